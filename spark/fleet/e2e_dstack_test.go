//go:build unix

package fleet_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/agent"
	"github.com/gpugate/gpugate/spark/dstack"
	"github.com/gpugate/gpugate/spark/dstack/dstacktest"
	"github.com/gpugate/gpugate/spark/fleet"
	"github.com/gpugate/gpugate/spark/sqlitestore"
)

// dstackFleet serves a controller whose engine is the fake dstack server,
// with both hosts running the host agent; it returns the operator's
// client, the hosts and the fake. Serve's error, if it stops, goes to
// served.
func dstackFleet(t *testing.T, ctx context.Context, fake *dstacktest.Server, served chan<- error) (*spark.Controller, *spark.APIClient, map[string]*host) {
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
	return d.Controller, ops, hosts
}

type noGPU struct{}

func (noGPU) ComputeApps(context.Context) ([]string, error) { return nil, nil }

// runOf waits, one agent round at a time, until the fake holds the run of
// lease in the wanted state (finished or not).
func runOf(t *testing.T, ctx context.Context, fake *dstacktest.Server, h *host, lease string, finished bool) dstacktest.RunRecord {
	t.Helper()
	for {
		for _, r := range fake.Runs() {
			if r.Env[dstack.EnvLeaseID] == lease && !r.Deleted && (r.StopRequested || r.Finished()) == finished {
				return r
			}
		}
		fake.Progress()
		heartbeats(t, ctx, h, 1)
	}
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
	c, ops, hosts := dstackFleet(t, ctx, fake, served)

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
	_, _, _ = dstackFleet(t, ctx, fake, served)
	if err := <-served; !errors.Is(err, dstack.ErrNotEnrolled) {
		t.Errorf("serve: %v, want ErrNotEnrolled", err)
	}
}
