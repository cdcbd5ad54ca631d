package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/dstack"
	"github.com/gpugate/gpugate/spark/sparkgh"
)

// ErrEngine is Serve's refusal of a Daemon whose engine and whose GitHub
// integration's (sparkgh.Config.Engine) differ: a granted pull-request
// lane would run twice (a one-job runner and a dstack task) or never.
var ErrEngine = errors.New("fleet: the GitHub integration's engine is not the daemon's")

// engineAnnotation records a lease's dstack run.
const engineAnnotation = "dstack.run"

// receiptTries bounds the rounds that try to read a finished run's
// evidence receipt from dstack before its lease is concluded without one
// (a failing check): the run is over, and its hosts wait.
const receiptTries = 5

// refusedRun concludes a GitHub lane dstack refused to run.
var refusedRun = sparkgh.EngineRun{Why: "dstack cannot run this lane (the controller's log has why), so the lease was released"}

// checkEngine refuses a GitHub integration whose lanes another engine
// runs than the daemon's.
func (d *Daemon) checkEngine() error {
	switch gh := d.GitHub; {
	case gh == nil:
	case d.Engine != nil && gh.Engine() == sparkgh.RunnerEngine:
		return fmt.Errorf("%w: the daemon runs granted work on dstack, and the integration would mint one-job runners too; set its Config.Engine to dstack (the fleet file's engine: dstack does)", ErrEngine)
	case d.Engine == nil && gh.Engine() != sparkgh.RunnerEngine:
		return fmt.Errorf("%w: the integration leaves its lanes to engine %q, and the daemon has none; give the Daemon its Engine", ErrEngine, gh.Engine())
	}
	return nil
}

// verifyEnrollment refuses to serve while a managed host is not an idle
// or busy instance of the dstack fleet.
func (d *Daemon) verifyEnrollment(ctx context.Context) error {
	hosts, err := d.Controller.Hosts(ctx)
	if err != nil {
		return err
	}
	var managed []string
	for _, h := range hosts {
		if h.Managed {
			managed = append(managed, h.Name)
		}
	}
	if err := d.Engine.VerifyEnrollment(ctx, managed); err != nil {
		return fmt.Errorf("fleet: engine dstack: %w", err)
	}
	return nil
}

// work is the LeaseWork of granted request r: its suite's commands, and
// the repository and commit it tests (a pull request's, or what the
// GitHub integration's merge group or schedule named).
func (d *Daemon) work(r spark.Request) dstack.LeaseWork {
	w := dstack.WorkFor(r, d.Suites[r.Suite])
	if repo, sha, ok := sparkgh.Target(r); ok && w.Repo == "" {
		w.Repo, w.SHA = repo, sha
	}
	return w
}

// fromGitHub reports whether the GitHub integration holds lease r and
// concludes it (its check, its release).
func (d *Daemon) fromGitHub(r spark.Request) bool {
	_, _, ok := sparkgh.Target(r)
	return ok && d.GitHub != nil
}

// engineRound is one round's dstack work, bounded like the GitHub round.
// Each active lease without a run gets one (Start never runs a lease
// twice). A lease whose run finished ends: released, and a GitHub lane's
// check concluded from the run (passed only for a run that finished
// successfully with its evidence receipt recorded; a run that is gone
// fails it). A dstack server that cannot be read concludes nothing: the
// lease waits, at most until it expires. Every run whose lease ended is
// stopped, before any new run is submitted.
func (d *Daemon) engineRound(ctx context.Context, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, githubRoundTimeout)
	defer cancel()
	c := d.Controller
	// The active leases are those the hosts hold: reading them never
	// reads the queue, however long it is.
	hosts, err := c.Hosts(ctx)
	if err != nil {
		log.Error("sparkd.engine", "error", err)
	}
	active := map[string]bool{}
	for _, h := range hosts {
		if h.Lease != "" {
			active[h.Lease] = true
		}
	}
	for _, m := range []map[string]int{d.refused, d.receiptFailures} { // forget leases that ended
		for id := range m {
			if !active[id] {
				delete(m, id)
			}
		}
	}
	// The runs of ended leases are stopped first, before a new lease's
	// run is submitted onto the hosts they held.
	stopped, err := d.Engine.Sweep(ctx, func(id string) (bool, error) {
		st, err := c.Status(ctx, id)
		switch {
		case errors.Is(err, spark.ErrNotFound):
			return false, nil
		case err != nil:
			return false, err
		}
		return st.Request.State == spark.Active, nil
	})
	for _, name := range stopped {
		log.Info("sparkd.engine_stopped", "run", name, "why", "its lease ended")
	}
	if err != nil {
		log.Error("sparkd.engine_sweep", "error", err)
	}
	for _, id := range slices.Sorted(maps.Keys(active)) {
		st, err := c.Status(ctx, id)
		r := st.Request
		switch {
		case err != nil || r.State != spark.Active || r.Class == spark.ServiceStart:
		case d.refused[r.ID] > 0:
			if d.fromGitHub(r) { // its conclusion failed: again
				d.conclude(ctx, r, refusedRun, log)
			}
		case r.Annotations[engineAnnotation] == "":
			d.start(ctx, r, log)
		default:
			d.follow(ctx, r, log)
		}
	}
}

// start submits granted lease r's run.
func (d *Daemon) start(ctx context.Context, r spark.Request, log *slog.Logger) {
	name, err := d.Engine.Start(ctx, d.work(r))
	if errors.Is(err, dstack.ErrInvalidLease) {
		// It will not become runnable: say so once, as an alert. A GitHub
		// lane ends with a failing check; any other lease is left to
		// whoever holds it.
		if d.refused == nil {
			d.refused = map[string]int{}
		}
		d.refused[r.ID]++
		log.Error("sparkd.engine_refused", "request", r.ID, "error", err, "why", "dstack runs nothing for this lease")
		if d.fromGitHub(r) {
			d.conclude(ctx, r, refusedRun, log)
		}
		return
	}
	if err != nil {
		log.Error("sparkd.engine_start", "request", r.ID, "error", err)
		return
	}
	if err := d.Controller.Annotate(ctx, r.ID, engineAnnotation, name); err != nil {
		log.Error("sparkd.engine_start", "request", r.ID, "error", err)
		return
	}
	log.Info("sparkd.engine_started", "request", r.ID, "run", name)
}

// follow reads active lease r's run and, once it finished, ends the
// lease from it.
func (d *Daemon) follow(ctx context.Context, r spark.Request, log *slog.Logger) {
	name := r.Annotations[engineAnnotation]
	o, err := d.Engine.Result(ctx, d.work(r))
	switch {
	case errors.Is(err, dstack.ErrRunGone):
		// What it ran is unknown: never a pass.
		log.Error("sparkd.engine_run_gone", "request", r.ID, "run", name, "error", err)
		d.conclude(ctx, r, sparkgh.EngineRun{Name: name, Why: "without a trace: dstack no longer has the run, so what it ran is unknown"}, log)
		return
	case err != nil:
		// Nothing is concluded without reading the run.
		log.Error("sparkd.engine_result", "request", r.ID, "run", name, "error", err)
		return
	case !o.Finished:
		if o.Run.Status == dstack.RunRunning && d.fromGitHub(r) {
			if err := d.GitHub.EngineRunning(ctx, r.ID); err != nil {
				log.Error("sparkd.engine_running", "request", r.ID, "error", err)
			}
		}
		return
	}
	run := sparkgh.EngineRun{Name: o.Run.Name, Succeeded: o.Succeeded, Why: o.Reason, URL: d.Engine.RunURL(o.Run)}
	if o.Succeeded && d.fromGitHub(r) {
		if !d.recordReceipt(ctx, r, o.Run, &run, log) {
			return // tried again next round
		}
	}
	d.conclude(ctx, r, run, log)
}

// recordReceipt records the evidence receipt of lease r's successful run
// from the run's output; false when it should be tried again next round.
// A run whose output ends with no receipt, or whose receipt could not be
// read within receiptTries rounds, is concluded without one: its check
// fails. A receipt the task recorded itself (through the host API) stands
// when the output ends with none; when the output's receipt is another,
// the lease has two receipts and neither is trusted: its check fails.
func (d *Daemon) recordReceipt(ctx context.Context, r spark.Request, o dstack.Run, run *sparkgh.EngineRun, log *slog.Logger) bool {
	had := spark.ReceiptDigest(r)
	rec, err := d.Engine.Receipt(ctx, o)
	switch {
	case err == nil && had != "" && spark.DigestReceipt(rec) == had:
		return true // recorded already: a round whose conclusion failed
	case err == nil && had == "":
		_, err = d.Controller.RecordReceipt(ctx, r.ID, rec)
	case err == nil:
		err = fmt.Errorf("%w: the run's output ends with receipt %s", spark.ErrConflict, spark.DigestReceipt(rec))
	}
	switch {
	case err == nil:
		return true
	case errors.Is(err, spark.ErrConflict):
		log.Error("sparkd.engine_two_receipts", "request", r.ID, "run", o.Name, "recorded", had, "error", err)
		run.Succeeded, run.Why = false, "successfully, but its output's evidence receipt is not the one recorded for the lease: with two receipts neither is trusted (the controller's log has both digests)"
		return true
	case errors.Is(err, dstack.ErrNoReceipt):
		if had == "" {
			log.Warn("sparkd.engine_no_receipt", "request", r.ID, "run", o.Name, "error", err, "why", "its check fails: a pass needs the entry point's receipt as the output's last line")
		}
		return true
	}
	if d.receiptFailures == nil {
		d.receiptFailures = map[string]int{}
	}
	d.receiptFailures[r.ID]++
	n := d.receiptFailures[r.ID]
	log.Error("sparkd.engine_receipt", "request", r.ID, "run", o.Name, "try", n, "of", receiptTries, "error", err)
	if n < receiptTries {
		return false
	}
	run.Succeeded, run.Why = false, "successfully, but its evidence receipt could not be read from dstack (the controller's log has why)"
	return true
}

// conclude ends lease r from how its run ended: a GitHub lane through the
// integration (its check, then the release), any other lease released.
func (d *Daemon) conclude(ctx context.Context, r spark.Request, run sparkgh.EngineRun, log *slog.Logger) {
	var err error
	if d.fromGitHub(r) {
		err = d.GitHub.EngineFinished(ctx, r.ID, run)
	} else {
		err = d.Controller.Release(ctx, r.ID, r.Token)
	}
	if err != nil {
		log.Error("sparkd.engine_conclude", "request", r.ID, "run", run.Name, "error", err)
		return
	}
	log.Info("sparkd.engine_finished", "request", r.ID, "run", run.Name, "succeeded", run.Succeeded, "why", run.Why)
}
