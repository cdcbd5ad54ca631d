package spark_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpugate/gpugate/internal/faketime"
	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/sparktest"
)

var ctx = context.Background()

type fleet struct {
	store *sparktest.Store
	svc   *sparktest.Service
	c     *spark.Controller
	opts  spark.Options
}

func newFleet(t testing.TB, mutate ...func(*spark.Options)) *fleet {
	t.Helper()
	f := &fleet{store: sparktest.NewStore(), svc: &sparktest.Service{}}
	f.opts = spark.DefaultOptions()
	f.opts.Service = f.svc
	f.opts.EmergencyKey = "break-glass"
	for _, m := range mutate {
		m(&f.opts)
	}
	f.restart(t)
	f.beat(t, 0, 0)
	f.reconcile(t) // the resident service starts and passes its health check
	return f
}

func (f *fleet) restart(t testing.TB) {
	t.Helper()
	c, err := spark.New(f.store, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	f.c = c
}

func (f *fleet) beat(t testing.TB, procs1, procs2 int) {
	t.Helper()
	for i, h := range []string{"spark-1", "spark-2"} {
		if err := f.c.Heartbeat(ctx, spark.HostReport{Host: h, GPUProcesses: []int{procs1, procs2}[i]}); err != nil && !errors.Is(err, spark.ErrUnauthorized) {
			t.Fatal(err)
		}
	}
}

func (f *fleet) reconcile(t testing.TB) {
	t.Helper()
	if err := f.c.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
}

func (f *fleet) submit(t testing.TB, s spark.SubmitRequest) spark.Request {
	t.Helper()
	r, err := f.c.Submit(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (f *fleet) status(t testing.TB, id string) spark.Status {
	t.Helper()
	st, err := f.c.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func (f *fleet) host(t testing.TB, name string) spark.Host {
	t.Helper()
	hosts, _, err := f.c.Snapshot(ctx)
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

func pr(n int, sha string) *spark.PRRef { return &spark.PRRef{Repo: "o/butter", Number: n, SHA: sha} }

func TestResidentServiceIsOnlineOnlyAfterItsHealthCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t)
		if h := f.host(t, "spark-1"); h.Mode != spark.ServiceRunning {
			t.Errorf("spark-1 %s", h.Mode)
		}
		if got := f.svc.CallsSnapshot(); !slices.Equal(got, []string{"start", "health"}) {
			t.Errorf("calls %v", got)
		}
	})
}

// Seed 004's "Explicit Deckard start" asks for the resident service on its
// host. When the service is already online the request is done: it ends
// at once instead of waiting at the head of the queue for ever.
func TestAServiceStartWhileTheServiceRunsEndsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t)
		if h := f.host(t, "spark-1"); h.Mode != spark.ServiceRunning {
			t.Fatalf("spark-1 %s", h.Mode)
		}
		start := f.submit(t, spark.SubmitRequest{Class: spark.ServiceStart})
		f.reconcile(t)
		if st := f.status(t, start.ID).Request; st.State != spark.Released || st.Reason != "the resident service is already online" {
			t.Errorf("the service start is %s (%s), want released: the service is online", st.State, st.Reason)
		}
		if got := f.svc.CallsSnapshot(); !slices.Equal(got, []string{"start", "health"}) {
			t.Errorf("the running service was touched: %v", got)
		}
		// Other work still goes first to spark-2 and is not held up.
		dev := f.submit(t, spark.SubmitRequest{Class: spark.Development})
		f.reconcile(t)
		if st := f.status(t, dev.ID).Request; st.State != spark.Active {
			t.Errorf("development after it: %+v", st)
		}
	})
}

func TestAdmissionOrderFollowsClassPriority(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t)
		blocker := f.submit(t, spark.SubmitRequest{Class: spark.MergeCI})
		f.reconcile(t)
		bg := f.submit(t, spark.SubmitRequest{Class: spark.BackgroundCI})
		bench := f.submit(t, spark.SubmitRequest{Class: spark.Benchmark})
		manual := f.submit(t, spark.SubmitRequest{Class: spark.ManualPR, PR: pr(1, "aaa")})
		for id, want := range map[string]int{manual.ID: 1, bench.ID: 2, bg.ID: 3} {
			if got := f.status(t, id).Position; got != want {
				t.Errorf("%s position %d, want %d", id, got, want)
			}
		}
		if err := f.c.Release(ctx, blocker.ID, f.status(t, blocker.ID).Request.Token); err != nil {
			t.Fatal(err)
		}
		f.reconcile(t)
		if st := f.status(t, manual.ID).Request; st.State != spark.Active || !slices.Equal(st.Hosts, []string{"spark-2"}) {
			t.Errorf("manual PR %+v", st)
		}
		if f.status(t, bench.ID).Request.State != spark.Queued {
			t.Error("a benchmark (50) must not borrow the service host below the lending floor")
		}
	})
}

func TestPriorityIsNonPreemptive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t)
		ci := f.submit(t, spark.SubmitRequest{Class: spark.BackgroundCI, Host: "spark-2"})
		f.reconcile(t)
		dev := f.submit(t, spark.SubmitRequest{Class: spark.Development, Host: "spark-2"})
		f.reconcile(t)
		if f.status(t, ci.ID).Request.State != spark.Active || f.status(t, dev.ID).Request.State != spark.Queued {
			t.Error("development must not stop active CI")
		}
		if err := f.c.Cancel(ctx, ci.ID); !errors.Is(err, spark.ErrActive) {
			t.Errorf("cancel active: %v", err)
		}
	})
}

func TestDevelopmentDrainsItsTargetHostAndHasFirstClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t)
		ci := f.submit(t, spark.SubmitRequest{Class: spark.MergeCI})
		f.reconcile(t)
		dev := f.submit(t, spark.SubmitRequest{Class: spark.Development})
		if !f.host(t, "spark-2").Draining {
			t.Fatal("the development target must enter draining")
		}
		later := f.submit(t, spark.SubmitRequest{Class: spark.ManualPR, PR: pr(2, "bbb"), Host: "spark-2"})
		if p := f.status(t, later.ID).Pending; !strings.Contains(p, "draining for development") && !strings.Contains(p, "running request") {
			t.Errorf("pending %q", p)
		}
		f.c.Release(ctx, ci.ID, f.status(t, ci.ID).Request.Token)
		f.reconcile(t)
		if st := f.status(t, dev.ID).Request; st.State != spark.Active || st.Hosts[0] != "spark-2" {
			t.Errorf("dev %+v", st)
		}
		if f.host(t, "spark-2").Draining {
			t.Error("draining ends when development gets the host")
		}
	})
}

func TestOneHostRequestsPreferTheConfiguredHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t)
		r := f.submit(t, spark.SubmitRequest{Class: spark.ManualPR, PR: pr(3, "ccc")})
		f.reconcile(t)
		if got := f.status(t, r.ID).Request.Hosts; !slices.Equal(got, []string{"spark-2"}) {
			t.Errorf("hosts %v", got)
		}
	})
}

func pairFleet(t testing.TB) *fleet {
	return newFleet(t, func(o *spark.Options) { o.PairTest = true })
}

func TestPairRequestsRefusedWithoutADistributedTest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t)
		if _, err := f.c.Submit(ctx, spark.SubmitRequest{Class: spark.ManualPR, Topology: spark.Pair, PR: pr(4, "ddd")}); !errors.Is(err, spark.ErrPairRefused) {
			t.Errorf("err = %v", err)
		}
		if _, err := f.c.Submit(ctx, spark.SubmitRequest{Class: spark.Development, Topology: spark.Pair}); err != nil {
			t.Errorf("a development pair is always allowed: %v", err)
		}
	})
}

func TestPairIsAtomicAndHoldsTheFirstIdleHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := pairFleet(t)
		busy := f.submit(t, spark.SubmitRequest{Class: spark.MergeCI, Host: "spark-2"})
		f.reconcile(t)
		pair := f.submit(t, spark.SubmitRequest{Class: spark.Benchmark, Topology: spark.Pair})
		f.reconcile(t)
		if f.status(t, pair.ID).Request.State != spark.Queued {
			t.Fatal("a pair never starts on one host")
		}
		// spark-1 is free (its service lendable to a pair) but held: lower
		// one-host work cannot take it.
		single := f.submit(t, spark.SubmitRequest{Class: spark.BackgroundCI, Host: "spark-1"})
		f.reconcile(t)
		if f.status(t, single.ID).Request.State != spark.Queued || !strings.Contains(f.status(t, single.ID).Pending, "claimed by request "+pair.ID) {
			t.Errorf("single %+v", f.status(t, single.ID))
		}
		f.c.Release(ctx, busy.ID, f.status(t, busy.ID).Request.Token)
		f.reconcile(t)
		f.reconcile(t) // the service on spark-1 is drained and stopped, then the pair is granted
		st := f.status(t, pair.ID).Request
		if st.State != spark.Active || len(st.Hosts) != 2 || st.Hosts[0] == st.Hosts[1] {
			t.Errorf("pair %+v", st)
		}
	})
}

// A host held for a waiting pair may still go to a higher class: a waiting
// low-priority pair never blocks more important work (no priority
// inversion); it is admitted once higher classes stop arriving.
func TestHigherClassMayTakeAHostHeldForAPair(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := pairFleet(t)
		busy := f.submit(t, spark.SubmitRequest{Class: spark.MergeCI, Host: "spark-1"})
		f.reconcile(t)
		f.reconcile(t)
		pair := f.submit(t, spark.SubmitRequest{Class: spark.Benchmark, Topology: spark.Pair})
		f.reconcile(t)
		dev := f.submit(t, spark.SubmitRequest{Class: spark.Development, Host: "spark-2"})
		f.reconcile(t)
		if f.status(t, dev.ID).Request.State != spark.Active {
			t.Error("development (100) must take the host a benchmark pair (50) holds")
		}
		f.c.Release(ctx, busy.ID, f.status(t, busy.ID).Request.Token)
		f.c.Release(ctx, dev.ID, f.status(t, dev.ID).Request.Token)
		f.beat(t, 0, 0)
		for range 3 {
			f.reconcile(t)
		}
		if f.status(t, pair.ID).Request.State != spark.Active {
			t.Errorf("the pair must run once higher classes stop: %+v", f.status(t, pair.ID))
		}
	})
}

func TestNewCommitSupersedesTheQueuedRequestOfTheSamePR(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t)
		old := f.submit(t, spark.SubmitRequest{Class: spark.ManualPR, PR: pr(5, "old1111")})
		f.reconcile(t)
		queued := f.submit(t, spark.SubmitRequest{Class: spark.ManualPR, PR: pr(5, "mid2222")})
		newer := f.submit(t, spark.SubmitRequest{Class: spark.ManualPR, PR: pr(5, "new3333")})
		if st := f.status(t, queued.ID).Request; st.State != spark.Superseded {
			t.Errorf("queued %s", st.State)
		}
		if st := f.status(t, old.ID).Request; st.State != spark.Active || st.PR.SHA != "old1111" {
			t.Errorf("an active run keeps the SHA it tests: %+v", st)
		}
		if f.status(t, newer.ID).Request.State != spark.Queued {
			t.Error("the newest commit stays queued")
		}
	})
}

// Supersede ends a queued request for a commit no longer to be tested
// (a push after which nothing new is asked for), with its reason; an
// active run keeps its identity, and an ended request stays ended.
func TestSupersedeEndsQueuedWorkOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t)
		active := f.submit(t, spark.SubmitRequest{Class: spark.ManualPR, PR: pr(5, "old1111")})
		f.reconcile(t)
		queued := f.submit(t, spark.SubmitRequest{Class: spark.ManualPR, PR: pr(6, "old2222")})
		if err := f.c.Supersede(ctx, queued.ID, "superseded by new3333"); err != nil {
			t.Fatal(err)
		}
		if st := f.status(t, queued.ID).Request; st.State != spark.Superseded || st.Reason != "superseded by new3333" {
			t.Errorf("queued: %s (%s)", st.State, st.Reason)
		}
		if err := f.c.Supersede(ctx, active.ID, "x"); !errors.Is(err, spark.ErrActive) {
			t.Errorf("active: %v, want ErrActive", err)
		}
		if err := f.c.Supersede(ctx, queued.ID, "x"); !errors.Is(err, spark.ErrNotQueued) {
			t.Errorf("ended: %v, want ErrNotQueued", err)
		}
	})
}

func TestCancelRemovesQueuedWorkOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t)
		a := f.submit(t, spark.SubmitRequest{Class: spark.MergeCI})
		f.reconcile(t)
		b := f.submit(t, spark.SubmitRequest{Class: spark.MergeCI})
		if err := f.c.Cancel(ctx, b.ID); err != nil {
			t.Fatal(err)
		}
		for id, want := range map[string]error{a.ID: spark.ErrActive, b.ID: spark.ErrNotQueued, "r-none": spark.ErrNotFound} {
			if err := f.c.Cancel(ctx, id); !errors.Is(err, want) {
				t.Errorf("%s: %v, want %v", id, err, want)
			}
		}
	})
}

func TestFencingTokensStrictlyIncreaseAcrossRestarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t)
		var last int64
		for i := range 4 {
			r := f.submit(t, spark.SubmitRequest{Class: spark.MergeCI, Host: "spark-2"})
			f.reconcile(t)
			tok := f.status(t, r.ID).Request.Token
			if tok <= last {
				t.Fatalf("token %d after %d", tok, last)
			}
			last = tok
			f.c.Release(ctx, r.ID, tok)
			if i%2 == 1 {
				f.restart(t)
			}
		}
	})
}

func TestAStaleTokenIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t)
		r := f.submit(t, spark.SubmitRequest{Class: spark.MergeCI})
		f.reconcile(t)
		tok := f.status(t, r.ID).Request.Token
		if err := f.c.Release(ctx, r.ID, tok+1); !errors.Is(err, spark.ErrStaleToken) {
			t.Errorf("%v", err)
		}
		if err := f.c.CheckToken(ctx, "spark-2", tok); err != nil {
			t.Errorf("current token: %v", err)
		}
		f.c.Release(ctx, r.ID, tok)
		if err := f.c.CheckToken(ctx, "spark-2", tok); !errors.Is(err, spark.ErrStaleToken) {
			t.Errorf("after release: %v", err)
		}
		if err := f.c.Release(ctx, r.ID, tok); !errors.Is(err, spark.ErrStaleToken) {
			t.Errorf("double release: %v", err)
		}
	})
}

func TestAStaleHeartbeatIsOfflineNeverIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t)
		faketime.Advance(2 * time.Minute)
		f.c.Heartbeat(ctx, spark.HostReport{Host: "spark-1"})
		r := f.submit(t, spark.SubmitRequest{Class: spark.ManualPR, PR: pr(6, "eee"), Host: "spark-2"})
		f.reconcile(t)
		st := f.status(t, r.ID)
		if st.Request.State != spark.Queued || !strings.Contains(st.Pending, "spark-2 is offline") {
			t.Errorf("%+v", st)
		}
	})
}

func TestUnknownOrUnmanagedHostsAreNeverSchedulable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, func(o *spark.Options) { o.Hosts[1].Managed = false })
		if err := f.c.Heartbeat(ctx, spark.HostReport{Host: "spark-3"}); !errors.Is(err, spark.ErrUnauthorized) {
			t.Errorf("unknown host heartbeat: %v", err)
		}
		r := f.submit(t, spark.SubmitRequest{Class: spark.MergeCI, Host: "spark-2"})
		f.reconcile(t)
		if st := f.status(t, r.ID); st.Request.State != spark.Queued || !strings.Contains(st.Pending, "not managed") {
			t.Errorf("%+v", st)
		}
	})
}

func TestAnExpiredLeaseWithProcessesIsReleaseRequired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t)
		dev := f.submit(t, spark.SubmitRequest{Class: spark.Development, Duration: time.Hour})
		f.reconcile(t)
		f.beat(t, 0, 3) // development processes on spark-2
		faketime.Advance(time.Hour)
		f.beat(t, 0, 3)
		ci := f.submit(t, spark.SubmitRequest{Class: spark.MergeCI, Host: "spark-2"})
		f.reconcile(t)
		if f.status(t, dev.ID).Request.State != spark.Expired || f.host(t, "spark-2").Mode != spark.ReleaseRequired {
			t.Fatalf("%+v %+v", f.status(t, dev.ID).Request, f.host(t, "spark-2"))
		}
		if st := f.status(t, ci.ID); st.Request.State != spark.Queued || !strings.Contains(st.Pending, "release required") {
			t.Errorf("CI admitted to a release-required host: %+v", st)
		}
		f.beat(t, 0, 0) // the developer cleaned up
		f.reconcile(t)
		if f.status(t, ci.ID).Request.State != spark.Active {
			t.Error("a cleaned host returns to service")
		}
	})
}

func TestOneNodeOfAPairFailingFailsThePairAsAUnit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := pairFleet(t)
		p := f.submit(t, spark.SubmitRequest{Class: spark.Benchmark, Topology: spark.Pair})
		f.reconcile(t)
		f.reconcile(t)
		if f.status(t, p.ID).Request.State != spark.Active {
			t.Fatalf("%+v", f.status(t, p.ID))
		}
		faketime.Advance(100 * time.Second)
		f.c.Heartbeat(ctx, spark.HostReport{Host: "spark-2"}) // spark-1 went silent
		f.reconcile(t)
		st := f.status(t, p.ID).Request
		if st.State != spark.Failed || !strings.Contains(st.Reason, "spark-1") {
			t.Errorf("%+v", st)
		}
		if f.host(t, "spark-2").Mode != spark.ReleaseRequired {
			t.Errorf("the surviving host keeps its evidence until cleaned: %s", f.host(t, "spark-2").Mode)
		}
	})
}

func TestAutomationFailsClosedWhenTheControllerStateIsUnavailable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t)
		f.store.Fail = true
		if _, err := f.c.Submit(ctx, spark.SubmitRequest{Class: spark.MergeCI}); !errors.Is(err, spark.ErrUnavailable) {
			t.Errorf("submit: %v", err)
		}
		if err := f.c.Reconcile(ctx); !errors.Is(err, spark.ErrUnavailable) {
			t.Errorf("reconcile: %v", err)
		}
		if err := f.c.CheckToken(ctx, "spark-2", 1); err == nil {
			t.Error("the fencing check must fail closed")
		}
	})
}

func TestLendingTheServiceHostDrainsStopsAndVerifiesFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t)
		dev := f.submit(t, spark.SubmitRequest{Class: spark.Development, Host: "spark-1"})
		f.reconcile(t)
		if got := f.svc.CallsSnapshot()[2:]; !slices.Equal(got, []string{"drain", "stop", "verify"}) {
			t.Errorf("calls %v", got)
		}
		if f.status(t, dev.ID).Request.State != spark.Active {
			t.Fatal("dev not granted")
		}
		f.c.Release(ctx, dev.ID, f.status(t, dev.ID).Request.Token)
		f.reconcile(t)
		if h := f.host(t, "spark-1"); h.Mode != spark.ServiceRunning {
			t.Errorf("the service must be recreated and healthy: %s", h.Mode)
		}
	})
}

func TestAPauseIsNotARelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t)
		f.svc.FailStop = true // paused, the GPU allocation remains
		dev := f.submit(t, spark.SubmitRequest{Class: spark.Development, Host: "spark-1"})
		f.reconcile(t)
		if f.status(t, dev.ID).Request.State != spark.Queued {
			t.Error("a host whose service did not release the GPU must not be lent")
		}
		evs, _ := f.c.Events(ctx, 20)
		if !slices.ContainsFunc(evs, func(e spark.Event) bool { return e.Kind == "lend-failed" && e.Alert }) {
			t.Errorf("no alert: %+v", evs)
		}
	})
}

func TestAFailedRestoreKeepsTheHostOutRetriesBoundedAndAlerts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var hooked []string // what reached an operator through OnAlert
		f := newFleet(t, func(o *spark.Options) {
			o.RestoreAttempts = 3
			o.OnAlert = func(e spark.Event) { hooked = append(hooked, e.Kind+" "+e.Host) }
		})
		dev := f.submit(t, spark.SubmitRequest{Class: spark.Development, Host: "spark-1"})
		f.reconcile(t)
		f.svc.FailHealth = 10
		f.c.Release(ctx, dev.ID, f.status(t, dev.ID).Request.Token)
		ci := f.submit(t, spark.SubmitRequest{Class: spark.ManualPR, PR: pr(7, "fff"), Host: "spark-1"})
		for range 10 {
			f.beat(t, 0, 0)
			f.reconcile(t)
			faketime.Advance(5 * time.Minute)
		}
		if h := f.host(t, "spark-1"); h.Mode != spark.OutOfService || h.RestoreAttempts != 3 {
			t.Errorf("host %+v", h)
		}
		if f.status(t, ci.ID).Request.State != spark.Queued {
			t.Error("CI was admitted to a host whose service failed to restore")
		}
		evs, _ := f.c.Events(ctx, 50)
		alerts := 0
		for _, e := range evs {
			if e.Kind == "restore-failed" && e.Alert {
				alerts++
			}
		}
		if alerts != 3 {
			t.Errorf("%d restore alerts, want 3 (bounded)", alerts)
		}
		if want := slices.Repeat([]string{"restore-failed spark-1"}, 3); !slices.Equal(hooked, want) {
			t.Errorf("OnAlert got %v, want %v", hooked, want)
		}
	})
}

// alertsLost is a store that loses every transaction that records an
// alert, as one whose disk filled up at that moment would.
type alertsLost struct {
	spark.Store
	on   *bool
	lost *int // transactions lost
}

type watchedTx struct {
	spark.Tx
	alerted bool
}

func (t *watchedTx) AppendEvent(e spark.Event) error {
	t.alerted = t.alerted || e.Alert
	return t.Tx.AppendEvent(e)
}

func (s alertsLost) Tx(ctx context.Context, fn func(spark.Tx) error) error {
	return s.Store.Tx(ctx, func(tx spark.Tx) error {
		w := &watchedTx{Tx: tx}
		if err := fn(w); err != nil || !*s.on || !w.alerted {
			return err
		}
		*s.lost++
		return errors.New("disk full")
	})
}

// An alert reaches OnAlert only once its event is committed: a failed lend
// recorded in a transaction that was then lost alerts nobody (the
// committed case is TestAFailedRestoreKeepsTheHostOutRetriesBoundedAndAlerts).
func TestOnAlertSeesOnlyCommittedAlerts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var hooked []string
		f := newFleet(t, func(o *spark.Options) { o.OnAlert = func(e spark.Event) { hooked = append(hooked, e.Kind) } })
		f.svc.FailStop = true // the lend fails: an alert
		f.submit(t, spark.SubmitRequest{Class: spark.Development, Host: "spark-1"})
		lose, lost := false, 0
		c, err := spark.New(alertsLost{f.store, &lose, &lost}, f.opts)
		if err != nil {
			t.Fatal(err)
		}
		lose = true
		c.Reconcile(ctx)
		if lost == 0 {
			t.Fatal("no transaction recorded an alert: the scenario tests nothing")
		}
		if len(hooked) != 0 {
			t.Errorf("alerts from lost transactions reached OnAlert: %v", hooked)
		}
	})
}

func TestEmergencyTerminationIsSeparatelyAuthorized(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t)
		r := f.submit(t, spark.SubmitRequest{Class: spark.BackgroundCI, Host: "spark-2"})
		f.reconcile(t)
		if err := f.c.Terminate(ctx, r.ID, "guess"); !errors.Is(err, spark.ErrUnauthorized) {
			t.Errorf("%v", err)
		}
		if err := f.c.Terminate(ctx, r.ID, "break-glass"); err != nil {
			t.Fatal(err)
		}
		if f.status(t, r.ID).Request.State != spark.Terminated || f.host(t, "spark-2").Mode != spark.ReleaseRequired {
			t.Error("termination must end the lease and fence the host until cleanup")
		}
	})
}

func TestEventsCarryNoTokensOrCommands(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t)
		r := f.submit(t, spark.SubmitRequest{Class: spark.MergeCI})
		f.reconcile(t)
		tok := fmt.Sprint(f.status(t, r.ID).Request.Token)
		evs, _ := f.c.Events(ctx, 100)
		for _, e := range evs {
			if strings.Contains(e.Detail, "token") || e.Detail == tok {
				t.Errorf("event %+v", e)
			}
		}
	})
}

// TestInvariantsUnderRandomEventSequences drives thousands of random event
// sequences, restarting the controller on the same store.
func TestInvariantsUnderRandomEventSequences(t *testing.T) {
	for seed := range uint64(1500) {
		synctest.Test(t, func(t *testing.T) {
			store := sparktest.NewStore()
			sparktest.RandomSequence(t, seed, func() spark.Store { return store })
		})
	}
}

// A request may ask for a shorter lease than its class's length, never a
// longer one: an agent cannot hold the shared fleet past the configured
// limit by asking. A class the configuration leaves out keeps its default
// length rather than a zero-length lease that expires as it is granted.
func TestALeaseNeverOutlastsItsClassLimit(t *testing.T) {
	f := newFleet(t, func(o *spark.Options) {
		o.Durations = map[spark.Class]time.Duration{spark.Development: 2 * time.Hour}
	})
	for name, d := range map[string]time.Duration{"longer than the limit": 2*time.Hour + time.Second, "negative": -time.Minute} {
		if _, err := f.c.Submit(ctx, spark.SubmitRequest{Class: spark.Development, Duration: d}); !errors.Is(err, spark.ErrInvalid) {
			t.Errorf("%s (%s): %v, want ErrInvalid", name, d, err)
		}
	}
	for _, tc := range []struct {
		class    spark.Class
		ask      time.Duration
		want     time.Duration
		describe string
	}{
		{spark.Development, 0, 2 * time.Hour, "no length: the configured limit"},
		{spark.Development, 30 * time.Minute, 30 * time.Minute, "a shorter lease"},
		{spark.Development, 2 * time.Hour, 2 * time.Hour, "exactly the limit"},
		{spark.Benchmark, 0, spark.DefaultDurations()[spark.Benchmark], "a class left out of the configuration"},
	} {
		if r := f.submit(t, spark.SubmitRequest{Class: tc.class, Duration: tc.ask}); r.Duration != tc.want {
			t.Errorf("%s: %s lease of %s for %s asked, want %s", tc.describe, tc.class, r.Duration, tc.ask, tc.want)
		}
	}
}
