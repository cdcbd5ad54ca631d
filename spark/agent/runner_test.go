//go:build unix

package agent_test

import (
	"bufio"
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/agent"
	"github.com/gpugate/gpugate/spark/sparktest"
)

// leasedHost is a controller whose spark-2 runs the agent and holds an
// active merge-CI lease with a runner config.
func leasedHost(t *testing.T) (c *spark.Controller, ops, host *spark.APIClient, lease string) {
	t.Helper()
	ctx := context.Background()
	opts := spark.DefaultOptions()
	opts.Service = &sparktest.Service{}
	for i := range opts.Hosts {
		opts.Hosts[i].Agent = true
	}
	c, err := spark.New(sparktest.NewStore(), opts)
	if err != nil {
		t.Fatal(err)
	}
	vault := spark.NewRunnerConfigs()
	h, err := spark.NewAuthHandler(c, spark.Tokens{opsToken: {Role: spark.RoleOperator, Name: "ops"}, hostToken: {Role: spark.RoleHost, Name: "spark-2"}},
		spark.WithRunnerConfigs(vault))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	ops, _ = spark.NewAPIClient(srv.URL, opsToken, nil)
	host, _ = spark.NewAPIClient(srv.URL, hostToken, nil)
	st, err := ops.Request(ctx, spark.LeaseRequest{Class: spark.MergeCI, Host: "spark-2"})
	if err != nil {
		t.Fatal(err)
	}
	sparktest.Admit(ctx, c, "spark-1", "spark-2")
	vault.Put(st.Request.ID, "runner-"+st.Request.ID, "JIT")
	return c, ops, host, st.Request.ID
}

// fifoRunner is a fake runner that writes its environment to a FIFO and
// then runs until it is killed, and the FIFO.
func fifoRunner(t *testing.T, dir string) (runner, fifo string) {
	t.Helper()
	fifo = filepath.Join(dir, "env")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	runner = filepath.Join(dir, "run.sh")
	os.WriteFile(runner, []byte("#!/bin/sh\nenv > \""+fifo+"\"\nexec sleep 300\n"), 0o755)
	return runner, fifo
}

// The runner gets the job's own token, never the host's, with the
// controller's address and the host's preflight commands, so the job's
// preflight and receipt steps work and it can act as nothing else.
func TestRunner_TheJobGetsItsOwnTokenNeverTheHosts(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, _, host, lease := leasedHost(t)
	dir := t.TempDir()
	runner, fifo := fifoRunner(t, dir)
	t.Setenv("SPARK_TOKEN", hostToken) // the agent's own credential, in its environment
	go agent.Run(ctx, agent.Config{Client: host, Host: "spark-2", GPU: gpu{}, Disk: disk(1 << 40), WorkRoot: filepath.Join(dir, "work"),
		RunnerCmd: runner, Interconnect: "true", ServiceReleased: "test -e /", Every: 10 * time.Millisecond})
	f, err := os.Open(fifo) // blocks until the runner writes
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), "=")
		env[k] = v
	}
	f.Close()
	if env["SPARK_TOKEN"] == "" || env["SPARK_TOKEN"] == hostToken {
		t.Fatalf("the runner's SPARK_TOKEN is %q, want the job's own token", env["SPARK_TOKEN"])
	}
	if env["SPARK_ADDR"] != host.Addr() || env["SPARK_LEASE"] != lease || env["SPARK_INTERCONNECT_CMD"] != "true" || env["SPARK_SERVICE_RELEASED_CMD"] != "test -e /" {
		t.Errorf("the runner's environment lacks what its preflight needs: %v", env)
	}
	job, _ := spark.NewAPIClient(env["SPARK_ADDR"], env["SPARK_TOKEN"], nil)
	if _, err := job.UploadReceipt(ctx, lease, []byte("passed")); err != nil {
		t.Errorf("the job cannot record its receipt: %v", err)
	}
	if err := job.Heartbeat(ctx, "spark-2", 0); !errors.Is(err, spark.ErrUnauthorized) {
		t.Errorf("the job's token reports the host clean: %v", err)
	}
}

// A second agent process for the host never starts a second runner for
// the job, and never releases the lease under the first one.
func TestAgent_ASecondAgentForTheHostNeverStartsOrReleasesTheJob(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, _, host, lease := leasedHost(t)
	dir := t.TempDir()
	runner, fifo := fifoRunner(t, dir)
	cfg := agent.Config{Client: host, Host: "spark-2", GPU: gpu{}, Disk: disk(1 << 40), WorkRoot: filepath.Join(dir, "work"),
		RunnerCmd: runner, Every: 10 * time.Millisecond, JobGrace: time.Millisecond}
	first := cfg
	go agent.Run(ctx, first)
	if _, err := os.ReadFile(fifo); err != nil { // the first agent's runner started
		t.Fatal(err)
	}
	refused := make(chan agent.Event, 1)
	second := cfg
	second.WorkRoot = filepath.Join(dir, "work2")
	second.OnEvent = func(e agent.Event) {
		switch {
		case e.Kind == "runner-config" && errors.Is(e.Err, spark.ErrConflict):
			select {
			case refused <- e:
			default:
			}
		case e.Kind == "runner-started", e.Kind == "released":
			t.Errorf("the second agent: %s %v", e.Kind, e.Err)
		}
	}
	go agent.Run(ctx, second)
	<-refused
	<-refused // a second round: still refused, nothing started or released
	if st, _ := c.Status(ctx, lease); st.Request.State != spark.Active {
		t.Errorf("the lease is %s, want it still active for the first agent's job", st.Request.State)
	}
}
