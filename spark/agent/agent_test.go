package agent_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/agent"
	"github.com/gpugate/gpugate/spark/sparktest"
)

const opsToken, hostToken = "ops-token-0123456789abcdef", "host-token-0123456789abcd"

// controller serves the default fleet's controller with an operator's and
// spark-2's host credentials.
func controller(t *testing.T) (*spark.Controller, *spark.APIClient, *spark.APIClient) {
	t.Helper()
	opts := spark.DefaultOptions()
	opts.Service = &sparktest.Service{}
	c, err := spark.New(sparktest.NewStore(), opts)
	if err != nil {
		t.Fatal(err)
	}
	h, err := spark.NewAuthHandler(c, spark.Tokens{opsToken: {Role: spark.RoleOperator, Name: "ops"}, hostToken: {Role: spark.RoleHost, Name: "spark-2"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	ops, _ := spark.NewAPIClient(srv.URL, opsToken, nil)
	host, _ := spark.NewAPIClient(srv.URL, hostToken, nil)
	return c, ops, host
}

type gpu struct {
	apps []string
	err  error
}

func (g gpu) ComputeApps(context.Context) ([]string, error) { return g.apps, g.err }

type disk uint64

func (d disk) Free(string) (uint64, error) { return uint64(d), nil }

// host is the controller's record of name.
func host(t *testing.T, c *spark.Controller, name string) spark.Host {
	t.Helper()
	hosts, err := c.Hosts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hosts {
		if h.Name == name {
			return h
		}
	}
	t.Fatalf("no host %s", name)
	return spark.Host{}
}

// A host whose GPU processes cannot be counted sends no heartbeat, so it
// goes offline rather than look idle; a counted one reports the count.
func TestHeartbeat_NothingIsSentWhenTheGPUCannotBeCounted(t *testing.T) {
	ctx := context.Background()
	c, _, hostCl := controller(t)
	if _, err := agent.Heartbeat(ctx, hostCl, "spark-2", gpu{err: errors.New("nvidia-smi: not found")}); err == nil {
		t.Fatal("a heartbeat was reported without a process count")
	}
	if h := host(t, c, "spark-2"); !h.LastHeartbeat.IsZero() {
		t.Fatalf("the controller saw a heartbeat: %+v", h)
	}
	n, err := agent.Heartbeat(ctx, hostCl, "spark-2", gpu{apps: []string{"7 python"}})
	if err != nil || n != 1 {
		t.Fatalf("%d, %v", n, err)
	}
	if h := host(t, c, "spark-2"); h.LastHeartbeat.IsZero() || h.GPUProcesses != 1 {
		t.Errorf("the controller saw %+v, want one GPU process", h)
	}
}

// The host is what this machine says it is: a lease that holds another
// host, or is not active, lets nothing start here.
func TestPreflight_ALeaseOfAnotherHostOrNotActiveLetsNothingStart(t *testing.T) {
	ctx := context.Background()
	c, ops, _ := controller(t)
	st, err := ops.Request(ctx, spark.LeaseRequest{Class: spark.MergeCI, Host: "spark-2"})
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Preflight(ctx, ops, st.Request.ID, agent.PreflightOptions{Host: "spark-2", WorkDir: t.TempDir()}); !errors.Is(err, agent.ErrNotLeased) {
		t.Errorf("a queued lease: %v, want ErrNotLeased", err)
	}
	sparktest.Admit(ctx, c, "spark-1", "spark-2")
	if err := agent.Preflight(ctx, ops, st.Request.ID, agent.PreflightOptions{Host: "spark-1", WorkDir: t.TempDir()}); !errors.Is(err, agent.ErrNotLeased) {
		t.Errorf("another host: %v, want ErrNotLeased", err)
	}
	err = agent.Preflight(ctx, ops, st.Request.ID, agent.PreflightOptions{Host: "spark-2", WorkDir: t.TempDir(), GPU: gpu{}, Disk: disk(1 << 40)})
	if err != nil {
		t.Errorf("the leased host: %v", err)
	}
}
