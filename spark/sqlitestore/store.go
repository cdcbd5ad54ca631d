// Package sqlitestore is the authoritative spark.Store: SQLite through
// modernc.org/sqlite (no cgo), WAL mode, BEGIN IMMEDIATE for every
// transaction, schema migrations versioned in code, and a single writer
// connection. A crash at any point leaves the last committed state.
package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"

	_ "modernc.org/sqlite" // the pure-Go SQLite driver

	"github.com/gpugate/gpugate/spark"
)

// migrations are applied in order; a database records the highest applied.
var migrations = []string{
	1: `
CREATE TABLE hosts (name TEXT PRIMARY KEY, doc TEXT NOT NULL);
CREATE TABLE requests (id TEXT PRIMARY KEY, state TEXT NOT NULL, seq INTEGER NOT NULL, doc TEXT NOT NULL);
CREATE INDEX requests_by_state ON requests (state, seq);
CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT NOT NULL, doc TEXT NOT NULL);
INSERT INTO counters (name, value) VALUES ('token', 0), ('seq', 0);
`,
}

// SchemaVersion is the version Open migrates to.
const SchemaVersion = 1

// Store is a SQLite-backed spark.Store.
type Store struct{ db *sql.DB }

var _ spark.Store = (*Store)(nil)

// Open opens (creating and migrating) the database at path.
func Open(path string) (*Store, error) {
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "busy_timeout(10000)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1) // the single writer
	s := &Store{db: db}
	if err := s.migrate(); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) migrate() error {
	ctx := context.Background()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlitestore: migrate: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("sqlitestore: migrate: %w", err)
	}
	var v int
	switch err := tx.QueryRow(`SELECT version FROM schema_version`).Scan(&v); {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := tx.Exec(`INSERT INTO schema_version (version) VALUES (0)`); err != nil {
			return fmt.Errorf("sqlitestore: migrate: %w", err)
		}
	case err != nil:
		return fmt.Errorf("sqlitestore: migrate: %w", err)
	}
	if v > SchemaVersion {
		return fmt.Errorf("sqlitestore: the database is at schema %d, newer than this build's %d", v, SchemaVersion)
	}
	for next := v + 1; next <= SchemaVersion; next++ {
		if _, err := tx.Exec(migrations[next]); err != nil {
			return fmt.Errorf("sqlitestore: migration %d: %w", next, err)
		}
	}
	if _, err := tx.Exec(`UPDATE schema_version SET version = ?`, SchemaVersion); err != nil {
		return fmt.Errorf("sqlitestore: migrate: %w", err)
	}
	return tx.Commit()
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Tx runs fn inside BEGIN IMMEDIATE … COMMIT; any error rolls back.
func (s *Store) Tx(ctx context.Context, fn func(spark.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlitestore: begin: %w", err)
	}
	if err := fn(&sqlTx{tx}); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlitestore: commit: %w", err)
	}
	return nil
}

type sqlTx struct{ tx *sql.Tx }

func (t *sqlTx) Hosts() ([]spark.Host, error) {
	rows, err := t.tx.Query(`SELECT doc FROM hosts ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: hosts: %w", err)
	}
	return scan[spark.Host](rows)
}

func scan[T any](rows *sql.Rows) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		var doc string
		if err := rows.Scan(&doc); err != nil {
			return nil, fmt.Errorf("sqlitestore: scan: %w", err)
		}
		var v T
		if err := json.Unmarshal([]byte(doc), &v); err != nil {
			return nil, fmt.Errorf("sqlitestore: decode: %w", err)
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func (t *sqlTx) PutHost(h spark.Host) error {
	doc, err := json.Marshal(h)
	if err != nil {
		return err
	}
	_, err = t.tx.Exec(`INSERT INTO hosts (name, doc) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET doc = excluded.doc`, h.Name, string(doc))
	if err != nil {
		return fmt.Errorf("sqlitestore: put host: %w", err)
	}
	return nil
}

func (t *sqlTx) Requests(states ...spark.State) ([]spark.Request, error) {
	var rows *sql.Rows
	var err error
	if len(states) == 0 {
		rows, err = t.tx.Query(`SELECT doc FROM requests ORDER BY seq`)
	} else {
		args := make([]any, len(states))
		marks := "?"
		for i, s := range states {
			args[i] = string(s)
			if i > 0 {
				marks += ", ?"
			}
		}
		rows, err = t.tx.Query(`SELECT doc FROM requests WHERE state IN (`+marks+`) ORDER BY seq`, args...)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: requests: %w", err)
	}
	return scan[spark.Request](rows)
}

func (t *sqlTx) Request(id string) (spark.Request, bool, error) {
	var doc string
	switch err := t.tx.QueryRow(`SELECT doc FROM requests WHERE id = ?`, id).Scan(&doc); {
	case errors.Is(err, sql.ErrNoRows):
		return spark.Request{}, false, nil
	case err != nil:
		return spark.Request{}, false, fmt.Errorf("sqlitestore: request: %w", err)
	}
	var r spark.Request
	if err := json.Unmarshal([]byte(doc), &r); err != nil {
		return spark.Request{}, false, fmt.Errorf("sqlitestore: decode request: %w", err)
	}
	return r, true, nil
}

func (t *sqlTx) PutRequest(r spark.Request) error {
	doc, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = t.tx.Exec(`INSERT INTO requests (id, state, seq, doc) VALUES (?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET state = excluded.state, seq = excluded.seq, doc = excluded.doc`, r.ID, string(r.State), r.Seq, string(doc))
	if err != nil {
		return fmt.Errorf("sqlitestore: put request: %w", err)
	}
	return nil
}

func (t *sqlTx) next(name string) (int64, error) {
	var v int64
	if err := t.tx.QueryRow(`UPDATE counters SET value = value + 1 WHERE name = ? RETURNING value`, name).Scan(&v); err != nil {
		return 0, fmt.Errorf("sqlitestore: next %s: %w", name, err)
	}
	return v, nil
}

// NextToken allocates a fencing token in this transaction: committed with
// the grant or not at all, so tokens strictly increase across restarts.
func (t *sqlTx) NextToken() (int64, error) { return t.next("token") }
func (t *sqlTx) NextSeq() (int64, error)   { return t.next("seq") }

func (t *sqlTx) AppendEvent(e spark.Event) error {
	doc, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if _, err := t.tx.Exec(`INSERT INTO events (at, doc) VALUES (?, ?)`, e.At.UTC().Format(time.RFC3339Nano), string(doc)); err != nil {
		return fmt.Errorf("sqlitestore: event: %w", err)
	}
	return nil
}

func (t *sqlTx) Events(limit int) ([]spark.Event, error) {
	if limit <= 0 {
		limit = 1000
	}
	rows, err := t.tx.Query(`SELECT doc FROM (SELECT id, doc FROM events ORDER BY id DESC LIMIT ?) ORDER BY id`, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: events: %w", err)
	}
	return scan[spark.Event](rows)
}
