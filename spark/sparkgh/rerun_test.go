package sparkgh

import (
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/gpugate/gpugate/spark"
)

// rerequest delivers a Re-run of check id as GitHub sends it.
func (w *world) rerequest(t *testing.T, id int64, name, sha, sender string) {
	t.Helper()
	w.gh.mu.Lock()
	ext := w.gh.checks[id].externalID
	w.gh.mu.Unlock()
	w.event(t, "check_run", map[string]any{"action": "rerequested", "sender": map[string]any{"login": sender},
		"check_run": map[string]any{"id": id, "name": name, "head_sha": sha, "external_id": ext}})
}

// finish ends the granted request's job with conclusion.
func (w *world) finish(t *testing.T, conclusion string) {
	t.Helper()
	_, live, _ := w.c.Snapshot(ctx)
	for _, r := range live {
		if r.State == spark.Active {
			w.event(t, "workflow_job", map[string]any{"action": "completed", "workflow_job": map[string]any{"runner_name": RunnerName(r.ID), "conclusion": conclusion}})
		}
	}
}

// A maintainer's Re-run of a finished check, from GitHub's interface,
// asks for the same lane again at the same commit: a new request, with a
// new check that names it. Each check carries its request as its
// external_id, which is how the Re-run finds it.
func TestRerun_AMaintainersRerunOfAFinishedCheckRunsTheLaneAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, false)
		w.label(t, "labeled", "spark-test-long", "maint", prJSON(7, sha1, []string{"spark-test-long"}, false))
		w.tick(t)
		w.finish(t, "failure")
		if last := w.gh.last(1); last.Conclusion != "failure" {
			t.Fatalf("first check %+v", last)
		}
		first := w.gh.checks[1].externalID
		w.rerequest(t, 1, "Spark test", sha1, "maint")
		_, live, _ := w.c.Snapshot(ctx)
		if len(live) != 1 || live[0].ID == first || live[0].Suite != "performance" || live[0].PR.SHA != sha1 || live[0].Annotations[keyLabel] != "" {
			t.Fatalf("live %+v, want the same lane asked for again", live)
		}
		if len(w.gh.checks) != 2 || w.gh.checks[2].externalID != live[0].ID || w.gh.checks[2].sha != sha1 {
			t.Errorf("checks %+v, want a second one naming the new request", w.gh.checks)
		}
		// A second delivery of the same Re-run while the new request is
		// queued asks for nothing more.
		w.rerequest(t, 1, "Spark test", sha1, "maint")
		if _, live, _ := w.c.Snapshot(ctx); len(live) != 1 || len(w.gh.checks) != 2 {
			t.Errorf("live %d, checks %d after a duplicate Re-run", len(live), len(w.gh.checks))
		}
	})
}

// What a Re-run does not do: run for someone below min_role (refused on
// the pull request), for a pull request that moved past the check's
// commit or closed, for a request still queued or running, or for
// another check.
func TestRerun_WhatItDoesNotRun(t *testing.T) {
	for name, tc := range map[string]struct {
		setup   func(w *world) (id int64, checkName, sha, sender string)
		refused string // the comment, "" for none
	}{
		"a writer": {func(w *world) (int64, string, string, string) { return 1, "Spark test", sha1, "dev" }, "@dev has the write role"},
		"a newer commit": {func(w *world) (int64, string, string, string) {
			w.setPR(prJSON(7, sha2, []string{"spark-test"}, false))
			return 1, "Spark test", sha1, "maint"
		}, ""},
		"a closed pull request": {func(w *world) (int64, string, string, string) {
			pr := prJSON(7, sha1, []string{"spark-test"}, false)
			pr["state"] = "closed"
			w.setPR(pr)
			return 1, "Spark test", sha1, "maint"
		}, ""},
		"another check's name": {func(w *world) (int64, string, string, string) { return 1, "build", sha1, "maint" }, ""},
		"another commit":       {func(w *world) (int64, string, string, string) { return 1, "Spark test", sha2, "maint" }, ""},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newWorld(t, false)
				w.label(t, "labeled", "spark-test", "maint", prJSON(7, sha1, []string{"spark-test"}, false))
				w.tick(t)
				w.finish(t, "failure")
				id, checkName, sha, sender := tc.setup(w)
				w.rerequest(t, id, checkName, sha, sender)
				if _, live, _ := w.c.Snapshot(ctx); len(live) != 0 || len(w.gh.checks) != 1 {
					t.Errorf("live %d, checks %d: nothing may be asked for", len(live), len(w.gh.checks))
				}
				if got := strings.Join(w.gh.comments, "\n"); (tc.refused == "") != (got == "") || !strings.Contains(got, tc.refused) {
					t.Errorf("comments %q, want one saying %q", got, tc.refused)
				}
			})
		})
	}
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, false)
		w.label(t, "labeled", "spark-test", "maint", prJSON(7, sha1, []string{"spark-test"}, false))
		w.rerequest(t, 1, "Spark test", sha1, "maint") // still queued
		if _, live, _ := w.c.Snapshot(ctx); len(live) != 1 || len(w.gh.checks) != 1 {
			t.Errorf("live %d, checks %d: a queued request is not asked for twice", len(live), len(w.gh.checks))
		}
	})
}

// A merge group's check re-run while the group is still in the queue
// runs the merge lane again; once the group has left the queue, nothing.
func TestRerun_AMergeGroupsCheckRunsAgainWhileTheGroupIsQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, ref := mergeWorld(t)
		w.mergeGroup(t, "checks_requested", ref, mergeSHA)
		w.tick(t)
		w.finish(t, "cancelled")
		w.rerequest(t, 1, "Spark test", mergeSHA, "maint")
		_, live, _ := w.c.Snapshot(ctx)
		if len(live) != 1 || live[0].Class != spark.MergeCI || live[0].Annotations[keyMerge] != ref || len(w.gh.checks) != 2 {
			t.Fatalf("live %+v, checks %d", live, len(w.gh.checks))
		}
		w.tick(t)
		w.finish(t, "failure")
		delete(w.gh.branches, "o/butter@"+strings.TrimPrefix(ref, "refs/heads/"))
		w.rerequest(t, 2, "Spark test", mergeSHA, "maint")
		if _, live, _ := w.c.Snapshot(ctx); len(live) != 0 || len(w.gh.checks) != 2 {
			t.Errorf("live %d, checks %d after the group left the queue", len(live), len(w.gh.checks))
		}
	})
}

// "Re-run all checks" (check_suite rerequested) re-runs each of the
// integration's checks in the suite as its own Re-run would; someone
// below min_role is refused once, not once per check.
func TestRerun_ReRunAllChecksReRunsEachOfTheSuitesChecks(t *testing.T) {
	for name, tc := range map[string]struct {
		sender  string
		queued  int
		refusal int
	}{"a maintainer": {"maint", 2, 0}, "a writer": {"dev", 0, 1}} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newWorld(t, false)
				busy(w, t)
				w.label(t, "labeled", "spark-test", "maint", prJSON(9, sha1, []string{"spark-test"}, false))
				w.label(t, "labeled", "spark-test-long", "maint", prJSON(9, sha1, []string{"spark-test", "spark-test-long"}, false))
				comment(w, t, "maint", "/spark cancel") // on pull request 9
				if _, live, _ := w.c.Snapshot(ctx); slices.ContainsFunc(live, func(r spark.Request) bool { return r.PR != nil }) {
					t.Fatalf("live %+v after the cancel", live)
				}
				w.gh.comments = nil
				w.event(t, "check_suite", map[string]any{"action": "rerequested", "sender": map[string]any{"login": tc.sender},
					"check_suite": map[string]any{"id": int64(sha1[0]), "head_sha": sha1}})
				_, live, _ := w.c.Snapshot(ctx)
				prs := slices.DeleteFunc(live, func(r spark.Request) bool { return r.PR == nil })
				if len(prs) != tc.queued || len(w.gh.comments) != tc.refusal {
					t.Errorf("queued %d (want %d), comments %q", len(prs), tc.queued, w.gh.comments)
				}
			})
		})
	}
}
