package runpod_test

import (
	"context"
	"encoding/json"
	"maps"

	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpugate/gpugate/internal/faketime"
	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/rest"
	"github.com/gpugate/gpugate/runpod/runpodtest"
)

const (
	repo     = "o/r"
	workflow = ".github/workflows/runpod-gpu-test.yml"
)

type reapWorld struct {
	srv  *runpodtest.Server
	c    *rest.Client
	runs *runpodtest.Runs
	deps runpod.ReapDeps
	pol  runpod.ReapPolicy
}

func newReapWorld(t *testing.T) *reapWorld {
	t.Helper()
	w := &reapWorld{srv: runpodtest.New(), runs: runpodtest.NewRuns()}
	c, err := w.srv.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	w.c = c
	w.deps = runpod.ReapDeps{API: c, Runs: w.runs, Retention: w.runs}
	w.pol = runpod.DefaultReapPolicy(repo, workflow)
	return w
}

// pod creates a pod tagged for (repo, wf, run, attempt) named name; an
// empty name uses the identity's own name.
func (w *reapWorld) pod(t *testing.T, o runpod.Ownership, name string, extra map[string]string) string {
	t.Helper()
	if name == "" {
		name = o.Prefix() + "-c1"
	}
	env := o.Tags()
	maps.Copy(env, extra)
	if o.Repository == "" {
		env = extra
	}
	p, err := w.c.CreatePod(context.Background(), rest.CreatePodRequest{Name: name, Image: "img", Env: env,
		GPU: rest.GPURequest{ID: "NVIDIA A100-SXM4-80GB", Count: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return p.ID
}

func own(run int64, attempt int) runpod.Ownership {
	return runpod.Ownership{Repository: repo, Workflow: workflow, RunID: run, RunAttempt: attempt}
}

func (w *reapWorld) reap(t *testing.T) (map[string]runpod.ReapDecision, error) {
	t.Helper()
	ds, err := runpod.Reap(context.Background(), w.deps, w.pol, time.Now())
	out := map[string]runpod.ReapDecision{}
	for _, d := range ds {
		out[d.PodID] = d
	}
	return out, err
}

func (w *reapWorld) active(id int64, attempt int) {
	w.runs.Set(runpod.RunInfo{ID: id, Repository: repo, Workflow: workflow, Event: "workflow_run", Status: "in_progress", Attempt: attempt})
}

func TestReap_ListsEveryPodBeforeDecidingAnything(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newReapWorld(t)
		w.pod(t, own(1, 1), "", nil)
		w.srv.AddFault(runpodtest.Fault{Method: "GET", Path: "/v2/pods", Status: 500, Times: 100})
		w.pol.Execute = true
		ds, err := runpod.Reap(context.Background(), w.deps, w.pol, time.Now().Add(10*time.Hour))
		if err == nil || ds != nil || len(w.srv.Running()) != 1 {
			t.Errorf("decisions %v, err %v: a failed listing decides nothing", ds, err)
		}
	})
}

func TestReap_UntaggedForeignAndDisagreeingPodsAreNeverTouched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newReapWorld(t)
		untagged := w.pod(t, runpod.Ownership{}, "someones-notebook", map[string]string{"JUPYTER": "1"})
		foreignRepo := w.pod(t, runpod.Ownership{Repository: "x/y", Workflow: workflow, RunID: 2, RunAttempt: 1}, "", nil)
		foreignWf := w.pod(t, runpod.Ownership{Repository: repo, Workflow: ".github/workflows/other.yml", RunID: 3, RunAttempt: 1}, "", nil)
		foreignRef := w.pod(t, own(6, 1), "", map[string]string{runpod.TagWorkflow: "x/y/" + workflow + "@refs/heads/main"})
		badName := w.pod(t, own(4, 1), "gpugate-999-1-c1", nil)
		runElsewhere := w.pod(t, own(5, 1), "", nil)
		w.runs.Set(runpod.RunInfo{ID: 5, Repository: "x/y", Workflow: workflow, Status: "completed", Attempt: 1, CompletedAt: time.Now().Add(-time.Hour)})
		w.pol.Execute = true
		faketime.Advance(10 * time.Hour)
		ds, err := w.reap(t)
		if err != nil {
			t.Fatal(err)
		}
		for id, rule := range map[string]string{untagged: runpod.RuleUntagged, foreignRepo: runpod.RuleForeign, foreignWf: runpod.RuleForeign, foreignRef: runpod.RuleForeign, badName: runpod.RuleUntagged, runElsewhere: runpod.RuleForeign} {
			if ds[id].Rule != rule || ds[id].Action != runpod.ActionNone {
				t.Errorf("%s: %+v, want rule %s and no action", id, ds[id], rule)
			}
		}
		if len(w.srv.Running()) != 6 {
			t.Errorf("running %v: nothing may be deleted", w.srv.Running())
		}
	})
}

func TestReap_ReclaimsRunsCompletedAtLeastFiveMinutesAgo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newReapWorld(t)
		id := w.pod(t, own(7, 1), "", nil)
		w.runs.Set(runpod.RunInfo{ID: 7, Repository: repo, Workflow: workflow, Status: "completed", Attempt: 1, CompletedAt: time.Now()})
		faketime.Advance(4 * time.Minute)
		if ds, _ := w.reap(t); ds[id].Rule != runpod.RuleActive {
			t.Errorf("4 min after completion: %+v, want active", ds[id])
		}
		faketime.Advance(time.Minute)
		if ds, _ := w.reap(t); ds[id].Rule != runpod.RuleCompleted || ds[id].Action != runpod.ActionWouldDelete {
			t.Errorf("5 min after completion: %+v, want run-completed, would-delete", ds[id])
		}
	})
}

func TestReap_ReclaimsSupersededAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newReapWorld(t)
		old := w.pod(t, own(8, 1), "", nil)
		cur := w.pod(t, own(8, 2), "", nil)
		w.active(8, 2)
		ds, _ := w.reap(t)
		if ds[old].Rule != runpod.RuleSuperseded || ds[cur].Rule != runpod.RuleActive {
			t.Errorf("old %+v, current %+v", ds[old], ds[cur])
		}
	})
}

func TestReap_TwoHourLifetimeBackstop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newReapWorld(t)
		id := w.pod(t, own(9, 1), "", nil)
		w.active(9, 1)
		faketime.Advance(20*time.Second + 2*time.Hour) // started 20 s after creation
		if ds, _ := w.reap(t); ds[id].Rule != runpod.RuleActive || ds[id].AgeFrom != "startedAt" || ds[id].AgeSeconds != 7200 {
			t.Errorf("at exactly 2 h: %+v", ds[id])
		}
		faketime.Advance(time.Second)
		if ds, _ := w.reap(t); ds[id].Rule != runpod.RuleLifetime {
			t.Errorf("past 2 h: %+v, want lifetime", ds[id])
		}
	})
}

func TestReap_StuckBeforeStartUsesCreatedAtForAgeNeverForCost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newReapWorld(t)
		w.srv.SetBehavior("NVIDIA A100-SXM4-80GB", runpodtest.Behavior{ProvisionFor: 100 * time.Hour})
		id := w.pod(t, own(10, 1), "", nil)
		w.active(10, 1)
		faketime.Advance(3 * time.Hour)
		ds, _ := w.reap(t)
		d := ds[id]
		if d.Rule != runpod.RuleLifetime || d.AgeFrom != "createdAt" || d.EstimatedCost != nil {
			t.Errorf("%+v: want lifetime by createdAt and no cost estimate", d)
		}
	})
}

func TestReap_RetentionRecordExemptsOnlyTheNamedDebugPod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newReapWorld(t)
		retained := w.pod(t, own(11, 1), "gpugate-11-1-c1", map[string]string{"KEEP_FAILED_PODS": "true"})
		flagOnly := w.pod(t, own(11, 1), "gpugate-11-1-c2", map[string]string{"KEEP_FAILED_PODS": "true"})
		accepted := w.pod(t, own(11, 1), "gpugate-11-1-c3", nil)
		w.runs.Set(runpod.RunInfo{ID: 11, Repository: repo, Workflow: workflow, Event: "workflow_dispatch", Status: "completed", Attempt: 1, CompletedAt: time.Now()})
		w.runs.Retain(11, runpod.RetentionRecord{RunID: 11, Attempt: 1, PodIDs: []string{retained}}.Name())
		w.runs.Retain(11, "runpod-debug-retained-11-2-"+flagOnly) // another attempt's record
		faketime.Advance(10 * time.Minute)
		ds, err := w.reap(t)
		if err != nil {
			t.Fatal(err)
		}
		if ds[retained].Rule != runpod.RuleRetained || ds[flagOnly].Action != runpod.ActionWouldDelete || ds[accepted].Action != runpod.ActionWouldDelete {
			t.Errorf("retained %+v\nflag only %+v\naccepted %+v", ds[retained], ds[flagOnly], ds[accepted])
		}
	})
}

func TestReap_UnreadableRetentionLeavesDebugPodsUnknownWhileOthersProceed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newReapWorld(t)
		debug := w.pod(t, own(12, 1), "", nil)
		normal := w.pod(t, own(13, 1), "", nil)
		w.runs.Set(runpod.RunInfo{ID: 12, Repository: repo, Workflow: workflow, Event: "workflow_dispatch", Status: "completed", Attempt: 1, CompletedAt: time.Now()})
		w.runs.Set(runpod.RunInfo{ID: 13, Repository: repo, Workflow: workflow, Event: "workflow_run", Status: "completed", Attempt: 1, CompletedAt: time.Now()})
		w.runs.FailNext("Records", 1)
		w.pol.Execute = true
		faketime.Advance(10 * time.Minute)
		ds, err := w.reap(t)
		if err == nil {
			t.Error("the sweep must fail visibly")
		}
		if ds[debug].Rule != runpod.RuleUnknown || ds[debug].Action != runpod.ActionNone || ds[normal].Action != runpod.ActionDeleted {
			t.Errorf("debug %+v\nnormal %+v", ds[debug], ds[normal])
		}
		if got := w.srv.Running(); len(got) != 1 || got[0] != debug {
			t.Errorf("running %v, want only the debug pod", got)
		}
	})
}

func TestReap_APIErrorLeavesThePodUntouchedAndFailsVisibly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newReapWorld(t)
		a := w.pod(t, own(14, 1), "", nil)
		b := w.pod(t, own(15, 1), "", nil)
		for _, id := range []int64{14, 15} {
			w.runs.Set(runpod.RunInfo{ID: id, Repository: repo, Workflow: workflow, Status: "completed", Attempt: 1, CompletedAt: time.Now()})
		}
		w.runs.FailNext("Run", 1)
		w.pol.Execute = true
		faketime.Advance(time.Hour)
		ds, err := w.reap(t)
		if err == nil || ds[a].Rule != runpod.RuleUnknown || ds[b].Action != runpod.ActionDeleted {
			t.Errorf("err %v\na %+v\nb %+v", err, ds[a], ds[b])
		}
		// The next sweep, with GitHub back, reclaims it.
		if ds, err := w.reap(t); err != nil || ds[a].Action != runpod.ActionDeleted {
			t.Errorf("second sweep: %v %+v", err, ds[a])
		}
	})
}

// With GitHub down for the whole sweep no run can be read: even pods past
// the lifetime backstop stay untouched (the run could be another
// workflow's, or a retained debug dispatch), and the sweep fails visibly.
func TestReap_GitHubDownForTheSweepTouchesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newReapWorld(t)
		old := w.pod(t, own(16, 1), "", nil)
		w.active(16, 1)
		w.runs.FailAlways(true)
		w.pol.Execute = true
		faketime.Advance(10 * time.Hour)
		ds, err := w.reap(t)
		if err == nil || ds[old].Rule != runpod.RuleUnknown || ds[old].Action != runpod.ActionNone || len(w.srv.Running()) != 1 {
			t.Errorf("err %v, %+v, running %v", err, ds[old], w.srv.Running())
		}
		w.runs.FailAlways(false)
		if ds, err := w.reap(t); err != nil || ds[old].Rule != runpod.RuleLifetime || ds[old].Action != runpod.ActionDeleted {
			t.Errorf("GitHub back: %v %+v", err, ds[old])
		}
	})
}

func TestReap_DryRunIsTheDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newReapWorld(t)
		id := w.pod(t, own(16, 1), "", nil)
		w.active(16, 2)
		ds, _ := w.reap(t)
		if ds[id].Action != runpod.ActionWouldDelete || len(w.srv.Running()) != 1 || w.srv.Count("DELETE", "/v2/pods/*") != 0 {
			t.Errorf("%+v: a dry run must not delete", ds[id])
		}
	})
}

func TestReap_ExecuteDeletesThenCancelsButNeverANewerAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newReapWorld(t)
		stale := w.pod(t, own(17, 1), "", nil) // superseded: attempt 2 is live
		long := w.pod(t, own(18, 1), "", nil)  // lifetime: its own attempt is live
		w.active(17, 2)
		w.active(18, 1)
		w.pol.Execute, w.pol.CancelRuns = true, true
		faketime.Advance(3 * time.Hour)
		ds, err := w.reap(t)
		if err != nil {
			t.Fatal(err)
		}
		if ds[stale].Action != runpod.ActionDeleted || ds[stale].Canceled || ds[long].Action != runpod.ActionDeleted || !ds[long].Canceled || ds[long].DeletedAt == nil {
			t.Errorf("stale %+v\nlong %+v", ds[stale], ds[long])
		}
		if got := w.runs.Canceled(); !slices.Equal(got, []int64{18}) {
			t.Errorf("canceled runs %v, want only 18 (never 17's newer attempt)", got)
		}
	})
}

func TestReap_DecisionsDocumentCarriesNoEnvironmentOrCredentials(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newReapWorld(t)
		w.pod(t, own(19, 1), "", map[string]string{runpod.EnvJITConfig: "JITSECRET-xyz"})
		w.active(19, 2)
		ds, err := runpod.Reap(context.Background(), w.deps, w.pol, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		doc, _ := json.Marshal(ds)
		for _, s := range []string{"JITSECRET", runpodtest.APIKey} {
			if strings.Contains(string(doc), s) {
				t.Errorf("%s in the decisions document: %s", s, doc)
			}
		}
	})
}

// TestReap_RandomFaultsNeverTouchForeignPodsAndReclaimWithinTwoCleanSweeps
// injects random failures into list, get, delete and run lookups over many
// sweeps, then runs two clean sweeps.
func TestReap_RandomFaultsNeverTouchForeignPodsAndReclaimWithinTwoCleanSweeps(t *testing.T) {
	for seed := range uint64(200) {
		synctest.Test(t, func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 7))
			w := newReapWorld(t)
			w.pol.Execute = true
			protected := map[string]bool{}
			reclaimable := map[string]bool{}
			for i := range 8 {
				run := int64(100 + i)
				switch r.IntN(5) {
				case 0:
					protected[w.pod(t, runpod.Ownership{}, fmt.Sprintf("foreign-%d", i), nil)] = true
				case 1:
					protected[w.pod(t, runpod.Ownership{Repository: "x/y", Workflow: workflow, RunID: run, RunAttempt: 1}, "", nil)] = true
				case 2: // retained debug pod
					id := w.pod(t, own(run, 1), "", nil)
					w.runs.Set(runpod.RunInfo{ID: run, Repository: repo, Workflow: workflow, Event: "workflow_dispatch", Status: "completed", Attempt: 1, CompletedAt: time.Now()})
					w.runs.Retain(run, runpod.RetentionRecord{RunID: run, Attempt: 1, PodIDs: []string{id}}.Name())
					protected[id] = true
				case 3: // active
					protected[w.pod(t, own(run, 1), "", nil)] = true
					w.active(run, 1)
				case 4: // completed
					reclaimable[w.pod(t, own(run, 1), "", nil)] = true
					w.runs.Set(runpod.RunInfo{ID: run, Repository: repo, Workflow: workflow, Event: "workflow_run", Status: "completed", Attempt: 1, CompletedAt: time.Now()})
				}
			}
			faketime.Advance(30 * time.Minute)
			for range 5 {
				for n := r.IntN(4); n > 0; n-- {
					w.srv.AddFault(runpodtest.Fault{
						Method: []string{"GET", "GET", "DELETE"}[r.IntN(3)], Path: []string{"/v2/pods", "/v2/pods/*"}[r.IntN(2)],
						Status: []int{500, 503, 429, 404, 422}[r.IntN(5)], RetryAfter: "1", Times: 1 + r.IntN(8)})
				}
				w.runs.FailNext([]string{"Run", "Records"}[r.IntN(2)], r.IntN(3))
				runpod.Reap(context.Background(), w.deps, w.pol, time.Now())
				faketime.Advance(15 * time.Minute)
			}
			w.srv.ClearFaults()
			w.runs.FailNext("Run", -1000)
			w.runs.FailNext("Records", -1000)
			for range 2 {
				runpod.Reap(context.Background(), w.deps, w.pol, time.Now())
			}
			running := w.srv.Running()
			for id := range protected {
				if !slices.Contains(running, id) {
					t.Fatalf("seed %d: protected pod %s was deleted", seed, id)
				}
			}
			for id := range reclaimable {
				if slices.Contains(running, id) {
					t.Fatalf("seed %d: reclaimable pod %s still running after two clean sweeps", seed, id)
				}
			}
		})
	}
}

func TestParseRetentionRecord(t *testing.T) {
	tests := map[string]struct {
		name string
		ok   bool
		want runpod.RetentionRecord
	}{
		"one pod":     {"runpod-debug-retained-123-2-abc123", true, runpod.RetentionRecord{RunID: 123, Attempt: 2, PodIDs: []string{"abc123"}}},
		"several":     {"runpod-debug-retained-9-1-a1,b2,c_3", true, runpod.RetentionRecord{RunID: 9, Attempt: 1, PodIDs: []string{"a1", "b2", "c_3"}}},
		"no pods":     {"runpod-debug-retained-9-1-", false, runpod.RetentionRecord{}},
		"empty id":    {"runpod-debug-retained-9-1-a,,b", false, runpod.RetentionRecord{}},
		"zero run":    {"runpod-debug-retained-0-1-a", false, runpod.RetentionRecord{}},
		"signed":      {"runpod-debug-retained-+9-1-a", false, runpod.RetentionRecord{}},
		"bad prefix":  {"runpod-debug-kept-9-1-a", false, runpod.RetentionRecord{}},
		"dash in id":  {"runpod-debug-retained-9-1-a-b", false, runpod.RetentionRecord{}},
		"missing att": {"runpod-debug-retained-9-a", false, runpod.RetentionRecord{}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := runpod.ParseRetentionRecord(tt.name)
			if ok != tt.ok || (ok && (got.RunID != tt.want.RunID || got.Attempt != tt.want.Attempt || !slices.Equal(got.PodIDs, tt.want.PodIDs))) {
				t.Errorf("got %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
			if ok && got.Name() != tt.name {
				t.Errorf("Name() = %q, want %q", got.Name(), tt.name)
			}
		})
	}
}

func FuzzParseRetentionRecord(f *testing.F) {
	f.Add("runpod-debug-retained-123-2-abc123,def")
	f.Add("runpod-debug-retained-1-1-")
	f.Fuzz(func(t *testing.T, name string) {
		rec, ok := runpod.ParseRetentionRecord(name)
		if !ok {
			return
		}
		if rec.RunID <= 0 || rec.Attempt <= 0 || len(rec.PodIDs) == 0 {
			t.Fatalf("accepted %q as %+v", name, rec)
		}
		if again, ok := runpod.ParseRetentionRecord(rec.Name()); !ok || again.Name() != rec.Name() {
			t.Fatalf("%q does not round-trip", name)
		}
	})
}

// In Actions the provisioner's workflow comes from GITHUB_WORKFLOW_REF
// (owner/repo/.github/workflows/x.yml@refs/...), the reaper is configured
// with the path, and GitHub's run object may carry either form: all name
// the same workflow, so its orphans are reclaimed.
func TestReap_TheWorkflowMatchesWhicheverWayGitHubSpellsIt(t *testing.T) {
	ref := repo + "/" + workflow + "@refs/heads/main"
	for name, tc := range map[string]struct {
		tagged, policy, run string
		raw                 bool // the tag as written, not through Ownership.Tags
	}{
		"GITHUB_WORKFLOW_REF ownership": {tagged: ref, policy: workflow, run: workflow},
		"a GITHUB_WORKFLOW_REF tag":     {tagged: ref, policy: workflow, run: workflow, raw: true},
		"a run path with its ref":       {tagged: workflow, policy: workflow, run: repo + "/" + workflow + "@main"},
		"a bare file name policy":       {tagged: workflow, policy: "runpod-gpu-test.yml", run: workflow},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newReapWorld(t)
				w.pol.Workflow = tc.policy
				o := own(21, 1)
				var extra map[string]string
				if tc.raw {
					extra = map[string]string{runpod.TagWorkflow: tc.tagged}
				} else {
					o.Workflow = tc.tagged
				}
				id := w.pod(t, o, "", extra)
				w.runs.Set(runpod.RunInfo{ID: 21, Repository: repo, Workflow: tc.run, Status: "completed", Attempt: 1, CompletedAt: time.Now()})
				faketime.Advance(10 * time.Minute)
				if ds, err := w.reap(t); err != nil || ds[id].Rule != runpod.RuleCompleted || ds[id].Action != runpod.ActionWouldDelete {
					t.Errorf("%+v, %v: want run-completed, would-delete", ds[id], err)
				}
			})
		})
	}
}

func TestOwnershipTags_TheWorkflowIsTaggedAsItsPath(t *testing.T) {
	o := runpod.Ownership{Repository: repo, Workflow: repo + "/" + workflow + "@refs/pull/42/merge", RunID: 1, RunAttempt: 1}
	if got := o.Tags()[runpod.TagWorkflow]; got != workflow {
		t.Errorf("tagged %q, want %q", got, workflow)
	}
}
