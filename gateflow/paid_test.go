package gateflow_test

import (
	"context"
	"errors"
	"io"
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
		if err != nil || oc.Gate != gate.KindPaid || oc.Cost == nil {
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
