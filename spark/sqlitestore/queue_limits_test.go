package sqlitestore

import (
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/sparktest"
)

// SQLite and the in-memory store read the same queue when a queued
// request is rewritten with another priority, class, pull request,
// topology or host (not only another state), inside the transaction and
// after it.
func TestStores_ReadTheSameQueue_WhenQueuedRequestsChangeTheirKeys(t *testing.T) {
	classes := []spark.Class{spark.ManualPR, spark.MergeCI, spark.Benchmark, spark.BackgroundCI, spark.Development, spark.ServiceStart}
	states := []spark.State{spark.Queued, spark.Queued, spark.Queued, spark.Active, spark.Released}
	for seed := range 30 {
		rng := rand.New(rand.NewPCG(uint64(seed), 17))
		stores := []spark.Store{open(t, filepath.Join(t.TempDir(), "spark.db")), sparktest.NewStore()}
		var known []spark.Request
		for round := range 20 {
			var changes []spark.Request
			for range 1 + rng.IntN(10) {
				var r spark.Request
				if len(known) > 0 && rng.IntN(2) == 0 {
					r = known[rng.IntN(len(known))]
					switch rng.IntN(6) {
					case 0:
						r.Priority = rng.IntN(5) * 10
					case 1:
						r.Class = classes[rng.IntN(len(classes))]
					case 2:
						if r.PR == nil {
							r.PR = &spark.PRRef{Repo: "o/r", Number: rng.IntN(4), SHA: "x"}
						} else {
							r.PR = nil
						}
					case 3:
						r.Topology = map[bool]spark.Topology{true: spark.Pair, false: spark.Single}[r.Topology == spark.Single]
					case 4:
						r.Host = map[bool]string{true: "h1", false: ""}[r.Host == ""]
					case 5:
						r.State = states[rng.IntN(len(states))]
					}
				} else {
					cl := classes[rng.IntN(len(classes))]
					r = spark.Request{ID: fmt.Sprintf("r%d-%d-%d", seed, round, len(known)), Class: cl, Topology: spark.Single,
						Priority: rng.IntN(5) * 10, Seq: int64(len(known) + 1), State: spark.Queued}
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
				if err := s.Tx(ctx, func(tx spark.Tx) error {
					for _, r := range changes {
						if err := tx.PutRequest(r); err != nil {
							return err
						}
					}
					inside = append(inside, viewQueue(t, tx))
					return nil
				}); err != nil {
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
		}
	}
}

// SQLite and the in-memory store read the same history for every limit:
// SQLite's LIMIT -1 means no limit, the memory store's means none, and
// their limit-0 Events differ too (SQLite: the newest 1000; memory: all).
func TestStores_ReadTheSameHistory_ForALimitOfZeroOrLess(t *testing.T) {
	stores := []spark.Store{open(t, filepath.Join(t.TempDir(), "spark.db")), sparktest.NewStore()}
	for _, s := range stores {
		s.Tx(ctx, func(tx spark.Tx) error {
			for i := range 1200 {
				tx.AppendEvent(spark.Event{Kind: fmt.Sprint("k", i)})
			}
			return nil
		})
	}
	for _, limit := range []int{-1, 0} {
		var since, newest []int
		for _, s := range stores {
			s.Tx(ctx, func(tx spark.Tx) error {
				es, _ := tx.EventsSince(0, limit)
				since = append(since, len(es))
				es, _ = tx.Events(limit)
				newest = append(newest, len(es))
				return nil
			})
		}
		if since[0] != since[1] {
			t.Errorf("EventsSince(0, %d): SQLite returns %d events, memory %d", limit, since[0], since[1])
		}
		if newest[0] != newest[1] {
			t.Errorf("Events(%d): SQLite returns %d events, memory %d", limit, newest[0], newest[1])
		}
	}
}

// The schema-3 migration fills the new columns from every existing row,
// odd ones too: a request document without a class or topology (an old
// or hand-repaired row, here an ended one) makes the borrower expression
// NULL, the NOT NULL column refuses it, and the whole upgrade fails: the
// fleet cannot start on its own database.
func TestMigrate_ARowWithoutClassOrTopologyDoesNotStopTheUpgrade(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spark.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{migrations[1], migrations[2], `CREATE TABLE schema_version (version INTEGER NOT NULL)`, `INSERT INTO schema_version VALUES (2)`,
		`INSERT INTO requests (id, state, seq, doc) VALUES ('old', 'released', 1, '{"id":"old","state":"released","seq":1}')`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	s, err := Open(path)
	if err != nil {
		t.Fatalf("opening a schema-2 database with an odd ended row: %v", err)
	}
	s.Close()
}
