package gateflow_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpugate/gpugate/changepolicy"
	"github.com/gpugate/gpugate/cost"
	"github.com/gpugate/gpugate/gate"
	"github.com/gpugate/gpugate/gate/gatetest"
	"github.com/gpugate/gpugate/gateflow"
	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/rest"
	"github.com/gpugate/gpugate/runpod/runpodtest"
)

const (
	paidHead  = "1111111111111111111111111111111111111111"
	paidMerge = "3333333333333333333333333333333333333333"
)

// paidWorld is one CUDA change's paid gate against the fakes: RunPod's
// server and registry, GitHub's repository and checks, and a GPU test job
// that starts its tests 30 s after the hand-over and passes 60 s later.
// Build it inside a synctest bubble: the fake pods take minutes to start.
type paidWorld struct {
	fake     *runpodtest.Server
	repo     *gatetest.Repo
	checks   *gatetest.Checks
	pr       *runpodtest.PR
	progress *runpodtest.Progress
	deps     gateflow.Deps
	listing  changepolicy.Listing
}

func newPaidWorld(t *testing.T) *paidWorld {
	t.Helper()
	policy, err := changepolicy.Load(changepolicy.ExamplePolicy)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := runpod.LoadConfig(runpod.ExampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	w := &paidWorld{fake: runpodtest.New(), repo: gatetest.NewRepo(), checks: gatetest.NewChecks(), pr: runpodtest.NewPR(paidHead), progress: &runpodtest.Progress{}}
	api, err := w.fake.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	w.repo.Roles = map[string]string{"maintainer": "maintain"}
	w.repo.PRs = map[int]gate.PullRequest{9: {Number: 9, Open: true, HeadSHA: paidHead, MergeSHA: paidMerge, HeadRepoID: 1, BaseRepoID: 1}}
	w.deps = gateflow.Deps{
		Policy: policy, Repo: w.repo, Checks: w.checks,
		API: api, Registry: w.fake.NewRegistry(), Progress: w.progress, PR: w.pr, Config: cfg,
		Image: "ghcr.io/actions/actions-runner:2.323.0@sha256:831a2607a2618e4b79d9323b4c72330f3861768a061c2b92a845e9d214d80e5b",
		Owner: runpod.Ownership{Repository: "o/r", Workflow: ".github/workflows/gpu.yml", RunID: 1, RunAttempt: 1},
		Watch: runpod.DefaultWatchOptions(),
		StartJob: func(string) <-chan cost.Marks {
			return w.job("success", true)
		},
	}
	w.listing = changepolicy.Listing{Changes: []changepolicy.Change{{Path: "src/kernels/add.cu", Status: changepolicy.Modified}}, HeadSHA: paidHead}
	return w
}

// job plays the GPU test job: its tests start 30 s after the hand-over
// and it concludes 60 s later; its marks are sent then when deliver is
// set, and never otherwise.
func (w *paidWorld) job(conclusion string, deliver bool) <-chan cost.Marks {
	w.progress.Set(runpod.JobProgress{})
	ch := make(chan cost.Marks, 1)
	time.AfterFunc(30*time.Second, func() {
		w.progress.Set(runpod.JobProgress{TestsStarted: true, TestStepListed: true})
		time.AfterFunc(60*time.Second, func() {
			w.progress.Set(runpod.JobProgress{TestsStarted: true, TestStepListed: true, Completed: true, Conclusion: conclusion})
			if deliver {
				ch <- cost.Marks{}
			}
		})
	})
	return ch
}

func (w *paidWorld) run(ctx context.Context) (gateflow.Outcome, error) {
	return gateflow.Run(ctx, w.deps, w.listing, "maintainer", 9, io.Discard)
}

func (w *paidWorld) creates() int { return w.fake.Count("POST", "/v2/pods") }

// A run of the fakes' paid gate passes and leaves no pod running: the
// baseline the tests below break one piece of.
func TestRun_APaidGatePassesAndLeavesNoPodRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newPaidWorld(t)
		oc, err := w.run(context.Background())
		if err != nil || oc.Gate != gate.KindPaid || oc.Reason != "" || oc.Cost == nil {
			t.Fatalf("%+v, %v; want a passed paid gate with its cost", oc, err)
		}
		if running := w.fake.Running(); len(running) != 0 {
			t.Errorf("pods still running: %v", running)
		}
	})
}

// Run validates its Deps before any spend: a field the run needs that is
// missing or invalid is a *DepsError naming it (ErrDeps, wrapping the
// field's own error), returned before a pod is created or a gate is
// published, never a panic after a pod has been bought.
func TestRun_ValidatesItsDepsBeforeAnySpend(t *testing.T) {
	cases := map[string]struct {
		field string
		spoil func(d *gateflow.Deps)
		wrap  error
	}{
		"no Repo":                 {"Repo", func(d *gateflow.Deps) { d.Repo = nil }, nil},
		"no Checks":               {"Checks", func(d *gateflow.Deps) { d.Checks = nil }, nil},
		"no API":                  {"API", func(d *gateflow.Deps) { d.API = nil }, nil},
		"no Registry":             {"Registry", func(d *gateflow.Deps) { d.Registry = nil }, nil},
		"no Progress":             {"Progress", func(d *gateflow.Deps) { d.Progress = nil }, nil},
		"no StartJob":             {"StartJob", func(d *gateflow.Deps) { d.StartJob = nil }, nil},
		"no Image":                {"Image", func(d *gateflow.Deps) { d.Image = "" }, nil},
		"no Owner":                {"Owner", func(d *gateflow.Deps) { d.Owner = runpod.Ownership{} }, nil},
		"a zero Config":           {"Config", func(d *gateflow.Deps) { d.Config = runpod.Config{} }, runpod.ErrInvalidConfig},
		"zero WatchOptions":       {"Watch", func(d *gateflow.Deps) { d.Watch = runpod.WatchOptions{} }, runpod.ErrWatchOptions},
		"a negative watch period": {"Watch", func(d *gateflow.Deps) { d.Watch.Poll = -time.Second }, runpod.ErrWatchOptions},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newPaidWorld(t)
				tc.spoil(&w.deps)
				var (
					oc  gateflow.Outcome
					err error
				)
				func() {
					defer func() {
						if r := recover(); r != nil {
							t.Errorf("panicked: %v", r)
						}
					}()
					oc, err = w.run(context.Background())
				}()
				var de *gateflow.DepsError
				if !errors.Is(err, gateflow.ErrDeps) || !errors.As(err, &de) || de.Field != tc.field || !strings.Contains(err.Error(), "Deps."+tc.field) {
					t.Errorf("err = %v, want a *DepsError naming Deps.%s", err, tc.field)
				}
				if tc.wrap != nil && !errors.Is(err, tc.wrap) {
					t.Errorf("err = %v, want it to wrap %v", err, tc.wrap)
				}
				if n := w.creates(); n != 0 || oc.Result != nil {
					t.Errorf("%d pod creates (result %+v): nothing may be bought", n, oc.Result)
				}
				if gates := w.checks.Published(paidHead); len(gates) != 0 {
					t.Errorf("published %v", gates)
				}
				if running := w.fake.Running(); len(running) != 0 {
					t.Errorf("pods still running: %v", running)
				}
			})
		})
	}
}

// No panic or early return after a create leaves a pod undeleted: a
// dependency that panics once the pod is bought still has the pod
// deleted, confirmed, before the panic goes on.
func TestRun_NoPanicOrEarlyReturnAfterACreateLeavesAPodUndeleted(t *testing.T) {
	cases := map[string]func(d *gateflow.Deps){
		"StartJob panics": func(d *gateflow.Deps) {
			d.StartJob = func(string) <-chan cost.Marks { panic("the job could not start") }
		},
		"the time restatement panics": func(d *gateflow.Deps) { d.RealTime = panicky{} },
	}
	for name, breakDeps := range cases {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newPaidWorld(t)
				breakDeps(&w.deps)
				var recovered any
				func() {
					defer func() { recovered = recover() }()
					_, _ = w.run(context.Background())
				}()
				if recovered == nil {
					t.Error("the dependency's panic was swallowed")
				}
				if w.creates() == 0 {
					t.Fatal("no pod was created: the test breaks nothing after a create")
				}
				if running := w.fake.Running(); len(running) != 0 {
					t.Errorf("pods still running after the panic: %v", running)
				}
			})
		})
	}
}

// panicky is a Restater that panics.
type panicky struct{}

func (panicky) Restate(*runpod.Result) { panic("restate failed") }

func (panicky) Notes(runpod.Attempt) []string { return nil }

func (panicky) Report(*rest.Pod, runpod.Result) (cost.Report, error) { return cost.Report{}, nil }

// Every wait in Run honours ctx, and cleanup still runs: a context that
// ends while the job runs, or while its marks are awaited, ends the run
// by its deadline with the context's error, and the pod is deleted
// (under cleanup's own context). Nothing is published with a context that
// has ended.
func TestRun_EveryWaitHonoursTheContextAndCleanupStillRuns(t *testing.T) {
	cases := map[string]struct {
		deadline  time.Duration
		completes bool // the job completes (and its gate is published) before the deadline
	}{
		"the context ends while the job runs":            {deadline: 2 * time.Minute},
		"the context ends while the job's marks are due": {deadline: 10 * time.Minute, completes: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newPaidWorld(t)
				// The job's marks never come.
				w.deps.StartJob = func(string) <-chan cost.Marks { return w.job("success", false) }
				if !tc.completes {
					w.deps.StartJob = func(string) <-chan cost.Marks { return make(chan cost.Marks) }
				}
				ctx, cancel := context.WithTimeout(context.Background(), tc.deadline)
				defer cancel()
				start := time.Now()
				type result struct {
					oc  gateflow.Outcome
					err error
				}
				done := make(chan result, 1)
				go func() {
					oc, err := w.run(ctx)
					done <- result{oc, err}
				}()
				var r result
				select {
				case r = <-done:
				case <-time.After(tc.deadline + 5*time.Minute):
					t.Fatalf("Run still blocked %s past its deadline; pods running: %v", 5*time.Minute, w.fake.Running())
				}
				if late := time.Since(start) - tc.deadline; late > time.Minute {
					t.Errorf("Run returned %s after its deadline", late)
				}
				if !errors.Is(r.err, context.DeadlineExceeded) {
					t.Errorf("err = %v, want it to wrap context.DeadlineExceeded", r.err)
				}
				if running := w.fake.Running(); len(running) != 0 || w.creates() == 0 {
					t.Errorf("%d creates, pods still running: %v; want the pod bought and deleted", w.creates(), running)
				}
				gates := w.checks.Published(paidHead)
				switch {
				case tc.completes && (len(gates) != 1 || r.oc.Gate != gate.KindPaid):
					t.Errorf("gate %q, published %v: the job passed before the deadline", r.oc.Gate, gates)
				case !tc.completes && (len(gates) != 0 || r.oc.Gate != "" || r.oc.Reason == ""):
					t.Errorf("gate %q (reason %q), published %v: nothing is published once the context has ended", r.oc.Gate, r.oc.Reason, gates)
				}
			})
		})
	}
}

// A watch error is wrapped into Run's error, so errors.Is matches it, and
// its reason is in the outcome (and on the failed gate); invalid watch
// options are refused before spending (TestRun_ValidatesItsDepsBeforeAnySpend).
func TestRun_AWatchErrorIsWrappedIntoRunsErrorAndItsReasonIsInTheOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newPaidWorld(t)
		// The job never starts its tests: the watchdog deletes the pod at
		// the setup deadline.
		w.deps.StartJob = func(string) <-chan cost.Marks {
			ch := make(chan cost.Marks, 1)
			ch <- cost.Marks{}
			return ch
		}
		w.deps.Watch.SetupDeadline = 5 * time.Minute
		oc, err := w.run(context.Background())
		if !errors.Is(err, gateflow.ErrGateFailed) || !errors.Is(err, runpod.ErrWatchdog) {
			t.Fatalf("err = %v, want ErrGateFailed wrapping runpod.ErrWatchdog", err)
		}
		if oc.Gate != gate.KindFailed || !strings.Contains(oc.Reason, "tests did not start") {
			t.Errorf("gate %q, reason %q: want a failed gate saying why", oc.Gate, oc.Reason)
		}
		if gates := w.checks.Published(paidHead); len(gates) != 1 || gates[0].Conclusion != "failure" {
			t.Errorf("published %v, want the one failed gate", gates)
		}
		if running := w.fake.Running(); len(running) != 0 {
			t.Errorf("pods still running: %v", running)
		}
	})
}

// A locally validated pull request is reported the same whenever the
// label is seen: at the recheck, by provisioning just before a create, or
// at the publication after the job. Each is LocallyValidated with no
// error and no failed gate, the paid path publishes nothing, and every pod
// created is deleted.
func TestRun_ALocallyValidatedPullRequestIsReportedTheSameWheneverTheLabelIsSeen(t *testing.T) {
	cases := map[string]struct {
		// the repository shows the label from this re-read of the pull
		// request on (1: the recheck, 2: the publication)
		fromReread int
		// provisioning's own read shows it before the first create
		provisioning bool
		bought       bool
	}{
		"seen at the recheck":                      {fromReread: 1, provisioning: true},
		"added between the recheck and the create": {fromReread: 2, provisioning: true},
		"added while the job ran, seen at publish": {fromReread: 2, bought: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newPaidWorld(t)
				rereads := 0
				w.repo.OnReread = func(pr *gate.PullRequest) {
					if rereads++; rereads >= tc.fromReread && !slices.Contains(pr.Labels, gate.DefaultLocalLabel) {
						pr.Labels = append(pr.Labels, gate.DefaultLocalLabel)
					}
				}
				if tc.provisioning {
					w.pr.Set(runpod.PR{Open: true, HeadSHA: paidHead, Labels: []string{gate.DefaultLocalLabel}}, nil)
				}
				oc, err := w.run(context.Background())
				if err != nil || !oc.LocallyValidated || oc.Gate != "" || oc.Reason != "" {
					t.Errorf("%+v, %v; want a locally validated outcome, no error and no gate", oc, err)
				}
				if gates := w.checks.Published(paidHead); len(gates) != 0 {
					t.Errorf("the paid path published %v over the local validation", gates)
				}
				if bought := w.creates() != 0; bought != tc.bought {
					t.Errorf("%d pod creates, want bought = %v", w.creates(), tc.bought)
				}
				if running := w.fake.Running(); len(running) != 0 {
					t.Errorf("pods still running: %v", running)
				}
			})
		})
	}
}
