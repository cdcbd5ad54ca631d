package spark_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/sparktest"
)

// agentFleet is two managed hosts running the host agent (spark-1 with
// the resident service, driven through its agent), the operator's token
// and each host's. With serve, spark-1's agent passes every order.
func agentFleet(t *testing.T, serve bool) (c *spark.Controller, vault *spark.RunnerConfigs, svc *spark.AgentService, ops, h1, h2 *spark.APIClient) {
	t.Helper()
	opts := spark.DefaultOptions()
	for i := range opts.Hosts {
		opts.Hosts[i].Agent = true
	}
	svc = spark.NewAgentService("spark-1")
	opts.Service = svc
	c, err := spark.New(sparktest.NewStore(), opts)
	if err != nil {
		t.Fatal(err)
	}
	vault = spark.NewRunnerConfigs()
	h, err := spark.NewAuthHandler(c, spark.Tokens{
		"ops-token-0123456789": {Role: spark.RoleOperator, Name: "ops"},
		"host-1-token-0123456": {Role: spark.RoleHost, Name: "spark-1"},
		"host-2-token-0123456": {Role: spark.RoleHost, Name: "spark-2"},
	}, spark.WithRunnerConfigs(vault), spark.WithAgentService(svc))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	client := func(tok string) *spark.APIClient { cl, _ := spark.NewAPIClient(srv.URL, tok, nil); return cl }
	h1 = client("host-1-token-0123456")
	if serve {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		go func() {
			for ctx.Err() == nil {
				if o, ok, err := h1.NextOrder(ctx, "spark-1", time.Second); err == nil && ok {
					h1.ReportOrder(ctx, "spark-1", o.ID, "")
				}
			}
		}()
	}
	return c, vault, svc, client("ops-token-0123456789"), h1, client("host-2-token-0123456")
}

// A lease's runner config is handed to the leased host's agent over the
// API, again if its answer was lost, to no other host, and is gone once
// the lease ends; after the lease ends the host takes no
// work until its agent acknowledges the cleanup, and an acknowledgement
// with GPU processes left keeps it out of service.
func TestHostAgent_TheRunnerConfigOnceThenNoWorkUntilTheCleanupAck(t *testing.T) {
	ctx := context.Background()
	c, vault, _, ops, h1, h2 := agentFleet(t, true)
	st, err := ops.Request(ctx, spark.LeaseRequest{Class: spark.MergeCI, Host: "spark-2"})
	if err != nil {
		t.Fatal(err)
	}
	sparktest.Admit(ctx, c, "spark-1", "spark-2")
	id := st.Request.ID
	vault.Put(id, "spark-"+id, "ENCODED-JIT-CONFIG")
	if _, err := h1.TakeRunner(ctx, "spark-2", "agent-a"); !errors.Is(err, spark.ErrUnauthorized) {
		t.Errorf("spark-1's token took spark-2's runner: %v", err)
	}
	if _, err := h1.TakeRunner(ctx, "spark-1", "agent-a"); !errors.Is(err, spark.ErrNotFound) {
		t.Errorf("spark-1 holds no lease: %v", err)
	}
	a, err := h2.TakeRunner(ctx, "spark-2", "agent-a")
	if err != nil || a.Lease != id || a.JITConfig.Reveal() != "ENCODED-JIT-CONFIG" || a.Token == 0 || a.Runner != "spark-"+id {
		t.Fatalf("%+v %v", a, err)
	}
	if again, err := h2.TakeRunner(ctx, "spark-2", "agent-a"); err != nil || again.JITConfig != a.JITConfig {
		t.Errorf("a lost answer cannot be taken again: %+v %v", again, err)
	}
	if err := h2.Release(ctx, id, a.Token); err != nil {
		t.Fatal(err)
	}
	if dropped := vault.Sweep(ctx, c); len(dropped) != 1 || dropped[0] != id {
		t.Errorf("swept %v, want the ended lease's config", dropped)
	}
	st2, err := ops.Request(ctx, spark.LeaseRequest{Class: spark.MergeCI, Host: "spark-2"})
	if err != nil {
		t.Fatal(err)
	}
	sparktest.Admit(ctx, c, "spark-1", "spark-2")
	if st2, _ = ops.Status(ctx, st2.Request.ID); st2.Request.State != spark.Queued {
		t.Fatalf("a host not yet cleaned up took work: %+v", st2)
	}
	if err := h1.AckCleanup(ctx, "spark-2", id, 0); !errors.Is(err, spark.ErrUnauthorized) {
		t.Errorf("spark-1's token acknowledged spark-2's cleanup: %v", err)
	}
	if err := h2.AckCleanup(ctx, "spark-2", "another-lease", 0); !errors.Is(err, spark.ErrStaleToken) {
		t.Errorf("an acknowledgement for another lease: %v", err)
	}
	if err := h2.AckCleanup(ctx, "spark-2", id, 2); err != nil {
		t.Fatal(err)
	}
	sparktest.Admit(ctx, c, "spark-1")
	if err := c.Heartbeat(ctx, spark.HostReport{Host: "spark-2", GPUProcesses: 2}); err != nil {
		t.Fatal(err)
	}
	c.Reconcile(ctx)
	if st2, _ = ops.Status(ctx, st2.Request.ID); st2.Request.State != spark.Queued {
		t.Fatalf("a host with processes left took work: %+v", st2)
	}
	sparktest.Admit(ctx, c, "spark-1", "spark-2") // clean now
	if st2, _ = ops.Status(ctx, st2.Request.ID); st2.Request.State != spark.Active {
		t.Errorf("the clean host took no work: %+v", st2)
	}
}

// The resident service's steps are orders to the service host's agent:
// the controller waits for each report, and a failed step fails the
// lending; no other host's token can take or report them.
func TestAgentService_EachStepIsAnOrderTheServiceHostsAgentReports(t *testing.T) {
	ctx := context.Background()
	_, _, svc, _, h1, h2 := agentFleet(t, false)
	if _, _, err := h2.NextOrder(ctx, "spark-1", 0); !errors.Is(err, spark.ErrUnauthorized) {
		t.Errorf("spark-2 took spark-1's orders: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- svc.Drain(ctx) }()
	o, ok, err := h1.NextOrder(ctx, "spark-1", 10*time.Second)
	if err != nil || !ok || o.Step != "drain" {
		t.Fatalf("%+v %v %v", o, ok, err)
	}
	if err := h2.ReportOrder(ctx, "spark-1", o.ID, ""); !errors.Is(err, spark.ErrUnauthorized) {
		t.Errorf("spark-2 reported spark-1's step: %v", err)
	}
	if err := h1.ReportOrder(ctx, "spark-1", o.ID, ""); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("drain: %v", err)
	}
	go func() { done <- svc.VerifyReleased(ctx) }()
	o, _, _ = h1.NextOrder(ctx, "spark-1", 10*time.Second)
	if err := h1.ReportOrder(ctx, "spark-1", o.ID, "exit status 1: 3 GiB still held"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, spark.ErrServiceStep) {
		t.Errorf("a failed verify: %v, want ErrServiceStep", err)
	}
	if err := h1.ReportOrder(ctx, "spark-1", o.ID, ""); !errors.Is(err, spark.ErrStaleToken) {
		t.Errorf("a second report of one order: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := svc.Start(wctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("an agent that never reports: %v", err)
	}
}

// The receipt's digest is stored with the lease, by a host of the lease
// only, while it is active.
func TestReceipt_TheDigestIsStoredWithTheLeaseByItsHostOnly(t *testing.T) {
	ctx := context.Background()
	c, _, _, ops, h1, h2 := agentFleet(t, true)
	st, _ := ops.Request(ctx, spark.LeaseRequest{Class: spark.MergeCI, Host: "spark-2"})
	sparktest.Admit(ctx, c, "spark-1", "spark-2")
	if _, err := h1.UploadReceipt(ctx, st.Request.ID, []byte("passed")); !errors.Is(err, spark.ErrUnauthorized) {
		t.Errorf("another host recorded the receipt: %v", err)
	}
	if _, err := h2.UploadReceipt(ctx, st.Request.ID, nil); !errors.Is(err, spark.ErrInvalid) {
		t.Errorf("an empty receipt: %v", err)
	}
	receipt := []byte("suite=smoke passed=12\n")
	digest, err := h2.UploadReceipt(ctx, st.Request.ID, receipt)
	if sum := sha256.Sum256(receipt); err != nil || digest != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Fatalf("%q %v", digest, err)
	}
	if got, _ := ops.Status(ctx, st.Request.ID); spark.ReceiptDigest(got.Request) != digest {
		t.Errorf("stored %q, want %q", spark.ReceiptDigest(got.Request), digest)
	}
}

// An order no agent takes fails within the take window, not after the
// step's whole timeout: a service host whose agent is down holds
// admission for TakeWithin only.
func TestAgentService_AnOrderNoAgentTakesFailsWithinTheTakeWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc := spark.NewAgentService("spark-1")
		svc.TakeWithin = time.Minute
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		start := time.Now()
		err := svc.Drain(ctx)
		if !errors.Is(err, spark.ErrNoAgent) {
			t.Fatalf("an untaken drain: %v, want ErrNoAgent", err)
		}
		if waited := time.Since(start); waited != time.Minute {
			t.Errorf("the untaken order held the caller %s, want the take window (1m)", waited)
		}
	})
}

// An order is taken by one agent only: a second agent process polling
// for the same host gets nothing, so a step never runs twice at once; a
// taken order waits for its report past the take window.
func TestAgentService_AnOrderIsTakenByOneAgentOnly(t *testing.T) {
	ctx := context.Background()
	_, _, svc, _, h1, _ := agentFleet(t, false)
	svc.TakeWithin = 5 * time.Second
	done := make(chan error, 1)
	go func() { done <- svc.Stop(ctx) }()
	first, ok, err := h1.NextOrder(ctx, "spark-1", 10*time.Second)
	if err != nil || !ok || first.Step != "stop" {
		t.Fatalf("%+v %v %v", first, ok, err)
	}
	if second, ok, err := h1.NextOrder(ctx, "spark-1", 0); err != nil || ok {
		t.Fatalf("a second agent took the order being run: %+v %v %v", second, ok, err)
	}
	if err := h1.ReportOrder(ctx, "spark-1", first.ID, ""); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("stop: %v", err)
	}
}

// Only the agent process that took a lease's runner config first may take
// it again (its answer was lost): a second agent process for the same
// host gets ErrConflict, so it starts no second runner for the job.
func TestRunnerConfigs_OnlyTheAgentProcessThatTookItTakesItAgain(t *testing.T) {
	ctx := context.Background()
	c, vault, _, ops, _, h2 := agentFleet(t, true)
	grantedWithRunner(t, c, vault, ops)
	if _, err := h2.TakeRunner(ctx, "spark-2", "agent-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := h2.TakeRunner(ctx, "spark-2", "agent-a"); err != nil {
		t.Errorf("the same agent process taking it again: %v", err)
	}
	if a, err := h2.TakeRunner(ctx, "spark-2", "agent-b"); !errors.Is(err, spark.ErrConflict) || a.JITConfig != "" {
		t.Errorf("a second agent process took the config: %v %q", err, a.JITConfig.Reveal())
	}
}

// A lease's job gets a token of its own with the runner config: it reads
// its own lease, checks fencing and the state of the hosts the lease holds
// and records the lease's receipt, and nothing else; it stops working once
// the lease ends.
func TestJob_TheJobsTokenDoesItsPreflightAndReceiptAndNothingElse(t *testing.T) {
	ctx := context.Background()
	c, vault, _, ops, _, h2 := agentFleet(t, true)
	other, err := ops.Request(ctx, spark.LeaseRequest{Class: spark.Development, Host: "spark-1"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := ops.Request(ctx, spark.LeaseRequest{Class: spark.MergeCI, Host: "spark-2"})
	if err != nil {
		t.Fatal(err)
	}
	sparktest.Admit(ctx, c, "spark-1", "spark-2")
	id := st.Request.ID
	vault.Put(id, "spark-"+id, "JIT")
	a, err := h2.TakeRunner(ctx, "spark-2", "agent-a")
	if err != nil || a.JobToken == "" || a.JobToken.Reveal() == a.JITConfig.Reveal() {
		t.Fatalf("the assignment carries no job token of its own: %+v %v", a, err)
	}
	job := apiAs(t, ops, a.JobToken.Reveal())
	allowed := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("the job %s: %v, want it allowed", what, err)
		}
	}
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, spark.ErrUnauthorized) {
			t.Errorf("the job %s: %v, want ErrUnauthorized", what, err)
		}
	}
	own, err := job.Status(ctx, id)
	allowed("reading its lease", err)
	if own.Request.Token != a.Token {
		t.Errorf("the job sees token %d, want its lease's %d for its fencing check", own.Request.Token, a.Token)
	}
	allowed("checking fencing on its host", job.CheckToken(ctx, "spark-2", a.Token))
	_, err = job.HostState(ctx, "spark-2")
	allowed("reading its host's state", err)
	_, err = job.UploadReceipt(ctx, id, []byte(`{"passed":3}`))
	allowed("recording its receipt", err)

	_, err = job.Status(ctx, other.Request.ID)
	refused("reading another lease", err)
	_, err = job.HostState(ctx, "spark-1")
	refused("reading another host's state", err)
	refused("checking fencing on another host", job.CheckToken(ctx, "spark-1", a.Token))
	_, err = job.UploadReceipt(ctx, other.Request.ID, []byte("x"))
	refused("recording another lease's receipt", err)
	refused("reporting its host clean", job.Heartbeat(ctx, "spark-2", 0))
	refused("releasing its lease", job.Release(ctx, id, a.Token))
	refused("cancelling work", job.Cancel(ctx, other.Request.ID))
	refused("acknowledging its host's cleanup", job.AckCleanup(ctx, "spark-2", id, 0))
	_, err = job.TakeRunner(ctx, "spark-2", "agent-a")
	refused("taking the runner config", err)
	_, err = job.Request(ctx, spark.LeaseRequest{Class: spark.Development})
	refused("asking for a lease", err)
	_, err = job.Hosts(ctx)
	refused("listing the hosts", err)

	if err := h2.Release(ctx, id, a.Token); err != nil {
		t.Fatal(err)
	}
	vault.Sweep(ctx, c)
	if _, err := job.Status(ctx, id); err == nil || errors.Is(err, spark.ErrUnauthorized) {
		t.Errorf("after its lease ended the job token still authenticates: %v", err)
	}
}

// A pair's second host gets an assignment without a runner config, so its
// agent runs the preflight there too; a host the lease does not hold gets
// none.
func TestPair_TheSecondHostGetsAPreflightOnlyAssignment(t *testing.T) {
	ctx := context.Background()
	opts := spark.DefaultOptions()
	opts.PairTest = true
	for i := range opts.Hosts {
		opts.Hosts[i].Agent, opts.Hosts[i].Service = true, false
	}
	c, err := spark.New(sparktest.NewStore(), opts)
	if err != nil {
		t.Fatal(err)
	}
	vault := spark.NewRunnerConfigs()
	h, _ := spark.NewAuthHandler(c, spark.Tokens{
		"ops-token-0123456789": {Role: spark.RoleOperator, Name: "ops"},
		"host-1-token-0123456": {Role: spark.RoleHost, Name: "spark-1"},
		"host-2-token-0123456": {Role: spark.RoleHost, Name: "spark-2"},
	}, spark.WithRunnerConfigs(vault))
	srv := httptest.NewServer(h)
	defer srv.Close()
	as := func(tok string) *spark.APIClient { cl, _ := spark.NewAPIClient(srv.URL, tok, nil); return cl }
	ops, h1, h2 := as("ops-token-0123456789"), as("host-1-token-0123456"), as("host-2-token-0123456")
	st, err := ops.Request(ctx, spark.LeaseRequest{Class: spark.Benchmark, Topology: spark.Pair})
	if err != nil {
		t.Fatal(err)
	}
	sparktest.Admit(ctx, c, "spark-1", "spark-2")
	st, _ = ops.Status(ctx, st.Request.ID)
	if st.Request.State != spark.Active || len(st.Request.Hosts) != 2 {
		t.Fatalf("the pair: %+v", st.Request)
	}
	vault.Put(st.Request.ID, "spark-"+st.Request.ID, "JIT")
	first, second := map[string]*spark.APIClient{"spark-1": h1, "spark-2": h2}[st.Request.Hosts[0]], map[string]*spark.APIClient{"spark-1": h1, "spark-2": h2}[st.Request.Hosts[1]]
	if a, err := first.TakeRunner(ctx, st.Request.Hosts[0], "a"); err != nil || a.JITConfig == "" {
		t.Errorf("the first host: %+v %v, want the runner config", a, err)
	}
	a, err := second.TakeRunner(ctx, st.Request.Hosts[1], "b")
	if err != nil || a.Lease != st.Request.ID || a.Token != st.Request.Token || a.Topology != spark.Pair || a.JITConfig != "" || a.JobToken != "" {
		t.Errorf("the second host: %+v %v, want the lease and its token, no runner config", a, err)
	}
}

// apiAs is a client of cl's server with token.
func apiAs(t *testing.T, cl *spark.APIClient, token string) *spark.APIClient {
	t.Helper()
	c, err := spark.NewAPIClient(cl.Addr(), token, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A lease has one evidence receipt: the same one again is accepted, as an
// answer lost on the way; another is ErrConflict, so a later upload
// cannot replace the receipt the check names.
func TestReceipt_ALeaseHasOneReceipt(t *testing.T) {
	ctx := context.Background()
	c, _, _, ops, _, h2 := agentFleet(t, true)
	st, _ := ops.Request(ctx, spark.LeaseRequest{Class: spark.MergeCI, Host: "spark-2"})
	sparktest.Admit(ctx, c, "spark-1", "spark-2")
	first, err := h2.UploadReceipt(ctx, st.Request.ID, []byte(`{"passed":12}`))
	if err != nil {
		t.Fatal(err)
	}
	if again, err := h2.UploadReceipt(ctx, st.Request.ID, []byte(`{"passed":12}`)); err != nil || again != first {
		t.Errorf("the same receipt again: %q %v, want %q accepted", again, err, first)
	}
	if _, err := h2.UploadReceipt(ctx, st.Request.ID, []byte(`{"passed":13}`)); !errors.Is(err, spark.ErrConflict) {
		t.Errorf("another receipt: %v, want ErrConflict", err)
	}
	if got, _ := ops.Status(ctx, st.Request.ID); spark.ReceiptDigest(got.Request) != first {
		t.Errorf("the stored digest is %q, want the first receipt's %q", spark.ReceiptDigest(got.Request), first)
	}
}

// Two receipts uploaded at once cannot both win: exactly one is recorded,
// the one whose upload succeeded, and the other is ErrConflict.
func TestReceipt_TwoUploadsAtOnceCannotBothWin(t *testing.T) {
	ctx := context.Background()
	c, _, _, ops, _, _ := agentFleet(t, true)
	for i := range 400 {
		st, err := ops.Request(ctx, spark.LeaseRequest{Class: spark.MergeCI, Host: "spark-2"})
		if err != nil {
			t.Fatal(err)
		}
		sparktest.Admit(ctx, c, "spark-1", "spark-2")
		id := st.Request.ID
		digests, errs := make([]string, 2), make([]error, 2)
		var wg sync.WaitGroup
		for j := range 2 {
			wg.Go(func() { digests[j], errs[j] = c.RecordReceipt(ctx, id, []byte(fmt.Sprint("receipt ", i, j))) })
		}
		wg.Wait()
		won := 0
		for j := range 2 {
			if errs[j] == nil {
				won++
				if got, _ := c.Status(ctx, id); spark.ReceiptDigest(got.Request) != digests[j] {
					t.Fatalf("lease %d: upload %d succeeded but the stored receipt is another", i, j)
				}
			} else if !errors.Is(errs[j], spark.ErrConflict) {
				t.Fatalf("lease %d: %v", i, errs[j])
			}
		}
		if won != 1 {
			t.Fatalf("lease %d: %d uploads won, want exactly one", i, won)
		}
		got, _ := c.Status(ctx, id)
		c.Release(ctx, id, got.Request.Token)
		c.AckCleanup(ctx, "spark-2", id, 0)
	}
}

// grantedWithRunner is a merge-CI lease granted on spark-2 with its
// runner config minted.
func grantedWithRunner(t *testing.T, c *spark.Controller, vault *spark.RunnerConfigs, ops *spark.APIClient) string {
	t.Helper()
	ctx := context.Background()
	st, err := ops.Request(ctx, spark.LeaseRequest{Class: spark.MergeCI, Host: "spark-2"})
	if err != nil {
		t.Fatal(err)
	}
	sparktest.Admit(ctx, c, "spark-1", "spark-2")
	vault.Put(st.Request.ID, "spark-"+st.Request.ID, "JIT")
	return st.Request.ID
}

// urlRecorder is a transport that keeps every request's URL.
type urlRecorder struct{ urls []string }

func (u *urlRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	u.urls = append(u.urls, r.URL.String())
	return http.DefaultTransport.RoundTrip(r)
}

// The agent's ID lets a process take its lease's runner config again, so
// it never travels in a URL, which access logs keep: it is in the body,
// and a take without one is refused.
func TestTakeRunner_TheAgentsIDNeverInTheURL(t *testing.T) {
	ctx := context.Background()
	c, vault, _, ops, _, h2 := agentFleet(t, true)
	grantedWithRunner(t, c, vault, ops)
	rec := &urlRecorder{}
	cl, _ := spark.NewAPIClient(h2.Addr(), "host-2-token-0123456", &http.Client{Transport: rec})
	const id = "agent-id-4f1c9e"
	if _, err := cl.TakeRunner(ctx, "spark-2", id); err != nil {
		t.Fatal(err)
	}
	if _, err := h2.TakeRunner(ctx, "spark-2", "another-agent"); !errors.Is(err, spark.ErrConflict) {
		t.Errorf("the ID did not reach the controller: another agent took the config too (%v)", err)
	}
	for _, u := range rec.urls {
		if strings.Contains(u, id) {
			t.Errorf("the agent's ID is in the URL %s", u)
		}
	}
	if _, err := cl.TakeRunner(ctx, "spark-2", ""); !errors.Is(err, spark.ErrInvalid) {
		t.Errorf("a take with no agent ID: %v, want ErrInvalid", err)
	}
}
