package sparkgh

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpugate/gpugate/internal/faketime"
	"github.com/gpugate/gpugate/spark"
)

// SweepRegisteredRunners removes what a restart made Sync forget: the
// idle registration of a reservation whose lease ended (here while sparkd
// was down, so this integration never saw the grant). It leaves a live
// lease's runner, a busy one (it removes itself after its job), and any
// runner that is not the fleet's.
func TestSweepRegisteredRunners_RemovesIdleRunnersOfEndedLeasesOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, false)
		w.label(t, "labeled", "spark-test", "maint", prJSON(7, sha1, []string{"spark-test"}, false))
		w.tick(t) // granted: its runner is minted
		_, live, _ := w.c.Snapshot(ctx)
		ended := RunnerName(live[0].ID)
		faketime.Advance(time.Until(live[0].Expires) + time.Second)
		// sparkd restarts, and the lease expires before its job ran: the
		// new integration never saw the grant.
		restarted, err := New(DefaultConfig("webhook-secret-123"), w.c, w.gh, nil)
		if err != nil {
			t.Fatal(err)
		}
		w.in = restarted
		busyEnded := RunnerName("r-busy")
		w.label(t, "labeled", "spark-test-long", "maint", prJSON(7, sha1, []string{"spark-test", "spark-test-long"}, false))
		w.tick(t)
		_, live, _ = w.c.Snapshot(ctx)
		active := RunnerName(live[0].ID)
		if len(w.gh.removed) != 0 {
			t.Fatalf("removed %v before the sweep", w.gh.removed)
		}
		w.gh.registered = []RegisteredRunner{{Name: ended}, {Name: active}, {Name: busyEnded, Busy: true}, {Name: "spark-unknown"}, {Name: "build-box-1"}}
		removed, err := restarted.SweepRegisteredRunners(ctx)
		if err != nil || !slices.Equal(removed, []string{ended}) || !slices.Equal(w.gh.removed, []string{ended}) {
			t.Errorf("removed %v (calls %v), %v; want only %s", removed, w.gh.removed, err, ended)
		}
		if st, _ := w.c.Status(ctx, live[0].ID); st.Request.State != spark.Active {
			t.Errorf("the live lease is %s", st.Request.State)
		}
	})
}
