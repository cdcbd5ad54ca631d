package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/dstack"
	"github.com/gpugate/gpugate/spark/dstack/dstacktest"
	"github.com/gpugate/gpugate/spark/sparkgh"
	"github.com/gpugate/gpugate/spark/sparktest"
)

// memGitHub is an in-memory GitHub for the engine's tests: maintainers
// label open pull requests of o/butter and checks are recorded; a runner
// minted or a workflow dispatched is counted (the engine runs the lanes).
type memGitHub struct {
	hungGitHub
	mu                 sync.Mutex
	prs                map[int]sparkgh.PR
	checks             map[int64][]sparkgh.Check
	external           map[int64]string // check → the request it reports
	minted, dispatched int
}

func newMemGitHub() *memGitHub {
	return &memGitHub{prs: map[int]sparkgh.PR{}, checks: map[int64][]sparkgh.Check{}, external: map[int64]string{}}
}

func (g *memGitHub) Permission(context.Context, string, string) (string, error) {
	return "maintain", nil
}
func (g *memGitHub) PullRequest(_ context.Context, _ string, n int) (sparkgh.PR, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.prs[n], nil
}
func (g *memGitHub) CreateCheck(_ context.Context, _, _, _ string, c sparkgh.Check) (int64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	id := int64(len(g.checks) + 1)
	g.checks[id], g.external[id] = []sparkgh.Check{c}, c.ExternalID
	return id, nil
}
func (g *memGitHub) UpdateCheck(_ context.Context, _ string, id int64, _ string, c sparkgh.Check) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.checks[id] = append(g.checks[id], c)
	return nil
}
func (g *memGitHub) Comment(context.Context, string, int, string) error { return nil }
func (g *memGitHub) MintJIT(context.Context, string, []string) (sparkgh.Secret, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.minted++
	return "", errors.New("memGitHub: no runner is minted with an engine")
}
func (g *memGitHub) Dispatch(context.Context, string, string, map[string]any) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.dispatched++
	return errors.New("memGitHub: no workflow is dispatched with an engine")
}

// last is each check's last content, with the request it reports.
func (g *memGitHub) last() map[string]sparkgh.Check {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string]sparkgh.Check{}
	for id, h := range g.checks {
		out[g.external[id]] = h[len(h)-1]
	}
	return out
}

// engineWorld is a controller of two managed hosts whose engine is the
// dstack fake (in process), with the GitHub integration on memGitHub.
type engineWorld struct {
	c    *spark.Controller
	d    *Daemon
	gh   *memGitHub
	fake *dstacktest.Server
	in   *sparkgh.Integration
	prs  int
}

func newEngineWorld(t *testing.T) *engineWorld {
	t.Helper()
	mem := newMemGitHub()
	w, _ := engineWorldOf(t, "", mem, mem)
	return w
}

// engineWorldOf is the engine world of the dstack fleet file with extra
// (more of its YAML), whose integration calls gh, mem's fake or one
// wrapping it.
func engineWorldOf(t *testing.T, extra string, gh sparkgh.GitHub, mem *memGitHub) (*engineWorld, File) {
	t.Helper()
	f, err := Load([]byte(`hosts:
  - {name: spark-1, managed: true, agent: true}
  - {name: spark-2, managed: true, agent: true}
preferred_host: spark-2
pair_test: true
engine: dstack
dstack: {url: "` + dstacktest.BaseURL + `", project: main, fleet: spark, token_file: unused, suites: {smoke: [make smoke], performance: [make perf]}}
` + extra))
	if err != nil {
		t.Fatal(err)
	}
	w := &engineWorld{gh: mem, fake: dstacktest.New()}
	w.fake.AddFleet(dstacktest.FleetSpec{Name: "spark", Placement: "cluster", Hosts: []string{"spark-1", "spark-2"}})
	client, err := dstack.NewClient(dstacktest.BaseURL, dstacktest.Token, dstacktest.Project, w.fake.Client())
	if err != nil {
		t.Fatal(err)
	}
	engine, err := dstack.NewBackend(client, dstack.Config{Fleet: "spark"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := f.GitHub
	cfg.WebhookSecret = "webhook-secret-123"
	if w.in, err = sparkgh.New(cfg, nil, gh, nil); err != nil {
		t.Fatal(err)
	}
	f.Options.OnGrant = w.in.OnGrant
	if w.c, err = spark.New(sparktest.NewStore(), f.Options); err != nil {
		t.Fatal(err)
	}
	w.in.SetController(w.c)
	w.d = &Daemon{Controller: w.c, GitHub: w.in, Engine: engine, Suites: f.Dstack.Suites, Log: slog.New(slog.DiscardHandler)}
	return w, f
}

// label has a maintainer label a new pull request at a new commit.
func (w *engineWorld) label(t *testing.T, label string) {
	t.Helper()
	w.prs++
	sha := fmt.Sprintf("%040x", w.prs)
	w.gh.mu.Lock()
	w.gh.prs[w.prs] = sparkgh.PR{Repo: "o/butter", Number: w.prs, HeadSHA: sha, Open: true, HeadRepoID: 9, BaseRepoID: 9, Labels: []string{label}}
	w.gh.mu.Unlock()
	pr := map[string]any{"number": w.prs, "state": "open", "labels": []map[string]any{{"name": label}},
		"head": map[string]any{"sha": sha, "repo": map[string]any{"id": 9}}, "base": map[string]any{"repo": map[string]any{"id": 9}}}
	body, _ := json.Marshal(map[string]any{"action": "labeled", "label": map[string]any{"name": label}, "sender": map[string]any{"login": "maint"},
		"pull_request": pr, "repository": map[string]any{"full_name": "o/butter", "id": 9}})
	if err := w.in.Process(context.Background(), "pull_request", body); err != nil {
		t.Fatal(err)
	}
}

// round is one of the daemon's rounds: the hosts' heartbeats, admission,
// the GitHub work and the engine's, then dstack's own progress.
func (w *engineWorld) round(ctx context.Context) {
	for _, h := range []string{"spark-1", "spark-2"} {
		w.c.Heartbeat(ctx, spark.HostReport{Host: h})
		if st, _ := w.c.HostState(ctx, h); st.Mode == spark.Cleaning {
			w.c.AckCleanup(ctx, h, st.Ended, 0) // the host's agent, its run's processes gone
		}
	}
	w.c.Reconcile(ctx)
	githubRound(ctx, w.in, w.c, "", nil, &runnerSweep{}, w.d.Log)
	w.d.engineRound(ctx, w.d.Log)
	w.fake.Progress()
}

// passedRun labels a pull request, runs the rounds that grant it and
// start its task, and has the task finish done with the receipt
// {"ok":true} as its output's last line; it returns the lease.
func (w *engineWorld) passedRun(t *testing.T, ctx context.Context) string {
	t.Helper()
	w.label(t, "spark-test")
	w.round(ctx)
	w.round(ctx)
	_, live, _ := w.c.Snapshot(ctx)
	if len(live) != 1 || live[0].State != spark.Active {
		t.Fatalf("the lane is not granted: %+v", live)
	}
	name := w.d.Engine.RunName(live[0].ID)
	w.fake.Output(name, 0, dstacktest.LogStdout, `{"ok":true}`+"\n")
	w.fake.Finish(name, false)
	return live[0].ID
}

func digestOf(b string) string {
	sum := sha256.Sum256([]byte(b))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// A development lease whose dev environment ends (dstack stopped it, or
// it failed) ends too: released, so its host does not stay held by
// nothing.
func TestEngineRound_ALeaseWhoseRunEndedIsReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		w := newEngineWorld(t)
		dev, err := w.c.Submit(ctx, spark.SubmitRequest{Class: spark.Development, Owner: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		w.round(ctx)
		w.round(ctx)
		name := w.d.Engine.RunName(dev.ID)
		if r, ok := w.fake.Run(name); !ok || r.Type != "dev-environment" || r.Status != "running" {
			t.Fatalf("the dev environment: %+v %v", r, ok)
		}
		w.fake.End(name, dstacktest.Ending{Status: "terminated", Reason: dstack.ReasonJobFailed, JobStatus: dstack.JobTerminated, JobReason: "inactivity_duration_exceeded"})
		w.round(ctx)
		if st, _ := w.c.Status(ctx, dev.ID); st.Request.State != spark.Released {
			t.Errorf("the development lease is %s after its dev environment ended, want released", st.Request.State)
		}
	})
}

// While dstack cannot be read, or its run of the lease is still running,
// nothing is concluded: the lease stays active and its check open; once
// dstack answers again the finished run concludes it.
func TestEngineRound_AnUnreachableDstackConcludesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		w := newEngineWorld(t)
		id := w.passedRun(t, ctx)
		for _, f := range []dstacktest.Fault{{Path: "*", Status: 503, Times: 50}, {Path: "*", Drop: true, Times: 50}, {Path: "*", Hang: true, Times: 50}} {
			w.fake.ClearFaults()
			w.fake.AddFault(f)
			w.round(ctx)
			if st, _ := w.c.Status(ctx, id); st.Request.State != spark.Active || w.gh.last()[id].Status == "completed" {
				t.Fatalf("with %+v: the lease is %s, its check %+v", f, st.Request.State, w.gh.last()[id])
			}
		}
		w.fake.ClearFaults()
		w.round(ctx)
		if got := w.gh.last()[id]; got.Conclusion != "success" || !strings.Contains(got.Summary, digestOf(`{"ok":true}`)) {
			t.Errorf("once dstack answers: %+v", got)
		}
	})
}

// A finished run whose receipt dstack cannot return is retried for
// receiptTries rounds, then concluded as a failure: the run is over and
// its hosts wait.
func TestEngineRound_AReceiptThatCannotBeReadFailsTheCheckAfterItsTries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		w := newEngineWorld(t)
		id := w.passedRun(t, ctx)
		w.fake.AddFault(dstacktest.Fault{Path: "/api/project/main/logs/poll", Status: 400, Detail: "Failed to poll logs from log storage", Times: 1000})
		for range receiptTries - 1 {
			w.round(ctx)
		}
		if st, _ := w.c.Status(ctx, id); st.Request.State != spark.Active {
			t.Fatalf("concluded after %d failed reads: %s", receiptTries-1, st.Request.State)
		}
		w.round(ctx)
		st, _ := w.c.Status(ctx, id)
		if got := w.gh.last()[id]; st.Request.State != spark.Released || got.Conclusion != "failure" || !strings.Contains(got.Summary, "receipt could not be read") {
			t.Errorf("after %d failed reads: the lease %s, the check %+v", receiptTries, st.Request.State, got)
		}
	})
}

// A Daemon whose GitHub integration mints runners while the daemon runs
// dstack would run a lane twice; one whose integration leaves lanes to an
// engine the daemon lacks would never run them. Serve refuses both.
func TestServe_RefusesAGitHubIntegrationOfAnotherEngine(t *testing.T) {
	w := newEngineWorld(t)
	runner, err := sparkgh.New(sparkgh.DefaultConfig("webhook-secret-123"), w.c, w.gh, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]*Daemon{
		"runner integration, dstack daemon": {Controller: w.c, API: http.NotFoundHandler(), GitHub: runner, Engine: w.d.Engine},
		"dstack integration, no engine":     {Controller: w.c, API: http.NotFoundHandler(), GitHub: w.in},
	} {
		if err := d.Serve(context.Background(), nil); !errors.Is(err, ErrEngine) {
			t.Errorf("%s: Serve = %v, want ErrEngine", name, err)
		}
	}
}

// TestInvariant_NoPassingCheckWithoutAFinishedRunAndARecordedReceipt
// labels pull requests (single and pair lanes), lets dstack run them and
// ends their runs every way dstack ends runs (done with or without a
// receipt as the output's last line, failed, stopped, aborted, retries
// exhausted, deleted), records receipts through the host API at random,
// and injects faults on every dstack path (error statuses, lost and
// dropped answers, hung calls, malformed answers), running the daemon's
// rounds in between. After every round, each passing check's lease is
// released, holds a receipt digest the check names, and its run finished
// done with all jobs done; once the faults stop, every lane is concluded.
func TestInvariant_NoPassingCheckWithoutAFinishedRunAndARecordedReceipt(t *testing.T) {
	var total struct{ passed, failed, faults int }
	for trial := range 12 {
		t.Run(fmt.Sprint(trial), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, f, n := engineWalk(t, rand.New(rand.NewPCG(uint64(trial), 0xe61)))
				total.passed += p
				total.failed += f
				total.faults += n
			})
		})
	}
	if total.passed < 10 || total.failed < 20 || total.faults < 50 {
		t.Errorf("the walk passed %d checks, failed %d and hit %d faults: too few to check anything", total.passed, total.failed, total.faults)
	}
}

// endings are the ways the walk ends a running run, with whether each is
// a successful finish.
var endings = []struct {
	name string
	e    dstacktest.Ending
	ok   bool
}{
	{"done", dstacktest.Ending{Status: "done", Reason: dstack.ReasonAllJobsDone, JobStatus: dstack.JobDone, JobReason: "done_by_runner"}, true},
	{"failed", dstacktest.Ending{Status: "failed", Reason: dstack.ReasonJobFailed, JobStatus: dstack.JobFailed, JobReason: "container_exited_with_error"}, false},
	{"stopped", dstacktest.Ending{Status: "terminated", Reason: dstack.ReasonStoppedByUser, JobStatus: dstack.JobTerminated, JobReason: "terminated_by_user"}, false},
	{"aborted", dstacktest.Ending{Status: "terminated", Reason: dstack.ReasonAbortedByUser, JobStatus: dstack.JobAborted, JobReason: "aborted_by_user"}, false},
	{"retries", dstacktest.Ending{Status: "failed", Reason: dstack.ReasonRetryLimitExceeded, JobStatus: dstack.JobFailed, JobReason: "instance_unreachable"}, false},
	{"server error", dstacktest.Ending{Status: "failed", Reason: dstack.ReasonServerError, JobStatus: dstack.JobTerminated, JobReason: "terminated_by_server"}, false},
}

func engineWalk(t *testing.T, rng *rand.Rand) (passed, failed, faults int) {
	ctx := context.Background()
	w := newEngineWorld(t)
	succeeded := map[string]bool{} // runs the walk ended done
	check := func(step int) {
		t.Helper()
		for id, c := range w.gh.last() {
			if c.Conclusion != "success" {
				continue
			}
			st, err := w.c.Status(ctx, id)
			r := st.Request
			digest := spark.ReceiptDigest(r)
			name := r.Annotations[engineAnnotation]
			run, found := w.fake.Run(name)
			switch {
			case err != nil || r.State != spark.Released:
				t.Fatalf("step %d: request %s's check passed, and it is %s (%v)", step, id, r.State, err)
			case digest == "" || !strings.Contains(c.Summary, digest):
				t.Fatalf("step %d: request %s's check passed without a recorded receipt (%q): %q", step, id, digest, c.Summary)
			case !found || !succeeded[name] || run.Status != "done" || run.TerminationReason != dstack.ReasonAllJobsDone:
				t.Fatalf("step %d: request %s's check passed, and its run %s is %+v (found %v, ended done %v)", step, id, name, run, found, succeeded[name])
			}
		}
	}
	for step := range 80 {
		switch k := rng.IntN(10); {
		case k < 2:
			label := "spark-test"
			if rng.IntN(3) == 0 {
				label = "spark-pair-test"
			}
			w.label(t, label)
		case k < 5:
			w.fake.AddFault(dstacktest.RandomFault(rng, dstacktest.Paths))
			faults++
		case k < 8:
			var running []dstacktest.RunRecord
			for _, r := range w.fake.Runs() {
				if r.Status == "running" && !r.Deleted {
					running = append(running, r)
				}
			}
			if len(running) == 0 {
				break
			}
			r := running[rng.IntN(len(running))]
			switch rng.IntN(4) { // its output's last line
			case 0:
				w.fake.Output(r.Name, 0, dstacktest.LogStdout, "ok\n"+`{"run":"`+r.Name+`"}`+"\n")
			case 1:
				w.fake.Output(r.Name, 0, dstacktest.LogStdout, `{"run":"`+r.Name+`"}`+"\nDone.\n")
			case 2:
				w.fake.Output(r.Name, 0, dstacktest.LogStderr, `{"run":"`+r.Name+`"}`+"\n")
			}
			if rng.IntN(8) == 0 {
				w.fake.Delete(r.Name)
				break
			}
			e := endings[rng.IntN(len(endings))]
			if rng.IntN(2) == 0 {
				e = endings[0]
			}
			w.fake.End(r.Name, e.e)
			succeeded[r.Name] = e.ok
		case k < 9:
			_, live, _ := w.c.Snapshot(ctx)
			if i := slices.IndexFunc(live, func(r spark.Request) bool { return r.State == spark.Active }); i >= 0 {
				w.c.RecordReceipt(ctx, live[i].ID, []byte(`{"by":"the host's sparkctl"}`)) // as the task itself could
			}
		}
		w.round(ctx)
		check(step)
	}
	// Without faults, every lane is concluded once its run ends.
	w.fake.ClearFaults()
	for range 200 {
		_, live, _ := w.c.Snapshot(ctx)
		if len(live) == 0 {
			break
		}
		for _, r := range w.fake.Runs() {
			if r.Status == "running" && !r.Deleted {
				w.fake.Output(r.Name, 0, dstacktest.LogStdout, `{"run":"`+r.Name+`"}`+"\n")
				w.fake.End(r.Name, endings[0].e)
				succeeded[r.Name] = true
			}
		}
		w.round(ctx)
		check(-1)
	}
	_, live, _ := w.c.Snapshot(ctx)
	if len(live) != 0 {
		t.Errorf("after the faults stopped, %d lanes are still live: %+v", len(live), live)
	}
	for id, c := range w.gh.last() {
		switch c.Conclusion {
		case "success":
			passed++
		case "":
			t.Errorf("request %s's check never completed: %+v", id, c)
		default:
			failed++
		}
	}
	if w.gh.minted != 0 || w.gh.dispatched != 0 {
		t.Errorf("%d runners minted, %d workflows dispatched: the engine runs the lanes", w.gh.minted, w.gh.dispatched)
	}
	return passed, failed, faults
}

// The run of a lease that ended is stopped before the next lease's run is
// submitted onto the host it held, in the same round.
func TestEngineRound_AnEndedLeasesRunIsStoppedBeforeTheNextIsSubmitted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		w := newEngineWorld(t)
		first, err := w.c.Submit(ctx, spark.SubmitRequest{Class: spark.Development, Owner: "alice", Host: "spark-2"})
		if err != nil {
			t.Fatal(err)
		}
		w.round(ctx)
		st, _ := w.c.Status(ctx, first.ID)
		if st.Request.Annotations[engineAnnotation] == "" {
			t.Fatalf("the first lease has no run: %+v", st.Request)
		}
		if err := w.c.Release(ctx, first.ID, st.Request.Token); err != nil {
			t.Fatal(err)
		}
		if _, err := w.c.Submit(ctx, spark.SubmitRequest{Class: spark.Development, Owner: "bob", Host: "spark-2"}); err != nil {
			t.Fatal(err)
		}
		before := len(w.fake.Requests())
		w.round(ctx)
		var order []string
		for _, r := range w.fake.Requests()[before:] {
			if p := strings.TrimPrefix(r.Path, "/api/project/"+dstacktest.Project+"/runs/"); p == "stop" || p == "apply" {
				order = append(order, p)
			}
		}
		if !slices.Equal(order, []string{"stop", "apply"}) {
			t.Errorf("the round's run calls: %v, want the ended lease's stop before the next one's apply", order)
		}
	})
}

// A lease has one evidence receipt: when the task recorded one itself and
// its output ends with another, neither is trusted and its check fails;
// the same one twice, or the task's own with none in the output, passes.
func TestEngineRound_TwoDifferentReceiptsFailTheCheck(t *testing.T) {
	for name, tc := range map[string]struct {
		recorded, output, want string
	}{
		"another in the output": {`{"by":"the task"}`, `{"ok":true}` + "\n", "failure"},
		"the same in both":      {`{"ok":true}`, `{"ok":true}` + "\n", "success"},
		"none in the output":    {`{"by":"the task"}`, "Done.\n", "success"},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				w := newEngineWorld(t)
				w.label(t, "spark-test")
				w.round(ctx)
				w.round(ctx)
				_, live, _ := w.c.Snapshot(ctx)
				if len(live) != 1 || live[0].State != spark.Active {
					t.Fatalf("the lane is not granted: %+v", live)
				}
				id := live[0].ID
				if _, err := w.c.RecordReceipt(ctx, id, []byte(tc.recorded)); err != nil {
					t.Fatal(err)
				}
				run := w.d.Engine.RunName(id)
				w.fake.Output(run, 0, dstacktest.LogStdout, tc.output)
				w.fake.Finish(run, false)
				for range 3 {
					w.round(ctx)
				}
				if got := w.gh.last()[id]; got.Conclusion != tc.want {
					t.Errorf("recorded %s, output %q: the check %+v, want %s", tc.recorded, tc.output, got, tc.want)
				}
			})
		})
	}
}
