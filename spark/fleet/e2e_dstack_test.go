//go:build unix

package fleet_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpugate/gpugate/internal/githubtest"
	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/agent"
	"github.com/gpugate/gpugate/spark/dstack"
	"github.com/gpugate/gpugate/spark/dstack/dstacktest"
	"github.com/gpugate/gpugate/spark/fleet"
	"github.com/gpugate/gpugate/spark/sparkgh"
	"github.com/gpugate/gpugate/spark/sqlitestore"
)

// dstackFleet serves a controller whose engine is the fake dstack server,
// with both hosts running the host agent and, when gh is set, the GitHub
// integration against that fake GitHub; it returns the controller, the
// operator's client, the hosts and the webhook's sender (nil without gh).
// Serve's error, if it stops, goes to served.
func dstackFleet(t *testing.T, ctx context.Context, fake *dstacktest.Server, gh *fakeGitHub, served chan<- error) (*spark.Controller, *spark.APIClient, map[string]*host, *webhook) {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "dstack-token"), []byte(dstacktest.Token+"\n"), 0o600)
	f, err := fleet.Load([]byte(`hosts:
  - {name: spark-1, managed: true, service: true, agent: true}
  - {name: spark-2, managed: true, agent: true}
preferred_host: spark-2
pair_test: true
engine: dstack
dstack:
  url: ` + fake.Start() + `
  project: ` + dstacktest.Project + `
  fleet: spark
  token_file: ` + filepath.Join(dir, "dstack-token") + `
  suites: {smoke: [make smoke], performance: [make perf]}
`))
	if err != nil {
		t.Fatal(err)
	}
	engine, err := f.Dstack.Backend()
	if err != nil {
		t.Fatal(err)
	}
	store, err := sqlitestore.Create(filepath.Join(dir, "spark.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	d := &fleet.Daemon{Engine: engine, Suites: f.Dstack.Suites, StateDir: dir, Every: 20 * time.Millisecond, Log: slog.New(slog.DiscardHandler)}
	if gh != nil {
		client, _ := githubtest.New(t, gh.handler(t))
		cfg := f.GitHub
		cfg.WebhookSecret = e2eSecret
		if d.GitHub, err = sparkgh.New(cfg, nil, &sparkgh.GitHubAPI{Client: client}, slog.New(slog.DiscardHandler)); err != nil {
			t.Fatal(err)
		}
		f.Options.OnGrant = d.GitHub.OnGrant
	}
	if d.Controller, err = spark.New(store, f.Options); err != nil {
		t.Fatal(err)
	}
	tokens := spark.Tokens{"operator-token-0123456789": {Role: spark.RoleOperator, Name: "ops"}}
	for _, h := range []string{"spark-1", "spark-2"} {
		tokens[h+"-host-token-0123456"] = spark.Credential{Role: spark.RoleHost, Name: h}
	}
	if d.API, err = spark.NewAuthHandler(d.Controller, tokens, spark.WithAgentService(f.Options.Service.(*spark.AgentService))); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "http://" + ln.Addr().String()
	go func() { served <- d.Serve(ctx, ln) }()
	hosts := map[string]*host{}
	for _, name := range []string{"spark-1", "spark-2"} {
		h := &host{name: name, events: make(chan agent.Event, 1024)}
		hosts[name] = h
		cl, _ := spark.NewAPIClient(addr, name+"-host-token-0123456", nil)
		cfg := agent.Config{Client: cl, Host: name, GPU: noGPU{}, Disk: bigDisk{}, WorkRoot: filepath.Join(dir, name), RunnerCmd: "/bin/false",
			Every: 20 * time.Millisecond, OnEvent: func(e agent.Event) {
				select {
				case h.events <- e:
				default:
				}
			}}
		if name == "spark-1" {
			cfg.Service = &fleet.ShellService{DrainCmd: "true", StopCmd: "true", VerifyReleasedCmd: "true", StartCmd: "true", HealthyCmd: "true"}
		}
		go agent.Run(ctx, cfg)
	}
	ops, _ := spark.NewAPIClient(addr, "operator-token-0123456789", nil)
	var wh *webhook
	if gh != nil {
		wh = &webhook{ctx: ctx, addr: addr, gh: gh}
	}
	return d.Controller, ops, hosts, wh
}

type noGPU struct{}

func (noGPU) ComputeApps(context.Context) ([]string, error) { return nil, nil }

// runOf waits, one agent round at a time, until the fake holds the run of
// lease in the wanted state (finished or not).
func runOf(t *testing.T, ctx context.Context, fake *dstacktest.Server, h *host, lease string, finished bool) dstacktest.RunRecord {
	t.Helper()
	return runWhere(t, ctx, fake, h, "the run of "+lease, func(r dstacktest.RunRecord) bool {
		return r.Env[dstack.EnvLeaseID] == lease && (r.StopRequested || r.Finished()) == finished
	})
}

// runWhere waits until the fake holds a run (not deleted) that matches.
func runWhere(t *testing.T, ctx context.Context, fake *dstacktest.Server, h *host, what string, match func(dstacktest.RunRecord) bool) dstacktest.RunRecord {
	t.Helper()
	var run dstacktest.RunRecord
	until(t, ctx, fake, h, what, func() bool {
		runs := fake.Runs()
		i := slices.IndexFunc(runs, func(r dstacktest.RunRecord) bool { return !r.Deleted && match(r) })
		if i >= 0 {
			run = runs[i]
		}
		return i >= 0
	})
	return run
}

// With engine: dstack the controller stays the admission authority and
// dstack runs what it granted: a development lease as a dev environment
// on its host, a CI pair as one two-node task on exactly the leased
// hosts; a release stops the run, and the hosts' agents acknowledge the
// cleanup before they take work again.
func TestEndToEnd_DstackRunsWhatTheControllerGrantsAndReleaseStopsIt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fake := dstacktest.New()
	defer fake.Close()
	fake.AddFleet(dstacktest.FleetSpec{Name: "spark", Placement: "cluster", Hosts: []string{"spark-1", "spark-2"}})
	served := make(chan error, 1)
	c, ops, hosts, _ := dstackFleet(t, ctx, fake, nil, served)

	dev, err := ops.Request(ctx, spark.LeaseRequest{Class: spark.Development, Host: "spark-2", Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if dev, err = ops.Wait(ctx, dev.Request.ID); err != nil || dev.Request.State != spark.Active {
		t.Fatalf("%+v %v", dev.Request, err)
	}
	run := runOf(t, ctx, fake, hosts["spark-2"], dev.Request.ID, false)
	if run.Type != "dev-environment" || !slices.Equal(run.Selectors, []string{"hostname=spark-2"}) {
		t.Errorf("the development lease's run: %s on %v, want a dev environment on spark-2", run.Type, run.Selectors)
	}
	if err := ops.Release(ctx, dev.Request.ID, dev.Request.Token); err != nil {
		t.Fatal(err)
	}
	runOf(t, ctx, fake, hosts["spark-2"], dev.Request.ID, true)
	if e := hosts["spark-2"].wait(t, ctx, "cleaned", dev.Request.ID); e.Err != nil {
		t.Fatal(e.Err)
	}

	// A pull request's pair, as the GitHub integration queues it (with
	// the commit it tests).
	r, err := c.Submit(ctx, spark.SubmitRequest{Class: spark.ManualPR, Topology: spark.Pair, Suite: "smoke",
		PR: &spark.PRRef{Repo: "o/butter", Number: 8, SHA: "2222222222222222222222222222222222222222"}})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ops.Wait(ctx, r.ID)
	if err != nil || pair.Request.State != spark.Active {
		t.Fatalf("%+v %v", pair.Request, err)
	}
	run = runOf(t, ctx, fake, hosts["spark-2"], pair.Request.ID, false)
	hostsOf := slices.Clone(run.Selectors)
	slices.Sort(hostsOf)
	if !slices.Equal(run.Commands, []string{"make smoke"}) {
		t.Errorf("the pair's task runs %v, want the smoke suite's commands", run.Commands)
	}
	if run.Type != "task" || run.Nodes != 2 || !slices.Equal(hostsOf, []string{"hostname=spark-1", "hostname=spark-2"}) {
		t.Errorf("the pair's run: %s, %d nodes on %v; want one two-node task on both hosts", run.Type, run.Nodes, run.Selectors)
	}
	if err := ops.Release(ctx, pair.Request.ID, pair.Request.Token); err != nil {
		t.Fatal(err)
	}
	runOf(t, ctx, fake, hosts["spark-2"], pair.Request.ID, true)
	for _, h := range hosts {
		if e := h.wait(t, ctx, "cleaned", pair.Request.ID); e.Err != nil {
			t.Fatalf("%s: %v", h.name, e.Err)
		}
	}
	if n := fake.Count("/api/project/" + dstacktest.Project + "/runs/apply"); n != 2 {
		t.Errorf("%d runs submitted for two leases", n)
	}
	cancel()
	if err := <-served; err != nil {
		t.Errorf("serve: %v", err)
	}
}

// A managed host that is not an idle or busy instance of the dstack fleet
// stops the controller before it serves: nothing is admitted to a host
// dstack cannot run work on.
func TestEndToEnd_AHostNotEnrolledInTheDstackFleetStopsTheController(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fake := dstacktest.New()
	defer fake.Close()
	fake.AddFleet(dstacktest.FleetSpec{Name: "spark", Placement: "cluster", Hosts: []string{"spark-1", "spark-2"}})
	fake.SetInstanceStatus("spark-1", dstacktest.Terminated)
	served := make(chan error, 1)
	dstackFleet(t, ctx, fake, nil, served)
	if err := <-served; !errors.Is(err, dstack.ErrNotEnrolled) {
		t.Errorf("serve: %v, want ErrNotEnrolled", err)
	}
}

// until runs agent rounds of h, moving the fake's runs along, until cond
// holds.
func until(t *testing.T, ctx context.Context, fake *dstacktest.Server, h *host, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		if ctx.Err() != nil {
			t.Fatalf("never %s: %v", what, ctx.Err())
		}
		fake.Progress()
		heartbeats(t, ctx, h, 1)
	}
}

// runAt waits until the fake holds the unfinished run that tests sha.
func runAt(t *testing.T, ctx context.Context, fake *dstacktest.Server, h *host, sha string) dstacktest.RunRecord {
	t.Helper()
	return runWhere(t, ctx, fake, h, "a run at "+sha, func(r dstacktest.RunRecord) bool { return r.Env[dstack.EnvSHA] == sha && !r.Finished() })
}

// completed waits until check id is completed and returns its title,
// conclusion and summary.
func completed(t *testing.T, ctx context.Context, fake *dstacktest.Server, gh *fakeGitHub, h *host, id int64) (title, conclusion, summary string) {
	t.Helper()
	until(t, ctx, fake, h, "a completed check", func() bool {
		title, conclusion = gh.last(id)
		return conclusion != ""
	})
	return title, conclusion, gh.summary(id)
}

// With engine: dstack a maintainer's label runs as a dstack task: the
// label is queued with its check, granted, and the lease becomes one
// task on exactly the leased host at the pull request's repository and
// commit (SPARK_REPO, SPARK_SHA) running the suite's commands; no one-job
// runner is minted and no workflow dispatched. The check follows the run
// (running), passes once the run finished successfully and its output's
// last line, the evidence receipt, is recorded (its digest in the check),
// and the lease is released and its host cleaned up. A run that fails
// fails the check, naming the run and its termination reason, and
// releases the lease too; so does a run that disappears. A pair runs as
// one two-node task on both hosts.
func TestEndToEnd_DstackRunsALabelledPullRequestAsATaskAndConcludesItsCheck(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fake := dstacktest.New()
	defer fake.Close()
	fake.AddFleet(dstacktest.FleetSpec{Name: "spark", Placement: "cluster", Hosts: []string{"spark-1", "spark-2"}})
	gh := &fakeGitHub{checks: map[int64][]map[string]any{}, prs: map[int]map[string]any{}}
	served := make(chan error, 1)
	c, _, hosts, wh := dstackFleet(t, ctx, fake, gh, served)
	spark2 := hosts["spark-2"]
	const receipt = `{"suite":"smoke","passed":12,"failed":0}`
	const sha1, sha2, sha3, sha4 = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222", "3333333333333333333333333333333333333333", "4444444444444444444444444444444444444444"

	// 1. Label → queued → granted → a task on spark-2 at the commit.
	wh.label(t, 7, sha1, "spark-test")
	run := runAt(t, ctx, fake, spark2, sha1)
	lease := run.Env[dstack.EnvLeaseID]
	if run.Type != "task" || run.Nodes != 1 || !slices.Equal(run.Selectors, []string{"hostname=spark-2"}) || run.Env[dstack.EnvRepo] != "o/butter" || run.Env[dstack.EnvTopology] != "single" ||
		!slices.Equal(run.Commands, []string{"make smoke"}) {
		t.Errorf("the label's run: %s, %d nodes on %v, repo %q, commands %v; want one smoke task on spark-2 at o/butter",
			run.Type, run.Nodes, run.Selectors, run.Env[dstack.EnvRepo], run.Commands)
	}
	if st, err := c.Status(ctx, lease); err != nil || st.Request.State != spark.Active || !slices.Equal(st.Request.Hosts, []string{"spark-2"}) {
		t.Fatalf("the lease the run names: %+v %v", st.Request, err)
	}
	until(t, ctx, fake, spark2, "a running check", func() bool { title, _ := gh.last(1); return title == "Spark test running — exact SHA 1111111" })

	// 2. The run passes with its receipt: the check passes, the lease
	// ends and the host is cleaned up.
	fake.Output(run.Name, 0, dstacktest.LogStdout, "running 12 tests\nok\n")
	fake.Output(run.Name, 0, dstacktest.LogStdout, receipt+"\n")
	fake.Finish(run.Name, false)
	title, conclusion, summary := completed(t, ctx, fake, gh, spark2, 1)
	st, _ := c.Status(ctx, lease)
	sum := sha256.Sum256([]byte(receipt))
	digest := "sha256:" + hex.EncodeToString(sum[:])
	if title != "Spark test passed — evidence receipt recorded" || conclusion != "success" || !strings.Contains(summary, digest) {
		t.Errorf("the check: %q %q %q, want a pass naming %s", title, conclusion, summary, digest)
	}
	// (The check is created queued, or granted already when the grant
	// came first.)
	shown := gh.titles(1)
	if len(shown) > 0 && shown[0] == "Spark test queued — position 1" {
		shown = shown[1:]
	}
	if got, want := strings.Join(shown, " | "), "Spark 2 allocated — environment preparing | Spark test running — exact SHA 1111111 | Spark test passed — evidence receipt recorded"; got != want {
		t.Errorf("the check went through %s\nwant %s", got, want)
	}
	if st.Request.State != spark.Released || spark.ReceiptDigest(st.Request) != digest {
		t.Errorf("the lease: %s with receipt %q", st.Request.State, spark.ReceiptDigest(st.Request))
	}
	if e := spark2.wait(t, ctx, "cleaned", lease); e.Err != nil {
		t.Fatal(e.Err)
	}

	// 3. A run that fails: a failing check naming the run and why, and
	// the lease released.
	wh.label(t, 8, sha2, "spark-test")
	run = runAt(t, ctx, fake, spark2, sha2)
	fake.Output(run.Name, 0, dstacktest.LogStdout, receipt+"\n") // a receipt does not make a failed run pass
	fake.Finish(run.Name, true)
	title, conclusion, summary = completed(t, ctx, fake, gh, spark2, 2)
	if conclusion != "failure" || !strings.Contains(summary, run.Name) || !strings.Contains(summary, "job_failed") || !strings.Contains(summary, "container_exited_with_error") {
		t.Errorf("the failed run's check: %q %q %q", title, conclusion, summary)
	}
	if st, _ := c.Status(ctx, run.Env[dstack.EnvLeaseID]); st.Request.State != spark.Released {
		t.Errorf("the failed run's lease is %s", st.Request.State)
	}
	spark2.wait(t, ctx, "cleaned", run.Env[dstack.EnvLeaseID])

	// 4. A run that disappears is no pass either.
	wh.label(t, 9, sha3, "spark-test")
	run = runAt(t, ctx, fake, spark2, sha3)
	fake.Delete(run.Name)
	title, conclusion, summary = completed(t, ctx, fake, gh, spark2, 3)
	if conclusion != "failure" || !strings.Contains(summary, run.Name) {
		t.Errorf("the vanished run's check: %q %q %q", title, conclusion, summary)
	}
	spark2.wait(t, ctx, "cleaned", run.Env[dstack.EnvLeaseID])

	// 5. A pair: one two-node task on both hosts, passing with its
	// receipt.
	wh.label(t, 10, sha4, "spark-pair-test")
	run = runAt(t, ctx, fake, spark2, sha4)
	if placed := slices.Sorted(slices.Values(run.Selectors)); run.Type != "task" || run.Nodes != 2 || run.Env[dstack.EnvTopology] != "pair" || !slices.Equal(placed, []string{"hostname=spark-1", "hostname=spark-2"}) {
		t.Errorf("the pair's run: %s, %d nodes on %v; want one two-node task on both hosts", run.Type, run.Nodes, run.Selectors)
	}
	until(t, ctx, fake, spark2, "the pair placed", func() bool { r, _ := fake.Run(run.Name); return len(r.Hosts) == 2 })
	fake.Output(run.Name, 0, dstacktest.LogStdout, receipt+"\n")
	fake.Finish(run.Name, false)
	if title, conclusion, _ = completed(t, ctx, fake, gh, spark2, 4); conclusion != "success" {
		t.Errorf("the pair's check: %q %q", title, conclusion)
	}
	for _, h := range hosts {
		if e := h.wait(t, ctx, "cleaned", run.Env[dstack.EnvLeaseID]); e.Err != nil {
			t.Fatalf("%s: %v", h.name, e.Err)
		}
	}

	gh.mu.Lock()
	minted, dispatched := gh.jit, gh.dispatched
	gh.mu.Unlock()
	if minted != 0 || dispatched != 0 {
		t.Errorf("%d runners minted and %d workflows dispatched: with engine dstack the task runs the lane", minted, dispatched)
	}
	if n := fake.Count("/api/project/" + dstacktest.Project + "/runs/apply"); n != 4 {
		t.Errorf("%d runs submitted for four lanes", n)
	}
	cancel()
	if err := <-served; err != nil {
		t.Errorf("serve: %v", err)
	}
}
