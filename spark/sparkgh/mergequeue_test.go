package sparkgh

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/gpugate/gpugate/spark"
)

const mergeSHA = "3333333333333333333333333333333333333333"

// mergeWorld is a world whose integration serves main's merge queue with
// the smoke suite on one node, and whose merge group for pull request 7
// is in the queue at mergeSHA.
func mergeWorld(t *testing.T) (*world, string) {
	return mergeWorldOf(newWorld(t, false))
}

// mergeWorldOf makes w such a world.
func mergeWorldOf(w *world) (*world, string) {
	w.in.cfg.MergeQueue = &MergeQueue{Lane: Lane{Suite: "smoke", Topology: spark.Single}, Branches: []string{"main"}}
	ref := fmt.Sprintf("refs/heads/gh-readonly-queue/main/pr-7-%s", sha1)
	w.gh.branches["o/butter@"+strings.TrimPrefix(ref, "refs/heads/")] = mergeSHA
	w.setPR(prJSON(7, sha1, nil, false))
	return w, ref
}

func (w *world) mergeGroup(t *testing.T, action, ref, sha string) {
	t.Helper()
	w.event(t, "merge_group", map[string]any{"action": action, "merge_group": map[string]any{
		"head_sha": sha, "head_ref": ref, "base_sha": sha2, "base_ref": "refs/heads/main"}})
}

// TestMergeCorrectnessCI_AMergeGroupRunsTheLaneAtItsCommitAndReportsItsCheck: seed
// 004's "Merge correctness CI", one node, at its admission order (70):
// the merge group GitHub asks checks of is queued at its own commit as a
// merge-ci request, its check is on that commit (what the queue waits
// for), the workflow is dispatched there once granted, and the job's
// result completes the check. A duplicate delivery asks for nothing more.
func TestMergeCorrectnessCI_AMergeGroupRunsTheLaneAtItsCommitAndReportsItsCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, ref := mergeWorld(t)
		w.mergeGroup(t, "checks_requested", ref, mergeSHA)
		w.mergeGroup(t, "checks_requested", ref, mergeSHA)
		_, live, _ := w.c.Snapshot(ctx)
		if len(live) != 1 || live[0].Class != spark.MergeCI || live[0].Suite != "smoke" || live[0].Topology != spark.Single || live[0].PR != nil {
			t.Fatalf("live %+v, want one merge-ci request", live)
		}
		if len(w.gh.checks) != 1 || w.gh.checks[1].sha != mergeSHA {
			t.Fatalf("checks %+v, want one on the merge group's commit", w.gh.checks)
		}
		w.tick(t)
		if len(w.gh.dispatches) != 1 || w.gh.dispatches[0]["head_sha"] != mergeSHA || w.gh.dispatches[0]["suite"] != "smoke" {
			t.Fatalf("dispatches %v", w.gh.dispatches)
		}
		runner := RunnerName(live[0].ID)
		if _, err := w.c.RecordReceipt(ctx, live[0].ID, []byte("suite=smoke passed\n")); err != nil {
			t.Fatal(err)
		}
		for _, action := range []string{"in_progress", "completed"} {
			w.event(t, "workflow_job", map[string]any{"action": action, "workflow_job": map[string]any{"runner_name": runner, "conclusion": "success"}})
		}
		want := []string{"Spark test queued — position 1", "Spark 2 allocated — environment preparing", "Spark test running — exact SHA 3333333", "Spark test passed — evidence receipt recorded"}
		if got := w.gh.titles(1); strings.Join(got, " | ") != strings.Join(want, " | ") {
			t.Errorf("check titles %q", got)
		}
	})
}

// A group the queue removes (merged, dequeued, or invalidated by an
// earlier entry) is cancelled while it is still queued.
func TestMergeQueue_ADestroyedGroupIsCancelledWhileQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, ref := mergeWorld(t)
		w.mergeGroup(t, "checks_requested", ref, mergeSHA)
		w.mergeGroup(t, "destroyed", ref, mergeSHA)
		if _, live, _ := w.c.Snapshot(ctx); len(live) != 0 {
			t.Errorf("live %+v after the group was destroyed", live)
		}
		if last := w.gh.last(1); last.Conclusion != "cancelled" {
			t.Errorf("check %+v", last)
		}
	})
}

// What is not admitted: a branch whose queue is not served and a
// deployment that serves none (ignored: no check), a ref that is not a
// merge queue's and a group whose newest pull request comes from a fork
// and a pair lane the fleet refuses (the check fails at once, so the
// queue drops the group rather than wait), and a late delivery for a group no longer in the queue
// (ignored).
func TestMergeQueue_WhatIsNotAdmitted(t *testing.T) {
	for name, tc := range map[string]struct {
		setup   func(w *world, ref string) (action, gotRef, sha string)
		refused string // the failed check's summary, "" for none
	}{
		"not served": {func(w *world, ref string) (string, string, string) {
			w.in.cfg.MergeQueue = nil
			return "checks_requested", ref, mergeSHA
		}, ""},
		"another base branch": {func(w *world, ref string) (string, string, string) {
			w.in.cfg.MergeQueue.Branches = []string{"release"}
			return "checks_requested", ref, mergeSHA
		}, ""},
		"not a merge queue ref": {func(w *world, ref string) (string, string, string) {
			return "checks_requested", "refs/heads/main", mergeSHA
		}, `"refs/heads/main" is not a merge queue ref of main`},
		"a fork's pull request": {func(w *world, ref string) (string, string, string) {
			w.setPR(prJSON(7, sha1, nil, true))
			return "checks_requested", ref, mergeSHA
		}, "#7 comes from a fork"},
		"a deleted fork's pull request": {func(w *world, ref string) (string, string, string) {
			pr := prJSON(7, sha1, nil, false)
			pr["head"] = map[string]any{"sha": sha1, "repo": nil}
			w.setPR(pr)
			return "checks_requested", ref, mergeSHA
		}, "#7 comes from a fork"},
		"the group left the queue": {func(w *world, ref string) (string, string, string) {
			delete(w.gh.branches, "o/butter@"+strings.TrimPrefix(ref, "refs/heads/"))
			return "checks_requested", ref, mergeSHA
		}, ""},
		"a pair lane without a distributed test": {func(w *world, ref string) (string, string, string) {
			w.in.cfg.MergeQueue.Topology = spark.Pair
			return "checks_requested", ref, mergeSHA
		}, "no distributed test is configured"},
		"the group was rebuilt": {func(w *world, ref string) (string, string, string) {
			return "checks_requested", ref, sha2
		}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w, ref := mergeWorld(t)
				action, gotRef, sha := tc.setup(w, ref)
				w.mergeGroup(t, action, gotRef, sha)
				if _, live, _ := w.c.Snapshot(ctx); len(live) != 0 {
					t.Errorf("live %+v: nothing may be queued", live)
				}
				switch {
				case tc.refused == "" && len(w.gh.checks) != 0:
					t.Errorf("checks %+v, want none", w.gh.checks)
				case tc.refused != "" && (len(w.gh.checks) != 1 || w.gh.last(1).Conclusion != "failure" || !strings.Contains(w.gh.last(1).Summary, tc.refused)):
					t.Errorf("checks %+v, want one failed naming %q", w.gh.checks, tc.refused)
				}
			})
		})
	}
}

// The events the App must be subscribed to name merge_group only when the
// merge queue is served (sparkd logs them at start).
func TestMergeQueue_TheEventsToSubscribeToIncludeMergeGroupOnlyWhenServed(t *testing.T) {
	w, _ := mergeWorld(t)
	if !slices.Contains(w.in.Events(), "merge_group") {
		t.Errorf("served: %v", w.in.Events())
	}
	w.in.cfg.MergeQueue = nil
	if slices.Contains(w.in.Events(), "merge_group") {
		t.Errorf("not served: %v", w.in.Events())
	}
}

func TestMergeQueue_ConfigurationIsValidated(t *testing.T) {
	for name, mq := range map[string]MergeQueue{
		"no branch":     {Lane: Lane{Suite: "smoke", Topology: spark.Single}},
		"an empty name": {Lane: Lane{Suite: "smoke", Topology: spark.Single}, Branches: []string{" "}},
		"an odd suite":  {Lane: Lane{Suite: "bench", Topology: spark.Single}, Branches: []string{"main"}},
		"no topology":   {Lane: Lane{Suite: "smoke"}, Branches: []string{"main"}},
	} {
		c := DefaultConfig("s")
		c.MergeQueue = &mq
		if err := c.Validate(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "merge queue") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
