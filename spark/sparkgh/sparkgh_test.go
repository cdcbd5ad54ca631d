package sparkgh

import (
	"bytes"
	"context"
	"crypto/hmac"
	sha1hash "crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-github/v66/github"
	"github.com/gpugate/gpugate/internal/faketime"
	"github.com/gpugate/gpugate/internal/workflowtest"
	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/sparktest"
)

var ctx = context.Background()

// fakeGH is an in-memory GitHub.
type fakeGH struct {
	mu         sync.Mutex
	roles      map[string]string
	prs        map[int]PR
	checks     map[int64]*checkRec
	next       int64
	comments   []string
	dispatches []map[string]any
	minted     map[string][]string
	// updateCalls counts UpdateCheck calls, changed or not: each is an
	// API request.
	updateCalls int
	branches    map[string]string // repo@branch -> commit
	// Injected failures of MintJIT, Dispatch, CreateCheck and
	// RemoveRunner.
	mintErr, dispatchErr, createErr, removeErr error
	removed                                    []string // RemoveRunner calls that succeeded
	registered                                 []RegisteredRunner
	onRemove                                   func(name string) // called, with the lock held, before a removal
	removeCalls                                int
	// prFailures: how many PullRequest calls fail before one succeeds.
	prFailures int
	// prHang: PullRequest blocks until its context ends, as a request
	// GitHub never answers.
	prHang  bool
	prReads int // PullRequest calls: each is an API request
}

type checkRec struct {
	sha        string
	externalID string
	history    []Check
}

func newFakeGH() *fakeGH {
	return &fakeGH{roles: map[string]string{"maint": "maintain", "admin1": "admin", "dev": "write"}, prs: map[int]PR{},
		checks: map[int64]*checkRec{}, minted: map[string][]string{}, branches: map[string]string{"o/butter@main": "2222222222222222222222222222222222222222"}}
}

func (g *fakeGH) Permission(_ context.Context, _, user string) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if r, ok := g.roles[user]; ok {
		return r, nil
	}
	return "read", nil
}
func (g *fakeGH) PullRequest(ctx context.Context, _ string, n int) (PR, error) {
	g.mu.Lock()
	hang := g.prHang
	g.prReads++
	g.mu.Unlock()
	if hang {
		<-ctx.Done()
		return PR{}, ctx.Err()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.prFailures > 0 {
		g.prFailures--
		return PR{}, errors.New("502 Bad Gateway")
	}
	return g.prs[n], nil
}
func (g *fakeGH) CreateCheck(_ context.Context, _, sha, _ string, c Check) (int64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.createErr != nil {
		return 0, g.createErr
	}
	g.next++
	ext := c.ExternalID
	c.ExternalID = ""
	g.checks[g.next] = &checkRec{sha: sha, externalID: ext, history: []Check{c}}
	return g.next, nil
}
func (g *fakeGH) UpdateCheck(_ context.Context, _ string, id int64, _ string, c Check) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.updateCalls++
	rec := g.checks[id]
	if last := rec.history[len(rec.history)-1]; last != c {
		rec.history = append(rec.history, c)
	}
	return nil
}
func (g *fakeGH) Comment(_ context.Context, _ string, _ int, body string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.comments = append(g.comments, body)
	return nil
}
func (g *fakeGH) Dispatch(_ context.Context, _, _ string, inputs map[string]any) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.dispatchErr != nil {
		return g.dispatchErr
	}
	g.dispatches = append(g.dispatches, inputs)
	return nil
}
func (g *fakeGH) MintJIT(_ context.Context, name string, labels []string) (Secret, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mintErr != nil {
		return "", g.mintErr
	}
	g.minted[name] = labels
	g.registered = append(g.registered, RegisteredRunner{Name: name})
	return "JIT-SECRET-" + Secret(name), nil
}

// SuiteChecks lists the checks on the commit the suite is of: suite IDs
// are the commits' first byte's value, in this fake.
func (g *fakeGH) SuiteChecks(_ context.Context, _ string, suite int64, _ string) ([]CheckRun, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []CheckRun
	for id := int64(1); id <= g.next; id++ {
		if rec := g.checks[id]; rec != nil && len(rec.sha) > 0 && int64(rec.sha[0]) == suite {
			out = append(out, CheckRun{ID: id, HeadSHA: rec.sha, ExternalID: rec.externalID})
		}
	}
	return out, nil
}

func (g *fakeGH) RemoveRunner(_ context.Context, name string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.removeCalls++
	if g.removeErr != nil {
		return g.removeErr
	}
	if g.onRemove != nil {
		g.onRemove(name)
	}
	g.removed = append(g.removed, name)
	g.registered = slices.DeleteFunc(g.registered, func(r RegisteredRunner) bool { return r.Name == name })
	return nil
}

func (g *fakeGH) Runners(context.Context) ([]RegisteredRunner, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.registered), nil
}

func (g *fakeGH) BranchSHA(_ context.Context, repo, branch string) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	sha, ok := g.branches[repo+"@"+branch]
	if !ok {
		return "", fmt.Errorf("404 Branch not found: %w", ErrNoBranch)
	}
	return sha, nil
}

func (g *fakeGH) titles(id int64) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, c := range g.checks[id].history {
		out = append(out, c.Title)
	}
	return out
}

func (g *fakeGH) last(id int64) Check {
	g.mu.Lock()
	defer g.mu.Unlock()
	h := g.checks[id].history
	return h[len(h)-1]
}

type world struct {
	gh   *fakeGH
	in   *Integration
	c    *spark.Controller
	opts spark.Options
}

func newWorld(t *testing.T, pairTest bool) *world {
	t.Helper()
	w := &world{gh: newFakeGH()}
	in, err := New(DefaultConfig("webhook-secret-123"), nil, w.gh, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.in = in
	w.opts = spark.DefaultOptions()
	w.opts.Service, w.opts.PairTest, w.opts.OnGrant = &sparktest.Service{}, pairTest, in.OnGrant
	c, err := spark.New(sparktest.NewStore(), w.opts)
	if err != nil {
		t.Fatal(err)
	}
	in.SetController(c)
	w.c = c
	w.tick(t)
	return w
}

func (w *world) tick(t *testing.T) {
	t.Helper()
	for _, h := range []string{"spark-1", "spark-2"} {
		w.c.Heartbeat(ctx, spark.HostReport{Host: h})
	}
	if err := w.c.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.in.Sync(ctx); err != nil {
		t.Fatal(err)
	}
}

const repoID = 99

func prJSON(number int, sha string, labels []string, fork bool) map[string]any {
	head := repoID
	if fork {
		head = 1234
	}
	var ls []map[string]any
	for _, l := range labels {
		ls = append(ls, map[string]any{"name": l})
	}
	return map[string]any{"number": number, "state": "open", "labels": ls,
		"head": map[string]any{"sha": sha, "repo": map[string]any{"id": head}}, "base": map[string]any{"repo": map[string]any{"id": repoID}}}
}

func (w *world) event(t *testing.T, event string, payload map[string]any) {
	t.Helper()
	payload["repository"] = map[string]any{"full_name": "o/butter", "id": repoID}
	data, _ := json.Marshal(payload)
	if err := w.in.Process(ctx, event, data); err != nil {
		t.Fatal(err)
	}
}

// label delivers a label event whose pull request is also GitHub's
// current state of it.
func (w *world) label(t *testing.T, action, label, sender string, pr map[string]any) {
	w.setPR(pr)
	w.event(t, "pull_request", map[string]any{"action": action, "label": map[string]any{"name": label}, "sender": map[string]any{"login": sender}, "pull_request": pr})
}

// setPR makes pr (prJSON's shape) GitHub's current state of it.
func (w *world) setPR(pr map[string]any) {
	data, _ := json.Marshal(pr)
	var p github.PullRequest
	json.Unmarshal(data, &p)
	w.gh.mu.Lock()
	defer w.gh.mu.Unlock()
	w.gh.prs[p.GetNumber()] = prOf("o/butter", &p)
}

var sha1 = strings.Repeat("1", 40)
var sha2 = strings.Repeat("2", 40)

// A delivery acted on late (redelivered, or queued behind others) does
// nothing unless what it says of the pull request still holds: a label
// was a decision about the commit it was applied to, and the deliveries
// for what changed since handle the rest. One that still holds but asks
// for what is already queued at that commit adds nothing.
func TestALateDeliveryActsOnlyOnThePullRequestAsItIsNow(t *testing.T) {
	sha3 := strings.Repeat("3", 40)
	closed := func(p map[string]any) map[string]any { p["state"] = "closed"; return p }
	for name, tc := range map[string]struct {
		queued  bool           // a request for sha3 is queued first
		action  string         // the late delivery
		said    map[string]any // its pull request
		now     map[string]any // GitHub's, when it is processed
		wantSHA string         // the one queued request afterwards; "" for none
	}{
		"labeled, pushed since":       {false, "labeled", prJSON(7, sha1, []string{"spark-test"}, false), prJSON(7, sha2, []string{"spark-test"}, false), ""},
		"labeled, closed since":       {false, "labeled", prJSON(7, sha1, []string{"spark-test"}, false), closed(prJSON(7, sha1, []string{"spark-test"}, false)), ""},
		"labeled, label removed":      {false, "labeled", prJSON(7, sha1, []string{"spark-test"}, false), prJSON(7, sha1, nil, false), ""},
		"synchronize, pushed again":   {true, "synchronize", prJSON(7, sha2, []string{"spark-test"}, false), prJSON(7, sha3, []string{"spark-test"}, false), sha3},
		"closed, reopened since":      {true, "closed", closed(prJSON(7, sha3, []string{"spark-test"}, false)), prJSON(7, sha3, []string{"spark-test"}, false), sha3},
		"unlabeled, labelled again":   {true, "unlabeled", prJSON(7, sha3, nil, false), prJSON(7, sha3, []string{"spark-test"}, false), sha3},
		"synchronize, still the head": {true, "synchronize", prJSON(7, sha3, []string{"spark-test"}, false), prJSON(7, sha3, []string{"spark-test"}, false), sha3},
		"labeled, delivered twice":    {true, "labeled", prJSON(7, sha3, []string{"spark-test"}, false), prJSON(7, sha3, []string{"spark-test"}, false), sha3},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newWorld(t, false)
				if tc.queued {
					w.label(t, "labeled", "spark-test", "maint", prJSON(7, sha3, []string{"spark-test"}, false))
				}
				w.setPR(tc.now)
				w.event(t, "pull_request", map[string]any{"action": tc.action, "label": map[string]any{"name": "spark-test"}, "sender": map[string]any{"login": "maint"},
					"pull_request": tc.said})
				_, live, _ := w.c.Snapshot(ctx)
				var got string
				for _, r := range live {
					got += r.PR.SHA
				}
				if got != tc.wantSHA || len(w.gh.comments) != 0 {
					t.Errorf("queued %q, want %q; comments %v", got, tc.wantSHA, w.gh.comments)
				}
			})
		})
	}
}

// Sync runs after every admission round, seconds apart: a check is
// written only when what it shows changed, or a few queued requests would
// spend the installation's API budget (5,000 requests an hour) rewriting
// the same text, and dispatches and JIT minting would then be refused.
func TestSync_WritesACheckOnlyWhenWhatItShowsChanged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, false)
		w.label(t, "labeled", "spark-test", "maint", prJSON(7, sha1, []string{"spark-test"}, false))
		writes := func() int { w.gh.mu.Lock(); defer w.gh.mu.Unlock(); return 1 + w.gh.updateCalls } // the creation, then updates
		for range 5 {
			if err := w.in.Sync(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if got := writes(); got != 1 {
			t.Errorf("an unchanged queued check was written %d times, want once (its creation)", got)
		}
		w.tick(t) // granted: the check changes once
		for range 5 {
			w.tick(t)
		}
		if got := writes(); got != 2 {
			t.Errorf("after the grant and five more rounds: %d writes, want 2; titles %v", got, w.gh.titles(1))
		}
	})
}

// GitHub's API can lag its webhooks for a moment: a pull request read
// just after a push may still show the commit before it. A view older than
// the delivery (updated_at, to the second) is not taken for a stale
// delivery: processing fails with ErrBehind, to be retried, and succeeds
// once GitHub has caught up. A view newer than the delivery is the stale
// case, ignored.
func TestAViewOlderThanTheDeliveryIsRetriedNotIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, false)
		at := func(p map[string]any, ts string) map[string]any { p["updated_at"] = ts; return p }
		pushed := at(prJSON(7, sha2, []string{"spark-test"}, false), "2026-11-29T03:00:05Z")
		payload, _ := json.Marshal(map[string]any{"action": "synchronize", "sender": map[string]any{"login": "maint"}, "pull_request": pushed,
			"repository": map[string]any{"full_name": "o/butter", "id": repoID}})
		// Not yet caught up: a view from before the push, and one from the
		// push's own second (updated_at counts whole seconds).
		for _, ts := range []string{"2026-11-29T03:00:00Z", "2026-11-29T03:00:05Z"} {
			w.setPR(at(prJSON(7, sha1, []string{"spark-test"}, false), ts))
			if err := w.in.Process(ctx, "pull_request", payload); !errors.Is(err, ErrBehind) {
				t.Fatalf("a view updated %s: %v, want ErrBehind", ts, err)
			}
		}
		// A view newer than the delivery: the delivery is stale, ignored.
		w.setPR(at(prJSON(7, strings.Repeat("3", 40), []string{"spark-test"}, false), "2026-11-29T03:00:09Z"))
		if err := w.in.Process(ctx, "pull_request", payload); err != nil {
			t.Fatalf("a stale delivery: %v", err)
		}
		if _, live, _ := w.c.Snapshot(ctx); len(live) != 0 {
			t.Fatalf("a stale delivery queued %+v", live)
		}
		w.setPR(pushed)
		if err := w.in.Process(ctx, "pull_request", payload); err != nil {
			t.Fatal(err)
		}
		if _, live, _ := w.c.Snapshot(ctx); len(live) != 1 || live[0].PR.SHA != sha2 {
			t.Errorf("queued %+v, want the pushed commit", live)
		}
	})
}

func TestLabelByAMaintainerQueuesACheckOnTheExactSHA(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, false)
		w.label(t, "labeled", "spark-test", "maint", prJSON(7, sha1, []string{"spark-test"}, false))
		if len(w.gh.checks) != 1 || w.gh.checks[1].sha != sha1 {
			t.Fatalf("checks %v", w.gh.checks)
		}
		if got := w.gh.titles(1)[0]; got != "Spark test queued — position 1" {
			t.Errorf("title %q", got)
		}
	})
}

func TestLabelAuthorization(t *testing.T) {
	tests := map[string]struct {
		label, sender string
		fork          bool
		want          string
	}{
		"writer is not a maintainer":      {"spark-test", "dev", false, "needs maintain or higher"},
		"fork":                            {"spark-test", "maint", true, "fork pull requests are never admitted"},
		"pair without a distributed test": {"spark-pair-test", "maint", false, "pair requests need a configured distributed test"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newWorld(t, false)
				w.label(t, "labeled", tt.label, tt.sender, prJSON(7, sha1, []string{tt.label}, tt.fork))
				if len(w.gh.checks) != 0 || len(w.gh.comments) != 1 || !strings.Contains(w.gh.comments[0], tt.want) {
					t.Errorf("checks %d comments %v", len(w.gh.checks), w.gh.comments)
				}
			})
		})
	}
}

func TestLabelRemovalAndClosingCancelQueuedWorkOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, false)
		w.label(t, "labeled", "spark-test", "maint", prJSON(7, sha1, []string{"spark-test"}, false))
		w.tick(t) // active on spark-2
		w.label(t, "labeled", "spark-test-long", "maint", prJSON(7, sha1, []string{"spark-test", "spark-test-long"}, false))
		w.label(t, "unlabeled", "spark-test-long", "maint", prJSON(7, sha1, []string{"spark-test"}, false))
		if c := w.gh.last(2); c.Conclusion != "cancelled" || c.Summary != "The queued request was cancelled: label spark-test-long removed" {
			t.Errorf("queued check %+v: it says why", c)
		}
		w.label(t, "closed", "", "maint", prJSON(7, sha1, nil, false))
		if c := w.gh.last(1); c.Status != "in_progress" {
			t.Errorf("closing must not stop active work: %+v", c)
		}
	})
}

func TestANewCommitSupersedesTheQueuedOldSHA(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, false)
		w.c.Submit(ctx, spark.SubmitRequest{Class: spark.MergeCI, Host: "spark-2"}) // keep both hosts busy
		w.c.Submit(ctx, spark.SubmitRequest{Class: spark.MergeCI, Host: "spark-1"})
		w.tick(t)
		w.tick(t)
		w.label(t, "labeled", "spark-test", "maint", prJSON(8, sha1, []string{"spark-test"}, false))
		w.label(t, "synchronize", "", "maint", prJSON(8, sha2, []string{"spark-test"}, false))
		w.tick(t)
		if c := w.gh.last(1); c.Conclusion != "neutral" || !strings.Contains(c.Title, "superseded") {
			t.Errorf("old SHA check %+v", c)
		}
		if w.gh.checks[2].sha != sha2 || w.gh.last(2).Status != "queued" {
			t.Errorf("new SHA check %+v", w.gh.last(2))
		}
		if title := w.gh.last(2).Title; title != "Spark 2 draining — active job finishing" {
			t.Errorf("title %q", title)
		}
	})
}

func TestAnUnreviewedPushDropsTheQueuedWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, false)
		w.c.Submit(ctx, spark.SubmitRequest{Class: spark.MergeCI, Host: "spark-2"})
		w.tick(t)
		w.label(t, "labeled", "spark-test", "maint", prJSON(8, sha1, []string{"spark-test"}, false))
		w.label(t, "synchronize", "", "dev", prJSON(8, sha2, []string{"spark-test"}, false))
		// Seed 004: "New PR SHA: supersede a queued old-SHA request".
		if len(w.gh.checks) != 1 || w.gh.last(1).Conclusion != "neutral" || !strings.Contains(w.gh.last(1).Title, "superseded") || len(w.gh.comments) != 1 {
			t.Errorf("checks %d last %+v comments %v", len(w.gh.checks), w.gh.last(1), w.gh.comments)
		}
	})
}

func comment(w *world, t *testing.T, sender, body string) {
	w.event(t, "issue_comment", map[string]any{"action": "created", "sender": map[string]any{"login": sender},
		"issue": map[string]any{"number": 9, "pull_request": map[string]any{"url": "x"}}, "comment": map[string]any{"body": body}})
}

// A comment carries no commit: a command processed more than
// CommandMaxAge after it was written (a redelivery) is refused, since the
// pull request may have changed since; a prompt one is acted on.
func TestALateCommentCommandIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, false)
		w.gh.prs[9] = PR{Repo: "o/butter", Number: 9, HeadSHA: sha1, Open: true, HeadRepoID: repoID, BaseRepoID: repoID}
		at := func(ago time.Duration) string { return time.Now().Add(-ago).UTC().Format(time.RFC3339) }
		send := func(ago time.Duration) {
			w.event(t, "issue_comment", map[string]any{"action": "created", "sender": map[string]any{"login": "maint"},
				"issue": map[string]any{"number": 9, "pull_request": map[string]any{"url": "x"}}, "comment": map[string]any{"body": "/spark test", "created_at": at(ago)}})
		}
		send(3 * time.Hour)
		if _, live, _ := w.c.Snapshot(ctx); len(live) != 0 || len(w.gh.comments) != 1 || !strings.Contains(w.gh.comments[0], "arrived 3h0m0s late") {
			t.Errorf("a 3-hour-old command: queued %d, comments %v", len(live), w.gh.comments)
		}
		send(30 * time.Second)
		if _, live, _ := w.c.Snapshot(ctx); len(live) != 1 {
			t.Errorf("a prompt command queued %d requests, want 1", len(live))
		}
	})
}

func TestCommentCommands(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, false)
		w.gh.prs[9] = PR{Repo: "o/butter", Number: 9, HeadSHA: sha1, Open: true, HeadRepoID: repoID, BaseRepoID: repoID}
		comment(w, t, "maint", "Looks good.\n/spark test\n")
		if len(w.gh.checks) != 1 {
			t.Fatalf("checks %d", len(w.gh.checks))
		}
		comment(w, t, "maint", "/spark status")
		comment(w, t, "maint", "/spark frobnicate")
		comment(w, t, "maint", "please run /spark test later") // not at the start of a line
		comment(w, t, "dev", "/spark test")
		if len(w.gh.comments) != 3 || !strings.Contains(w.gh.comments[0], "Spark test queued") ||
			!strings.Contains(w.gh.comments[1], "Unknown command `/spark frobnicate`") || !strings.Contains(w.gh.comments[2], "refused") {
			t.Errorf("comments %q", w.gh.comments)
		}
		comment(w, t, "maint", "/spark test --pair")
		if !strings.Contains(w.gh.comments[3], "pair requests need") {
			t.Errorf("pair: %q", w.gh.comments[3])
		}
		comment(w, t, "maint", "/spark cancel")
		if w.gh.last(1).Conclusion != "cancelled" {
			t.Errorf("%+v", w.gh.last(1))
		}
	})
}

func TestGrantDispatchesAndMintsAOneJobRunnerThenRunsAndPasses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, false)
		var jits []string
		w.in.JITConfigs = func(runner string, s Secret) error { jits = append(jits, runner); return nil }
		w.label(t, "labeled", "spark-test-long", "maint", prJSON(7, sha1, []string{"spark-test-long"}, false))
		w.tick(t)
		if len(w.gh.dispatches) != 1 {
			t.Fatalf("dispatches %v", w.gh.dispatches)
		}
		d := w.gh.dispatches[0]
		runner := RunnerName(d["reservation_id"].(string))
		if d["head_sha"] != sha1 || d["topology"] != "single" || d["suite"] != "performance" ||
			!slices.Equal(w.gh.minted[runner], []string{"self-hosted", "Linux", "ARM64", "waffuru-spark", "spark-single", runner}) || len(jits) != 1 {
			t.Errorf("dispatch %v minted %v", d, w.gh.minted)
		}
		job := func(action, conclusion string) {
			w.event(t, "workflow_job", map[string]any{"action": action, "workflow_job": map[string]any{"runner_name": runner, "conclusion": conclusion}})
		}
		job("in_progress", "")
		if _, err := w.c.RecordReceipt(ctx, d["reservation_id"].(string), []byte("suite=performance passed\n")); err != nil {
			t.Fatal(err)
		}
		job("completed", "success")
		want := []string{"Spark test queued — position 1", "Spark 2 allocated — environment preparing", "Spark test running — exact SHA 1111111", "Spark test passed — evidence receipt recorded"}
		if diff := strings.Join(w.gh.titles(1), " | "); diff != strings.Join(want, " | ") {
			t.Errorf("titles %s", diff)
		}
		hosts, live, _ := w.c.Snapshot(ctx)
		if len(live) != 0 || hosts[1].Mode != spark.Idle {
			t.Errorf("the lease must be released: %+v %+v", live, hosts)
		}
		w.tick(t)
		if w.gh.removeCalls != 0 {
			t.Errorf("RemoveRunner called %d times for a runner that ran its one job (it removed itself)", w.gh.removeCalls)
		}
	})
}

// Seed 004: "Scheduled benchmark … Controller schedule" and "Merge
// correctness CI … Controller-approved workflow". A scheduled request runs
// the branch's commit at the time it was asked for: queued in priority
// order, granted, then a one-job runner and the workflow dispatched at
// that commit, with no check run (there is no pull request), and released
// when its job completes. Classes with entry points of their own, a branch
// GitHub does not know and a malformed repository are refused.
func TestAScheduledRequestRunsTheBranchsCommitThroughTheSameQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, false)
		r, err := w.in.Schedule(ctx, Scheduled{Name: "nightly-bench", Repo: "o/butter", Branch: "main", Class: spark.Benchmark, Suite: "performance"})
		if err != nil {
			t.Fatal(err)
		}
		if r.Owner != "schedule:nightly-bench" || r.State != spark.Queued || r.Duration != spark.DefaultDurations()[spark.Benchmark] {
			t.Errorf("queued %+v", r)
		}
		w.gh.branches["o/butter@main"] = "3333333333333333333333333333333333333333" // main moves on
		// Due again before it ran: the waiting request is the answer.
		if again, err := w.in.Schedule(ctx, Scheduled{Name: "nightly-bench", Repo: "o/butter", Branch: "main", Class: spark.Benchmark, Suite: "performance"}); err != nil || again.ID != r.ID {
			t.Errorf("asked again while queued: %+v %v, want %s", again, err, r.ID)
		}
		w.tick(t)
		if len(w.gh.dispatches) != 1 {
			t.Fatalf("dispatches %v", w.gh.dispatches)
		}
		d := w.gh.dispatches[0]
		runner := RunnerName(r.ID)
		if d["reservation_id"] != r.ID || d["head_sha"] != "2222222222222222222222222222222222222222" || d["suite"] != "performance" || d["topology"] != "single" ||
			!slices.Equal(w.gh.minted[runner], []string{"self-hosted", "Linux", "ARM64", "waffuru-spark", "spark-single", runner}) {
			t.Errorf("dispatch %v, minted %v: want the commit it was asked for", d, w.gh.minted)
		}
		if len(w.gh.checks) != 0 {
			t.Errorf("a scheduled request got %d check run(s)", len(w.gh.checks))
		}
		w.event(t, "workflow_job", map[string]any{"action": "completed", "workflow_job": map[string]any{"runner_name": runner, "conclusion": "success"}})
		if st, _ := w.c.Status(ctx, r.ID); st.Request.State != spark.Released {
			t.Errorf("after its job: %s", st.Request.State)
		}
		for name, bad := range map[string]Scheduled{
			"development":       {Name: "x", Repo: "o/butter", Branch: "main", Class: spark.Development, Suite: "smoke"},
			"a PR class":        {Name: "x", Repo: "o/butter", Branch: "main", Class: spark.ManualPR, Suite: "smoke"},
			"no suite":          {Name: "x", Repo: "o/butter", Branch: "main", Class: spark.MergeCI},
			"a bad repo":        {Name: "x", Repo: "butter", Branch: "main", Class: spark.MergeCI, Suite: "smoke"},
			"an unknown branch": {Name: "x", Repo: "o/butter", Branch: "gone", Class: spark.MergeCI, Suite: "smoke"},
		} {
			if _, err := w.in.Schedule(ctx, bad); err == nil || name != "an unknown branch" && !errors.Is(err, ErrSchedule) {
				t.Errorf("%s: %v", name, err)
			}
		}
		if _, live, _ := w.c.Snapshot(ctx); len(live) != 0 {
			t.Errorf("a refused schedule queued %+v", live)
		}
	})
}

// A request whose check GitHub refused when it was queued is not left
// invisible: the next Sync creates it, once.
func TestARequestWhoseCheckGitHubRefusedGetsItOnTheNextSync(t *testing.T) {
	for name, tc := range map[string]struct {
		setup func(w *world) (event string, payload map[string]any)
		sha   string
	}{
		"a label": {func(w *world) (string, map[string]any) {
			w.setPR(prJSON(7, sha1, []string{"spark-test-long"}, false))
			return "pull_request", map[string]any{"action": "labeled", "label": map[string]any{"name": "spark-test-long"}, "sender": map[string]any{"login": "maint"},
				"pull_request": prJSON(7, sha1, []string{"spark-test-long"}, false)}
		}, sha1},
		"a merge group": {func(w *world) (string, map[string]any) {
			_, ref := mergeWorldOf(w)
			return "merge_group", map[string]any{"action": "checks_requested", "merge_group": map[string]any{"head_sha": mergeSHA, "head_ref": ref, "base_ref": "refs/heads/main"}}
		}, mergeSHA},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newWorld(t, false)
				event, payload := tc.setup(w)
				w.gh.createErr = errors.New("502 Bad Gateway")
				payload["repository"] = map[string]any{"full_name": "o/butter", "id": repoID}
				data, _ := json.Marshal(payload)
				if err := w.in.Process(ctx, event, data); err == nil {
					t.Fatal("the refused check must be reported")
				}
				if _, live, _ := w.c.Snapshot(ctx); len(live) != 1 || len(w.gh.checks) != 0 {
					t.Fatalf("live %d, checks %d: the request stays queued without a check", len(live), len(w.gh.checks))
				}
				w.gh.createErr = nil
				w.tick(t)
				w.tick(t)
				if len(w.gh.checks) != 1 || w.gh.checks[1].sha != tc.sha {
					t.Fatalf("checks %v, want one on %s", w.gh.checks, tc.sha)
				}
				if got := w.gh.last(1).Title; got != "Spark 2 allocated — environment preparing" {
					t.Errorf("the healed check says %q", got)
				}
			})
		})
	}
}

// A grant whose runner cannot be minted, handed to the host agent or
// dispatched must not hold the host idle: the lease is released, nothing
// is dispatched without a runner, and the public check names the step but
// not the error.
// TestARunnerWhoseJobNeverRanIsRemovedWhenItsLeaseEnds: seed 004, "It
// processes one job and deregisters. Do not leave a persistent Spark
// runner online". A lease that ends before its job ran on its runner (the
// job never picked up, the lease expired) leaves the one-job runner
// registered, and online if the host agent started it: it is removed.
// A removal GitHub refuses is tried on the next sweeps, removeTries times
// in all, then left with a log line. A restart does not lose the grant.
func TestARunnerWhoseJobNeverRanIsRemovedWhenItsLeaseEnds(t *testing.T) {
	for name, tc := range map[string]struct {
		removeErr error
		calls     int
	}{"removed": {nil, 1}, "GitHub refuses": {errors.New("500 Internal Server Error"), removeTries}} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var logs bytes.Buffer
				w := newWorld(t, false)
				w.gh.removeErr = tc.removeErr
				w.label(t, "labeled", "spark-test", "maint", prJSON(7, sha1, []string{"spark-test"}, false))
				w.tick(t)
				if len(w.gh.dispatches) != 1 {
					t.Fatalf("dispatches %v", w.gh.dispatches)
				}
				runner := RunnerName(w.gh.dispatches[0]["reservation_id"].(string))
				if w.gh.removeCalls != 0 {
					t.Fatalf("a live lease's runner was removed")
				}
				// sparkd restarts while the lease is live: the new
				// integration finds the grant among the live requests.
				restarted, err := New(DefaultConfig("webhook-secret-123"), w.c, w.gh, slog.New(slog.NewTextHandler(&logs, nil)))
				if err != nil {
					t.Fatal(err)
				}
				w.in = restarted
				w.tick(t)
				_, live, _ := w.c.Snapshot(ctx)
				faketime.Advance(time.Until(live[0].Expires) + time.Second) // the job never started
				for i := range removeTries + 2 {
					w.c.Reconcile(ctx)
					err := w.in.Sync(ctx)
					if wantErr := tc.removeErr != nil && i < removeTries; (err != nil) != wantErr || (wantErr && (!errors.Is(err, tc.removeErr) || !strings.Contains(err.Error(), runner))) {
						t.Errorf("Sync %d: %v (want an error naming %s: %v)", i, err, runner, wantErr)
					}
				}
				if w.gh.removeCalls != tc.calls {
					t.Errorf("RemoveRunner called %d times, want %d", w.gh.removeCalls, tc.calls)
				}
				if tc.removeErr == nil && !slices.Equal(w.gh.removed, []string{runner}) {
					t.Errorf("removed %v, want %s", w.gh.removed, runner)
				}
				if want := "sparkgh.runner_removed"; tc.removeErr != nil {
					if want = "sparkgh.runner_remove_failed"; strings.Count(logs.String(), want) != removeTries {
						t.Errorf("log:\n%s", logs.String())
					}
				} else if !strings.Contains(logs.String(), want+" request=") {
					t.Errorf("log:\n%s", logs.String())
				}
			})
		})
	}
}

func TestAFailedGrantReleasesTheLeaseAndFailsTheCheck(t *testing.T) {
	const detail = "https://ghes.internal/api/v3 /var/lib/spark/jit"
	for name, tc := range map[string]struct {
		mint, handoff, dispatch error
		step                    string
	}{
		"mint":     {mint: errors.New(detail), step: "minting the one-job runner failed"},
		"hand-off": {handoff: errors.New(detail), step: "handing the runner's config to the host agent failed"},
		"dispatch": {dispatch: errors.New(detail), step: "dispatching the workflow failed"},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newWorld(t, false)
				w.gh.mintErr, w.gh.dispatchErr = tc.mint, tc.dispatch
				w.in.JITConfigs = func(string, Secret) error { return tc.handoff }
				w.label(t, "labeled", "spark-test-long", "maint", prJSON(7, sha1, []string{"spark-test-long"}, false))
				w.tick(t)
				w.tick(t)
				hosts, live, _ := w.c.Snapshot(ctx)
				if len(live) != 0 || hosts[0].Lease != "" || hosts[1].Lease != "" {
					t.Errorf("the lease must be released: %+v %+v", live, hosts)
				}
				if tc.dispatch == nil && len(w.gh.dispatches) != 0 {
					t.Errorf("dispatched without a runner: %v", w.gh.dispatches)
				}
				last := w.gh.last(1)
				if last.Conclusion != "failure" || !strings.Contains(last.Summary, tc.step) || strings.Contains(last.Summary, detail) {
					t.Errorf("check %+v", last)
				}
				// A runner that was minted is removed with the lease.
				var want []string
				for runner := range w.gh.minted {
					if tc.mint == nil {
						want = append(want, runner)
					}
				}
				if !slices.Equal(w.gh.removed, want) {
					t.Errorf("removed runners %v, want %v", w.gh.removed, want)
				}
			})
		})
	}
}

func sign(body []byte, key string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// post delivers body to wh as GitHub would, signed with secret, and
// returns the status wh answered.
func post(wh *Webhook, secret, delivery, event string, body []byte) int {
	r := httptest.NewRequest("POST", "/github/webhook", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-GitHub-Event", event)
	r.Header.Set("X-GitHub-Delivery", delivery)
	r.Header.Set("X-Hub-Signature-256", sign(body, secret))
	rec := httptest.NewRecorder()
	wh.ServeHTTP(rec, r)
	return rec.Code
}

// Run drains what ServeHTTP queued, one delivery at a time, and returns
// when its context ends; a delivery it cannot process is logged, and the
// next one is still processed.
func TestWebhook_RunProcessesQueuedDeliveriesUntilItsContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, false)
		wh := w.in.NewWebhook(4)
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { wh.Run(rctx); close(done) }()
		deliver := func(delivery, event string, body []byte) {
			t.Helper()
			if code := post(wh, "webhook-secret-123", delivery, event, body); code != http.StatusAccepted {
				t.Fatalf("%s: %d", delivery, code)
			}
		}
		w.setPR(prJSON(7, sha1, []string{"spark-test-long"}, false))
		deliver("d1", "pull_request", []byte(`{"action":"labeled","pull_request":null}`)) // undecodable for us
		body, _ := json.Marshal(map[string]any{"action": "labeled", "label": map[string]any{"name": "spark-test-long"}, "sender": map[string]any{"login": "maint"},
			"pull_request": prJSON(7, sha1, []string{"spark-test-long"}, false), "repository": map[string]any{"full_name": "o/butter", "id": repoID}})
		deliver("d2", "pull_request", body)
		synctest.Wait()
		if _, live, _ := w.c.Snapshot(ctx); len(live) != 1 || len(wh.queue) != 0 {
			t.Errorf("live %d, still queued %d: Run must process both deliveries", len(live), len(wh.queue))
		}
		cancel()
		<-done
	})
}

// A receiver that stops (sparkd's SIGTERM) has answered 202 for the
// delivery it is processing and for those still queued: GitHub logged
// them as delivered, so each is remembered as unprocessed, for the
// redelivery after the restart.
func TestWebhook_DeliveriesInFlightOrQueuedWhenItStopsAreRemembered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, false)
		w.gh.prHang = true // the first delivery's processing is in flight
		wh := w.in.NewWebhook(4)
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { wh.Run(rctx); close(done) }()
		body, _ := json.Marshal(map[string]any{"action": "labeled", "label": map[string]any{"name": "spark-test"}, "sender": map[string]any{"login": "maint"},
			"pull_request": prJSON(7, sha1, []string{"spark-test"}, false), "repository": map[string]any{"full_name": "o/butter", "id": repoID}})
		for _, id := range []string{"in-flight", "queued-1", "queued-2"} {
			if code := post(wh, "webhook-secret-123", id, "pull_request", body); code != http.StatusAccepted {
				t.Fatalf("%s: %d", id, code)
			}
			synctest.Wait()
		}
		cancel()
		<-done
		got := slices.Sorted(maps.Keys(wh.Unprocessed()))
		if want := []string{"in-flight", "queued-1", "queued-2"}; !slices.Equal(got, want) {
			t.Errorf("unprocessed %v, want %v", got, want)
		}
	})
}

// GitHub records a delivery as received once sparkd answers 202, so a
// processing failure (GitHub briefly failing) is retried by sparkd, twice,
// 2 s and 4 s later; one that keeps failing is returned, for Run to log.
// An attempt whose request GitHub never answers gives up after
// processTimeout, so later deliveries are not held behind it.
func TestWebhook_AProcessingFailureIsRetried(t *testing.T) {
	for name, tc := range map[string]struct {
		failures int
		queued   int
		took     time.Duration
	}{"a brief outage": {2, 1, 6 * time.Second}, "an outage that lasts": {3, 0, 6 * time.Second}, "no outage": {0, 1, 0},
		// -1: every request hangs; each attempt gives up after processTimeout.
		"GitHub never answers": {-1, 0, 3*processTimeout + 6*time.Second}} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newWorld(t, false)
				w.setPR(prJSON(7, sha1, []string{"spark-test"}, false))
				w.gh.prFailures, w.gh.prHang = tc.failures, tc.failures < 0
				body, _ := json.Marshal(map[string]any{"action": "labeled", "label": map[string]any{"name": "spark-test"}, "sender": map[string]any{"login": "maint"},
					"pull_request": prJSON(7, sha1, []string{"spark-test"}, false), "repository": map[string]any{"full_name": "o/butter", "id": repoID}})
				start := time.Now() // the bubble's clock moves to each retry timer
				err := w.in.NewWebhook(1).process(ctx, delivery{"d1", "pull_request", body, time.Now()})
				if _, live, _ := w.c.Snapshot(ctx); len(live) != tc.queued || (err != nil) != (tc.queued == 0) || time.Since(start) != tc.took {
					t.Errorf("queued %d (want %d), err %v, after %s (want %s)", len(live), tc.queued, err, time.Since(start), tc.took)
				}
			})
		})
	}
}

// GitHub's delivery log shows a delivery sparkd answered 202 as
// delivered, even when sparkd then failed to process it: the receiver
// remembers it, the Redeliverer asks GitHub to send it again, and the
// redelivery (same delivery ID) gets past the de-duplication and is
// processed. Nothing GitHub accepted from a maintainer is lost to an
// outage longer than the receiver's own retries.
func TestWebhook_ADeliveryItAcceptedButCouldNotProcessIsRedelivered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, false)
		wh := w.in.NewWebhook(4)
		var journal []map[string]time.Time
		wh.Journal = func(m map[string]time.Time) error { journal = append(journal, m); return nil }
		// drain runs the receiver for a minute of the bubble's clock: past
		// its retries.
		drain := func() {
			rctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			wh.Run(rctx)
		}
		w.setPR(prJSON(7, sha1, []string{"spark-test"}, false))
		w.gh.prFailures = processRetries + 1 // longer than the receiver's retries
		body, _ := json.Marshal(map[string]any{"action": "labeled", "label": map[string]any{"name": "spark-test"}, "sender": map[string]any{"login": "maint"},
			"pull_request": prJSON(7, sha1, []string{"spark-test"}, false), "repository": map[string]any{"full_name": "o/butter", "id": repoID}})
		arrived := time.Now()
		if code := post(wh, "webhook-secret-123", "label-7", "pull_request", body); code != http.StatusAccepted {
			t.Fatalf("first delivery: %d", code)
		}
		drain()
		if got := wh.Unprocessed(); !got["label-7"].Equal(arrived) || len(got) != 1 {
			t.Fatalf("unprocessed %v, want label-7 at %s", got, arrived)
		}
		// A restart now (sparkd journals the set beside its database)
		// still knows it.
		restarted := w.in.NewWebhook(4)
		restarted.Restore(journal[len(journal)-1])
		if got := restarted.Unprocessed(); !got["label-7"].Equal(arrived) || len(got) != 1 {
			t.Errorf("restored %v, want label-7 at %s", got, arrived)
		}
		log := &fakeLog{attempts: []Delivery{{ID: 70, GUID: "label-7", At: arrived.Add(-time.Second), OK: true}}}
		r := &Redeliverer{Log: log, Unprocessed: wh}
		// The sweep is due later than the window it would read by itself.
		if got, err := r.Sweep(ctx, arrived.Add(30*time.Minute)); err != nil || !slices.Equal(got, []string{"label-7"}) || !slices.Equal(log.redelivered, []int64{70}) {
			t.Fatalf("sweep redelivered %v (attempts %v), %v", got, log.redelivered, err)
		}
		if got := wh.Unprocessed(); len(got) != 0 || len(journal) != 2 || len(journal[1]) != 0 {
			t.Errorf("still unprocessed after its redelivery was asked for: %v (journal %v)", got, journal)
		}
		if code := post(wh, "webhook-secret-123", "label-7", "pull_request", body); code != http.StatusAccepted {
			t.Fatalf("the redelivery: %d, want it processed, not dropped as a duplicate", code)
		}
		drain()
		if _, live, _ := w.c.Snapshot(ctx); len(live) != 1 {
			t.Errorf("live %d after the redelivery, want the label's lane queued", len(live))
		}
		if code := post(wh, "webhook-secret-123", "label-7", "pull_request", body); code != http.StatusOK {
			t.Errorf("a duplicate of a processed delivery: %d, want 200", code)
		}
	})
}

func TestWebhook_GitHubsPublishedSignatureExample(t *testing.T) {
	const key = "It's a Secret to Everybody"
	in, err := New(DefaultConfig(key), nil, newFakeGH(), nil)
	if err != nil {
		t.Fatal(err)
	}
	wh := in.NewWebhook(4)
	post := func(body, sig, delivery string) int {
		r := httptest.NewRequest("POST", "/webhook", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("X-GitHub-Event", "ping")
		r.Header.Set("X-GitHub-Delivery", delivery)
		r.Header.Set("X-Hub-Signature-256", sig)
		rec := httptest.NewRecorder()
		wh.ServeHTTP(rec, r)
		return rec.Code
	}
	const published = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	const ping = `{"zen":"Design for failure."}`
	// The subtests run in order on one receiver that nothing drains: a
	// queued delivery stays queued, so ServeHTTP itself processes nothing.
	t.Run("the published example verifies, and its body is no JSON object", func(t *testing.T) {
		if code := post("Hello, World!", published, "d0"); code != http.StatusBadRequest || len(wh.queue) != 0 {
			t.Errorf("published example: %d, queued %d; want 400 (verified, not 401)", code, len(wh.queue))
		}
	})
	t.Run("a signed delivery is queued, not processed", func(t *testing.T) {
		if code := post(ping, sign([]byte(ping), key), "d1"); code != http.StatusAccepted || len(wh.queue) != 1 {
			t.Errorf("signed: %d, queued %d", code, len(wh.queue))
		}
	})
	t.Run("a duplicate delivery ID is queued once", func(t *testing.T) {
		if code := post(ping, sign([]byte(ping), key), "d1"); code != http.StatusOK || len(wh.queue) != 1 {
			t.Errorf("duplicate: %d, queued %d", code, len(wh.queue))
		}
	})
	t.Run("a bad signature queues nothing", func(t *testing.T) {
		if code := post(ping, "sha256="+strings.Repeat("0", 64), "d2"); code != http.StatusUnauthorized || len(wh.queue) != 1 {
			t.Errorf("bad signature: %d, queued %d", code, len(wh.queue))
		}
	})
	t.Run("an unsigned payload is refused", func(t *testing.T) {
		if code := post(ping, "", "d3"); code != http.StatusUnauthorized || len(wh.queue) != 1 {
			t.Errorf("unsigned: %d, queued %d", code, len(wh.queue))
		}
	})
	t.Run("an oversized body is refused unread", func(t *testing.T) {
		wh.MaxBody = 8
		if code := post(ping, sign([]byte(ping), key), "d4"); code != http.StatusRequestEntityTooLarge || len(wh.queue) != 1 {
			t.Errorf("oversized: %d, queued %d", code, len(wh.queue))
		}
	})
}

// A signed body that is empty or not a JSON object is answered 400 and
// queued nothing: GitHub logs the delivery as failed, where a 202 would
// have logged it delivered while nothing could ever process it.
func TestWebhook_ASignedBodyThatIsNoJSONObjectIs400(t *testing.T) {
	const key = "webhook-secret-123"
	in, err := New(DefaultConfig(key), nil, newFakeGH(), nil)
	if err != nil {
		t.Fatal(err)
	}
	wh := in.NewWebhook(4)
	for _, body := range []string{"", "   ", "not json", "[1,2]", `"a string"`, "null", `{"truncated": `} {
		if code := post(wh, key, "d-"+body, "pull_request", []byte(body)); code != http.StatusBadRequest || len(wh.queue) != 0 {
			t.Errorf("body %q: %d, queued %d; want 400 and nothing queued", body, code, len(wh.queue))
		}
	}
}

// Webhooks are SHA-256 only: a delivery signed only with the legacy SHA-1
// X-Hub-Signature, or whose X-Hub-Signature-256 carries a sha1= value, is
// refused and queues nothing, however valid the SHA-1 HMAC.
func TestWebhook_OnlyASHA256SignatureIsAccepted(t *testing.T) {
	const key = "webhook-secret-123"
	in, err := New(DefaultConfig(key), nil, newFakeGH(), nil)
	if err != nil {
		t.Fatal(err)
	}
	wh := in.NewWebhook(4)
	body := []byte(`{"zen":"Keep it logically awesome."}`)
	m := hmac.New(sha1hash.New, []byte(key))
	m.Write(body)
	sha1Sig := "sha1=" + hex.EncodeToString(m.Sum(nil))
	for name, headers := range map[string]map[string]string{
		"X-Hub-Signature alone":              {"X-Hub-Signature": sha1Sig},
		"a sha1 value in the SHA-256 header": {"X-Hub-Signature-256": sha1Sig},
	} {
		r := httptest.NewRequest("POST", "/webhook", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("X-GitHub-Event", "ping")
		r.Header.Set("X-GitHub-Delivery", "sha1-"+name)
		for k, v := range headers {
			r.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		wh.ServeHTTP(rec, r)
		if rec.Code != http.StatusUnauthorized || len(wh.queue) != 0 {
			t.Errorf("%s: %d, queued %d; want 401 and nothing queued", name, rec.Code, len(wh.queue))
		}
	}
	if code := post(wh, key, "sha256", "ping", body); code != http.StatusAccepted {
		t.Errorf("the same delivery signed with SHA-256: %d, want 202", code)
	}
}

// fmt prints unexported fields raw: the integration, which holds the
// webhook secret in one, prints without it.
func TestIntegration_PrintsWithoutItsWebhookSecret(t *testing.T) {
	in, err := New(DefaultConfig("webhook-secret-123"), nil, newFakeGH(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if printed := fmt.Sprintf("%v %+v %#v %s", in, in, in, in); strings.Contains(printed, "webhook-secret-123") {
		t.Errorf("printed: %s", printed)
	}
}

func TestWebhook_RefusesToStartWithoutASecret(t *testing.T) {
	for _, s := range []string{"", "short"} {
		if _, err := New(DefaultConfig(s), nil, newFakeGH(), nil); !errors.Is(err, ErrNoSecret) {
			t.Errorf("secret %q: %v, want ErrNoSecret", s, err)
		}
	}
}

// Label application is an authorization decision, so a configuration
// that would weaken it is refused at New: a misspelt minimum role would
// rank below every actor's and admit them all.
func TestNewRefusesAConfigurationThatWouldWeakenAuthorization(t *testing.T) {
	for name, mutate := range map[string]func(*Config){
		"a misspelt role":       func(c *Config) { c.MinRole = "maintainer" },
		"the none role":         func(c *Config) { c.MinRole = "none" },
		"an unknown suite":      func(c *Config) { c.Labels = map[string]Lane{"gpu": {Suite: "everything", Topology: spark.Single}} },
		"an unknown topology":   func(c *Config) { c.Labels = map[string]Lane{"gpu": {Suite: "smoke", Topology: "triple"}} },
		"an empty label":        func(c *Config) { c.Labels = map[string]Lane{" ": {Suite: "smoke", Topology: spark.Single}} },
		"an empty runner label": func(c *Config) { c.RunnerLabels = []string{"self-hosted", ""} },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := DefaultConfig("webhook-secret-123")
			mutate(&cfg)
			if _, err := New(cfg, nil, newFakeGH(), nil); !errors.Is(err, ErrConfig) {
				t.Errorf("New: %v, want ErrConfig", err)
			}
		})
	}
	for _, role := range []string{"", "read", "triage", "write", "maintain", "admin"} {
		cfg := DefaultConfig("webhook-secret-123")
		cfg.MinRole = role
		if err := cfg.Validate(); err != nil {
			t.Errorf("MinRole %q: %v", role, err)
		}
	}
}

func TestDashboardCarriesOnlySanitizedFields(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, false)
		jitSeen := ""
		w.in.JITConfigs = func(_ string, s Secret) error { jitSeen = s.Reveal(); return nil }
		w.label(t, "labeled", "spark-test", "maint", prJSON(7, sha1, []string{"spark-test"}, false))
		w.c.Submit(ctx, spark.SubmitRequest{Class: spark.Development, Owner: "alice-secret-user"})
		w.tick(t)
		var buf bytes.Buffer
		w.c.DashboardHandler(DefaultConfig("").HostNames).ServeHTTP(httptestRecorder(&buf), httptest.NewRequest("GET", "/dashboard.json", nil))
		out := buf.String()
		_, live, _ := w.c.Snapshot(ctx)
		forbidden := []string{"alice-secret-user", "webhook-secret-123", jitSeen, `"token"`, `"owner"`, `"annotations"`, "gh.check"}
		for _, r := range live {
			if r.Token != 0 {
				forbidden = append(forbidden, fmt.Sprintf(`:%d,`, r.Token))
			}
		}
		for _, f := range forbidden {
			if f != "" && strings.Contains(out, f) {
				t.Errorf("dashboard leaks %q:\n%s", f, out)
			}
		}
		if !strings.Contains(out, `"name":"Spark 2"`) || !strings.Contains(out, `"repo":"o/butter"`) {
			t.Errorf("dashboard lacks state or linkage:\n%s", out)
		}
	})
}

type bufRecorder struct {
	*httptest.ResponseRecorder
	buf *bytes.Buffer
}

func httptestRecorder(buf *bytes.Buffer) *bufRecorder {
	return &bufRecorder{httptest.NewRecorder(), buf}
}

func (b *bufRecorder) Write(p []byte) (int, error) { b.buf.Write(p); return len(p), nil }

func TestParseCommands(t *testing.T) {
	body := "LGTM\n/spark test\n> /spark cancel\n  /spark status\n/spark test --pair\n/sparkle test\n```\n/spark cancel\n```\n/spark deploy now\n/spark"
	got := ParseCommands(body, "/spark")
	var verbs []string
	for _, c := range got {
		verbs = append(verbs, fmt.Sprintf("%s:%v:%v", c.Verb, c.Pair, c.Known))
	}
	want := []string{"test:false:true", "test:true:true", "deploy:false:false", ":false:false"}
	if !slices.Equal(verbs, want) {
		t.Errorf("got %v, want %v", verbs, want)
	}
}

func FuzzParseCommands(f *testing.F) {
	f.Add("/spark test\n/spark test --pair\n/spark status")
	f.Fuzz(func(t *testing.T, body string) {
		for _, c := range ParseCommands(body, "/spark") {
			if !strings.HasPrefix(c.Line, "/spark") || (c.Known && c.Verb == "") {
				t.Fatalf("%+v", c)
			}
		}
	})
}

func FuzzWebhookDecoder(f *testing.F) {
	f.Add("pull_request", []byte(`{"action":"labeled","label":{"name":"spark-test"},"pull_request":{"number":1}}`))
	f.Add("issue_comment", []byte(`{"action":"created","issue":{"number":1,"pull_request":{}},"comment":{"body":"/spark test"}}`))
	f.Add("workflow_job", []byte(`{"action":"completed","workflow_job":{"runner_name":"spark-r-1"}}`))
	f.Add("check_run", []byte(`{"action":"rerequested","check_run":{"id":1,"name":"Spark test","head_sha":"`+sha1+`","external_id":"r-1"},"sender":{"login":"maint"},"repository":{"full_name":"o/butter"}}`))
	f.Add("check_suite", []byte(`{"action":"rerequested","check_suite":{"id":49,"head_sha":"`+sha1+`"},"sender":{"login":"maint"},"repository":{"full_name":"o/butter"}}`))
	f.Add("merge_group", []byte(`{"action":"checks_requested","merge_group":{"head_sha":"`+mergeSHA+`","head_ref":"refs/heads/gh-readonly-queue/main/pr-7-`+sha1+`","base_ref":"refs/heads/main"},"repository":{"full_name":"o/butter"}}`))
	f.Fuzz(func(t *testing.T, event string, payload []byte) {
		gh := newFakeGH()
		cfg := DefaultConfig("fuzz-secret-123")
		cfg.MergeQueue = &MergeQueue{Lane: Lane{Suite: "smoke", Topology: spark.Single}, Branches: []string{"main"}}
		in, _ := New(cfg, nil, gh, nil)
		opts := spark.DefaultOptions()
		opts.Service = &sparktest.Service{}
		c, _ := spark.New(sparktest.NewStore(), opts)
		in.SetController(c)
		in.Process(context.Background(), event, payload) // must not panic
	})
}

func TestProcessRejectsPayloadsMissingTheirSubject(t *testing.T) {
	cfg := DefaultConfig("a-webhook-secret")
	cfg.MergeQueue = &MergeQueue{Lane: Lane{Suite: "smoke", Topology: spark.Single}, Branches: []string{"main"}}
	in, _ := New(cfg, nil, newFakeGH(), nil)
	for event, body := range map[string]string{
		"pull_request":  `{"action":"labeled"}`,
		"issue_comment": `{"action":"created","issue":{"number":1,"pull_request":{}},"comment":{"body":"/spark test"}}`,
		"merge_group":   `{"action":"checks_requested","repository":{"full_name":"o/butter"}}`,
		"check_run":     `{"action":"rerequested","repository":{"full_name":"o/butter"}}`,
		"check_suite":   `{"action":"rerequested","repository":{"full_name":"o/butter"}}`,
	} {
		if err := in.Process(ctx, event, []byte(body)); !errors.Is(err, ErrPayload) {
			t.Errorf("%s: %v, want ErrPayload", event, err)
		}
	}
}

// BenchmarkParseCommands: a typical review comment (~1 KiB) and a 100x one.
func BenchmarkParseCommands(b *testing.B) {
	line := "Looks good to me; one nit about the kernel launch bounds below.\n"
	for _, n := range []int{16, 1600} {
		body := strings.Repeat(line, n) + "/spark test --pair\n"
		b.Run(fmt.Sprintf("%dB", len(body)), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if len(ParseCommands(body, "/spark")) != 1 {
					b.Fatal("command lost")
				}
			}
		})
	}
}

// TestWebhook_AFullQueueWaitsThenRefusesAndLogsTheDeliveryToRedeliver:
// GitHub never redelivers a failed delivery by itself. A burst waits for
// room; a delivery still without room after QueueWait is refused with 503
// and logged with its ID, for an operator to redeliver, and the
// redelivery is then accepted rather than taken for a duplicate.
func TestWebhook_AFullQueueWaitsThenRefusesAndLogsTheDeliveryToRedeliver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		in, err := New(DefaultConfig("s3cret-webhook"), nil, newFakeGH(), slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil {
			t.Fatal(err)
		}
		wh := in.NewWebhook(1)
		body := []byte(`{"zen": "Keep it logically awesome."}`)
		ping := func(delivery string) int { return post(wh, "s3cret-webhook", delivery, "ping", body) }
		if code := ping("d1"); code != http.StatusAccepted {
			t.Fatalf("first: %d", code)
		}
		// Room appears while the second waits: it is queued.
		second := make(chan int)
		go func() { second <- ping("d2") }()
		synctest.Wait()
		<-wh.queue
		if code := <-second; code != http.StatusAccepted {
			t.Errorf("a delivery that found room within QueueWait: %d", code)
		}
		start := time.Now()
		if code := ping("d3"); code != http.StatusServiceUnavailable || time.Since(start) != wh.QueueWait {
			t.Errorf("no room: %d after %s, want 503 after %s", code, time.Since(start), wh.QueueWait)
		}
		if !strings.Contains(logs.String(), "sparkgh.webhook_refused delivery=d3 event=ping") || !strings.Contains(logs.String(), "GitHub does not redeliver on its own") {
			t.Errorf("log:\n%s", logs.String())
		}
		<-wh.queue
		if code := ping("d3"); code != http.StatusAccepted {
			t.Errorf("the redelivery: %d", code)
		}
	})
}

// BenchmarkWebhookServeHTTP: signature validation and enqueueing of a
// realistic pull_request delivery (~20 KiB) and a 100x one.
func BenchmarkWebhookServeHTTP(b *testing.B) {
	in, err := New(DefaultConfig("bench-webhook-secret"), nil, newFakeGH(), nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, size := range []int{20 << 10, 2000 << 10} {
		body, _ := json.Marshal(map[string]any{"action": "labeled", "label": map[string]any{"name": "spark-test"},
			"pull_request": map[string]any{"number": 7, "body": strings.Repeat("x", size)}})
		sig := sign(body, "bench-webhook-secret")
		b.Run(fmt.Sprintf("%dKiB", len(body)>>10), func(b *testing.B) {
			wh := in.NewWebhook(1)
			b.SetBytes(int64(len(body)))
			i := 0
			for b.Loop() {
				i++
				r := httptest.NewRequest("POST", "/webhook", bytes.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set("X-GitHub-Event", "pull_request")
				r.Header.Set("X-GitHub-Delivery", strconv.Itoa(i))
				r.Header.Set("X-Hub-Signature-256", sig)
				rec := httptest.NewRecorder()
				wh.ServeHTTP(rec, r)
				if rec.Code != http.StatusAccepted {
					b.Fatalf("status %d", rec.Code)
				}
				<-wh.queue
			}
		})
	}
}

// TestTheWorkflowAsksForItsReservationsOwnRunner: the template's runs-on,
// for each topology, is exactly the labels the grant mints, the runner's
// own name included, so the job cannot land on another lease's runner
// (seed 004: "JIT runners receive cumulative labels describing the
// allocation"; seed 001's per-attempt label: "a shared label would let a
// stale online record ... accept").
func TestTheWorkflowAsksForItsReservationsOwnRunner(t *testing.T) {
	runsOn := workflowtest.Read(t, "spark-test.yml").Jobs["spark-test"].RunsOn
	// The two expressions the template uses, evaluated for given inputs.
	topoExpr := regexp.MustCompile(`^\$\{\{ inputs\.topology == '(\w+)' && '([\w-]+)' \|\| '([\w-]+)' \}\}$`)
	eval := func(topology, reservation string) []string {
		var out []string
		for _, item := range runsOn {
			if m := topoExpr.FindStringSubmatch(item); m != nil {
				item = m[3]
				if topology == m[1] {
					item = m[2]
				}
			}
			out = append(out, strings.ReplaceAll(item, "${{ inputs.reservation_id }}", reservation))
		}
		return out
	}
	cfg := DefaultConfig("")
	for _, topo := range []spark.Topology{spark.Single, spark.Pair} {
		got, want := eval(string(topo), "r42"), cfg.runnerLabels(topo, "r42")
		if !slices.Equal(got, want) {
			t.Errorf("%s: the workflow asks for %v, the grant mints %v", topo, got, want)
		}
	}
	if other := eval("single", "r43"); slices.Equal(other, cfg.runnerLabels(spark.Single, "r42")) {
		t.Errorf("another reservation's job asks for this runner: %v", other)
	}
}

// "Evidence receipt recorded" means a receipt: a job that concluded
// success but whose entry point recorded none fails its check; one with a
// receipt passes, naming the digest the controller stored and linking the
// job that ran.
func TestCheck_APassWithoutAnEvidenceReceiptIsNotAPass(t *testing.T) {
	for name, receipt := range map[string][]byte{"no receipt": nil, "a receipt": []byte("suite=performance passed=40\n")} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newWorld(t, false)
				w.in.JITConfigs = func(string, Secret) error { return nil }
				w.label(t, "labeled", "spark-test-long", "maint", prJSON(7, sha1, []string{"spark-test-long"}, false))
				w.tick(t)
				id := w.gh.dispatches[0]["reservation_id"].(string)
				digest := ""
				if receipt != nil {
					var err error
					if digest, err = w.c.RecordReceipt(ctx, id, receipt); err != nil {
						t.Fatal(err)
					}
				}
				w.event(t, "workflow_job", map[string]any{"action": "completed", "workflow_job": map[string]any{"runner_name": RunnerName(id), "conclusion": "success",
					"html_url": "https://github.com/acme/butter/actions/runs/5/job/9"}})
				got := w.gh.last(1)
				switch {
				case receipt == nil && (got.Conclusion != "failure" || got.Title != "Spark test passed without an evidence receipt"):
					t.Errorf("without a receipt: %+v", got)
				case receipt != nil && (got.Conclusion != "success" || !strings.Contains(got.Summary, digest) || !strings.Contains(got.Summary, "(https://github.com/acme/butter/actions/runs/5/job/9)")):
					t.Errorf("with receipt %s: %+v", digest, got)
				}
			})
		})
	}
}
