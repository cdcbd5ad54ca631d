package sparktest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gpugate/gpugate/internal/faketime"
	"github.com/gpugate/gpugate/spark"
)

// RandomSequence drives one random event sequence (submits of every class
// and topology, heartbeats lost and regained, GPU processes, releases,
// cancels, expiries, service stop and restore failures, and controller
// restarts on the store open returns) and checks the scheduler's
// invariants after every step: a host never has two active leases;
// fencing tokens strictly increase; a pair never runs on one host; and a
// pair request is eventually admitted once both hosts are healthy and no
// other work arrives, and so, then, is every other queued request: none
// waits for ever. Run it inside testing/synctest: it sleeps through
// hours of fake time.
func RandomSequence(t testing.TB, seed uint64, open func() spark.Store) {
	t.Helper()
	ctx := context.Background()
	r := rand.New(rand.NewPCG(seed, 42))
	svc := &Service{}
	opts := spark.DefaultOptions()
	opts.Service, opts.PairTest = svc, true
	var lastGrantToken int64
	var c *spark.Controller
	opts.OnGrant = func(g spark.Request) {
		if g.Token <= lastGrantToken {
			t.Fatalf("seed %d: token %d not above %d", seed, g.Token, lastGrantToken)
		}
		lastGrantToken = g.Token
		// Nothing is admitted to an offline, unmanaged or (for CI)
		// draining host.
		hosts, _, err := c.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hosts {
			if !slices.Contains(g.Hosts, h.Name) {
				continue
			}
			if !h.Managed || time.Since(h.LastHeartbeat) > 90*time.Second {
				t.Fatalf("seed %d: %s granted on offline or unmanaged host %s", seed, g.ID, h.Name)
			}
			if h.Draining && g.Class != spark.Development {
				t.Fatalf("seed %d: %s (%s) granted on draining host %s", seed, g.ID, g.Class, h.Name)
			}
		}
	}
	store := open()
	var err error
	c, err = spark.New(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	alive := map[string]bool{"spark-1": true, "spark-2": true}
	procs := map[string]int{}
	var ids []string
	classes := []spark.Class{spark.Development, spark.ServiceStart, spark.ManualPR, spark.MergeCI, spark.Benchmark, spark.BackgroundCI}
	for step := range 120 {
		switch r.IntN(10) {
		case 0, 1, 2:
			s := spark.SubmitRequest{Class: classes[r.IntN(len(classes))], Duration: time.Duration(1+r.IntN(90)) * time.Minute}
			if r.IntN(4) == 0 && s.Class != spark.ServiceStart {
				s.Topology = spark.Pair
			}
			if r.IntN(5) == 0 && s.Topology != spark.Pair {
				s.Host = []string{"spark-1", "spark-2"}[r.IntN(2)]
			}
			if s.Class == spark.ManualPR {
				s.PR = &spark.PRRef{Repo: "o/r", Number: 1 + r.IntN(3), SHA: fmt.Sprint("sha", step)}
			}
			if req, err := c.Submit(ctx, s); err == nil {
				ids = append(ids, req.ID)
			}
		case 3:
			if len(ids) > 0 {
				id := ids[r.IntN(len(ids))]
				st, err := c.Status(ctx, id)
				if err == nil && st.Request.State == spark.Active {
					c.Release(ctx, id, st.Request.Token)
				} else {
					c.Cancel(ctx, id)
				}
			}
		case 4:
			h := []string{"spark-1", "spark-2"}[r.IntN(2)]
			alive[h] = !alive[h]
		case 5:
			procs[[]string{"spark-1", "spark-2"}[r.IntN(2)]] = r.IntN(2) * r.IntN(4)
		case 6:
			svc.mu.Lock()
			svc.FailHealth, svc.FailStop = r.IntN(3), r.IntN(6) == 0
			svc.mu.Unlock()
		case 7:
			// Restart the controller on the same durable state.
			if s2 := open(); s2 != store {
				store.Close()
				store = s2
			}
			if c, err = spark.New(store, opts); err != nil {
				t.Fatal(err)
			}
		}
		for h, ok := range alive {
			if ok {
				c.Heartbeat(ctx, spark.HostReport{Host: h, GPUProcesses: procs[h]})
			}
		}
		if err := c.Reconcile(ctx); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		CheckInvariants(t, c)
		faketime.Advance(time.Duration(r.IntN(20)) * time.Minute)
	}
	svc.mu.Lock()
	svc.FailHealth, svc.FailStop = 0, false
	svc.mu.Unlock()
	hosts, _, _ := c.Snapshot(ctx)
	if slices.ContainsFunc(hosts, func(h spark.Host) bool { return h.Mode == spark.OutOfService }) {
		store.Close() // a host out of service waits for a human: nothing more to prove
		return
	}
	// With the hosts healthy and nothing new arriving, the queue drains:
	// every request is admitted (and its lease expires) or ends; none
	// waits for ever.
	heal := func(done func() bool) bool {
		for range 400 {
			for _, h := range []string{"spark-1", "spark-2"} {
				c.Heartbeat(ctx, spark.HostReport{Host: h})
			}
			if err := c.Reconcile(ctx); err != nil {
				t.Fatal(err)
			}
			if done() {
				return true
			}
			faketime.Advance(30 * time.Minute)
		}
		return false
	}
	queued := func() []string {
		_, reqs, err := c.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var q []string
		for _, r := range reqs {
			if r.State == spark.Queued {
				q = append(q, fmt.Sprintf("%s (%s, host %q)", r.ID, r.Class, r.Host))
			}
		}
		return q
	}
	if !heal(func() bool { return len(queued()) == 0 }) {
		t.Fatalf("seed %d: with both hosts healthy the queue never drained: %v", seed, queued())
	}
	// Then a pair is admitted.
	p, err := c.Submit(ctx, spark.SubmitRequest{Class: spark.Benchmark, Topology: spark.Pair, Duration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if !heal(func() bool { st, _ := c.Status(ctx, p.ID); return st.Request.State != spark.Queued }) {
		st, _ := c.Status(ctx, p.ID)
		t.Fatalf("seed %d: a pair was never admitted with both hosts healthy: %+v", seed, st)
	}
	store.Close()
}

// CheckInvariants fails t if a host has two active leases, a pair runs on
// one host, an active lease has no token, or a host is marked leased to
// nothing active.
func CheckInvariants(t testing.TB, c *spark.Controller) {
	t.Helper()
	hosts, reqs, err := c.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	owner := map[string]string{}
	for _, r := range reqs {
		if r.State != spark.Active || r.Class == spark.ServiceStart {
			continue
		}
		if r.Topology == spark.Pair && (len(r.Hosts) != 2 || r.Hosts[0] == r.Hosts[1]) {
			t.Fatalf("pair %s on %v", r.ID, r.Hosts)
		}
		if r.Token <= 0 {
			t.Fatalf("active lease %s without a token", r.ID)
		}
		for _, h := range r.Hosts {
			if o := owner[h]; o != "" {
				t.Fatalf("host %s has two active leases (%s, %s)", h, o, r.ID)
			}
			owner[h] = r.ID
		}
	}
	for _, h := range hosts {
		if h.Mode == spark.Leased && owner[h.Name] == "" {
			t.Fatalf("host %s is leased to nothing active", h.Name)
		}
		if owner[h.Name] != "" && h.Mode != spark.Leased {
			t.Fatalf("host %s runs %s but is %s", h.Name, owner[h.Name], h.Mode)
		}
	}
}
