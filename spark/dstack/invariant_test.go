package dstack_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/gpugate/gpugate/spark/dstack"
	"github.com/gpugate/gpugate/spark/dstack/dstacktest"
)

type simLease struct {
	work    dstack.LeaseWork
	active  bool
	started bool
}

var faultPaths = []string{applyPath, getPath, fleetPath, stopPath, listPath}

// TestInvariant_EveryStartedRunIsStoppedOrNamedOnceItsLeaseEnds grants,
// starts, releases and sweeps random leases against the fake while
// random faults (error statuses, lost and dropped answers, hung calls,
// malformed answers) hit every path, and checks after each sweep that
// every run of an ended lease is stopped or named in the sweep's error;
// that no lease ever has two runs; that a run only ever lands on its
// lease's hosts; and that once the faults stop, one sweep stops them all.
func TestInvariant_EveryStartedRunIsStoppedOrNamedOnceItsLeaseEnds(t *testing.T) {
	var total simStats
	for trial := range 30 {
		t.Run(fmt.Sprint(trial), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := simulate(t, rand.New(rand.NewPCG(uint64(trial), 0xd57ac)))
				total.runs += s.runs
				total.swept += s.swept
				total.faults += s.faults
			})
		})
	}
	// The walk must reach what it checks.
	if total.runs < 100 || total.swept < 20 || total.faults < 100 {
		t.Errorf("the walk made %d runs, swept %d and hit %d faults: too few to check anything", total.runs, total.swept, total.faults)
	}
}

type simStats struct{ runs, swept, faults int }

func simulate(t *testing.T, rng *rand.Rand) simStats {
	var st simStats
	f := newFixture(t, "cluster")
	b := f.b
	leases := map[string]*simLease{}
	var order []string
	busy := map[string]string{} // host → the active lease holding it
	start := func(l *simLease) {
		if _, err := b.Start(ctx, l.work); err == nil {
			l.started = true
		}
	}
	activeFn := func(id string) (bool, error) {
		if rng.IntN(20) == 0 {
			return false, errors.New("the controller's store did not answer")
		}
		l, ok := leases[id]
		return ok && l.active, nil
	}
	next := 0
	for step := range 80 {
		if rng.IntN(3) == 0 {
			f.srv.AddFault(dstacktest.RandomFault(rng, faultPaths))
		}
		switch op := rng.IntN(12); {
		case op < 3: // grant
			var free []string
			for _, h := range []string{"spark-1", "spark-2", "spark-3"} {
				if busy[h] == "" {
					free = append(free, h)
				}
			}
			if len(free) == 0 {
				continue
			}
			rng.Shuffle(len(free), func(i, j int) { free[i], free[j] = free[j], free[i] })
			next++
			id := fmt.Sprintf("r-%016x", next)
			var w dstack.LeaseWork
			switch {
			case len(free) >= 2 && rng.IntN(3) == 0:
				w = ciWork(id, free[0], free[1])
			case rng.IntN(3) == 0:
				w = devWork(id, free[0])
			default:
				w = ciWork(id, free[0])
			}
			l := &simLease{work: w, active: true}
			leases[id], order = l, append(order, id)
			for _, h := range w.Hosts {
				busy[h] = id
			}
			start(l)
		case op < 5: // the controller retries the starts that failed
			for _, id := range order {
				if l := leases[id]; l.active && !l.started {
					start(l)
				}
			}
		case op < 7: // release
			var live []string
			for _, id := range order {
				if leases[id].active {
					live = append(live, id)
				}
			}
			if len(live) == 0 {
				continue
			}
			l := leases[live[rng.IntN(len(live))]]
			l.active = false
			for _, h := range l.work.Hosts {
				delete(busy, h)
			}
			b.Stop(ctx, b.RunName(l.work.LeaseID)) // may fail: the sweep is the backstop
		case op < 10: // a round's sweep
			stopped, err := b.Sweep(ctx, activeFn)
			st.swept += len(stopped)
			checkSweep(t, f.srv, leases, stopped, err, step)
		case op < 11:
			f.srv.Progress()
			if runs := f.srv.Runs(); len(runs) > 0 && rng.IntN(3) == 0 {
				if r := runs[rng.IntN(len(runs))]; r.Status == "running" {
					f.srv.Finish(r.Name, rng.IntN(2) == 0)
				}
			}
		default: // the controller restarts
			b = newBackend(t, f.c)
		}
	}
	f.srv.ClearFaults()
	stopped, err := b.Sweep(ctx, func(id string) (bool, error) { return leases[id].active, nil })
	if err != nil {
		t.Fatalf("the sweep without faults = %v", err)
	}
	checkSweep(t, f.srv, leases, stopped, nil, -1)
	st.swept += len(stopped)
	for _, r := range f.srv.Requests() {
		if r.Fault != "" {
			st.faults++
		}
	}
	st.runs = len(f.srv.Runs())
	perLease := map[string]int{}
	for _, r := range f.srv.Runs() {
		id := r.Env[dstack.EnvLeaseID]
		l, ok := leases[id]
		if !ok {
			t.Fatalf("run %s names no lease of the test", r.Name)
		}
		perLease[id]++
		if perLease[id] > 1 {
			t.Errorf("lease %s has %d runs: it ran twice", id, perLease[id])
		}
		want := leasedHostnames(l.work.Hosts...)
		for _, h := range r.Hosts {
			if !slices.Contains(want, h) {
				t.Errorf("run %s of lease %s (hosts %v) was placed on %s", r.Name, id, want, h)
			}
		}
		if len(r.Hosts) > 0 && len(r.Hosts) != len(want) {
			t.Errorf("run %s placed on %v, want %v", r.Name, r.Hosts, want)
		}
	}
	return st
}

// checkSweep: after a sweep, every unfinished run of an ended lease was
// stopped or is named in the sweep's error (which, when listing the runs
// failed, says so instead).
func checkSweep(t *testing.T, srv *dstacktest.Server, leases map[string]*simLease, stopped []string, err error, step int) {
	t.Helper()
	reqs := srv.Requests()
	listed := false
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].Path == listPath {
			listed = reqs[i].Status == 200 && reqs[i].Fault == ""
			break
		}
	}
	for _, name := range stopped {
		if r, ok := srv.Run(name); !ok || !r.StopRequested {
			t.Errorf("step %d: Sweep reported %s stopped, but the server has no stop for it", step, name)
		}
	}
	if !listed {
		if err == nil {
			t.Errorf("step %d: the listing failed and Sweep said nothing", step)
		}
		return
	}
	for _, r := range srv.Runs() {
		l := leases[r.Env[dstack.EnvLeaseID]]
		if r.Deleted || r.Finished() || r.StopRequested || l == nil || l.active {
			continue
		}
		if err == nil || !strings.Contains(err.Error(), r.Name) {
			t.Errorf("step %d: run %s of ended lease %s is %s, not stopped and not named in the sweep's error %v", step, r.Name, l.work.LeaseID, r.Status, err)
		}
	}
}
