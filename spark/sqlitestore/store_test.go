package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/sparktest"
)

var ctx = context.Background()

// open opens the database at path, creating it the first time.
func open(t testing.TB, path string) *Store {
	t.Helper()
	s, err := openOrCreate(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func openOrCreate(path string) (*Store, error) {
	if _, err := os.Stat(path); err != nil {
		return Create(path)
	}
	return Open(path)
}

func TestTransactionsAreAllOrNothing(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "spark.db"))
	defer s.Close()
	boom := errors.New("boom")
	err := s.Tx(ctx, func(tx spark.Tx) error {
		tx.PutRequest(spark.Request{ID: "a", State: spark.Queued, Seq: 1})
		tx.NextToken()
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
	s.Tx(ctx, func(tx spark.Tx) error {
		if _, ok, _ := tx.Request("a"); ok {
			t.Error("a rolled-back request is visible")
		}
		if tok, _ := tx.NextToken(); tok != 1 {
			t.Errorf("token %d after a rolled-back allocation, want 1", tok)
		}
		return nil
	})
	s.Tx(ctx, func(tx spark.Tx) error {
		tx.PutHost(spark.Host{Name: "h", Mode: spark.Idle})
		tx.PutRequest(spark.Request{ID: "b", State: spark.Queued, Seq: 2})
		tx.PutRequest(spark.Request{ID: "c", State: spark.Active, Seq: 3})
		return tx.AppendEvent(spark.Event{Kind: "k", At: time.Now()})
	})
	s.Tx(ctx, func(tx spark.Tx) error {
		q, _ := tx.Requests(spark.Queued)
		all, _ := tx.Requests()
		hosts, _ := tx.Hosts()
		evs, _ := tx.Events(10)
		if len(q) != 1 || q[0].ID != "b" || len(all) != 2 || len(hosts) != 1 || len(evs) != 1 {
			t.Errorf("queued %v all %v hosts %v events %v", q, all, hosts, evs)
		}
		return nil
	})
}

func TestFencingTokensStrictlyIncreaseAcrossReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spark.db")
	var last int64
	for range 3 {
		s := open(t, path)
		s.Tx(ctx, func(tx spark.Tx) error {
			tok, err := tx.NextToken()
			if err != nil || tok <= last {
				t.Errorf("token %d after %d (%v)", tok, last, err)
			}
			last = tok
			return err
		})
		s.Close()
	}
}

func TestSchemaMigrationsAreVersioned(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spark.db")
	open(t, path).Close()
	open(t, path).Close() // idempotent
	db, _ := sql.Open("sqlite", "file:"+path)
	db.Exec(`UPDATE schema_version SET version = 99`)
	db.Close()
	if _, err := Open(path); err == nil {
		t.Error("a newer schema must be refused")
	}
}

// TestCrashHelper is the child process of the crash test: it is killed in
// the middle of a transaction.
func TestCrashHelper(t *testing.T) {
	path := os.Getenv("SPARK_CRASH_DB")
	if path == "" {
		t.Skip("the crash test's child process")
	}
	s, err := openOrCreate(path)
	if err != nil {
		os.Exit(3)
	}
	// One committed transaction, then one killed halfway.
	s.Tx(ctx, func(tx spark.Tx) error {
		for i := range 10 {
			seq, _ := tx.NextSeq()
			tx.PutRequest(spark.Request{ID: fmt.Sprint("committed-", i), State: spark.Queued, Seq: seq})
		}
		return nil
	})
	s.Tx(ctx, func(tx spark.Tx) error {
		for i := range 1000 {
			seq, _ := tx.NextSeq()
			tx.PutRequest(spark.Request{ID: fmt.Sprint("torn-", i), State: spark.Queued, Seq: seq})
			if i == 500 {
				tx.NextToken()
				self, _ := os.FindProcess(os.Getpid())
				self.Kill() // SIGKILL, or TerminateProcess on Windows: no deferred code runs
			}
		}
		return nil
	})
	os.Exit(4) // not reached
}

func TestACrashMidTransactionLeavesTheLastCommittedState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spark.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SPARK_CRASH_DB="+path)
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the child was not killed mid-transaction: %v", err)
	}
	s := open(t, path)
	defer s.Close()
	s.Tx(ctx, func(tx spark.Tx) error {
		all, err := tx.Requests()
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 10 || all[0].ID != "committed-0" {
			t.Errorf("%d requests after the crash, want the 10 committed", len(all))
		}
		seq, _ := tx.NextSeq()
		tok, _ := tx.NextToken()
		if seq != 11 || tok&(1<<32-1) != 1 { // the epoch, in the high bits, moves at every open

			t.Errorf("counters seq %d token %d: the torn transaction leaked", seq, tok)
		}
		return nil
	})
}

// TestRandomSequencesRestartingOnTheSameFile runs the scheduler's
// randomized invariants on SQLite, reopening the database file at every
// controller restart.
func TestRandomSequencesRestartingOnTheSameFile(t *testing.T) {
	for seed := range uint64(25) {
		synctest.Test(t, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "spark.db")
			sparktest.RandomSequence(t, 10_000+seed, func() spark.Store { return open(t, path) })
		})
	}
}

func TestControllerOverSQLite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := open(t, filepath.Join(t.TempDir(), "spark.db"))
		defer s.Close()
		opts := spark.DefaultOptions()
		opts.Service = &sparktest.Service{}
		c, err := spark.New(s, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range []string{"spark-1", "spark-2"} {
			c.Heartbeat(ctx, spark.HostReport{Host: h})
		}
		r, err := c.Submit(ctx, spark.SubmitRequest{Class: spark.ManualPR, PR: &spark.PRRef{Repo: "o/r", Number: 1, SHA: "abc"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		st, err := c.Status(ctx, r.ID)
		if err != nil || st.Request.State != spark.Active || !slices.Equal(st.Request.Hosts, []string{"spark-2"}) {
			t.Errorf("%+v %v", st, err)
		}
	})
}

// queued is a controller over a new SQLite store with n requests queued
// for spark-2, in every CI class in turn; the store closes with the test.
func queued(tb testing.TB, n int) *spark.Controller {
	tb.Helper()
	s := open(tb, filepath.Join(tb.TempDir(), "spark.db"))
	tb.Cleanup(func() { s.Close() })
	opts := spark.DefaultOptions()
	opts.Service = &sparktest.Service{}
	c, err := spark.New(s, opts)
	if err != nil {
		tb.Fatal(err)
	}
	classes := []spark.Class{spark.ManualPR, spark.MergeCI, spark.Benchmark, spark.BackgroundCI}
	for i := range n {
		if _, err := c.Submit(ctx, spark.SubmitRequest{Class: classes[i%len(classes)], Host: "spark-2"}); err != nil {
			tb.Fatal(err)
		}
	}
	return c
}

// The dashboard's queue positions are the ones Status reports: one plan
// read for all of them.
func TestDashboard_PositionsAreStatusPositions(t *testing.T) {
	c := queued(t, 12)
	snap, err := c.Dashboard(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, r := range snap.Reservations {
		if r.State != spark.Queued {
			continue
		}
		st, err := c.Status(ctx, r.ID)
		if err != nil || st.Position != r.Position || r.Position == 0 {
			t.Errorf("%s: dashboard position %d, status %d (%v)", r.ID, r.Position, st.Position, err)
		}
		seen++
	}
	if seen != 12 {
		t.Errorf("%d queued reservations on the dashboard, want 12", seen)
	}
}
