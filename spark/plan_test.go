package spark_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/sparktest"
)

// countingStore counts the requests each transaction reads.
type countingStore struct {
	*sparktest.Store
	read int
}

func (s *countingStore) Tx(ctx context.Context, fn func(spark.Tx) error) error {
	return s.Store.Tx(ctx, func(tx spark.Tx) error { return fn(countingTx{tx, &s.read}) })
}

type countingTx struct {
	spark.Tx
	read *int
}

func (t countingTx) Requests(states ...spark.State) ([]spark.Request, error) {
	rs, err := t.Tx.Requests(states...)
	*t.read += len(rs)
	return rs, err
}

func (t countingTx) Queue(borrowersOnly bool, fn func(spark.Request) bool) error {
	return t.Tx.Queue(borrowersOnly, func(r spark.Request) bool { *t.read++; return fn(r) })
}

func (t countingTx) QueueFor(host string, borrowersOnly bool, fn func(spark.Request) bool) error {
	return t.Tx.QueueFor(host, borrowersOnly, func(r spark.Request) bool { *t.read++; return fn(r) })
}

func (t countingTx) QueuedPairs() ([]spark.Request, error) {
	rs, err := t.Tx.QueuedPairs()
	*t.read += len(rs)
	return rs, err
}

func (t countingTx) QueuedOf(class spark.Class) ([]spark.Request, error) {
	rs, err := t.Tx.QueuedOf(class)
	*t.read += len(rs)
	return rs, err
}

func (t countingTx) QueuedForPR(repo string, number int) ([]spark.Request, error) {
	rs, err := t.Tx.QueuedForPR(repo, number)
	*t.read += len(rs)
	return rs, err
}

// queue puts n requests made by make straight into the store, queued,
// each with the next submission sequence number.
func queue(t testing.TB, s spark.Store, n int, make func(i int) spark.Request) {
	t.Helper()
	err := s.Tx(ctx, func(tx spark.Tx) error {
		for i := range n {
			r := make(i)
			r.Seq, _ = tx.NextSeq()
			r.State, r.Duration, r.Submitted = spark.Queued, time.Hour, time.Now()
			if err := tx.PutRequest(r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// queueCI queues n CI requests of every class in turn, a tenth of them
// for a pull request, straight into the store.
func queueCI(t testing.TB, s spark.Store, n int) {
	classes := []spark.Class{spark.ManualPR, spark.MergeCI, spark.Benchmark, spark.BackgroundCI}
	prio := spark.DefaultPriorities()
	queue(t, s, n, func(i int) spark.Request {
		c := classes[i%len(classes)]
		r := spark.Request{ID: fmt.Sprintf("q%06d", i), Class: c, Topology: spark.Single, Priority: prio[c]}
		if i%10 == 0 {
			r.PR = &spark.PRRef{Repo: "o/r", Number: i, SHA: "abc1234"}
		}
		return r
	})
}

// An admission pass, a submission, a status and the dashboard read the
// head of the queue, not all of it: with 10,000 queued each reads a
// handful of requests.
func TestAdmission_ReadsTheHeadOfTheQueueNotAllOfIt(t *testing.T) {
	store := &countingStore{Store: sparktest.NewStore()}
	opts := spark.DefaultOptions()
	opts.Service = &sparktest.Service{}
	c, err := spark.New(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	queueCI(t, store, 10_000)
	for _, h := range []string{"spark-1", "spark-2"} {
		c.Heartbeat(ctx, spark.HostReport{Host: h})
	}
	for _, step := range []struct {
		name string
		most int
		run  func() error
	}{
		{"reconcile placing both hosts", 50, func() error { return c.Reconcile(ctx) }},
		{"reconcile with both hosts busy", 50, func() error { return c.Reconcile(ctx) }},
		{"submit superseding a PR's queued commit", 50, func() error {
			_, err := c.Submit(ctx, spark.SubmitRequest{Class: spark.ManualPR, PR: &spark.PRRef{Repo: "o/r", Number: 5000, SHA: "def5678"}})
			return err
		}},
		{"status of the last request", 50, func() error {
			st, err := c.Status(ctx, "q009999")
			if err == nil && st.Position == 0 {
				err = fmt.Errorf("no position")
			}
			return err
		}},
		{"a pull request's live requests (a GitHub event)", 50, func() error {
			live, err := c.LiveForPR(ctx, "o/r", 5000)
			if err == nil && len(live) == 0 {
				err = fmt.Errorf("PR 5000's requests not found")
			}
			return err
		}},
		{"dashboard listing the default 100", 110, func() error { _, err := c.Dashboard(ctx, nil); return err }},
	} {
		store.read = 0
		if err := step.run(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if store.read > step.most {
			t.Errorf("%s read %d requests of 10,000 queued; want at most %d", step.name, store.read, step.most)
		}
	}
}

// The dashboard lists the active reservations and the head of the queue,
// and counts the whole queue.
func TestDashboard_ListsTheHeadOfTheQueueAndCountsItAll(t *testing.T) {
	store := sparktest.NewStore()
	opts := spark.DefaultOptions()
	opts.Service = &sparktest.Service{}
	opts.DashboardQueue = 10
	c, err := spark.New(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	queueCI(t, store, 500)
	snap, err := c.Dashboard(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Queued != 500 || len(snap.Reservations) != 10 {
		t.Fatalf("queued %d, listed %d; want 500 counted and 10 listed", snap.Queued, len(snap.Reservations))
	}
	for i, r := range snap.Reservations {
		st, err := c.Status(ctx, r.ID)
		if err != nil || st.Position != i+1 || r.Position != i+1 {
			t.Errorf("%s listed at %d with position %d; status says %d (%v)", r.ID, i+1, r.Position, st.Position, err)
		}
	}
}
