package sqlitestore

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/sparktest"
)

// The admission benchmarks run at 100 queued requests (realistic), 10,000
// and 100,000, on SQLite and in memory side by side. Each reports the
// median and 99th-percentile latency of the call it measures; the goals
// are Reconcile p99 under 5 ms and Dashboard under 50 ms at 10,000 queued
// on SQLite, growing at most logarithmically with the queue.

var benchSizes = []int{100, 10_000, 100_000}

var benchStores = []struct {
	name string
	open func(testing.TB) spark.Store
}{
	{"sqlite", func(tb testing.TB) spark.Store {
		s := open(tb, filepath.Join(tb.TempDir(), "spark.db"))
		tb.Cleanup(func() { s.Close() })
		return s
	}},
	{"memory", func(testing.TB) spark.Store { return sparktest.NewStore() }},
}

// benchFleet is the two-host fleet over store with n requests queued, in
// every CI class in turn and a tenth of them for a pull request; grants
// collects what each pass granted.
type benchFleet struct {
	c      *spark.Controller
	store  spark.Store
	grants []spark.Request
	next   int
}

func newBenchFleet(tb testing.TB, store spark.Store, n int) *benchFleet {
	tb.Helper()
	f := &benchFleet{store: store}
	opts := spark.DefaultOptions()
	opts.Service = &sparktest.Service{}
	opts.OnGrant = func(r spark.Request) { f.grants = append(f.grants, r) }
	c, err := spark.New(store, opts)
	if err != nil {
		tb.Fatal(err)
	}
	f.c = c
	f.fill(tb, n)
	return f
}

// fill queues n requests in one transaction, as Submit would store them.
func (f *benchFleet) fill(tb testing.TB, n int) {
	tb.Helper()
	classes := []spark.Class{spark.ManualPR, spark.MergeCI, spark.Benchmark, spark.BackgroundCI}
	prio := spark.DefaultPriorities()
	err := f.store.Tx(context.Background(), func(tx spark.Tx) error {
		for range n {
			seq, err := tx.NextSeq()
			if err != nil {
				return err
			}
			f.next++
			class := classes[f.next%len(classes)]
			r := spark.Request{ID: fmt.Sprintf("bench-%07d", f.next), Class: class, Topology: spark.Single,
				Priority: prio[class], Seq: seq, State: spark.Queued, Duration: time.Hour, Submitted: time.Now()}
			if f.next%10 == 0 {
				r.PR = &spark.PRRef{Repo: "o/r", Number: f.next, SHA: "abc1234"}
			}
			if err := tx.PutRequest(r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
}

// free releases every lease granted so far, so that the next pass has
// hosts to place.
func (f *benchFleet) free(tb testing.TB) {
	for _, g := range f.grants {
		if err := f.c.Release(context.Background(), g.ID, g.Token); err != nil {
			tb.Fatal(err)
		}
	}
	f.fill(tb, len(f.grants)) // keep the queue at its length
	f.grants = f.grants[:0]
	for _, h := range []string{"spark-1", "spark-2"} {
		f.c.Heartbeat(context.Background(), spark.HostReport{Host: h})
	}
}

// measure runs op b.N times, with prepare before each run untimed, and
// reports the median and 99th-percentile latency, wall clock and CPU time
// of the thread that ran it (on Linux; the store runs in the caller's
// goroutine).
func measure(b *testing.B, prepare, op func() error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var wall, cpu []time.Duration
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		if err := prepare(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start, startCPU := time.Now(), threadCPU()
		if err := op(); err != nil {
			b.Fatal(err)
		}
		wall, cpu = append(wall, time.Since(start)), append(cpu, threadCPU()-startCPU)
	}
	for _, m := range []struct {
		name string
		lat  []time.Duration
	}{{"", wall}, {"cpu-", cpu}} {
		slices.Sort(m.lat)
		b.ReportMetric(float64(m.lat[len(m.lat)/2].Microseconds())/1000, m.name+"p50-ms")
		b.ReportMetric(float64(m.lat[len(m.lat)*99/100].Microseconds())/1000, m.name+"p99-ms")
	}
}

func benchEach(b *testing.B, run func(b *testing.B, f *benchFleet)) {
	for _, st := range benchStores {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%s/queued=%d", st.name, n), func(b *testing.B) {
				run(b, newBenchFleet(b, st.open(b), n))
			})
		}
	}
}

// BenchmarkReconcile measures one admission pass that places both hosts
// (their leases are released before each pass).
func BenchmarkReconcile(b *testing.B) {
	benchEach(b, func(b *testing.B, f *benchFleet) {
		ctx := context.Background()
		measure(b, func() error { f.free(b); return nil }, func() error { return f.c.Reconcile(ctx) })
	})
}

// BenchmarkSubmit measures submitting a pull request's new commit, which
// supersedes its queued older one.
func BenchmarkSubmit(b *testing.B) {
	benchEach(b, func(b *testing.B, f *benchFleet) {
		ctx := context.Background()
		i := 0
		measure(b, func() error { i++; return nil }, func() error {
			_, err := f.c.Submit(ctx, spark.SubmitRequest{Class: spark.ManualPR, PR: &spark.PRRef{Repo: "o/r", Number: 10, SHA: fmt.Sprintf("%07x", i)}})
			return err
		})
	})
}

// BenchmarkStatus measures the status of the last queued request: its
// position and why it waits.
func BenchmarkStatus(b *testing.B) {
	benchEach(b, func(b *testing.B, f *benchFleet) {
		ctx := context.Background()
		last := fmt.Sprintf("bench-%07d", f.next)
		measure(b, func() error { return nil }, func() error {
			st, err := f.c.Status(ctx, last)
			if err == nil && st.Position == 0 {
				err = fmt.Errorf("%s has no queue position", last)
			}
			return err
		})
	})
}

// BenchmarkDashboard measures the sanitized dashboard snapshot.
func BenchmarkDashboard(b *testing.B) {
	benchEach(b, func(b *testing.B, f *benchFleet) {
		ctx := context.Background()
		measure(b, func() error { return nil }, func() error {
			_, err := f.c.Dashboard(ctx, nil)
			return err
		})
	})
}

// BenchmarkReconcile_QueueNamingABusyHost measures a pass over a queue
// whose requests all name spark-2, which is busy: none can be placed, and
// the pass reads none of them (each host's part of the queue has its own
// index).
func BenchmarkReconcile_QueueNamingABusyHost(b *testing.B) {
	for _, st := range benchStores {
		for _, n := range []int{10_000, 100_000} {
			b.Run(fmt.Sprintf("%s/queued=%d", st.name, n), func(b *testing.B) {
				store := st.open(b)
				opts := spark.DefaultOptions()
				opts.Service = &sparktest.Service{}
				c, err := spark.New(store, opts)
				if err != nil {
					b.Fatal(err)
				}
				prio := spark.DefaultPriorities()
				err = store.Tx(context.Background(), func(tx spark.Tx) error {
					for i := range n {
						seq, _ := tx.NextSeq()
						r := spark.Request{ID: fmt.Sprintf("named-%07d", i), Class: spark.BackgroundCI, Topology: spark.Single, Host: "spark-2",
							Priority: prio[spark.BackgroundCI], Seq: seq, State: spark.Queued, Duration: time.Hour, Submitted: time.Now()}
						if err := tx.PutRequest(r); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				beat := func() error {
					for _, h := range []string{"spark-1", "spark-2"} {
						if err := c.Heartbeat(ctx, spark.HostReport{Host: h}); err != nil {
							return err
						}
					}
					return nil
				}
				beat()
				if err := c.Reconcile(ctx); err != nil { // spark-2 taken by the first
					b.Fatal(err)
				}
				measure(b, beat, func() error { return c.Reconcile(ctx) })
			})
		}
	}
}
