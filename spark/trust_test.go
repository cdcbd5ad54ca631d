package spark_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpugate/gpugate/internal/faketime"
	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/sparktest"
)

// An idle host whose heartbeat reports GPU processes no lease holds is
// never admitted to: it is release-required, with an alert, until a
// heartbeat shows it clean.
func TestAdmission_AHostWithProcessesNoLeaseHoldsIsNeverAdmittedTo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var alerts []spark.Event
		f := newFleet(t, func(o *spark.Options) { o.OnAlert = func(e spark.Event) { alerts = append(alerts, e) } })
		f.beat(t, 0, 5) // spark-2, the preferred host, runs five processes nobody leased
		r := f.submit(t, spark.SubmitRequest{Class: spark.BackgroundCI})
		f.reconcile(t)
		if st := f.status(t, r.ID); st.Request.State != spark.Queued {
			t.Fatalf("background CI was admitted to %v beside unknown processes", st.Request.Hosts)
		}
		if h := f.host(t, "spark-2"); h.Mode != spark.ReleaseRequired {
			t.Errorf("spark-2 is %s, want release-required", h.Mode)
		}
		if len(alerts) != 1 || alerts[0].Kind != "unknown-processes" || alerts[0].Host != "spark-2" {
			t.Errorf("alerts %+v, want one unknown-processes alert for spark-2", alerts)
		}
		f.beat(t, 0, 0)
		f.reconcile(t)
		if st := f.status(t, r.ID); st.Request.State != spark.Active || st.Request.Hosts[0] != "spark-2" {
			t.Errorf("after a clean heartbeat: %s on %v, want active on spark-2", st.Request.State, st.Request.Hosts)
		}
	})
}

// Processes that appear after a lease ended cleanly (the lease's last
// heartbeat showed none) still keep the host out until it is clean.
func TestHeartbeat_ProcessesReportedAfterALeaseEndedMakeTheHostReleaseRequired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t)
		r := f.submit(t, spark.SubmitRequest{Class: spark.ManualPR, PR: pr(1, "abc")})
		f.reconcile(t)
		st := f.status(t, r.ID)
		if err := f.c.Release(ctx, r.ID, st.Request.Token); err != nil {
			t.Fatal(err)
		}
		f.beat(t, 0, 2)
		if h := f.host(t, "spark-2"); h.Mode != spark.ReleaseRequired {
			t.Fatalf("spark-2 is %s after reporting 2 processes with no lease, want release-required", h.Mode)
		}
		next := f.submit(t, spark.SubmitRequest{Class: spark.BackgroundCI})
		f.reconcile(t)
		if got := f.status(t, next.ID).Request.State; got != spark.Queued {
			t.Errorf("the next request is %s, want queued while spark-2 is not clean", got)
		}
	})
}

// A stream of one-host work of a higher class cannot keep a pair waiting
// past PairMaxWait: after the bound the pair goes first and gets both
// hosts as soon as both are free.
func TestPair_AStreamOfSinglesCannotKeepAPairWaitingPastTheBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opts := spark.Options{Hosts: []spark.HostConfig{{Name: "a", Managed: true}, {Name: "b", Managed: true}},
			PairTest: true, PairMaxWait: time.Hour}
		c, err := spark.New(sparktest.NewStore(), opts)
		if err != nil {
			t.Fatal(err)
		}
		beat := func() {
			for _, h := range []string{"a", "b"} {
				c.Heartbeat(ctx, spark.HostReport{Host: h})
			}
		}
		beat()
		pair, err := c.Submit(ctx, spark.SubmitRequest{Class: spark.Benchmark, Topology: spark.Pair})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		for range 20 {
			for range 2 {
				if _, err := c.Submit(ctx, spark.SubmitRequest{Class: spark.MergeCI}); err != nil {
					t.Fatal(err)
				}
			}
			beat()
			if err := c.Reconcile(ctx); err != nil {
				t.Fatal(err)
			}
			st, err := c.Status(ctx, pair.ID)
			if err != nil {
				t.Fatal(err)
			}
			if st.Request.State == spark.Active {
				if waited := time.Since(start); waited > opts.PairMaxWait+20*time.Minute {
					t.Errorf("the pair waited %s, past its bound of %s and one round", waited, opts.PairMaxWait)
				}
				return
			}
			_, live, _ := c.Snapshot(ctx)
			for _, r := range live {
				if r.State == spark.Active {
					c.Release(ctx, r.ID, r.Token)
				}
			}
			faketime.Advance(20 * time.Minute)
		}
		t.Fatalf("the pair still waits after 20 rounds of merge-CI singles (%s)", time.Since(start))
	})
}

// A host whose agent never acknowledges its cleanup is alerted once,
// past Options.CleanupTimeout, and stays out of work; only the operator
// clears it, and even then it takes work only after a heartbeat shows its
// GPU clean.
func TestCleanup_AnOverdueCleanupAlertsOnceAndOnlyTheOperatorClearsIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var alerts []spark.Event
		f := newFleet(t, func(o *spark.Options) {
			for i := range o.Hosts {
				o.Hosts[i].Agent = true
			}
			o.CleanupTimeout = 15 * time.Minute
			o.OnAlert = func(e spark.Event) { alerts = append(alerts, e) }
		})
		ended, err := f.c.Submit(ctx, spark.SubmitRequest{Class: spark.MergeCI, Host: "spark-2"})
		if err != nil {
			t.Fatal(err)
		}
		f.reconcile(t)
		lease := f.status(t, ended.ID).Request
		if err := f.c.Release(ctx, lease.ID, lease.Token); err != nil {
			t.Fatal(err)
		}
		next, err := f.c.Submit(ctx, spark.SubmitRequest{Class: spark.MergeCI, Host: "spark-2"})
		if err != nil {
			t.Fatal(err)
		}
		overdue := func() int {
			n := 0
			for _, e := range alerts {
				if e.Kind == "cleanup-overdue" && e.Host == "spark-2" && e.Request == lease.ID {
					n++
				}
			}
			return n
		}
		faketime.Advance(14 * time.Minute)
		f.beat(t, 0, 0)
		f.reconcile(t)
		if n := overdue(); n != 0 {
			t.Fatalf("alerted %d time(s) before the cleanup timeout", n)
		}
		for range 3 {
			faketime.Advance(time.Minute)
			f.beat(t, 0, 0)
			f.reconcile(t)
		}
		if n := overdue(); n != 1 {
			t.Errorf("an overdue cleanup alerted %d time(s), want once", n)
		}
		if st := f.status(t, next.ID).Request; st.State != spark.Queued {
			t.Fatalf("a host still cleaning up took work: %+v", st)
		}
		if err := f.c.ClearCleanup(ctx, "spark-2", "another-lease", "ops"); !errors.Is(err, spark.ErrStaleToken) {
			t.Errorf("clearing the cleanup of another lease: %v, want ErrStaleToken", err)
		}
		if err := f.c.ClearCleanup(ctx, "spark-2", lease.ID, "ops"); err != nil {
			t.Fatal(err)
		}
		f.beat(t, 0, 3)
		f.reconcile(t)
		if st := f.status(t, next.ID).Request; st.State != spark.Queued {
			t.Fatalf("a cleared host whose GPU still runs processes took work: %+v", st)
		}
		f.beat(t, 0, 0)
		f.reconcile(t)
		if st := f.status(t, next.ID).Request; st.State != spark.Active {
			t.Errorf("the cleared host, clean now, took no work: %+v", st)
		}
	})
}

// Clearing a cleanup is the operator's: a host's own credential cannot
// skip its acknowledgement.
func TestAPI_OnlyTheOperatorClearsACleanup(t *testing.T) {
	ctx := context.Background()
	c, _, _, ops, h1, h2 := agentFleet(t, true)
	st, err := ops.Request(ctx, spark.LeaseRequest{Class: spark.MergeCI, Host: "spark-2"})
	if err != nil {
		t.Fatal(err)
	}
	sparktest.Admit(ctx, c, "spark-1", "spark-2")
	st, _ = ops.Status(ctx, st.Request.ID)
	if err := h2.Release(ctx, st.Request.ID, st.Request.Token); err != nil {
		t.Fatal(err)
	}
	for name, cl := range map[string]*spark.APIClient{"the host itself": h2, "another host": h1} {
		if err := cl.ClearCleanup(ctx, "spark-2", st.Request.ID); !errors.Is(err, spark.ErrUnauthorized) {
			t.Errorf("%s cleared the cleanup: %v, want ErrUnauthorized", name, err)
		}
	}
	if err := ops.ClearCleanup(ctx, "spark-2", st.Request.ID); err != nil {
		t.Fatal(err)
	}
	if hs, _ := c.HostState(ctx, "spark-2"); hs.Mode != spark.ReleaseRequired {
		t.Errorf("after the operator's clear the host is %s, want release-required until a clean heartbeat", hs.Mode)
	}
}

// Under any stream of one-host work of the CI classes (manual PRs, merge
// CI, benchmarks, background CI), arriving and finishing at random, a
// queued pair is granted no later than PairMaxWait plus what remained of
// the leases running when the bound passed: after the bound no new
// one-host work takes a host the pair needs (priority is non-preemptive,
// so running work finishes first).
func TestPair_TheWaitBoundHoldsUnderRandomStreamsOfSingles(t *testing.T) {
	for seed := range int64(25) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(seed), 7))
				opts := spark.Options{Hosts: []spark.HostConfig{{Name: "a", Managed: true}, {Name: "b", Managed: true}},
					PairTest: true, PairMaxWait: time.Hour}
				c, err := spark.New(sparktest.NewStore(), opts)
				if err != nil {
					t.Fatal(err)
				}
				beat := func() {
					for _, h := range []string{"a", "b"} {
						c.Heartbeat(ctx, spark.HostReport{Host: h})
					}
				}
				const step = 5 * time.Minute
				classes := []spark.Class{spark.ManualPR, spark.MergeCI, spark.Benchmark, spark.BackgroundCI}
				submit := func() {
					class := classes[rng.IntN(len(classes))]
					s := spark.SubmitRequest{Class: class, Duration: time.Duration(1+rng.IntN(24)) * step}
					if class == spark.ManualPR {
						s.PR = &spark.PRRef{Repo: "o/r", Number: 1 + rng.IntN(1000), SHA: fmt.Sprintf("%040x", rng.Uint64())}
					}
					if _, err := c.Submit(ctx, s); err != nil {
						t.Fatal(err)
					}
				}
				for range rng.IntN(4) { // work queued before the pair
					submit()
				}
				beat()
				c.Reconcile(ctx)
				pair, err := c.Submit(ctx, spark.SubmitRequest{Class: spark.Benchmark, Topology: spark.Pair})
				if err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				var deadline time.Time // set when the bound passes
				for {
					for range 1 + rng.IntN(3) {
						submit()
					}
					beat()
					if err := c.Reconcile(ctx); err != nil {
						t.Fatal(err)
					}
					st, _ := c.Status(ctx, pair.ID)
					if st.Request.State == spark.Active {
						return
					}
					_, live, _ := c.Snapshot(ctx)
					if deadline.IsZero() && time.Since(start) >= opts.PairMaxWait {
						deadline = time.Now()
						for _, r := range live {
							if r.State == spark.Active && r.Expires.After(deadline) {
								deadline = r.Expires
							}
						}
						deadline = deadline.Add(step) // the round that sees the hosts free
					}
					if !deadline.IsZero() && time.Now().After(deadline) {
						t.Fatalf("the pair still waits %s after it was queued, past its bound (%s and the running leases' rest)", time.Since(start), opts.PairMaxWait)
					}
					for _, r := range live {
						if r.State == spark.Active && r.ID != pair.ID && rng.IntN(3) == 0 {
							c.Release(ctx, r.ID, r.Token) // finished early
						}
					}
					faketime.Advance(step)
				}
			})
		})
	}
}
