package spark_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/sparktest"
)

// Once the resident service's verify-released step passed, the GPU
// processes its host last reported were the service's and are gone: the
// grant the lending was for is made at once, not left waiting on
// processes no lease holds.
func TestAVerifiedReleaseClearsTheServicesProcessesForTheLendingsGrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t)
		f.beat(t, 3, 0) // the running service's processes on spark-1
		ci := f.submit(t, spark.SubmitRequest{Class: spark.MergeCI, Host: "spark-1"})
		f.reconcile(t)
		if got := f.svc.CallsSnapshot()[2:]; !slices.Equal(got, []string{"drain", "stop", "verify"}) {
			t.Fatalf("the lend ran %v, want drain, stop, verify", got)
		}
		st := f.status(t, ci.ID)
		if st.Request.State != spark.Active || !slices.Equal(st.Request.Hosts, []string{"spark-1"}) {
			t.Errorf("the lending's request is %s on %v (pending %q), want active on spark-1", st.Request.State, st.Request.Hosts, st.Pending)
		}
		if h := f.host(t, "spark-1"); h.Mode != spark.Leased || h.Lease != ci.ID {
			t.Errorf("spark-1 is %s leased to %q, want leased to %s", h.Mode, h.Lease, ci.ID)
		}
	})
}

// stopHook is a resident service that runs hook while it stops: something
// happening to the fleet during a lending.
type stopHook struct {
	*sparktest.Service
	hook func()
}

func (s *stopHook) Stop(ctx context.Context) error {
	if s.hook != nil {
		s.hook()
	}
	return s.Service.Stop(ctx)
}

// pairBlockedWhileTheServiceStops is a fleet whose development pair
// cannot start after spark-1's service stopped for it: spark-2 reported
// processes no lease holds while the service stopped. The pair is queued.
func pairBlockedWhileTheServiceStops(t *testing.T) (*fleet, spark.Request) {
	t.Helper()
	svc := &stopHook{Service: &sparktest.Service{}}
	f := newFleet(t, func(o *spark.Options) { o.Service = svc })
	f.svc = svc.Service
	svc.hook = func() {
		if err := f.c.Heartbeat(ctx, spark.HostReport{Host: "spark-2", GPUProcesses: 2}); err != nil {
			t.Error(err)
		}
	}
	pair := f.submit(t, spark.SubmitRequest{Class: spark.Development, Topology: spark.Pair})
	f.reconcile(t)
	svc.hook = nil
	if st := f.status(t, pair.ID).Request; st.State != spark.Queued {
		t.Fatalf("the pair is %s, want queued: the scenario tests nothing", st.State)
	}
	return f, pair
}

// A service host left idle by a lending whose request went away (here a
// development pair that could not start, then canceled) is no ordinary
// idle host: it goes back to restoring, the resident service is restored,
// and work that does not borrow the service host never gets it.
func TestAnIdleServiceHostWithNoLeaseOrPendingGrantRestoresTheService(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, pair := pairBlockedWhileTheServiceStops(t)
		if h := f.host(t, "spark-1"); h.Lease != "" {
			t.Fatalf("spark-1 is %s leased to %q after its lending, want no lease: the scenario tests nothing", h.Mode, h.Lease)
		}
		if err := f.c.Cancel(ctx, pair.ID); err != nil {
			t.Fatal(err)
		}
		f.beat(t, 0, 0)
		bg1 := f.submit(t, spark.SubmitRequest{Class: spark.BackgroundCI})
		bg2 := f.submit(t, spark.SubmitRequest{Class: spark.BackgroundCI})
		f.reconcile(t)
		f.reconcile(t)
		if h := f.host(t, "spark-1"); h.Mode != spark.ServiceRunning {
			t.Errorf("spark-1 is %s with no lease and no grant pending, want the resident service restored", h.Mode)
		}
		if got := f.svc.CallsSnapshot(); len(got) < 2 || !slices.Equal(got[len(got)-2:], []string{"start", "health"}) {
			t.Errorf("service calls %v: the service was not restarted and health-checked", got)
		}
		if st := f.status(t, bg1.ID).Request; st.State != spark.Active || !slices.Equal(st.Hosts, []string{"spark-2"}) {
			t.Errorf("the first background CI is %s on %v, want active on spark-2", st.State, st.Hosts)
		}
		st := f.status(t, bg2.ID)
		if st.Request.State != spark.Queued || !strings.Contains(st.Pending, "runs the resident service") {
			t.Errorf("the second background CI (priority 20) is %s on %v (pending %q): it must not borrow the service host",
				st.Request.State, st.Request.Hosts, st.Pending)
		}
	})
}

// The resident service does not stay stopped while the request it was
// lent for waits: when a pair's other host is no longer free once the
// service stopped, the service is restored at once, and lent again when
// both hosts are free, for the pair's grant.
func TestALentServiceHostIsRestoredWhileItsPairWaitsForTheOtherHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, pair := pairBlockedWhileTheServiceStops(t)
		f.reconcile(t)
		if h := f.host(t, "spark-1"); h.Mode != spark.ServiceRunning {
			t.Errorf("spark-1 is %s while its pair waits for spark-2, want the resident service running again", h.Mode)
		}
		f.beat(t, 0, 0) // spark-2 is clean again
		f.reconcile(t)
		if st := f.status(t, pair.ID).Request; st.State != spark.Active || !slices.Equal(st.Hosts, []string{"spark-1", "spark-2"}) &&
			!slices.Equal(st.Hosts, []string{"spark-2", "spark-1"}) {
			t.Errorf("the pair is %s on %v once both hosts are free, want active on both", st.State, st.Hosts)
		}
	})
}

// A service host whose service a lending stopped is lent only to the work
// the lending was for or to other work that may borrow it: an earlier
// request below the lending minimum that names no host does not take it
// in between.
func TestOnlyLendableWorkBorrowsAStoppedServiceHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t)
		busy := f.submit(t, spark.SubmitRequest{Class: spark.MergeCI, Host: "spark-2"})
		f.reconcile(t)
		unnamed := f.submit(t, spark.SubmitRequest{Class: spark.BackgroundCI})
		named := f.submit(t, spark.SubmitRequest{Class: spark.BackgroundCI, Host: "spark-1"}) // naming the host, it may borrow it
		f.reconcile(t)
		if st := f.status(t, named.ID).Request; st.State != spark.Active || !slices.Equal(st.Hosts, []string{"spark-1"}) {
			t.Errorf("the request naming spark-1 is %s on %v, want active on spark-1 once the lending for it is done", st.State, st.Hosts)
		}
		f.reconcile(t)
		st := f.status(t, unnamed.ID)
		if st.Request.State != spark.Queued {
			t.Errorf("background CI naming no host (priority 20) is %s on %v: it borrowed the service host", st.Request.State, st.Request.Hosts)
		}
		if f.status(t, busy.ID).Request.State != spark.Active {
			t.Error("the merge CI on spark-2 ended")
		}
	})
}
