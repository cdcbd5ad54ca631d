package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/sparktest"
	"github.com/gpugate/gpugate/spark/sqlitestore"
)

const token = "ctl-test-token-0123456789"

// spark3Token is spark-3's host credential.
const spark3Token = "spark-3-host-token-0123"

func TestCommandsAgainstTheAPI(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, err := sqlitestore.Create(t.TempDir() + "/spark.db")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	opts := spark.DefaultOptions()
	opts.Service = &sparktest.Service{}
	// A third host that only sparkctl heartbeat reports for.
	opts.Hosts = append(opts.Hosts, spark.HostConfig{Name: "spark-3", Managed: true})
	c, err := spark.New(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	// The operator's token, and spark-3's agent's own.
	h, _ := spark.NewAuthHandler(c, spark.Tokens{token: {Role: spark.RoleOperator, Name: "ops"}, spark3Token: {Role: spark.RoleHost, Name: "spark-3"}})
	srv := httptest.NewServer(h)
	defer srv.Close()
	go sparktest.RunAdmission(ctx, c, 20*time.Millisecond, "spark-1", "spark-2")
	env := map[string]string{"SPARK_ADDR": srv.URL, "SPARK_TOKEN": token}
	ctl := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		code := run(ctx, args, func(k string) string { return env[k] }, &out, &errOut)
		return code, out.String() + errOut.String()
	}
	code, out := ctl("-class", "development", "request")
	var st statusJSON
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil {
		t.Fatalf("request: %d %s", code, out)
	}
	code, out = ctl("wait", st.Request.ID)
	json.Unmarshal([]byte(out), &st)
	if code != 0 || st.Request.State != spark.Active {
		t.Fatalf("wait: %d %s", code, out)
	}
	if code, out := ctl("status", st.Request.ID); code != 0 || !strings.Contains(out, `"state": "active"`) {
		t.Errorf("status: %d %s", code, out)
	}
	if code, out := ctl("cancel", st.Request.ID); code != 1 || !strings.Contains(out, "active") {
		t.Errorf("cancel active: %d %s", code, out)
	}
	if code, out := ctl("release", st.Request.ID, strconv.FormatInt(st.Request.Token+7, 10)); code != 1 || !strings.Contains(out, "stale") {
		t.Errorf("stale release: %d %s", code, out)
	}
	if code, out := ctl("-workdir", t.TempDir(), "-min-free-gb", "0", "preflight", st.Request.ID); code != 2 || !strings.Contains(out, "needs -host or SPARK_HOST") {
		t.Errorf("preflight on an unnamed host: %d %s", code, out)
	}
	env["SPARK_HOST"] = st.Request.Hosts[0]
	preflightOnTheHost(t, ctl, st.Request.ID)
	delete(env, "SPARK_HOST")
	env["SPARK_TOKEN"] = spark3Token // the host agent's credential
	heartbeatFromTheHost(t, ctl, c)
	env["SPARK_TOKEN"] = token
	if code, out := ctl("release", st.Request.ID, strconv.FormatInt(st.Request.Token, 10)); code != 0 || !strings.Contains(out, "released "+st.Request.ID+": ") || !strings.Contains(out, st.Request.Hosts[0]+" ") {
		t.Errorf("release: %d %s", code, out)
	}
	if code, out := ctl("-host", st.Request.Hosts[0], "-workdir", t.TempDir(), "-min-free-gb", "0", "preflight", st.Request.ID); code != 1 || !strings.Contains(out, "not active") {
		t.Errorf("preflight after release: %d %s", code, out)
	}
	if code, out := ctl("hosts"); code != 0 || !strings.Contains(out, "spark-2") {
		t.Errorf("hosts: %d %s", code, out)
	}
	env["SPARK_TOKEN"] = "wrong-token-wrong-token"
	if code, _ := ctl("hosts"); code != 1 {
		t.Error("a wrong token must fail")
	}
	if code, _ := ctl("bogus"); code != 2 {
		t.Error("an unknown command must exit 2")
	}
}

// "sparkctl request -class benchmark -duration 3h", as docs/fleet.md
// writes it: the verb's flags after the verb are taken, and the lease is
// the one asked for, not a development lease of the default length. A
// flag the verb does not take, or a stray argument, is refused before
// anything is sent.
func TestSparkctl_FlagsAfterTheSubcommandAreTaken(t *testing.T) {
	ctx := context.Background()
	opts := spark.DefaultOptions()
	opts.Service = &sparktest.Service{}
	c, err := spark.New(sparktest.NewStore(), opts)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := spark.NewHandler(c, token)
	srv := httptest.NewServer(h)
	defer srv.Close()
	env := map[string]string{"SPARK_ADDR": srv.URL, "SPARK_TOKEN": token}
	ctl := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(ctx, args, func(k string) string { return env[k] }, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	for _, args := range [][]string{
		{"request", "-class", "benchmark", "-duration", "3h"},
		{"-class", "benchmark", "request", "-duration", "3h"}, // before the verb, as the workflows write preflight's
	} {
		code, out, errOut := ctl(args...)
		var printed struct {
			Request struct {
				ID       string `json:"id"`
				Class    string `json:"class"`
				Duration string `json:"duration"`
			} `json:"request"`
		}
		if err := json.Unmarshal([]byte(out), &printed); code != 0 || err != nil {
			t.Fatalf("%v: exit %d (%v): %s%s", args, code, err, out, errOut)
		}
		st, err := c.Status(ctx, printed.Request.ID)
		if err != nil || st.Request.Class != spark.Benchmark || st.Request.Duration != 3*time.Hour {
			t.Errorf("%v: the controller holds %+v (%v), want a benchmark lease of 3h", args, st.Request, err)
		}
		if printed.Request.Class != "benchmark" || printed.Request.Duration != "3h0m0s" {
			t.Errorf("%v: printed %+v, want class benchmark and duration 3h0m0s", args, printed.Request)
		}
	}
	_, before, _ := c.Snapshot(ctx)
	for _, args := range [][]string{
		{"hosts", "-class", "benchmark"},      // hosts takes no -class
		{"request", "extra"},                  // a stray argument
		{"status"},                            // its ID is missing
		{"release", "r-1", "7", "-addr", "x"}, // flags go before the arguments
		{"request", "-duration", "-3h"},       // no negative lease
	} {
		if code, out, errOut := ctl(args...); code != 2 || out != "" || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and one line", args, code, out, errOut)
		}
	}
	if _, after, _ := c.Snapshot(ctx); len(after) != len(before) {
		t.Errorf("a refused command line queued a lease: %d requests, then %d", len(before), len(after))
	}
}

// preflightOnTheHost runs the managed runner's preflight against the live
// lease id, with a stand-in nvidia-smi on PATH.
func preflightOnTheHost(t *testing.T, ctl func(...string) (int, string), id string) {
	t.Helper()
	bin := t.TempDir()
	apps := filepath.Join(bin, "apps")
	os.WriteFile(filepath.Join(bin, "nvidia-smi"), []byte("#!/bin/sh\ncat \""+apps+"\"\n"), 0o755)
	os.WriteFile(apps, nil, 0o644)
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	work := t.TempDir()
	base := []string{"-workdir", work, "-min-free-gb", "0"}
	for _, tc := range []struct {
		name  string
		flags []string
		apps  string
		code  int
		want  string
	}{
		{"everything clear", nil, "", 0, "preflight passed"},
		{"a competing GPU process", nil, "4242, python3\n", 1, "preflight gpu-processes failed: competing GPU processes: 4242, python3"},
		{"too little disk", []string{"-min-free-gb", "100000000"}, "", 1, "preflight disk failed"},
		{"another host", []string{"-host", "spark-9"}, "", 1, "not spark-9, where this runs"},
		{"the service host, unchecked", []string{"-service-host"}, "", 1, "preflight service-released failed"},
		{"the service host, released", []string{"-service-host", "-service-released-cmd", "true"}, "", 0, "preflight passed"},
		{"the service host, still holding", []string{"-service-host", "-service-released-cmd", "echo model loaded; false"}, "", 1, "model loaded"},
	} {
		os.WriteFile(apps, []byte(tc.apps), 0o644)
		args := append(append(append([]string{}, base...), tc.flags...), "preflight", id)
		if code, out := ctl(args...); code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("%s: exit %d, %s; want %d and %q", tc.name, code, out, tc.code, tc.want)
		}
	}
}

// heartbeatFromTheHost runs the host agent's heartbeat for spark-3 with
// the stand-in nvidia-smi preflightOnTheHost put on PATH: the controller
// records the GPU's process count, and when nvidia-smi fails nothing is
// sent, so the host is not refreshed.
func heartbeatFromTheHost(t *testing.T, ctl func(...string) (int, string), c *spark.Controller) {
	t.Helper()
	spark3 := func() spark.Host {
		hosts, _, err := c.Snapshot(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hosts {
			if h.Name == "spark-3" {
				return h
			}
		}
		t.Fatal("no spark-3")
		return spark.Host{}
	}
	apps := filepath.Join(filepath.Dir(lookPath(t, "nvidia-smi")), "apps")
	os.WriteFile(apps, []byte("4242, python3\n"), 0o644)
	if code, out := ctl("-host", "spark-3", "heartbeat"); code != 0 || !strings.Contains(out, "heartbeat for spark-3: 1 GPU process(es)") {
		t.Errorf("heartbeat: exit %d, %s", code, out)
	}
	before := spark3()
	if before.GPUProcesses != 1 || before.LastHeartbeat.IsZero() {
		t.Errorf("after the heartbeat spark-3 is %+v", before)
	}
	os.WriteFile(lookPath(t, "nvidia-smi"), []byte("#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2; exit 9\n"), 0o755)
	if code, out := ctl("-host", "spark-3", "heartbeat"); code != 1 || !strings.Contains(out, "no heartbeat sent for spark-3") {
		t.Errorf("heartbeat without nvidia-smi: exit %d, %s", code, out)
	}
	if after := spark3(); !after.LastHeartbeat.Equal(before.LastHeartbeat) {
		t.Errorf("a failed count still refreshed spark-3: %v then %v", before.LastHeartbeat, after.LastHeartbeat)
	}
	if code, out := ctl("heartbeat"); code != 2 || !strings.Contains(out, "needs -host or SPARK_HOST") {
		t.Errorf("heartbeat without a host: exit %d, %s", code, out)
	}
}

func lookPath(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// sparkctl mcp is the agents' interface to the same queue (the Spark
// seed's "shared sparkctl/MCP interface"): over stdin and stdout it
// answers an MCP client's handshake, lists the lease tools, and a
// spark_request queues a development lease owned by the agent.
func TestMCPServesTheLeaseQueueOnStdio(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts := spark.DefaultOptions()
	opts.Service = &sparktest.Service{}
	c, err := spark.New(sparktest.NewStore(), opts)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := spark.NewHandler(c, token)
	srv := httptest.NewServer(h)
	defer srv.Close()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	orig := stdin
	stdin = inR
	defer func() { stdin = orig }()
	env := map[string]string{"SPARK_ADDR": srv.URL, "SPARK_TOKEN": token}
	done := make(chan int)
	var errOut bytes.Buffer
	go func() {
		done <- run(ctx, []string{"-owner", "alice", "mcp"}, func(k string) string { return env[k] }, outW, &errOut)
		outW.Close()
	}()
	lines := bufio.NewScanner(outR)
	lines.Buffer(nil, 1<<20)
	exchange := func(msg string) map[string]any {
		t.Helper()
		if _, err := io.WriteString(inW, msg+"\n"); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(msg, `"id"`) {
			return nil // a notification has no answer
		}
		if !lines.Scan() {
			t.Fatalf("no answer to %s: %v %s", msg, lines.Err(), errOut.String())
		}
		var m map[string]any
		if err := json.Unmarshal(lines.Bytes(), &m); err != nil || m["error"] != nil {
			t.Fatalf("answer to %s: %v %s", msg, err, lines.Text())
		}
		return m["result"].(map[string]any)
	}
	hello := exchange(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"agent","version":"1"}}}`)
	if info, _ := hello["serverInfo"].(map[string]any); info["name"] != "spark" || !strings.Contains(fmt.Sprint(hello["instructions"]), "Never reach a host without an active lease") {
		t.Errorf("initialize: %v", hello)
	}
	exchange(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	list := exchange(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if tools, _ := list["tools"].([]any); len(tools) != 7 {
		t.Errorf("tools/list: %v", list)
	}
	call := exchange(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"spark_request","arguments":{}}}`)
	lease, _ := call["structuredContent"].(map[string]any)
	if call["isError"] == true || lease["state"] != "queued" || lease["class"] != "development" {
		t.Fatalf("spark_request: %v", call)
	}
	if st, err := c.Status(ctx, lease["id"].(string)); err != nil || st.Request.Owner != "agent:alice" {
		t.Errorf("the controller records %+v (%v)", st.Request, err)
	}
	inW.Close() // the agent goes away: the server ends
	if code := <-done; code != 0 {
		t.Errorf("exit %d after the client closed: %s", code, errOut.String())
	}
}

// Without its API token every command would be refused by the controller;
// sparkctl says so itself, exits 2, and sends nothing (sparkctl mcp does
// not start a server whose every tool would fail).
func TestEveryCommandNeedsTheAPIToken(t *testing.T) {
	for _, args := range [][]string{{"hosts"}, {"mcp"}, {"status", "r-1"}} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), args, func(k string) string {
			return map[string]string{"SPARK_ADDR": "http://127.0.0.1:1"}[k]
		}, &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), "no API token: set SPARK_TOKEN") || out.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out.String(), errOut.String())
		}
	}
	empty := filepath.Join(t.TempDir(), "token")
	os.WriteFile(empty, []byte("\n"), 0o600)
	var errOut bytes.Buffer
	if code := run(context.Background(), []string{"-token-file", empty, "hosts"}, func(string) string { return "" }, io.Discard, &errOut); code != 2 || !strings.Contains(errOut.String(), "no API token") {
		t.Errorf("an empty token file: exit %d, %q", code, errOut.String())
	}
}

// hangs is a controller that accepts every request and never answers.
type hangs struct{}

func (hangs) RoundTrip(r *http.Request) (*http.Response, error) {
	<-r.Context().Done()
	return nil, r.Context().Err()
}

// "If the controller, host heartbeat, or fencing check is unavailable,
// automation fails closed": a controller that stopped answering fails
// every command but wait and mcp within its bound (a minute; five for the
// preflight, whose shell checks may take two each), not at the client's
// long-poll limit.
func TestACommandFailsClosedWhenTheControllerStopsAnswering(t *testing.T) {
	defer func(c *http.Client) { httpClient = c }(httpClient)
	httpClient = &http.Client{Transport: hangs{}}
	env := map[string]string{"SPARK_TOKEN": "t", "SPARK_HOST": "spark-2"}
	for _, tc := range []struct {
		args  []string
		bound time.Duration
	}{
		{[]string{"status", "r-1"}, callTimeout},
		{[]string{"hosts"}, callTimeout},
		{[]string{"preflight", "r-1"}, preflightTimeout},
	} {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			var out, errOut bytes.Buffer
			code := run(context.Background(), tc.args, func(k string) string { return env[k] }, &out, &errOut)
			if code != 1 || time.Since(start) != tc.bound {
				t.Errorf("%v: exit %d after %s, want 1 after %s: %s", tc.args, code, time.Since(start), tc.bound, errOut.String())
			}
		})
	}
}

// clear-cleanup is the operator's way out for a host whose agent never
// acknowledged its cleanup: the host is release-required after it, and a
// host's own credential cannot use it.
func TestClearCleanup_TheOperatorClearsAHostItsAgentNeverAcknowledged(t *testing.T) {
	ctx := context.Background()
	opts := spark.DefaultOptions()
	opts.Service = &sparktest.Service{}
	opts.Hosts[1].Agent = true
	c, err := spark.New(sparktest.NewStore(), opts)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := spark.NewAuthHandler(c, spark.Tokens{token: {Role: spark.RoleOperator, Name: "ops"}, spark3Token: {Role: spark.RoleHost, Name: "spark-2"}})
	srv := httptest.NewServer(h)
	defer srv.Close()
	r, err := c.Submit(ctx, spark.SubmitRequest{Class: spark.MergeCI, Host: "spark-2"})
	if err != nil {
		t.Fatal(err)
	}
	sparktest.Admit(ctx, c, "spark-1", "spark-2")
	st, _ := c.Status(ctx, r.ID)
	if err := c.Release(ctx, r.ID, st.Request.Token); err != nil {
		t.Fatal(err)
	}
	ctl := func(tok string, args ...string) (int, string) {
		var out, errOut bytes.Buffer
		env := map[string]string{"SPARK_ADDR": srv.URL, "SPARK_TOKEN": tok}
		code := run(ctx, args, func(k string) string { return env[k] }, &out, &errOut)
		return code, out.String() + errOut.String()
	}
	if code, out := ctl(spark3Token, "clear-cleanup", "spark-2", r.ID); code != 1 {
		t.Errorf("the host's own credential: exit %d %s, want 1 (refused by the controller)", code, out)
	}
	if code, out := ctl(token, "clear-cleanup", "spark-2"); code != 2 {
		t.Errorf("without the lease: exit %d %s, want 2", code, out)
	}
	if code, out := ctl(token, "clear-cleanup", "spark-2", r.ID); code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	if hs, _ := c.HostState(ctx, "spark-2"); hs.Mode != spark.ReleaseRequired {
		t.Errorf("after clear-cleanup the host is %s, want release-required", hs.Mode)
	}
}
