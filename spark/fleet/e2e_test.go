//go:build unix

package fleet_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpugate/gpugate/internal/githubtest"
	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/agent"
	"github.com/gpugate/gpugate/spark/fleet"
	"github.com/gpugate/gpugate/spark/sparkgh"
	"github.com/gpugate/gpugate/spark/sqlitestore"
)

const (
	e2eSecret = "end-to-end-webhook-secret"
	e2eRepoID = 42
)

// fakeGitHub serves the GitHub calls the fleet makes and records the
// checks and the one-job runners it minted.
type fakeGitHub struct {
	mu     sync.Mutex
	checks map[int64][]map[string]any // each check's updates, in order
	next   int64
	jit    int
	// dispatched counts workflow dispatches.
	dispatched int
	prs        map[int]map[string]any
}

func (g *fakeGitHub) handler(t *testing.T) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /repos/o/butter/collaborators/{user}/permission", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"permission":"write","role_name":"maintain"}`)
	})
	record := func(id int64, r *http.Request) {
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		g.mu.Lock()
		g.checks[id] = append(g.checks[id], body)
		g.mu.Unlock()
	}
	mux.HandleFunc("POST /repos/o/butter/check-runs", func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		g.next++
		id := g.next
		g.mu.Unlock()
		record(id, r)
		fmt.Fprintf(w, `{"id":%d}`, id)
	})
	mux.HandleFunc("PATCH /repos/o/butter/check-runs/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
		record(id, r)
		fmt.Fprintf(w, `{"id":%d}`, id)
	})
	mux.HandleFunc("GET /repos/o/butter", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"default_branch":"main"}`) })
	mux.HandleFunc("GET /repos/o/butter/pulls/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		g.mu.Lock()
		pr := g.prs[n]
		g.mu.Unlock()
		json.NewEncoder(w).Encode(pr)
	})
	mux.HandleFunc("POST /repos/o/butter/actions/workflows/spark-test.yml/dispatches", func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		g.dispatched++
		g.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /orgs/acme/actions/runners/generate-jitconfig", func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Name string }
		json.NewDecoder(r.Body).Decode(&body)
		g.mu.Lock()
		g.jit++
		g.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"encoded_jit_config":"JIT-FOR-%s"}`, body.Name)
	})
	mux.HandleFunc("GET /orgs/acme/actions/runners", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"total_count":0,"runners":[]}`)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("unexpected GitHub call %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
	})
	return mux
}

// last is check id's last title and conclusion.
func (g *fakeGitHub) last(id int64) (title, conclusion string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	h := g.checks[id]
	if len(h) == 0 {
		return "", ""
	}
	out, _ := h[len(h)-1]["output"].(map[string]any)
	title, _ = out["title"].(string)
	conclusion, _ = h[len(h)-1]["conclusion"].(string)
	return title, conclusion
}

// titles are the titles check id showed, in order, each once.
func (g *fakeGitHub) titles(id int64) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, u := range g.checks[id] {
		output, _ := u["output"].(map[string]any)
		if title, _ := output["title"].(string); len(out) == 0 || out[len(out)-1] != title {
			out = append(out, title)
		}
	}
	return out
}

// summary is check id's last summary.
func (g *fakeGitHub) summary(id int64) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	h := g.checks[id]
	if len(h) == 0 {
		return ""
	}
	out, _ := h[len(h)-1]["output"].(map[string]any)
	s, _ := out["summary"].(string)
	return s
}

// host is one managed host of the test fleet: its agent's events, the
// fake nvidia-smi's process list, and the fake runner's pipes.
type host struct {
	name   string
	events chan agent.Event
	procs  string // the file the fake nvidia-smi prints
	seen   string // FIFO the fake runner writes its JIT config into
	gate   string // FIFO the fake runner waits on: the job ends when it is written
	past   []agent.Event
}

// wait returns the agent's next event of kind for lease (any lease: ""),
// keeping the events it reads past for a later wait.
func (h *host) wait(t *testing.T, ctx context.Context, kind, lease string) agent.Event {
	t.Helper()
	match := func(e agent.Event) bool { return e.Kind == kind && (lease == "" || e.Lease == lease) }
	for i, e := range h.past {
		if match(e) {
			h.past = append(h.past[:i], h.past[i+1:]...)
			return e
		}
	}
	for {
		select {
		case e := <-h.events:
			if match(e) {
				return e
			}
			if e.Kind != "heartbeat" {
				h.past = append(h.past, e)
			}
		case <-ctx.Done():
			t.Fatalf("%s: no %s event for %q: %v", h.name, kind, lease, ctx.Err())
		}
	}
}

// runJob plays the job the runner on h picked up: it reads the JIT config
// and the API token the runner was started with.
func (h *host) runJob(t *testing.T) (jitConfig, token string) {
	t.Helper()
	f, err := os.Open(h.seen) // blocks until the runner writes
	if err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(f)
	jit, _ := rd.ReadString('\n')
	tok, _ := rd.ReadString('\n')
	f.Close()
	return strings.TrimSpace(jit), strings.TrimSpace(tok)
}

func (h *host) endJob(t *testing.T) {
	t.Helper()
	if err := os.WriteFile(h.gate, []byte("done\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// The whole fleet on loopback: the controller's daemon with the GitHub
// integration against a fake GitHub, and two host agents that start a
// fake Actions runner as their child, with fake nvidia-smi. A label is
// queued, granted, run by the runner the agent starts with exactly that
// lease's config, passes with its evidence receipt, is released and
// cleaned up before the host takes work again; a pair runs on both hosts;
// a host that reports GPU processes no lease holds is never admitted to;
// and a host's token cannot act for the other host.
func TestEndToEnd_LabelToPassedThroughTheHostAgents(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	gh := &fakeGitHub{checks: map[int64][]map[string]any{}, prs: map[int]map[string]any{}}
	client, _ := githubtest.New(t, gh.handler(t))

	f, err := fleet.Load([]byte(`hosts:
  - {name: spark-1, managed: true, service: true, agent: true}
  - {name: spark-2, managed: true, agent: true}
preferred_host: spark-2
pair_test: true
heartbeat_timeout: 30s
lend_min_priority: 90
`))
	if err != nil {
		t.Fatal(err)
	}
	store, err := sqlitestore.Create(filepath.Join(dir, "spark.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	cfg := f.GitHub
	cfg.WebhookSecret = e2eSecret
	in, err := sparkgh.New(cfg, nil, &sparkgh.GitHubAPI{Client: client, Org: "acme"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	d := &fleet.Daemon{GitHub: in, Runners: spark.NewRunnerConfigs(), StateDir: dir, Every: 20 * time.Millisecond, Log: slog.New(slog.DiscardHandler)}
	in.JITConfigs = d.HandOff(map[string]bool{"spark-1": true, "spark-2": true})
	f.Options.OnGrant = in.OnGrant
	if d.Controller, err = spark.New(store, f.Options); err != nil {
		t.Fatal(err)
	}
	tokens := spark.Tokens{"operator-token-0123456789": {Role: spark.RoleOperator, Name: "ops"}}
	for _, h := range []string{"spark-1", "spark-2"} {
		tokens[h+"-host-token-0123456"] = spark.Credential{Role: spark.RoleHost, Name: h}
	}
	svc := f.Options.Service.(*spark.AgentService)
	if d.API, err = spark.NewAuthHandler(d.Controller, tokens, spark.WithRunnerConfigs(d.Runners), spark.WithAgentService(svc)); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "http://" + ln.Addr().String()
	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx, ln) }()

	// The two hosts: a fake nvidia-smi each, a fake runner, an agent.
	hosts := map[string]*host{}
	var agents sync.WaitGroup
	for _, name := range []string{"spark-1", "spark-2"} {
		hd := filepath.Join(dir, name)
		os.MkdirAll(hd, 0o755)
		h := &host{name: name, events: make(chan agent.Event, 1024), procs: filepath.Join(hd, "procs"), seen: filepath.Join(hd, "seen"), gate: filepath.Join(hd, "gate")}
		for _, fifo := range []string{h.seen, h.gate} {
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		os.WriteFile(h.procs, nil, 0o600)
		smi := filepath.Join(hd, "nvidia-smi")
		os.WriteFile(smi, []byte("#!/bin/sh\ncat '"+h.procs+"'\n"), 0o755)
		runner := filepath.Join(hd, "run.sh")
		os.WriteFile(runner, []byte("#!/bin/sh\nprintf '%s\\n%s\\n' \"$ACTIONS_RUNNER_INPUT_JITCONFIG\" \"$SPARK_TOKEN\" > \"$FAKE_SEEN\"\nread done < \"$FAKE_GATE\"\n"), 0o755)
		cl, _ := spark.NewAPIClient(addr, name+"-host-token-0123456", nil)
		acfg := agent.Config{Client: cl, Host: name, GPU: spark.NvidiaSMIApps{Path: smi}, Disk: bigDisk{}, WorkRoot: filepath.Join(hd, "work"),
			RunnerCmd: runner, RunnerEnv: []string{"FAKE_SEEN=" + h.seen, "FAKE_GATE=" + h.gate}, Every: 20 * time.Millisecond,
			Interconnect: "true", // a pair's link check
			OnEvent: func(e agent.Event) {
				if e.Kind != "heartbeat" {
					h.events <- e // never lost
					return
				}
				select {
				case h.events <- e:
				default: // heartbeats the test is not waiting for may go
				}
			}}
		if name == "spark-1" {
			acfg.Service = &fleet.ShellService{DrainCmd: "true", StopCmd: "true", VerifyReleasedCmd: "true", StartCmd: "true", HealthyCmd: "true"}
			acfg.ServiceReleased = "true" // the preflight's check there, as a pair's second host too
		}
		hosts[name] = h
		agents.Go(func() {
			if err := agent.Run(ctx, acfg); err != nil {
				t.Errorf("%s agent: %v", name, err)
			}
		})
	}
	ops, _ := spark.NewAPIClient(addr, "operator-token-0123456789", nil)
	host2, _ := spark.NewAPIClient(addr, "spark-2-host-token-0123456", nil)

	wh := &webhook{ctx: ctx, addr: addr, gh: gh}
	deliver, label := func(event string, payload map[string]any) { wh.deliver(t, event, payload) }, func(n int, sha, name string) { wh.label(t, n, sha, name) }
	// runs plays one labelled job to its passed check and the hosts'
	// cleanup; the runner starts on one of on (a pair's on its first
	// host), and every host of the lease acknowledges its cleanup. It
	// returns the lease and the host that ran the job.
	runs := func(on ...*host) (string, *host) {
		t.Helper()
		var started agent.Event
		var ran *host
		first, last := on[0], on[len(on)-1] // one host, or a pair's two
		for ran == nil {
			var e agent.Event
			h := first
			select {
			case e = <-first.events:
			case e = <-last.events:
				h = last
			case <-ctx.Done():
				hs, live, _ := d.Controller.Snapshot(context.Background())
				t.Fatalf("no runner started on %d hosts: %v\nhosts %+v\nlive %+v", len(on), ctx.Err(), hs, live)
			}
			switch e.Kind {
			case "runner-started":
				started, ran = e, h
			case "preflight-failed", "runner-config":
				t.Fatalf("%s: %s: %v", h.name, e.Kind, e.Err)
			case "heartbeat":
			default:
				h.past = append(h.past, e)
			}
		}
		if started.Err != nil {
			t.Fatalf("the runner on %s did not start: %v", ran.name, started.Err)
		}
		lease := started.Lease
		runner := sparkgh.RunnerName(lease)
		got, jobToken := ran.runJob(t)
		if got != "JIT-FOR-"+runner {
			t.Fatalf("the runner on %s was started with %q, want that lease's config", ran.name, got)
		}
		deliver("workflow_job", map[string]any{"action": "in_progress", "workflow_job": map[string]any{"runner_name": runner}})
		// The job's sparkctl preflight and receipt, with the token its
		// runner was given: the job's own, never the host's.
		job, _ := spark.NewAPIClient(addr, jobToken, nil)
		if err := agent.Preflight(ctx, job, lease, agent.PreflightOptions{Host: ran.name, WorkDir: dir, GPU: spark.NvidiaSMIApps{Path: filepath.Join(dir, ran.name, "nvidia-smi")},
			Disk: bigDisk{}, Interconnect: "true", ServiceReleased: "true"}); err != nil {
			ev, _ := d.Controller.Events(ctx, 30)
			t.Fatalf("the job's own preflight on %s: %v\n%+v", ran.name, err, ev)
		}
		if _, err := job.UploadReceipt(ctx, lease, []byte("suite=smoke passed=12 failed=0\n")); err != nil {
			ev, _ := d.Controller.Events(ctx, 30)
			t.Fatalf("the job's receipt on %s: %v\n%+v\npast %+v %+v", ran.name, err, ev, first.past, last.past)
		}
		if err := job.Heartbeat(ctx, ran.name, 0); !errors.Is(err, spark.ErrUnauthorized) {
			t.Errorf("the job's token reported its host clean: %v", err)
		}
		ran.endJob(t)
		deliver("workflow_job", map[string]any{"action": "completed", "workflow_job": map[string]any{"runner_name": runner, "conclusion": "success",
			"html_url": "https://github.com/o/butter/actions/runs/1/job/2"}})
		for _, h := range on {
			if e := h.wait(t, ctx, "cleaned", lease); e.Err != nil {
				t.Fatalf("%s: cleanup: %v", h.name, e.Err)
			}
		}
		return lease, ran
	}

	// 1. A label is queued, granted on the preferred host, run there by
	// the runner its agent starts, passes with its receipt, and the host
	// is cleaned up.
	const sha1, sha2, sha3 = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222", "3333333333333333333333333333333333333333"
	label(7, sha1, "spark-test")
	first, ran := runs(hosts["spark-2"])
	if ran.name != "spark-2" {
		t.Errorf("the single ran on %s, not the preferred host", ran.name)
	}
	// Checks are written after admission rounds, not with the lease's
	// end: the check may still be on its way.
	title, conclusion := gh.last(1)
	for conclusion == "" && ctx.Err() == nil {
		heartbeats(t, ctx, ran, 1)
		title, conclusion = gh.last(1)
	}
	if conclusion != "success" || title != "Spark test passed — evidence receipt recorded" {
		t.Errorf("the check: %q %q", title, conclusion)
	}
	if st, _ := ops.Status(ctx, first); st.Request.State != spark.Released || spark.ReceiptDigest(st.Request) == "" {
		t.Errorf("the lease: %+v", st.Request)
	}

	// 2. A host token cannot act for the other host.
	if _, err := host2.TakeRunner(ctx, "spark-1", "probe"); !errors.Is(err, spark.ErrUnauthorized) {
		t.Errorf("spark-2's token took spark-1's runner config: %v", err)
	}
	if err := host2.AckCleanup(ctx, "spark-1", first, 0); !errors.Is(err, spark.ErrUnauthorized) {
		t.Errorf("spark-2's token acknowledged spark-1's cleanup: %v", err)
	}
	if err := host2.Heartbeat(ctx, "spark-1", 0); !errors.Is(err, spark.ErrUnauthorized) {
		t.Errorf("spark-2's token reported spark-1 clean: %v", err)
	}

	// 3. A pair: one job, on its first host, with both hosts' cleanup.
	label(8, sha2, "spark-pair-test")
	pair, _ := runs(hosts["spark-2"], hosts["spark-1"])
	if st, _ := ops.Status(ctx, pair); len(st.Request.Hosts) != 2 {
		t.Errorf("the pair ran on %v", st.Request.Hosts)
	}

	// 4. A host that reports GPU processes no lease holds is never
	// admitted to: spark-2 does, so the next label waits for it (a
	// single pull-request lease does not borrow the service host).
	os.WriteFile(hosts["spark-2"].procs, []byte("4242, python3\n"), 0o600)
	heartbeats(t, ctx, hosts["spark-2"], 2) // the second read the new list
	if m := mode(t, ctx, ops, "spark-2"); m != string(spark.ReleaseRequired) {
		t.Fatalf("spark-2 reported a process no lease holds and is %s", m)
	}
	label(9, sha3, "spark-test")
	heartbeats(t, ctx, hosts["spark-2"], 10) // ten agent rounds: the daemon reconciled meanwhile
	_, live, _ := d.Controller.Snapshot(ctx)
	if len(live) != 1 || live[0].State != spark.Queued {
		ev, _ := d.Controller.Events(ctx, 30)
		t.Fatalf("with spark-2 unclean the label should wait: %+v\n%+v", live, ev)
	}
	os.WriteFile(hosts["spark-2"].procs, nil, 0o600) // cleaned by hand: admitted again
	runs(hosts["spark-2"])

	// 5. A development lease: no runner is started for it; when the
	// developer releases it, the host is cleaned up before it takes work.
	dev, err := ops.Request(ctx, spark.LeaseRequest{Class: spark.Development, Host: "spark-2", Owner: "dev"})
	if err != nil {
		t.Fatal(err)
	}
	if dev, err = ops.Wait(ctx, dev.Request.ID); err != nil || dev.Request.State != spark.Active {
		t.Fatalf("the development lease: %+v %v", dev.Request, err)
	}
	heartbeats(t, ctx, hosts["spark-2"], 3) // its agent saw the lease, and started nothing
	if err := ops.Release(ctx, dev.Request.ID, dev.Request.Token); err != nil {
		t.Fatal(err)
	}
	if e := hosts["spark-2"].wait(t, ctx, "cleaned", dev.Request.ID); e.Err != nil {
		t.Fatalf("cleanup after the development lease: %v", e.Err)
	}
	if m := mode(t, ctx, ops, "spark-2"); m != string(spark.Idle) {
		t.Errorf("after the acknowledged cleanup spark-2 is %s, want idle", m)
	}

	cancel()
	agents.Wait()
	if err := <-served; err != nil {
		t.Errorf("serve: %v", err)
	}
}

// webhook delivers signed GitHub webhooks to a daemon at addr, keeping
// the fake GitHub's view of each pull request it labels.
type webhook struct {
	ctx        context.Context
	addr       string
	gh         *fakeGitHub
	deliveries int
}

func (wh *webhook) deliver(t *testing.T, event string, payload map[string]any) {
	t.Helper()
	wh.deliveries++
	payload["repository"] = map[string]any{"full_name": "o/butter", "id": e2eRepoID}
	body, _ := json.Marshal(payload)
	m := hmac.New(sha256.New, []byte(e2eSecret))
	m.Write(body)
	req, _ := http.NewRequestWithContext(wh.ctx, "POST", wh.addr+"/github/webhook", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", strconv.Itoa(wh.deliveries))
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("%s delivery: %v %v", event, resp, err)
	}
	resp.Body.Close()
}

// label labels pull request n at sha with name, by a maintainer.
func (wh *webhook) label(t *testing.T, n int, sha, name string) {
	t.Helper()
	pr := map[string]any{"number": n, "state": "open", "labels": []map[string]any{{"name": name}},
		"head": map[string]any{"sha": sha, "repo": map[string]any{"id": e2eRepoID}}, "base": map[string]any{"repo": map[string]any{"id": e2eRepoID}}}
	wh.gh.mu.Lock()
	wh.gh.prs[n] = pr
	wh.gh.mu.Unlock()
	wh.deliver(t, "pull_request", map[string]any{"action": "labeled", "label": map[string]any{"name": name}, "sender": map[string]any{"login": "maint"}, "pull_request": pr})
}

// heartbeats waits for n more successful heartbeats of h's agent, after
// those already buffered.
func heartbeats(t *testing.T, ctx context.Context, h *host, n int) {
	t.Helper()
	for drained := false; !drained; {
		select {
		case e := <-h.events:
			if e.Kind != "heartbeat" {
				h.past = append(h.past, e)
			}
		default:
			drained = true
		}
	}
	for range n {
		if e := h.wait(t, ctx, "heartbeat", ""); e.Err != nil {
			t.Fatalf("%s: heartbeat: %v", h.name, e.Err)
		}
	}
}

// mode is host's mode as the controller reports it.
func mode(t *testing.T, ctx context.Context, cl *spark.APIClient, host string) string {
	t.Helper()
	hosts, err := cl.Hosts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hosts {
		if h["name"] == host {
			m, _ := h["mode"].(string)
			return m
		}
	}
	t.Fatalf("no host %s in %v", host, hosts)
	return ""
}

type bigDisk struct{}

func (bigDisk) Free(string) (uint64, error) { return 1 << 40, nil }
