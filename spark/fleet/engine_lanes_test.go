package fleet

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/dstack"
	"github.com/gpugate/gpugate/spark/dstack/dstacktest"
	"github.com/gpugate/gpugate/spark/sparkgh"
)

// The engine's tests of the lanes that are not a pull request's: the
// merge queue's (a merge_group delivery) and the fleet file's schedules.
// Both run on dstack like a pull request's lane: a task on the leased
// hosts at the commit the lane names, concluded from how it ended.

const (
	lanesRepo  = "o/butter"
	groupHead  = "3333333333333333333333333333333333333333" // the merge group's head commit
	prHead     = "1111111111111111111111111111111111111111" // its newest pull request's
	mainCommit = "4444444444444444444444444444444444444444" // main's, when a schedule asks
)

// groupRef is the merge group of pull request 7 into main.
var groupRef = "refs/heads/gh-readonly-queue/main/pr-7-" + prHead

// lanesGitHub is memGitHub with branches (the merge queue's refs and the
// branches schedules run) and the commit each check was created on.
type lanesGitHub struct {
	*memGitHub
	mu        sync.Mutex
	branches  map[string]string // repo@branch → its commit
	checkSHAs []string          // in creation order
}

func (g *lanesGitHub) BranchSHA(_ context.Context, repo, branch string) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if sha, ok := g.branches[repo+"@"+branch]; ok {
		return sha, nil
	}
	return "", fmt.Errorf("lanesGitHub: %s@%s: %w", repo, branch, sparkgh.ErrNoBranch)
}

func (g *lanesGitHub) CreateCheck(ctx context.Context, repo, sha, name string, c sparkgh.Check) (int64, error) {
	g.mu.Lock()
	g.checkSHAs = append(g.checkSHAs, sha)
	g.mu.Unlock()
	return g.memGitHub.CreateCheck(ctx, repo, sha, name, c)
}

// newLanesWorld is newEngineWorld's fleet serving main's merge queue
// with topology (the smoke suite) and with the schedules given (the
// fleet file's schedules: entries, YAML), on lanesGitHub.
func newLanesWorld(t *testing.T, topology spark.Topology, schedules string) (*engineWorld, *lanesGitHub, File) {
	t.Helper()
	gh := &lanesGitHub{memGitHub: newMemGitHub(), branches: map[string]string{
		lanesRepo + "@" + strings.TrimPrefix(groupRef, "refs/heads/"): groupHead,
		lanesRepo + "@main": mainCommit,
	}}
	gh.prs[7] = sparkgh.PR{Repo: lanesRepo, Number: 7, HeadSHA: prHead, Open: true, HeadRepoID: 9, BaseRepoID: 9}
	w, f := engineWorldOf(t, `github:
  merge_queue: {suite: smoke, topology: `+string(topology)+`, branches: [main]}
`+schedules, gh, gh.memGitHub)
	return w, gh, f
}

// mergeGroup delivers GitHub's merge_group event action for the group of
// pull request 7 into main at groupHead.
func mergeGroup(t *testing.T, w *engineWorld, action string) {
	t.Helper()
	body := fmt.Sprintf(`{"action":%q,"merge_group":{"head_sha":%q,"head_ref":%q,"base_sha":"2222222222222222222222222222222222222222","base_ref":"refs/heads/main"},"repository":{"full_name":%q,"id":9}}`,
		action, groupHead, groupRef, lanesRepo)
	if err := w.in.Process(context.Background(), "merge_group", []byte(body)); err != nil {
		t.Fatal(err)
	}
}

// grantedRun runs rounds until request id is an active lease with its
// run submitted and placed, and checks that run: one task, submitted
// once, on exactly the leased hosts, testing repo at sha. It returns the
// lease and the run's name.
func grantedRun(t *testing.T, ctx context.Context, w *engineWorld, id, repo, sha string, topology spark.Topology) (spark.Request, string) {
	t.Helper()
	w.round(ctx)
	w.round(ctx)
	st, err := w.c.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	r := st.Request
	want := map[spark.Topology]int{spark.Single: 1, spark.Pair: 2}[topology]
	if r.State != spark.Active || len(r.Hosts) != want {
		t.Fatalf("the lane is %s on %v, want active on %d host(s)", r.State, r.Hosts, want)
	}
	if gotRepo, gotSHA, ok := sparkgh.Target(r); !ok || gotRepo != repo || gotSHA != sha {
		t.Fatalf("sparkgh.Target = %s %s %v, want %s %s", gotRepo, gotSHA, ok, repo, sha)
	}
	name := r.Annotations[engineAnnotation]
	if name == "" || name != w.d.Engine.RunName(id) {
		t.Fatalf("the lease's run is %q, want %q", name, w.d.Engine.RunName(id))
	}
	w.round(ctx) // a round more submits nothing more
	var runs []dstacktest.RunRecord
	for _, run := range w.fake.Runs() {
		if run.Name == name {
			runs = append(runs, run)
		}
	}
	if len(runs) != 1 || len(w.fake.Runs()) != 1 {
		t.Fatalf("runs %+v, want the lane's one run", w.fake.Runs())
	}
	if n := w.fake.Count("/api/project/" + dstacktest.Project + "/runs/apply"); n != 1 {
		t.Errorf("%d run submissions, want 1", n)
	}
	run := runs[0]
	switch {
	case run.Type != "task" || run.Status != "running" || run.Nodes != want:
		t.Errorf("the run is a %s, %s, of %d node(s); want a running task of %d", run.Type, run.Status, run.Nodes, want)
	case !slices.Equal(slices.Sorted(slices.Values(run.Hosts)), slices.Sorted(slices.Values(r.Hosts))): // dstack picks the jobs' order
		t.Errorf("the run is placed on %v, the lease holds %v", run.Hosts, r.Hosts)
	case run.Env[dstack.EnvRepo] != repo || run.Env[dstack.EnvSHA] != sha:
		t.Errorf("the run tests %s at %s, want %s at %s", run.Env[dstack.EnvRepo], run.Env[dstack.EnvSHA], repo, sha)
	case run.Env[dstack.EnvLeaseID] != id || run.Env[dstack.EnvSuite] != r.Suite:
		t.Errorf("the run's lease %q, suite %q; want %s, %s", run.Env[dstack.EnvLeaseID], run.Env[dstack.EnvSuite], id, r.Suite)
	case !slices.Equal(run.Commands, w.d.Suites[r.Suite]):
		t.Errorf("the run's commands %q, want the %s suite's %q", run.Commands, r.Suite, w.d.Suites[r.Suite])
	}
	return r, name
}

// finish ends run name, failed or done (with receipt as its output's
// last line when set), and runs the rounds that conclude lease id, which
// must then be released.
func finish(t *testing.T, ctx context.Context, w *engineWorld, id, name string, failed bool, receipt string) spark.Request {
	t.Helper()
	if receipt != "" {
		w.fake.Output(name, 0, dstacktest.LogStdout, "make smoke: ok\n"+receipt+"\n")
	}
	w.fake.Finish(name, failed)
	w.round(ctx)
	w.round(ctx)
	st, err := w.c.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.Request.State != spark.Released {
		t.Fatalf("the lease is %s after its run ended, want released", st.Request.State)
	}
	return st.Request
}

// A merge group GitHub asks checks of (checks_requested) queues the merge
// queue's lane at the group's head commit, with its check on that
// commit; once granted, the lane runs once as a dstack task on the leased
// hosts with the group's repository and head in SPARK_REPO and SPARK_SHA.
// A run that finishes done with its receipt as the output's last line
// passes the group's check, naming the receipt's digest; a failed run
// fails it. Either way the lease is released. A redelivered event asks
// for nothing more.
func TestEngineRound_AMergeGroupLaneRunsOnDstackAtTheGroupsHead(t *testing.T) {
	for _, topology := range []spark.Topology{spark.Single, spark.Pair} {
		for _, failed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s failed=%v", topology, failed), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					ctx := context.Background()
					w, gh, _ := newLanesWorld(t, topology, "")
					mergeGroup(t, w, "checks_requested")
					mergeGroup(t, w, "checks_requested") // redelivered
					_, live, _ := w.c.Snapshot(ctx)
					if len(live) != 1 || live[0].Class != spark.MergeCI || live[0].Owner != spark.OwnerMergeQueue || live[0].Topology != topology || live[0].Suite != "smoke" {
						t.Fatalf("live %+v, want the merge group's one merge-ci request", live)
					}
					id := live[0].ID
					gh.mu.Lock()
					shas := slices.Clone(gh.checkSHAs)
					gh.mu.Unlock()
					if !slices.Equal(shas, []string{groupHead}) {
						t.Fatalf("checks created on %v, want one on the group's head %s", shas, groupHead)
					}
					_, name := grantedRun(t, ctx, w, id, lanesRepo, groupHead, topology)
					receipt := `{"suite":"smoke","sha":"` + groupHead + `"}`
					r := finish(t, ctx, w, id, name, failed, receipt)
					got := w.gh.last()[id]
					switch {
					case failed && (got.Conclusion != "failure" || !strings.Contains(got.Summary, name)):
						t.Errorf("after the run failed: the check %+v, want a failure naming run %s", got, name)
					case failed && spark.ReceiptDigest(r) != "":
						t.Errorf("a failed run's lease holds receipt %s", spark.ReceiptDigest(r))
					case !failed && (got.Conclusion != "success" || !strings.Contains(got.Summary, digestOf(receipt))):
						t.Errorf("after the run finished done: the check %+v, want a success naming %s", got, digestOf(receipt))
					case !failed && spark.ReceiptDigest(r) != digestOf(receipt):
						t.Errorf("the lease holds receipt %q, want %s", spark.ReceiptDigest(r), digestOf(receipt))
					}
					if len(w.gh.last()) != 1 || w.gh.minted != 0 || w.gh.dispatched != 0 {
						t.Errorf("%d checks, %d runners minted, %d workflows dispatched: want the group's one check, and dstack running the lane", len(w.gh.last()), w.gh.minted, w.gh.dispatched)
					}
				})
			})
		}
	}
}

// A scheduled lane (a fleet file's schedule, asked for by RunSchedules
// when due) runs on dstack like any other: once granted, one task on the
// leased hosts with the schedule's repository and its branch's commit at
// the time it asked in SPARK_REPO and SPARK_SHA. It has no check (there
// is no pull request to show one on); its lease is concluded from the
// run: released, with the run's receipt recorded when it finished done,
// and with none, and not passed, when it failed.
func TestEngineRound_AScheduledLaneRunsOnDstackAtItsBranchsCommit(t *testing.T) {
	for _, tc := range []struct {
		class    spark.Class
		topology spark.Topology
		suite    string
	}{
		{spark.Benchmark, spark.Single, "performance"},
		{spark.BackgroundCI, spark.Pair, "smoke"},
		{spark.MergeCI, spark.Single, "smoke"},
	} {
		for _, failed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s %s failed=%v", tc.class, tc.topology, failed), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					w, gh, f := newLanesWorld(t, spark.Single, fmt.Sprintf(`schedules:
  - {name: nightly, repo: %s, branch: main, class: %s, topology: %s, suite: %s, every: 6h}
`, lanesRepo, tc.class, tc.topology, tc.suite))
					// RunSchedules asks as the daemon has it ask, once its
					// interval has passed (the bubble's clock, not a sleep).
					asked := make(chan spark.Request)
					done := make(chan struct{})
					go func() {
						defer close(done)
						RunSchedules(ctx, f.Schedules, func(ctx context.Context, s sparkgh.Scheduled) error {
							r, err := w.in.Schedule(ctx, s)
							if err == nil {
								asked <- r
							}
							return err
						}, func(ctx context.Context, name string) (time.Time, bool, error) {
							return w.c.LastSubmitted(ctx, sparkgh.ScheduleOwner(name))
						}, w.d.Log)
					}()
					start := time.Now()
					q := <-asked
					cancel()
					<-done
					if waited := time.Since(start); waited != 6*time.Hour {
						t.Errorf("the schedule asked after %s, want 6h", waited)
					}
					if q.Class != tc.class || q.Topology != tc.topology || q.Suite != tc.suite || q.Owner != sparkgh.ScheduleOwner("nightly") {
						t.Fatalf("the schedule queued %+v", q)
					}
					gh.mu.Lock()
					gh.branches[lanesRepo+"@main"] = "5555555555555555555555555555555555555555" // main moves on: the lane runs what was asked
					gh.mu.Unlock()
					_, name := grantedRun(t, context.Background(), w, q.ID, lanesRepo, mainCommit, tc.topology)
					receipt := `{"suite":"` + tc.suite + `","sha":"` + mainCommit + `"}`
					r := finish(t, context.Background(), w, q.ID, name, failed, receipt)
					phase := r.Annotations["gh.phase"] // sparkgh's record of how the lane ended
					switch {
					case failed && (spark.ReceiptDigest(r) != "" || phase == "passed" || !strings.Contains(phase, name)):
						t.Errorf("after the run failed: receipt %q, phase %q; want none, and the failed run named", spark.ReceiptDigest(r), phase)
					case !failed && (spark.ReceiptDigest(r) != digestOf(receipt) || phase != "passed"):
						t.Errorf("after the run finished done: receipt %q, phase %q; want %s, passed", spark.ReceiptDigest(r), phase, digestOf(receipt))
					}
					if len(w.gh.last()) != 0 || w.gh.minted != 0 || w.gh.dispatched != 0 {
						t.Errorf("%d checks, %d runners minted, %d workflows dispatched: want none, and dstack running the lane", len(w.gh.last()), w.gh.minted, w.gh.dispatched)
					}
				})
			})
		}
	}
}
