package sqlitestore

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/sparktest"
)

// queueView is everything a transaction can read of the queue.
type queueView struct {
	Order, Borrowers []string
	Len              int
	Ahead            map[string]int
	Dev, Service     []string
	PR               map[int][]string
	ByHost           map[string][]string // QueueFor, all and borrowers only
	Pairs            []string
}

func viewQueue(t *testing.T, tx spark.Tx) queueView {
	t.Helper()
	v := queueView{Ahead: map[string]int{}, PR: map[int][]string{}, ByHost: map[string][]string{}}
	ids := func(rs []spark.Request, err error) []string {
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	var queued []spark.Request
	tx.Queue(false, func(r spark.Request) bool { queued = append(queued, r); v.Order = append(v.Order, r.ID); return true })
	tx.Queue(true, func(r spark.Request) bool { v.Borrowers = append(v.Borrowers, r.ID); return true })
	for _, r := range queued {
		n, err := tx.QueueAhead(r)
		if err != nil {
			t.Fatal(err)
		}
		v.Ahead[r.ID] = n
	}
	var err error
	if v.Len, err = tx.QueueLen(); err != nil {
		t.Fatal(err)
	}
	v.Dev, v.Service = ids(tx.QueuedOf(spark.Development)), ids(tx.QueuedOf(spark.ServiceStart))
	v.Pairs = ids(tx.QueuedPairs())
	for _, h := range []string{"", "spark-2"} {
		for _, only := range []bool{false, true} {
			key := h + fmt.Sprint(only)
			tx.QueueFor(h, only, func(r spark.Request) bool { v.ByHost[key] = append(v.ByHost[key], r.ID); return true })
		}
	}
	for pr := range 4 {
		v.PR[pr] = ids(tx.QueuedForPR("o/r", pr))
	}
	return v
}

// SQLite and the in-memory store read the same queue through every
// queue method, inside a transaction that has just changed it and after
// it commits, across random submissions, grants and ends.
func TestStores_ReadTheSameQueue(t *testing.T) {
	classes := []spark.Class{spark.ManualPR, spark.MergeCI, spark.Benchmark, spark.BackgroundCI, spark.Development, spark.ServiceStart}
	states := []spark.State{spark.Queued, spark.Queued, spark.Active, spark.Released, spark.Superseded}
	for seed := range 20 {
		rng := rand.New(rand.NewPCG(uint64(seed), 11))
		stores := []spark.Store{open(t, filepath.Join(t.TempDir(), "spark.db")), sparktest.NewStore()}
		var known []spark.Request
		for round := range 15 {
			// the same random changes for both stores
			var changes []spark.Request
			for range 1 + rng.IntN(8) {
				var r spark.Request
				if len(known) > 0 && rng.IntN(3) == 0 {
					r = known[rng.IntN(len(known))]
					r.State = states[rng.IntN(len(states))]
				} else {
					cl := classes[rng.IntN(len(classes))]
					r = spark.Request{ID: fmt.Sprintf("r%d-%d-%d", seed, round, len(known)), Class: cl, Topology: spark.Single,
						Priority: rng.IntN(4) * 10, Seq: int64(len(known) + 1), State: spark.Queued}
					if rng.IntN(4) == 0 {
						r.Topology = spark.Pair
					}
					if rng.IntN(3) == 0 {
						r.Host = "spark-2"
					}
					if rng.IntN(3) == 0 {
						r.PR = &spark.PRRef{Repo: "o/r", Number: rng.IntN(4), SHA: "abc"}
					}
					known = append(known, r)
				}
				for i := range known {
					if known[i].ID == r.ID {
						known[i] = r
					}
				}
				changes = append(changes, r)
			}
			var inside, after []queueView
			for _, s := range stores {
				err := s.Tx(ctx, func(tx spark.Tx) error {
					for _, r := range changes {
						if err := tx.PutRequest(r); err != nil {
							return err
						}
					}
					inside = append(inside, viewQueue(t, tx))
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				s.Tx(ctx, func(tx spark.Tx) error { after = append(after, viewQueue(t, tx)); return nil })
			}
			if d := cmp.Diff(inside[0], inside[1]); d != "" {
				t.Fatalf("seed %d round %d: inside the transaction (-sqlite +memory):\n%s", seed, round, d)
			}
			if d := cmp.Diff(after[0], after[1]); d != "" {
				t.Fatalf("seed %d round %d: after it (-sqlite +memory):\n%s", seed, round, d)
			}
			if d := cmp.Diff(inside[0], after[0]); d != "" {
				t.Fatalf("seed %d round %d: the commit changed the queue (-inside +after):\n%s", seed, round, d)
			}
		}
	}
}

// A database from before the queue's indexes (schema 2) keeps its queue:
// the migration fills the new columns from each request and counts the
// queue.
func TestMigrate_TheQueueIndexesAreBuiltFromExistingRequests(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spark.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	stmts := []string{migrations[1], migrations[2], `CREATE TABLE schema_version (version INTEGER NOT NULL)`, `INSERT INTO schema_version VALUES (2)`}
	old := []spark.Request{
		{ID: "bg", Class: spark.BackgroundCI, Topology: spark.Single, Priority: 10, Seq: 1, State: spark.Queued},
		{ID: "pr", Class: spark.ManualPR, Topology: spark.Single, Priority: 80, Seq: 2, State: spark.Queued, PR: &spark.PRRef{Repo: "o/r", Number: 3, SHA: "abc"}},
		{ID: "dev", Class: spark.Development, Topology: spark.Single, Priority: 100, Seq: 3, State: spark.Queued},
		{ID: "done", Class: spark.MergeCI, Topology: spark.Pair, Priority: 70, Seq: 4, State: spark.Released},
		{ID: "pair", Class: spark.Benchmark, Topology: spark.Pair, Priority: 40, Seq: 5, State: spark.Queued, Submitted: time.Now()},
	}
	for _, r := range old {
		doc, _ := jsonDoc(r)
		stmts = append(stmts, fmt.Sprintf(`INSERT INTO requests (id, state, seq, doc) VALUES (%q, %q, %d, '%s')`, r.ID, r.State, r.Seq, doc))
	}
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var got queueView
	s.Tx(ctx, func(tx spark.Tx) error { got = viewQueue(t, tx); return nil })
	want := queueView{Order: []string{"dev", "pr", "pair", "bg"}, Borrowers: []string{"dev", "pair"}, Len: 4,
		Ahead: map[string]int{"dev": 0, "pr": 1, "pair": 2, "bg": 3}, Dev: []string{"dev"},
		PR:     map[int][]string{0: nil, 1: nil, 2: nil, 3: {"pr"}},
		ByHost: map[string][]string{"false": {"dev", "pr", "pair", "bg"}, "true": {"dev", "pair"}}, Pairs: []string{"pair"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("the migrated queue (-want +got):\n%s", d)
	}
}

func jsonDoc(r spark.Request) (string, error) {
	b, err := json.Marshal(r)
	return string(b), err
}
