package sparkgh

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpugate/gpugate/internal/faketime"
	"github.com/gpugate/gpugate/spark"
)

// pending is a delivery GitHub has sent, or will send again.
type pending struct {
	event   string
	payload []byte
	what    string // for failure messages
}

// TestDeliveriesInAnyOrderEndWhereThePullRequestIs: GitHub delivers
// webhooks late, out of order and more than once. Whatever the order,
// once every delivery has been processed the fleet's queue agrees with
// the pull request as it is: queued work only for an open pull request's
// current head, for a label it still carries (or a maintainer's command
// at that head), and no work asked for twice, each with a check; running
// work is never stopped. Jobs end and checks are re-run among the
// deliveries.
func TestDeliveriesInAnyOrderEndWhereThePullRequestIs(t *testing.T) {
	lanes := []string{"spark-test", "spark-test-long"}
	actors := []string{"maint", "dev"}
	for seed := range 300 {
		synctest.Test(t, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 7))
			w := newWorld(t, false)
			if seed%2 == 0 {
				busy(w, t) // the pull request's work stays queued
			}
			// A runner is never removed while its lease is live.
			w.gh.onRemove = func(name string) {
				id, _ := RunnerRequest(name)
				if st, err := w.c.Status(ctx, id); err == nil && (st.Request.State == spark.Active || st.Request.State == spark.Queued) {
					t.Errorf("runner %s removed while its request is %s", name, st.Request.State)
				}
			}
			head, labels, open, commits := sha1, []string{}, true, 1
			var log []string
			var queue []pending
			send := func(event, what string, payload map[string]any) {
				payload["repository"] = map[string]any{"full_name": "o/butter", "id": repoID}
				data, _ := json.Marshal(payload)
				queue = append(queue, pending{event, data, what})
			}
			snapshot := func() map[string]any {
				pr := prJSON(7, head, labels, false)
				if !open {
					pr["state"] = "closed"
				}
				return pr
			}
			for range 10 {
				actor := actors[rng.IntN(2)]
				switch rng.IntN(8) {
				case 0, 1: // a label
					l := lanes[rng.IntN(2)]
					if !slices.Contains(labels, l) {
						labels = append(labels, l)
						w.setPR(snapshot())
						send("pull_request", "label "+l+" by "+actor, map[string]any{"action": "labeled", "label": map[string]any{"name": l}, "sender": map[string]any{"login": actor}, "pull_request": snapshot()})
					}
				case 2: // a label removed
					if len(labels) > 0 {
						l := labels[rng.IntN(len(labels))]
						labels = slices.DeleteFunc(labels, func(x string) bool { return x == l })
						w.setPR(snapshot())
						send("pull_request", "unlabel "+l, map[string]any{"action": "unlabeled", "label": map[string]any{"name": l}, "sender": map[string]any{"login": actor}, "pull_request": snapshot()})
					}
				case 3: // a push
					commits++
					head = strings.Repeat(fmt.Sprint(commits%10), 40)
					w.setPR(snapshot())
					send("pull_request", "push "+head[:4]+" by "+actor, map[string]any{"action": "synchronize", "sender": map[string]any{"login": actor}, "pull_request": snapshot()})
				case 4: // closed, or reopened
					open = !open
					w.setPR(snapshot())
					action := map[bool]string{true: "reopened", false: "closed"}[open]
					send("pull_request", action, map[string]any{"action": action, "sender": map[string]any{"login": actor}, "pull_request": snapshot()})
				case 5: // a comment command
					send("issue_comment", "/spark test by "+actor, map[string]any{"action": "created", "sender": map[string]any{"login": actor},
						"issue": map[string]any{"number": 7, "pull_request": map[string]any{}}, "comment": map[string]any{"body": "/spark test"}})
				case 6: // a granted job ends
					_, live, _ := w.c.Snapshot(ctx)
					for _, r := range live {
						if r.State == spark.Active && r.PR != nil {
							conclusion := []string{"success", "failure"}[rng.IntN(2)]
							send("workflow_job", "job of "+r.ID+" "+conclusion, map[string]any{"action": "completed",
								"workflow_job": map[string]any{"runner_name": RunnerName(r.ID), "conclusion": conclusion}})
							// The one-job runner removes itself after its job.
							w.gh.mu.Lock()
							w.gh.registered = slices.DeleteFunc(w.gh.registered, func(x RegisteredRunner) bool { return x.Name == RunnerName(r.ID) })
							w.gh.mu.Unlock()
							break
						}
					}
				case 7: // a Re-run of a check
					w.gh.mu.Lock()
					n := len(w.gh.checks)
					w.gh.mu.Unlock()
					if n > 0 {
						id := int64(1 + rng.IntN(n))
						w.gh.mu.Lock()
						rec := w.gh.checks[id]
						w.gh.mu.Unlock()
						send("check_run", fmt.Sprintf("re-run of check %d by %s", id, actor), map[string]any{"action": "rerequested", "sender": map[string]any{"login": actor},
							"check_run": map[string]any{"id": id, "name": "Spark test", "head_sha": rec.sha, "external_id": rec.externalID}})
					}
				}
				// Some deliveries arrive now, some later, some twice.
				for len(queue) > 0 && rng.IntN(3) > 0 {
					i := rng.IntN(len(queue))
					d := queue[i]
					if rng.IntN(4) > 0 {
						queue = slices.Delete(queue, i, i+1)
					}
					log = append(log, d.what)
					if err := w.in.Process(ctx, d.event, d.payload); err != nil {
						t.Fatalf("%s: %v (deliveries %q)", d.what, err, log)
					}
				}
				w.tick(t)
			}
			for _, i := range rng.Perm(len(queue)) {
				log = append(log, queue[i].what)
				if err := w.in.Process(ctx, queue[i].event, queue[i].payload); err != nil {
					t.Fatalf("%s: %v (deliveries %q)", queue[i].what, err, log)
				}
			}
			w.tick(t)
			// Some leases expire before their job runs; then the hourly
			// sweep runs. No runner of an ended lease stays registered.
			if rng.IntN(2) == 0 {
				faketime.Advance(3 * time.Hour)
				w.tick(t)
			}
			if _, err := w.in.SweepRegisteredRunners(ctx); err != nil {
				t.Fatal(err)
			}
			w.gh.mu.Lock()
			registered := slices.Clone(w.gh.registered)
			w.gh.mu.Unlock()
			for _, reg := range registered {
				id, _ := RunnerRequest(reg.Name)
				if st, err := w.c.Status(ctx, id); err != nil || (st.Request.State != spark.Active && st.Request.State != spark.Queued) {
					t.Errorf("runner %s still registered after its lease ended (%s, %v)", reg.Name, st.Request.State, err)
				}
			}
			_, live, _ := w.c.Snapshot(ctx)
			asked := map[string]bool{}
			for _, r := range live {
				if r.PR == nil {
					continue
				}
				label := r.Annotations[keyLabel]
				key := r.PR.SHA + "/" + r.Suite + "/" + string(r.Topology)
				switch {
				case asked[key]:
					t.Errorf("work asked for twice: %s", key)
				case r.State != spark.Queued: // running work is never stopped
				case !open:
					t.Errorf("work queued for a closed pull request: %+v", r.Annotations)
				case r.PR.SHA != head:
					t.Errorf("work queued for %s, not the head %s", r.PR.SHA[:4], head[:4])
				case label != "" && !slices.Contains(labels, label):
					t.Errorf("work queued for label %s, which the pull request no longer carries (labels %v)", label, labels)
				}
				asked[key] = true
				if _, ok := w.in.checkID(r); !ok {
					t.Errorf("request %s has no check", r.ID)
				}
			}
			if t.Failed() {
				t.Logf("seed %d; deliveries in the order processed: %q; at the end: head %s labels %v open %v", seed, log, head[:4], labels, open)
			}
		})
	}
}

// The cases the random orders found, each on its own.

// A "/spark test" on a closed pull request is refused: there is nothing
// to merge, and closing would not cancel it (its delivery came first).
func TestACommentCommandOnAClosedPullRequestIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, false)
		pr := prJSON(9, sha1, nil, false)
		pr["state"] = "closed"
		w.setPR(pr)
		comment(w, t, "maint", "/spark test")
		if _, live, _ := w.c.Snapshot(ctx); len(live) != 0 || len(w.gh.comments) != 1 || !strings.Contains(w.gh.comments[0], "the pull request is closed") {
			t.Errorf("live %d, comments %q", len(live), w.gh.comments)
		}
	})
}

// A push supersedes work a command asked for at the earlier commit: the
// command approved that commit, so nothing is asked for at the new one. With no
// label and nothing queued, a push costs no API request.
func TestNewPRSHASupersedesQueuedWorkACommandAskedForAtTheOldCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, false)
		busy(w, t)
		w.label(t, "synchronize", "", "maint", prJSON(9, sha1, nil, false))
		if w.gh.prReads != 0 {
			t.Errorf("a push with nothing labelled or queued read the pull request %d times", w.gh.prReads)
		}
		comment(w, t, "maint", "/spark test")
		w.label(t, "synchronize", "", "maint", prJSON(9, sha2, nil, false))
		w.tick(t)
		if _, live, _ := w.c.Snapshot(ctx); slices.ContainsFunc(live, func(r spark.Request) bool { return r.PR != nil }) {
			t.Errorf("live %+v: the old commit's work must end", live)
		}
		// Seed 004: "New PR SHA: supersede a queued old-SHA request".
		if last := w.gh.last(1); last.Conclusion != "neutral" || last.Summary != "A newer commit was pushed: superseded by 2222222; ask again to test it" {
			t.Errorf("check %+v", last)
		}
	})
}

// A push handled after its label's removal (delivered late) asks only
// for the labels the pull request carries now; one handled after the
// pull request was closed ends its queued work, since the closed delivery
// may have been handled while it was still open.
func TestAPushActsOnThePullRequestAsItIsNow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, false)
		busy(w, t)
		pushed := prJSON(9, sha2, []string{"spark-test"}, false) // the payload: labelled at the push
		w.setPR(prJSON(9, sha2, nil, false))                     // the label was removed since
		w.event(t, "pull_request", map[string]any{"action": "synchronize", "sender": map[string]any{"login": "maint"}, "pull_request": pushed})
		if _, live, _ := w.c.Snapshot(ctx); slices.ContainsFunc(live, func(r spark.Request) bool { return r.PR != nil }) {
			t.Errorf("live %+v: a removed label asks for nothing", live)
		}
		w.label(t, "labeled", "spark-test", "maint", prJSON(9, sha2, []string{"spark-test"}, false))
		closed := prJSON(9, sha2, []string{"spark-test"}, false)
		closed["state"] = "closed"
		w.setPR(closed)
		w.event(t, "pull_request", map[string]any{"action": "synchronize", "sender": map[string]any{"login": "maint"}, "pull_request": prJSON(9, sha2, []string{"spark-test"}, false)})
		if _, live, _ := w.c.Snapshot(ctx); slices.ContainsFunc(live, func(r spark.Request) bool { return r.PR != nil }) {
			t.Errorf("live %+v: a closed pull request keeps no queued work", live)
		}
	})
}

// busy keeps both hosts leased, so pull-request work stays queued.
func busy(w *world, t *testing.T) {
	t.Helper()
	w.c.Submit(ctx, spark.SubmitRequest{Class: spark.MergeCI, Host: "spark-1"})
	w.c.Submit(ctx, spark.SubmitRequest{Class: spark.MergeCI, Host: "spark-2"})
	w.tick(t)
}

// A command for the work a label already asked for (the same suite and
// topology at the same commit) is that work, not a second run; the
// command's ask outlives the label's, so removing the label leaves it.
func TestACommandForWhatALabelAskedForIsTheSameWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, false)
		busy(w, t)
		w.label(t, "labeled", "spark-test", "maint", prJSON(9, sha1, []string{"spark-test"}, false))
		comment(w, t, "maint", "/spark test")
		w.label(t, "unlabeled", "spark-test", "maint", prJSON(9, sha1, nil, false))
		_, live, _ := w.c.Snapshot(ctx)
		prs := slices.DeleteFunc(live, func(r spark.Request) bool { return r.PR == nil })
		if len(prs) != 1 || len(w.gh.checks) != 1 || prs[0].Suite != "smoke" {
			t.Errorf("pull-request work %+v, checks %d: want the one smoke run, still queued", prs, len(w.gh.checks))
		}
	})
}
