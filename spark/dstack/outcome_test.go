package dstack_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/dstack"
	"github.com/gpugate/gpugate/spark/dstack/dstacktest"
)

const logsPath = "/api/project/main/logs/poll"

// doneJob is a job that finished done on host.
func doneJob(num int, host string) dstack.Job {
	return dstack.Job{Num: num, Status: dstack.JobDone, Hostname: host, SubmissionID: fmt.Sprintf("0000000%d-0000-4000-8000-000000000000", num), TerminationReason: "done_by_runner"}
}

// Only a run that finished successfully succeeds: status done with
// all_jobs_done, and one job done per leased node, each on a leased host
// of its own. Every other finished status and termination reason dstack
// has (core/models/runs.py RunStatus, RunTerminationReason.to_status) is
// a failure that says why; an unfinished or unknown status is not
// finished at all.
func TestJudge_OnlyADoneRunWithAllJobsDoneOnTheLeasedHostsSucceeds(t *testing.T) {
	f := newFixture(t, "cluster")
	single, pair := ciWork("r1", "spark-2"), ciWork("r2", "spark-1", "spark-2")
	run := func(status dstack.RunStatus, reason string, jobs ...dstack.Job) dstack.Run {
		return dstack.Run{ID: "id", Name: "spark-r1", Status: status, TerminationReason: reason, Type: "task", Jobs: jobs}
	}
	failedJob := func(status, reason string) dstack.Job {
		j := doneJob(0, "10.0.0.2")
		j.Status, j.TerminationReason = status, reason
		return j
	}
	for name, tc := range map[string]struct {
		lease              dstack.LeaseWork
		run                dstack.Run
		finished, succeded bool
		says               []string
	}{
		"done, all jobs done":                   {single, run(dstack.RunDone, dstack.ReasonAllJobsDone, doneJob(0, "10.0.0.2")), true, true, nil},
		"a pair, both nodes done":               {pair, run(dstack.RunDone, dstack.ReasonAllJobsDone, doneJob(0, "10.0.0.1"), doneJob(1, "10.0.0.2")), true, true, nil},
		"a pair with one job":                   {pair, run(dstack.RunDone, dstack.ReasonAllJobsDone, doneJob(0, "10.0.0.1")), true, false, []string{"1 jobs for 2 leased nodes"}},
		"a pair's two jobs on one host":         {pair, run(dstack.RunDone, dstack.ReasonAllJobsDone, doneJob(0, "10.0.0.1"), doneJob(1, "10.0.0.1")), true, false, []string{"job 1 ran on"}},
		"done on a host the lease does not own": {single, run(dstack.RunDone, dstack.ReasonAllJobsDone, doneJob(0, "10.0.0.3")), true, false, []string{`job 0 ran on "10.0.0.3"`}},
		"done with no job":                      {single, run(dstack.RunDone, dstack.ReasonAllJobsDone), true, false, []string{"0 jobs for 1 leased nodes"}},
		"done, but a job failed":                {single, run(dstack.RunDone, dstack.ReasonAllJobsDone, failedJob(dstack.JobFailed, "container_exited_with_error")), true, false, []string{"job 0 failed: container_exited_with_error"}},
		"done without all_jobs_done":            {single, run(dstack.RunDone, "", doneJob(0, "10.0.0.2")), true, false, []string{"done"}},
		"failed: job_failed": {single, run(dstack.RunFailed, dstack.ReasonJobFailed, failedJob(dstack.JobFailed, "container_exited_with_error")), true, false,
			[]string{"failed (job_failed)", "job 0 failed: container_exited_with_error"}},
		"failed: retry_limit_exceeded": {single, run(dstack.RunFailed, dstack.ReasonRetryLimitExceeded, failedJob(dstack.JobFailed, "failed_to_start_due_to_no_capacity")), true, false,
			[]string{"retry_limit_exceeded", "failed_to_start_due_to_no_capacity"}},
		"failed: server_error":  {single, run(dstack.RunFailed, dstack.ReasonServerError, failedJob(dstack.JobTerminated, "terminated_by_server")), true, false, []string{"failed (server_error)"}},
		"failed: gateway_error": {single, run(dstack.RunFailed, dstack.ReasonGatewayError, failedJob(dstack.JobTerminated, "terminated_by_server")), true, false, []string{"failed (gateway_error)"}},
		"terminated: stopped_by_user": {single, run(dstack.RunTerminated, dstack.ReasonStoppedByUser, failedJob(dstack.JobTerminated, "terminated_by_user")), true, false,
			[]string{"terminated (stopped_by_user)", "job 0 terminated: terminated_by_user"}},
		"terminated: aborted_by_user": {single, run(dstack.RunTerminated, dstack.ReasonAbortedByUser, failedJob(dstack.JobAborted, "aborted_by_user")), true, false,
			[]string{"terminated (aborted_by_user)", "job 0 aborted: aborted_by_user"}},
		"terminated, max duration exceeded": {single, run(dstack.RunTerminated, dstack.ReasonJobFailed, failedJob(dstack.JobTerminated, "max_duration_exceeded")), true, false, []string{"max_duration_exceeded"}},
		"pending":                           {single, run(dstack.RunPending, ""), false, false, nil},
		"submitted":                         {single, run(dstack.RunSubmitted, ""), false, false, nil},
		"provisioning":                      {single, run(dstack.RunProvisioning, ""), false, false, nil},
		"running":                           {single, run(dstack.RunRunning, "", failedJob("running", "")), false, false, nil},
		"terminating":                       {single, run(dstack.RunTerminating, dstack.ReasonStoppedByUser), false, false, nil},
		"unknown":                           {single, run("paused", dstack.ReasonAllJobsDone, doneJob(0, "10.0.0.2")), false, false, nil},
	} {
		t.Run(name, func(t *testing.T) {
			o := f.b.Judge(tc.run, tc.lease)
			if o.Finished != tc.finished || o.Succeeded != tc.succeded {
				t.Errorf("finished %v succeeded %v, want %v %v (%s)", o.Finished, o.Succeeded, tc.finished, tc.succeded, o.Reason)
			}
			if o.Succeeded && o.Reason != "" {
				t.Errorf("a success with a reason: %q", o.Reason)
			}
			if o.Finished && !o.Succeeded && o.Reason == "" {
				t.Error("a failure that does not say why")
			}
			for _, s := range tc.says {
				if !strings.Contains(o.Reason, s) {
					t.Errorf("reason %q does not say %q", o.Reason, s)
				}
			}
		})
	}
}

// Result reads the lease's own run: a run that finished done on its host
// succeeds; a run dstack no longer has is ErrRunGone (never a pass); a
// run of that name that is not the lease's is ErrConflict; an unreachable
// server is neither.
func TestResult_ReadsTheLeasesRunAndAGoneRunIsErrRunGone(t *testing.T) {
	f := newFixture(t, "cluster")
	w := ciWork("r1", "spark-2")
	name, err := f.b.Start(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Progress()
	if o, err := f.b.Result(ctx, w); err != nil || o.Finished || o.Run.Status != dstack.RunRunning {
		t.Fatalf("running: %+v %v", o, err)
	}
	f.srv.Finish(name, false)
	o, err := f.b.Result(ctx, w)
	if err != nil || !o.Succeeded || o.Run.Jobs[0].TerminationReason != "done_by_runner" || o.Run.Jobs[0].SubmissionID == "" {
		t.Fatalf("done: %+v %v", o, err)
	}
	f.srv.AddFault(dstacktest.Fault{Path: getPath, Status: 503})
	if _, err := f.b.Result(ctx, w); err == nil || errors.Is(err, dstack.ErrRunGone) {
		t.Errorf("an unreachable server: %v, want an error that is not ErrRunGone", err)
	}
	if _, err := f.b.Result(ctx, ciWork("r9", "spark-2")); !errors.Is(err, dstack.ErrRunGone) {
		t.Errorf("a lease without a run: %v, want ErrRunGone", err)
	}
	f.srv.Delete(name)
	if _, err := f.b.Result(ctx, w); !errors.Is(err, dstack.ErrRunGone) || !errors.Is(err, dstack.ErrNotFound) {
		t.Errorf("a deleted run: %v, want ErrRunGone", err)
	}
	spec := dstack.RunSpec{RunName: f.b.RunName("r3"), Configuration: dstack.RunConfiguration{Type: "task", Commands: []string{"true"},
		Env: map[string]string{dstack.EnvLeaseID: "someone-else"}, Fleets: []string{fleetName}}}
	if _, err := f.c.ApplyRun(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if _, err := f.b.Result(ctx, ciWork("r3", "spark-2")); !errors.Is(err, dstack.ErrConflict) {
		t.Errorf("another lease's run under the name: %v, want ErrConflict", err)
	}
}

// startedRun starts lease w's run on the fake, places it and returns it
// as Result reads it once finished done.
func startedRun(t *testing.T, f fixture, w dstack.LeaseWork, output ...[2]string) dstack.Run {
	t.Helper()
	name, err := f.b.Start(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Progress()
	for _, o := range output {
		f.srv.Output(name, 0, o[0], o[1])
	}
	f.srv.Finish(name, false)
	o, err := f.b.Result(ctx, w)
	if err != nil || !o.Succeeded {
		t.Fatalf("%+v %v", o, err)
	}
	return o.Run
}

// The evidence receipt is the last line of the first job's standard
// output, however the runner cut it into chunks, read back from the end
// only as far as that line needs; blank lines and carriage returns after
// it aside. Output to stderr after it does not hide it. A last line that
// is not one JSON object, one longer than a receipt may be, or no output
// at all is ErrNoReceipt; a server that cannot answer is an error that is
// not ErrNoReceipt (it can be read again).
func TestReceipt_IsTheLastLineOfTheFirstJobsStandardOutput(t *testing.T) {
	const rec = `{"suite":"smoke","passed":12,"failed":0}`
	big := strings.Repeat("x", spark.MaxReceipt)
	many := make([][2]string, 0, 2600)
	for i := range 2500 {
		many = append(many, [2]string{"stdout", fmt.Sprintf("test %d ok\n", i)})
	}
	many = append(many, [2]string{"stdout", `{"suite":"smoke",`}, [2]string{"stdout", `"passed":2500}` + "\n"})
	for name, tc := range map[string]struct {
		output [][2]string
		want   string
		err    error
		// most logs/poll calls it may make
		calls int
	}{
		"one line":                     {[][2]string{{"stdout", rec + "\n"}}, rec, nil, 1},
		"after the log":                {[][2]string{{"stdout", "building\nrunning 12 tests\n"}, {"stdout", rec + "\r\n\n"}}, rec, nil, 1},
		"cut into chunks":              {[][2]string{{"stdout", "ok\n{\"suite\":"}, {"stdout", "\"smoke\",\"passed\":12,"}, {"stdout", "\"failed\":0}"}}, rec, nil, 1},
		"stderr after it":              {[][2]string{{"stdout", "ok\n" + rec + "\n"}, {"stderr", "warning: cache cold\n"}}, rec, nil, 1},
		"at the end of a long log":     {many, `{"suite":"smoke","passed":2500}`, nil, 1},
		"no line break, no more":       {[][2]string{{"stdout", rec}}, rec, nil, 1},
		"a last line that is no JSON":  {[][2]string{{"stdout", rec + "\nDone.\n"}}, "", dstack.ErrNoReceipt, 1},
		"a JSON array":                 {[][2]string{{"stdout", "[1,2]\n"}}, "", dstack.ErrNoReceipt, 1},
		"a cut JSON object":            {[][2]string{{"stdout", `{"suite":"smo` + "\n"}}, "", dstack.ErrNoReceipt, 1},
		"no output":                    {nil, "", dstack.ErrNoReceipt, 1},
		"only stderr":                  {[][2]string{{"stderr", rec + "\n"}}, "", dstack.ErrNoReceipt, 1},
		"longer than a receipt may be": {[][2]string{{"stdout", "ok\n{\"x\":\"" + big + "\"}\n"}}, "", dstack.ErrNoReceipt, 1},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, "cluster")
			r := startedRun(t, f, ciWork("r1", "spark-2"), tc.output...)
			before := f.srv.Count(logsPath)
			got, err := f.b.Receipt(ctx, r)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Errorf("Receipt: %q, %v; want %v", got, err, tc.err)
				}
			} else if err != nil || string(got) != tc.want {
				t.Errorf("Receipt: %q, %v; want %q", got, err, tc.want)
			}
			if n := f.srv.Count(logsPath) - before; n < 1 || n > tc.calls {
				t.Errorf("%d logs/poll calls, want 1 to %d: the output is read back only as far as its last line", n, tc.calls)
			}
		})
	}
	t.Run("the server cannot answer", func(t *testing.T) {
		f := newFixture(t, "cluster")
		r := startedRun(t, f, ciWork("r1", "spark-2"), [2]string{"stdout", rec + "\n"})
		for _, fault := range []dstacktest.Fault{{Path: logsPath, Status: 500}, {Path: logsPath, Malformed: true}, {Path: logsPath, Drop: true}, {Path: logsPath, Status: 400, Detail: "Failed to poll logs from log storage"}} {
			f.srv.AddFault(fault)
			if got, err := f.b.Receipt(ctx, r); err == nil || errors.Is(err, dstack.ErrNoReceipt) {
				t.Errorf("%+v: %q %v, want an error that is not ErrNoReceipt", fault, got, err)
			}
		}
		if got, err := f.b.Receipt(ctx, r); err != nil || string(got) != rec {
			t.Errorf("after the faults: %q %v", got, err)
		}
	})
	t.Run("a run without a submitted job", func(t *testing.T) {
		f := newFixture(t, "cluster")
		if _, err := f.b.Receipt(ctx, dstack.Run{Name: "spark-r1"}); !errors.Is(err, dstack.ErrNoReceipt) {
			t.Errorf("%v, want ErrNoReceipt", err)
		}
	})
}

// A receipt longer than one page of 1000 events is read over pages,
// newest first, following next_token.
func TestReceipt_ALastLineOverManyEventsIsReadOverPages(t *testing.T) {
	f := newFixture(t, "cluster")
	chunks := [][2]string{{"stdout", "log\n{\"n\":\""}}
	for range 1500 {
		chunks = append(chunks, [2]string{"stdout", "ab"})
	}
	chunks = append(chunks, [2]string{"stdout", "\"}\n"})
	r := startedRun(t, f, ciWork("r1", "spark-2"), chunks...)
	got, err := f.b.Receipt(ctx, r)
	if want := `{"n":"` + strings.Repeat("ab", 1500) + `"}`; err != nil || string(got) != want {
		t.Fatalf("Receipt: %d bytes, %v", len(got), err)
	}
	if n := f.srv.Count(logsPath); n != 2 {
		t.Errorf("%d logs/poll calls for 1502 events, want 2", n)
	}
	var second map[string]any
	for _, req := range f.srv.Requests() {
		if req.Path == logsPath {
			second = nil
			json.Unmarshal(req.Body, &second)
		}
	}
	if second["next_token"] == nil || second["descending"] != true || second["diagnose"] != false || second["run_name"] != r.Name {
		t.Errorf("the second page's request: %v", second)
	}
}

// RunURL links a run's page in dstack's web UI, only over https.
func TestRunURL_LinksTheRunsPageOnlyOverHTTPS(t *testing.T) {
	f := newFixture(t, "cluster")
	r := dstack.Run{ID: "0000-1", Name: "spark-r1"}
	if got, want := f.b.RunURL(r), dstacktest.BaseURL+"/projects/main/runs/0000-1"; got != want {
		t.Errorf("RunURL = %q, want %q", got, want)
	}
	srv := dstacktest.New()
	url := srv.Start()
	defer srv.Close()
	c, err := dstack.NewClient(url, dstacktest.Token, dstacktest.Project, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := newBackend(t, c).RunURL(r); got != "" {
		t.Errorf("RunURL over plain http = %q, want none", got)
	}
}
