package spark_test

// The head-of-queue plan under any settings: custom priorities, lending
// priorities above development, overdue pairs.

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/sparktest"
)

// activeByHost is every active request on each host.
func activeByHost(t *testing.T, c *spark.Controller) map[string][]string {
	t.Helper()
	_, reqs, err := c.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, r := range reqs {
		if r.State == spark.Active {
			for _, h := range r.Hosts {
				out[h] = append(out[h], r.ID+" ("+string(r.Class)+")")
			}
		}
	}
	return out
}

// A host never has two active leases, whatever the class priorities: with
// development below CI (Options.Priorities is the library's to set), the
// pass reads CI first from the queue, but treats development as ahead of
// it when deciding whether a host is claimed, so both are granted the
// same host.
func TestAHostNeverHasTwoActiveLeases_WithCustomPriorities(t *testing.T) {
	store := sparktest.NewStore()
	opts := spark.Options{
		Hosts:         []spark.HostConfig{{Name: "h0", Managed: true}, {Name: "h1", Managed: true}},
		PreferredHost: "h1",
		Priorities: map[spark.Class]int{spark.Development: 10, spark.ServiceStart: 90, spark.ManualPR: 80,
			spark.MergeCI: 70, spark.Benchmark: 50, spark.BackgroundCI: 20},
	}
	c, err := spark.New(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	beat := func() {
		for _, h := range []string{"h0", "h1"} {
			if err := c.Heartbeat(ctx, spark.HostReport{Host: h}); err != nil {
				t.Fatal(err)
			}
		}
	}
	beat()
	// Two development requests for the preferred host: the first takes
	// it (clearing its draining), the second waits for it.
	dev1, err := c.Submit(ctx, spark.SubmitRequest{Class: spark.Development})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Submit(ctx, spark.SubmitRequest{Class: spark.Development}); err != nil {
		t.Fatal(err)
	}
	if err := c.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := c.Status(ctx, dev1.ID)
	if err != nil || st.Request.State != spark.Active {
		t.Fatalf("dev1: %+v %v", st, err)
	}
	if err := c.Release(ctx, dev1.ID, st.Request.Token); err != nil {
		t.Fatal(err)
	}
	// CI arrives; one pass grants.
	if _, err := c.Submit(ctx, spark.SubmitRequest{Class: spark.ManualPR}); err != nil {
		t.Fatal(err)
	}
	beat()
	if err := c.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	for h, leases := range activeByHost(t, c) {
		if len(leases) > 1 {
			t.Errorf("host %s has %d active leases: %v", h, len(leases), leases)
		}
	}
}

// The head-of-queue plan decides what the whole-queue plan would (the
// engineer's equivalence test), here also across the settings it leaves
// at their defaults: class priorities in any order, and LendMinPriority
// from the fleet file's lend_min_priority (which may be above
// development's priority). And one plan never grants a host twice.
func TestPlan_TheHeadOfTheQueueDecidesWhatTheWholeQueueWould(t *testing.T) {
	modes := []spark.Mode{spark.Idle, spark.Idle, spark.Idle, spark.Leased, spark.ReleaseRequired, spark.ServiceRunning,
		spark.ServiceRunning, spark.Lending, spark.Restoring, spark.OutOfService}
	classes := []spark.Class{spark.ManualPR, spark.MergeCI, spark.Benchmark, spark.BackgroundCI, spark.Development, spark.ServiceStart}
	lendMin := []int{0, 85, 95, 101, 150}
	failures, grantDiffs, defaultGrantDiffs, defaultDiffs, doubles := 0, 0, 0, 0, 0
	for seed := range 2000 {
		rng := rand.New(rand.NewPCG(uint64(seed), 13))
		prio := map[spark.Class]int{}
		for i, p := range rng.Perm(len(classes)) {
			prio[classes[i]] = 10 * (p + 1)
		}
		if rng.IntN(2) == 0 {
			prio = spark.DefaultPriorities()
		}
		store := sparktest.NewStore()
		opts := spark.Options{PairTest: true, Service: &sparktest.Service{}, Priorities: prio, LendMinPriority: lendMin[rng.IntN(len(lendMin))]}
		nHosts := 2 + rng.IntN(3)
		for i := range nHosts {
			opts.Hosts = append(opts.Hosts, spark.HostConfig{Name: fmt.Sprintf("h%d", i), Managed: rng.IntN(8) > 0, Service: i == 0})
		}
		if rng.IntN(2) == 0 {
			opts.PreferredHost = "h1"
		}
		c, err := spark.New(store, opts)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		err = store.Tx(ctx, func(tx spark.Tx) error {
			hosts, _ := tx.Hosts()
			for _, h := range hosts {
				h.Mode, h.Draining = modes[rng.IntN(len(modes))], rng.IntN(5) == 0
				if rng.IntN(4) == 0 {
					h.GPUProcesses = 1 + rng.IntN(3)
				}
				if rng.IntN(6) > 0 {
					h.LastHeartbeat = now
				}
				if err := tx.PutHost(h); err != nil {
					return err
				}
			}
			for i := range rng.IntN(40) {
				seq, _ := tx.NextSeq()
				cl := classes[rng.IntN(len(classes))]
				r := spark.Request{ID: fmt.Sprintf("r%02d", i), Class: cl, Topology: spark.Single, Priority: prio[cl], Seq: seq, State: spark.Queued,
					Submitted: now.Add(-time.Duration(rng.IntN(150)) * time.Minute)}
				switch rng.IntN(6) {
				case 0:
					r.Topology = spark.Pair
				case 1:
					r.Host = fmt.Sprintf("h%d", rng.IntN(nHosts))
				}
				if cl == spark.ServiceStart {
					r.Host = "h0"
				}
				if err := tx.PutRequest(r); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		head, full, err := spark.ComparePlans(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		grantDiff := false
		for id := range full {
			fg, hg := len(full[id]) > 8 && full[id][:8] == "granted ", len(head[id]) > 8 && head[id][:8] == "granted "
			if (fg || hg) && full[id] != head[id] {
				grantDiff = true
			}
		}
		if grantDiff {
			grantDiffs++
			if isDefault(prio) {
				defaultGrantDiffs++
			}
		}
		if d := cmp.Diff(full, head); d != "" {
			if isDefault(prio) {
				defaultDiffs++
			}
			failures++
			if failures <= 3 {
				t.Errorf("seed %d (priorities %v, lend_min_priority %d): the head-of-queue plan differs from the whole-queue plan (-whole +head):\n%s",
					seed, prio, opts.LendMinPriority, d)
			}
		}
		granted := map[string]string{}
		for id, dec := range head {
			var hosts string
			if _, err := fmt.Sscanf(dec, "granted %s", &hosts); err != nil {
				continue
			}
			for _, h := range splitComma(hosts) {
				if other, ok := granted[h]; ok {
					doubles++
					if doubles <= 3 {
						t.Errorf("seed %d (priorities %v): one pass grants host %s to both %s and %s", seed, prio, h, other, id)
					}
				}
				granted[h] = id
			}
		}
	}
	if failures > 0 || doubles > 0 {
		t.Logf("%d double grants; %d of 2000 random fleets failed; %d grant differently (%d of them with the default priorities); %d differ with the default priorities", doubles, failures, grantDiffs, defaultGrantDiffs, defaultDiffs)
	}
}

func isDefault(p map[spark.Class]int) bool {
	return cmp.Equal(p, spark.DefaultPriorities())
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}

// GET /v1/hosts lists the hosts, yet reads every queued request
// (Controller.Snapshot): a call whose answer has nothing to do with the
// queue costs the queue's length.
func TestAPI_ListingTheHostsDoesNotReadTheQueue(t *testing.T) {
	store := &countingStore{Store: sparktest.NewStore()}
	opts := spark.DefaultOptions()
	opts.Service = &sparktest.Service{}
	c, err := spark.New(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	queueCI(t, store, 10_000)
	h, err := spark.NewHandler(c, "operator-token-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+"/v1/hosts", nil)
	req.Header.Set("Authorization", "Bearer operator-token-0123456789")
	store.read = 0
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /v1/hosts: %s", resp.Status)
	}
	if store.read > 50 {
		t.Errorf("GET /v1/hosts read %d requests of 10,000 queued; want at most 50", store.read)
	}
}

// An overdue pair goes ahead of all work but development, holding each
// host that frees up (Options.PairMaxWait). With lend_min_priority above
// development's priority (the fleet file's setting: "no CI class borrows
// the service host"), a queued development request closes the service
// host to the second phase, the borrowers-only third phase reads in
// priority order without putting the overdue pair first, and a one-host
// request naming the service host takes the host the pair should hold.
func TestAnOverduePairHoldsTheServiceHost_WithLendMinPriorityAboveDevelopment(t *testing.T) {
	store := sparktest.NewStore()
	opts := spark.DefaultOptions()
	svc := &sparktest.Service{Running: true}
	opts.Service, opts.PairTest, opts.LendMinPriority = svc, true, 101
	c, err := spark.New(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	prio := spark.DefaultPriorities()
	err = store.Tx(ctx, func(tx spark.Tx) error {
		hosts, _ := tx.Hosts()
		for _, h := range hosts {
			h.LastHeartbeat = now
			switch h.Name {
			case "spark-1":
				h.Mode = spark.ServiceRunning
			case "spark-2":
				h.Mode, h.Lease, h.Draining = spark.Leased, "r-running", true
			}
			if err := tx.PutHost(h); err != nil {
				return err
			}
		}
		for _, r := range []spark.Request{
			{ID: "pair", Class: spark.BackgroundCI, Topology: spark.Pair, Submitted: now.Add(-2 * time.Hour)},
			{ID: "dev", Class: spark.Development, Topology: spark.Single, Submitted: now},
			{ID: "named", Class: spark.ManualPR, Topology: spark.Single, Host: "spark-1", Submitted: now},
		} {
			r.Seq, _ = tx.NextSeq()
			r.Priority, r.State, r.Duration = prio[r.Class], spark.Queued, time.Hour
			if err := tx.PutRequest(r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	head, full, err := spark.ComparePlans(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(full, head); d != "" {
		t.Errorf("the head-of-queue plan differs from the whole-queue plan (-whole +head):\n%s", d)
	}
	if err := c.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	// The pass lent spark-1 to the request naming it: the resident
	// service was drained and stopped for a grant the overdue pair then
	// blocks.
	if calls := svc.CallsSnapshot(); slices.Contains(calls, "stop") {
		t.Errorf("the resident service was stopped (%v) for a request the overdue pair is ahead of", calls)
	}
}

// Status's position is the request's place in the order admission takes
// the queue. An overdue pair goes ahead of all work but development, yet
// its position counts every higher-priority request queued after it
// (QueueAhead counts by priority and submission only), and the dashboard,
// which lists the head of the queue by the same count, may not list it at
// all though it is admitted next.
func TestStatus_AnOverduePairsPositionIsWhereAdmissionTakesIt(t *testing.T) {
	store := sparktest.NewStore()
	opts := spark.DefaultOptions()
	opts.Service, opts.PairTest, opts.DashboardQueue = &sparktest.Service{}, true, 3
	c, err := spark.New(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	prio := spark.DefaultPriorities()
	err = store.Tx(ctx, func(tx spark.Tx) error {
		hosts, _ := tx.Hosts()
		for _, h := range hosts {
			h.LastHeartbeat, h.Mode, h.Lease = now, spark.Leased, "r-running"
			if err := tx.PutHost(h); err != nil {
				return err
			}
		}
		reqs := []spark.Request{{ID: "pair", Class: spark.BackgroundCI, Topology: spark.Pair, Submitted: now.Add(-2 * time.Hour)}}
		for i := range 5 {
			reqs = append(reqs, spark.Request{ID: fmt.Sprintf("ci%d", i), Class: spark.ManualPR, Topology: spark.Single, Submitted: now})
		}
		for _, r := range reqs {
			r.Seq, _ = tx.NextSeq()
			r.Priority, r.State, r.Duration = prio[r.Class], spark.Queued, time.Hour
			if err := tx.PutRequest(r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Status(ctx, "pair")
	if err != nil {
		t.Fatal(err)
	}
	if st.Position != 1 {
		t.Errorf("the overdue pair, which admission takes first, is at position %d", st.Position)
	}
	snap, err := c.Dashboard(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(snap.Reservations, func(r spark.DashboardReservation) bool { return r.ID == "pair" }) {
		t.Errorf("the dashboard's head of the queue (%d listed) leaves out the overdue pair admitted next", len(snap.Reservations))
	}
}

// Admission cost is independent of the queue's length, whatever the
// queue holds: a queue of requests that name a busy host is not read by
// Reconcile or Status (they could take nothing).
func TestAdmission_ReadsTheHeadOfTheQueue_EvenWhenTheQueueIsBorrowers(t *testing.T) {
	store := &countingStore{Store: sparktest.NewStore()}
	opts := spark.DefaultOptions()
	opts.Service = &sparktest.Service{}
	c, err := spark.New(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	queueBorrowers(t, store, 10_000, "spark-2")
	for _, h := range []string{"spark-1", "spark-2"} {
		c.Heartbeat(ctx, spark.HostReport{Host: h})
	}
	for _, step := range []struct {
		name string
		run  func() error
	}{
		{"reconcile placing spark-2", func() error { return c.Reconcile(ctx) }},
		{"reconcile with spark-2 busy", func() error { return c.Reconcile(ctx) }},
		{"status of the first waiting request", func() error { _, err := c.Status(ctx, "b000001"); return err }},
	} {
		store.read = 0
		if err := step.run(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if store.read > 50 {
			t.Errorf("%s read %d requests of 10,000 queued; want at most 50", step.name, store.read)
		}
	}
}

// queueBorrowers queues n single-host CI requests that each name a host
// (a borrower by spark.Borrower), straight into the store.
func queueBorrowers(t testing.TB, s spark.Store, n int, host string) {
	queue(t, s, n, func(i int) spark.Request {
		return spark.Request{ID: fmt.Sprintf("b%06d", i), Class: spark.BackgroundCI, Topology: spark.Single, Host: host,
			Priority: spark.DefaultPriorities()[spark.BackgroundCI]}
	})
}
