// Package dstack runs a spark fleet's granted leases on dstack: a Go
// client of the dstack server's HTTP API and Backend, the controller's
// execution engine for one fleet (the fleet file's engine: dstack, beside
// the JIT runner path).
//
// The controller stays the admission authority; dstack never admits on
// its own:
//
//   - Every managed host is enrolled in one dstack SSH fleet, and
//     VerifyEnrollment checks it: each host is an instance of that fleet
//     reporting idle or busy (reachable); missing, pending, provisioning,
//     terminating, terminated or unreachable is ErrNotEnrolled, naming
//     the host.
//   - Start runs a granted lease: a CI lease as a dstack task, a pair as
//     one two-node task (which needs a fleet with placement: cluster); a
//     development lease as a dev environment the developer attaches to
//     (dstack attach RUN). The run is pinned to exactly the leased hosts:
//     its configuration names the fleet (fleets), the leased hosts'
//     instances by hostname (instances: [{hostname: ...}], dstack's
//     instance targeting, under which dstack places the run only on
//     matching instances and fails the job rather than use another) and
//     creation_policy: reuse (never provision). A multi-node job takes
//     its instance whole, so a pair's two nodes land on the two hosts.
//   - A run's name derives from its lease ID (Backend.RunName), and Start
//     first looks the run up: a lease whose run exists, finished or not,
//     is never submitted again, across retries, lost answers and
//     controller restarts.
//   - A CI lease's task runs its suite's commands with the commit it
//     tests in its environment: SPARK_REPO (owner/name) and SPARK_SHA,
//     beside SPARK_LEASE_ID, SPARK_CLASS, SPARK_HOSTS, SPARK_TOPOLOGY and
//     SPARK_SUITE.
//   - Result reads a lease's run and Judge says how it stands (Outcome):
//     it succeeded only when it finished done with termination reason
//     all_jobs_done and each leased node's job done on a leased host of
//     its own; any other finished status or reason (failed, terminated,
//     stopped, aborted, ...) is a failure that names them, an unknown
//     status is not finished, and a run dstack no longer has is
//     ErrRunGone: never a success.
//   - Receipt is a finished run's evidence receipt: the last line of its
//     first job's standard output, when it is one JSON object of at most
//     spark.MaxReceipt bytes (ErrNoReceipt otherwise), read back from the
//     output's end (logs/poll) only as far as that line needs.
//   - Stop stops a lease's run (its release); a run already gone is
//     success. Sweep stops every run of the backend whose lease is no
//     longer active, so a release stops its run even when the controller
//     restarted in between.
//
// Every call is POST /api/project/{project}/<resource>/<verb> (runs/list:
// POST /api/runs/list) with a JSON body and Authorization: Bearer TOKEN.
// The token is a secret.Secret: never printed, logged or put in an error;
// dstack's error detail is scrubbed of it. The client never follows a
// redirect and bounds each request (DefaultTimeout). Answers decode
// leniently (dstack adds fields) but a missing required field is
// ErrMalformed. testdata/SOURCES.md records the dstack commit whose
// routers and models these shapes follow; spark/dstack/dstacktest is an
// in-process fake of that API with fault injection.
package dstack
