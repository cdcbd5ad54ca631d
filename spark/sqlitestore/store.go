// Package sqlitestore is the authoritative spark.Store: SQLite through
// modernc.org/sqlite (no cgo), WAL mode, BEGIN IMMEDIATE for every
// transaction, schema migrations versioned in code, and a single writer
// connection. A crash at any point leaves the last committed state.
//
// It refuses damage rather than serve it: Open opens only an existing
// fleet database (Create starts a new one), refuses an empty, foreign or
// damaged file, and refuses an older copy than the one it last opened
// (the epoch recorded beside the database). Fencing tokens carry the
// restore epoch, so Restore, which advances it, never lets a token go
// backwards. Backup is an online, consistent copy.
package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
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
	2: `INSERT INTO counters (name, value) VALUES ('epoch', 0);`,
	// The queue in admission order, borrowers, classes and pull requests
	// as indexes; the queue's length as a counter kept by triggers.
	3: `
ALTER TABLE requests ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE requests ADD COLUMN class TEXT NOT NULL DEFAULT '';
ALTER TABLE requests ADD COLUMN borrower INTEGER NOT NULL DEFAULT 0;
ALTER TABLE requests ADD COLUMN pr TEXT;
UPDATE requests SET
	priority = coalesce(json_extract(doc, '$.priority'), 0),
	class = coalesce(json_extract(doc, '$.class'), ''),
	borrower = coalesce(json_extract(doc, '$.class'), '') = 'development' OR coalesce(json_extract(doc, '$.topology'), '') = 'pair' OR coalesce(json_extract(doc, '$.host'), '') != '',
	pr = CASE WHEN json_extract(doc, '$.pr') IS NULL THEN NULL ELSE json_extract(doc, '$.pr.repo') || '#' || json_extract(doc, '$.pr.number') END;
CREATE INDEX requests_queue ON requests (priority DESC, seq) WHERE state = 'queued';
CREATE INDEX requests_borrowers ON requests (priority DESC, seq) WHERE state = 'queued' AND borrower;
CREATE INDEX requests_queued_class ON requests (class, seq) WHERE state = 'queued';
CREATE INDEX requests_queued_pr ON requests (pr, seq) WHERE state = 'queued';
INSERT INTO counters (name, value) VALUES ('queued', (SELECT count(*) FROM requests WHERE state = 'queued'));
CREATE TRIGGER requests_queued_insert AFTER INSERT ON requests WHEN new.state = 'queued'
BEGIN UPDATE counters SET value = value + 1 WHERE name = 'queued'; END;
CREATE TRIGGER requests_queued_update AFTER UPDATE OF state ON requests WHEN (old.state = 'queued') != (new.state = 'queued')
BEGIN UPDATE counters SET value = value + CASE WHEN new.state = 'queued' THEN 1 ELSE -1 END WHERE name = 'queued'; END;
CREATE TRIGGER requests_queued_delete AFTER DELETE ON requests WHEN old.state = 'queued'
BEGIN UPDATE counters SET value = value - 1 WHERE name = 'queued'; END;
`,
	// The event log's lineage: a random name for the database, and a
	// timeline that each restore moves on.
	4: `
CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO meta (name, value) VALUES ('fleet', lower(hex(randomblob(8))));
INSERT INTO counters (name, value) VALUES ('timeline', 0);
`,
	// The queue by the host a request names (admission reads only the
	// hosts that are free) and the queued pairs.
	5: `
ALTER TABLE requests ADD COLUMN host TEXT NOT NULL DEFAULT '';
ALTER TABLE requests ADD COLUMN topology TEXT NOT NULL DEFAULT '';
UPDATE requests SET host = coalesce(json_extract(doc, '$.host'), ''), topology = coalesce(json_extract(doc, '$.topology'), '');
CREATE INDEX requests_queue_host ON requests (host, priority DESC, seq) WHERE state = 'queued';
CREATE INDEX requests_borrowers_host ON requests (host, priority DESC, seq) WHERE state = 'queued' AND borrower;
CREATE INDEX requests_queued_pairs ON requests (seq) WHERE state = 'queued' AND topology = 'pair';
`,
}

// SchemaVersion is the version Open migrates to.
const SchemaVersion = 5

// Every statement a transaction runs, prepared once when the store
// opens: parsing them again in every transaction cost more than running
// them.
const (
	qHosts      = `SELECT doc FROM hosts ORDER BY name`
	qPutHost    = `INSERT INTO hosts (name, doc) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET doc = excluded.doc`
	qAll        = `SELECT doc FROM requests ORDER BY seq`
	qInStates   = `SELECT doc FROM requests WHERE state IN (SELECT value FROM json_each(?)) ORDER BY seq`
	qRequest    = `SELECT doc FROM requests WHERE id = ?`
	qPutRequest = `INSERT INTO requests (id, state, seq, doc, priority, class, borrower, pr, host, topology) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET state = excluded.state, seq = excluded.seq, doc = excluded.doc,
	priority = excluded.priority, class = excluded.class, borrower = excluded.borrower, pr = excluded.pr,
	host = excluded.host, topology = excluded.topology`
	qQueueFor     = `SELECT doc FROM requests INDEXED BY requests_queue_host WHERE state = 'queued' AND host = ? ORDER BY priority DESC, seq`
	qBorrowersFor = `SELECT doc FROM requests INDEXED BY requests_borrowers_host WHERE state = 'queued' AND borrower AND host = ? ORDER BY priority DESC, seq`
	qQueuedPairs  = `SELECT doc FROM requests INDEXED BY requests_queued_pairs WHERE state = 'queued' AND topology = 'pair' ORDER BY seq`
	qQueue        = `SELECT doc FROM requests INDEXED BY requests_queue WHERE state = 'queued' ORDER BY priority DESC, seq`
	qBorrowers    = `SELECT doc FROM requests INDEXED BY requests_borrowers WHERE state = 'queued' AND borrower ORDER BY priority DESC, seq`
	qQueuedOf     = `SELECT doc FROM requests INDEXED BY requests_queued_class WHERE state = 'queued' AND class = ? ORDER BY seq`
	qQueuedForPR  = `SELECT doc FROM requests INDEXED BY requests_queued_pr WHERE state = 'queued' AND pr = ? ORDER BY seq`
	qQueueLen     = `SELECT value FROM counters WHERE name = 'queued'`
	qQueueAhead   = `SELECT
	(SELECT count(*) FROM requests INDEXED BY requests_queue WHERE state = 'queued' AND priority > ?1) +
	(SELECT count(*) FROM requests INDEXED BY requests_queue WHERE state = 'queued' AND priority = ?1 AND seq < ?2)`
	qNext        = `UPDATE counters SET value = value + 1 WHERE name = ? RETURNING value`
	qEvent       = `INSERT INTO events (at, doc) VALUES (?, ?)`
	qEvents      = `SELECT doc FROM (SELECT id, doc FROM events ORDER BY id DESC LIMIT ?) ORDER BY id`
	qEventsSince = `SELECT id, doc FROM events WHERE id > ? ORDER BY id LIMIT ?`
	qLineage     = `SELECT (SELECT value FROM meta WHERE name = 'fleet') || '.' || (SELECT value FROM counters WHERE name = 'timeline')`
)

var statements = []string{qHosts, qPutHost, qAll, qInStates, qRequest, qPutRequest, qQueue, qBorrowers, qQueuedPairs,
	qQueuedOf, qQueuedForPR, qQueueLen, qQueueAhead, qNext, qEvent, qEvents, qEventsSince, qLineage}

// prepare prepares every statement, after the schema is current.
func (s *Store) prepare() error {
	s.stmts = make(map[string]*sql.Stmt, len(statements))
	for _, q := range statements {
		st, err := s.db.Prepare(q)
		if err != nil {
			return fmt.Errorf("sqlitestore: prepare: %w", err)
		}
		s.stmts[q] = st
	}
	return nil
}

// Store is a SQLite-backed spark.Store.
type Store struct {
	db    *sql.DB
	stmts map[string]*sql.Stmt // by query, prepared once
	// epoch is the high bits of every fencing token: advanced at every
	// open, after every backup and by every restore, so that a copy of
	// the database older than the last one opened here is refused.
	epoch atomic.Int64
	path  string
}

var _ spark.Store = (*Store)(nil)

// Errors Open, Create and Restore refuse a database with.
var (
	// ErrNoDatabase: the file does not exist. A new fleet starts only
	// when the operator says so (Create; sparkd -init).
	ErrNoDatabase = errors.New("sqlitestore: no fleet database at this path")
	// ErrNotFleetDB: the file is empty, not SQLite, or SQLite without
	// this store's schema. It is never taken for a new fleet: that would
	// forget every lease and reissue fencing tokens.
	ErrNotFleetDB = errors.New("sqlitestore: not a fleet database")
	// ErrDamaged: SQLite's integrity check failed.
	ErrDamaged = errors.New("sqlitestore: the fleet database is damaged")
	// ErrRolledBack: the database's epoch is older than the last one
	// this controller opened: it was replaced by an older copy without
	// Restore, and its fencing tokens would go backwards.
	ErrRolledBack = errors.New("sqlitestore: the fleet database is older than the one this controller last opened")
	// ErrExists: Create found a file at the path.
	ErrExists = errors.New("sqlitestore: a file already exists at this path")
)

// EpochFile is where the epoch a controller last opened is recorded,
// beside the database: path + EpochFile.
const EpochFile = ".epoch"

// Open opens an existing fleet database and checks it before anything is
// served: it must be this store's schema (an empty or foreign file is
// ErrNotFleetDB, a missing one ErrNoDatabase), pass SQLite's integrity
// check (ErrDamaged), and be no older than the epoch recorded beside it
// (ErrRolledBack).
func Open(path string) (*Store, error) { return openChecked(path, true) }

// openChecked is Open; a backup Restore reads is checked as Open checks, but
// nothing is written to it or beside it (advance false).
func openChecked(path string, advance bool) (*Store, error) {
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%w: %s: start a new fleet with sparkd -init (sqlitestore.Create), or point -db at the existing database", ErrNoDatabase, path)
	case err != nil:
		return nil, fmt.Errorf("sqlitestore: %w", err)
	case !info.Mode().IsRegular():
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrNotFleetDB, path)
	case info.Size() == 0:
		return nil, fmt.Errorf("%w: %s is empty (0 bytes): restore the database from a backup (sparkd restore), or remove the file and start a new fleet with -init", ErrNotFleetDB, path)
	}
	if err := inspect(path); err != nil {
		return nil, err
	}
	s, err := openDB(path)
	if err != nil {
		return nil, err
	}
	if err := s.check(path, advance); err != nil {
		s.db.Close()
		return nil, err
	}
	return s, nil
}

// inspect checks, read-only (a foreign file is left exactly as it was),
// that path is this store's database and passes SQLite's integrity check.
// sqliteHeader reports whether the file starts as every SQLite database
// does.
func sqliteHeader(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 16)
	n, _ := io.ReadFull(f, head)
	return n == 16 && string(head) == "SQLite format 3\x00"
}

func inspect(path string) error {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('schema_version', 'requests', 'counters')`).Scan(&n); err != nil {
		if sqliteHeader(path) {
			// A SQLite file that cannot be read: damaged, not foreign.
			return fmt.Errorf("%w: %s: %v: restore it from a backup (sparkd restore)", ErrDamaged, path, err)
		}
		return fmt.Errorf("%w: %s: %v", ErrNotFleetDB, path, err)
	}
	if n != 3 {
		return fmt.Errorf("%w: %s is SQLite but has no fleet schema: point -db at the fleet's database", ErrNotFleetDB, path)
	}
	rows, err := db.Query(`PRAGMA integrity_check`)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrDamaged, path, err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if rows.Scan(&line) == nil && line != "ok" && len(problems) < 5 {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrDamaged, path, err)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s: %s: restore it from a backup (sparkd restore)", ErrDamaged, path, strings.Join(problems, "; "))
	}
	return nil
}

// Create makes a new, empty fleet database at path; a file already there
// is ErrExists.
func Create(path string) (*Store, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("%w: %s: open it without -init", ErrExists, path)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: create %s: %w", path, err)
	}
	f.Close()
	s, err := openDB(path)
	if err != nil {
		return nil, err
	}
	if err := s.migrate(); err != nil {
		s.db.Close()
		return nil, err
	}
	if err := s.loadEpoch(); err != nil {
		s.db.Close()
		return nil, err
	}
	s.path = path
	return s, recordEpoch(path, s.epoch.Load())
}

func openDB(path string) (*Store, error) {
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
	return &Store{db: db}, nil
}

// check migrates the database Open inspected and refuses an older copy
// than the last one this controller opened, then records its epoch.
func (s *Store) check(path string, advance bool) error {
	if err := s.migrate(); err != nil {
		return err
	}
	if err := s.loadEpoch(); err != nil {
		return err
	}
	seen, err := readEpoch(path)
	if err != nil {
		return err
	}
	if e := s.epoch.Load(); e < seen {
		return fmt.Errorf("%w: %s has epoch %d, this controller last opened epoch %d: an older copy replaced it; bring it back with sparkd restore, which advances the epoch so no fencing token is reissued", ErrRolledBack, path, e, seen)
	}
	s.path = path
	if !advance {
		return nil
	}
	return s.advanceEpoch(max(s.epoch.Load(), seen) + 1)
}

// advanceEpoch sets the database's epoch to next and records it beside
// it: every token from now on is above every token issued before, and a
// copy taken before now has an older epoch, which Open refuses.
func (s *Store) advanceEpoch(next int64) error {
	if _, err := s.db.Exec(`UPDATE counters SET value = ? WHERE name = 'epoch'`, next); err != nil {
		return fmt.Errorf("sqlitestore: advance the epoch: %w", err)
	}
	s.epoch.Store(next)
	return recordEpoch(s.path, next)
}

// loadEpoch reads the database's epoch.
func (s *Store) loadEpoch() error {
	var e int64
	if err := s.db.QueryRow(`SELECT value FROM counters WHERE name = 'epoch'`).Scan(&e); err != nil {
		return fmt.Errorf("sqlitestore: read the epoch: %w", err)
	}
	s.epoch.Store(e)
	return nil
}

// readEpoch is the epoch recorded beside the database (0 when none is).
func readEpoch(path string) (int64, error) {
	data, err := os.ReadFile(path + EpochFile)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: read %s: %w", path+EpochFile, err)
	}
	e, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil || e < 0 {
		return 0, fmt.Errorf("sqlitestore: %s holds %q, not an epoch: it records the last epoch this controller opened; restore it, never edit it", path+EpochFile, strings.TrimSpace(string(data)))
	}
	return e, nil
}

// recordEpoch records epoch beside the database when it is newer than
// what is recorded, whole or not at all.
func recordEpoch(path string, epoch int64) error {
	seen, err := readEpoch(path)
	if err != nil || seen >= epoch && fileExists(path+EpochFile) {
		return err
	}
	tmp := path + EpochFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.FormatInt(epoch, 10)+"\n"), 0o600); err != nil {
		return fmt.Errorf("sqlitestore: record the epoch: %w", err)
	}
	if err := os.Rename(tmp, path+EpochFile); err != nil {
		return fmt.Errorf("sqlitestore: record the epoch: %w", err)
	}
	return nil
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// Backup writes a consistent copy of the live database to dest (VACUUM
// INTO: online, while the controller serves). dest must not exist.
func (s *Store) Backup(ctx context.Context, dest string) error {
	if fileExists(dest) {
		return fmt.Errorf("%w: %s: back up to a new file", ErrExists, dest)
	}
	if _, err := s.db.ExecContext(ctx, `VACUUM INTO ?`, dest); err != nil {
		return fmt.Errorf("sqlitestore: back up to %s: %w", dest, err)
	}
	// The live database moves past the backup: the backup copied back by
	// hand is then older, and refused; sparkd restore advances it.
	return s.advanceEpoch(s.epoch.Load() + 1)
}

// Restore replaces the database at path with the backup at from, checked
// as Open checks, and advances its epoch past every epoch this controller
// has opened, so the fencing tokens it issues next are above every token
// it issued before. The controller must be stopped.
func Restore(from, path string) error {
	b, err := openChecked(from, false)
	if err != nil {
		return fmt.Errorf("sqlitestore: restore: the backup: %w", err)
	}
	backupEpoch := b.epoch.Load()
	b.db.Close()
	seen, err := readEpoch(path)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(from)
	if err != nil {
		return fmt.Errorf("sqlitestore: restore: %w", err)
	}
	tmp := path + ".restore"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("sqlitestore: restore: %w", err)
	}
	next := max(backupEpoch, seen) + 1
	r, err := openDB(tmp)
	if err == nil {
		_, err = r.db.Exec(`UPDATE counters SET value = ? WHERE name = 'epoch'`, next)
		if err == nil {
			// The restored log goes on from the backup's last event: a
			// new timeline, so its events are never taken for the ones
			// the replaced database appended after the backup.
			_, err = r.db.Exec(`UPDATE counters SET value = value + 1 WHERE name = 'timeline'`)
		}
		r.db.Close()
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("sqlitestore: restore: advance the epoch: %w", err)
	}
	for _, side := range []string{"-wal", "-shm"} {
		os.Remove(path + side) // the replaced database's journal is not the backup's
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("sqlitestore: restore: %w", err)
	}
	return recordEpoch(path, next)
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
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlitestore: migrate: %w", err)
	}
	return s.prepare()
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Tx runs fn inside BEGIN IMMEDIATE … COMMIT; any error rolls back.
func (s *Store) Tx(ctx context.Context, fn func(spark.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlitestore: begin: %w", err)
	}
	if err := fn(&sqlTx{tx: tx, stmts: s.stmts, epoch: s.epoch.Load()}); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlitestore: commit: %w", err)
	}
	return nil
}

type sqlTx struct {
	tx    *sql.Tx
	stmts map[string]*sql.Stmt
	epoch int64
}

// query, queryRow and exec run a prepared statement in the transaction.
func (t *sqlTx) query(q string, args ...any) (*sql.Rows, error) {
	return t.tx.Stmt(t.stmts[q]).Query(args...)
}
func (t *sqlTx) queryRow(q string, args ...any) *sql.Row {
	return t.tx.Stmt(t.stmts[q]).QueryRow(args...)
}
func (t *sqlTx) exec(q string, args ...any) (sql.Result, error) {
	return t.tx.Stmt(t.stmts[q]).Exec(args...)
}

func (t *sqlTx) Hosts() ([]spark.Host, error) {
	rows, err := t.query(qHosts)
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
	_, err = t.exec(qPutHost, h.Name, string(doc))
	if err != nil {
		return fmt.Errorf("sqlitestore: put host: %w", err)
	}
	return nil
}

func (t *sqlTx) Requests(states ...spark.State) ([]spark.Request, error) {
	var rows *sql.Rows
	var err error
	if len(states) == 0 {
		rows, err = t.query(qAll)
	} else {
		var in []byte
		if in, err = json.Marshal(states); err == nil {
			rows, err = t.query(qInStates, string(in))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: requests: %w", err)
	}
	return scan[spark.Request](rows)
}

func (t *sqlTx) Request(id string) (spark.Request, bool, error) {
	var doc string
	switch err := t.queryRow(qRequest, id).Scan(&doc); {
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
	var pr any
	if r.PR != nil {
		pr = prKey(r.PR.Repo, r.PR.Number)
	}
	_, err = t.exec(qPutRequest,
		r.ID, string(r.State), r.Seq, string(doc), r.Priority, string(r.Class), spark.Borrower(r), pr, r.Host, string(r.Topology))
	if err != nil {
		return fmt.Errorf("sqlitestore: put request: %w", err)
	}
	return nil
}

func prKey(repo string, number int) string { return repo + "#" + strconv.Itoa(number) }

// Queue reads the queue from its index in admission order, a row at a
// time, and stops reading when fn says so.
func (t *sqlTx) Queue(borrowersOnly bool, fn func(spark.Request) bool) error {
	q := qQueue
	if borrowersOnly {
		q = qBorrowers
	}
	return t.each(fn, q)
}

// QueueFor reads the queue of the requests naming host from its index.
// The plan reads several hosts' queues at once, and one prepared
// statement cannot run twice at a time: each read prepares its own.
func (t *sqlTx) QueueFor(host string, borrowersOnly bool, fn func(spark.Request) bool) error {
	q := qQueueFor
	if borrowersOnly {
		q = qBorrowersFor
	}
	rows, err := t.tx.Query(q, host)
	if err != nil {
		return fmt.Errorf("sqlitestore: queue for %q: %w", host, err)
	}
	return readEach(rows, fn)
}

func (t *sqlTx) QueuedPairs() ([]spark.Request, error) {
	rows, err := t.query(qQueuedPairs)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: queued pairs: %w", err)
	}
	return scan[spark.Request](rows)
}

// each reads requests from query q a row at a time, and stops reading
// when fn says so.
func (t *sqlTx) each(fn func(spark.Request) bool, q string, args ...any) error {
	rows, err := t.query(q, args...)
	if err != nil {
		return fmt.Errorf("sqlitestore: queue: %w", err)
	}
	return readEach(rows, fn)
}

// readEach decodes rows of request documents for fn until it says stop.
func readEach(rows *sql.Rows, fn func(spark.Request) bool) error {
	defer rows.Close()
	for rows.Next() {
		var doc []byte
		if err := rows.Scan(&doc); err != nil {
			return fmt.Errorf("sqlitestore: queue: %w", err)
		}
		var r spark.Request
		if err := json.Unmarshal(doc, &r); err != nil {
			return fmt.Errorf("sqlitestore: decode request: %w", err)
		}
		if !fn(r) {
			return nil
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sqlitestore: queue: %w", err)
	}
	return nil
}

func (t *sqlTx) QueuedOf(class spark.Class) ([]spark.Request, error) {
	rows, err := t.query(qQueuedOf, string(class))
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: queued %s: %w", class, err)
	}
	return scan[spark.Request](rows)
}

func (t *sqlTx) QueuedForPR(repo string, number int) ([]spark.Request, error) {
	rows, err := t.query(qQueuedForPR, prKey(repo, number))
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: queued for %s: %w", prKey(repo, number), err)
	}
	return scan[spark.Request](rows)
}

func (t *sqlTx) QueueLen() (int, error) {
	var n int
	if err := t.queryRow(qQueueLen).Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlitestore: queue length: %w", err)
	}
	return n, nil
}

// QueueAhead counts the index entries before r's place in the queue.
func (t *sqlTx) QueueAhead(r spark.Request) (int, error) {
	var n int
	err := t.queryRow(qQueueAhead, r.Priority, r.Seq).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: queue position: %w", err)
	}
	return n, nil
}

func (t *sqlTx) next(name string) (int64, error) {
	var v int64
	if err := t.queryRow(qNext, name).Scan(&v); err != nil {
		return 0, fmt.Errorf("sqlitestore: next %s: %w", name, err)
	}
	return v, nil
}

// NextToken allocates a fencing token in this transaction: committed with
// the grant or not at all, so tokens strictly increase across restarts.
// NextToken is the next fencing token: the restore epoch in the high 32
// bits, a counter below, so a token issued after a restore is above every
// token issued before it.
func (t *sqlTx) NextToken() (int64, error) {
	n, err := t.next("token")
	return t.epoch<<32 | n, err
}
func (t *sqlTx) NextSeq() (int64, error) { return t.next("seq") }

func (t *sqlTx) AppendEvent(e spark.Event) error {
	doc, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if _, err := t.exec(qEvent, e.At.UTC().Format(time.RFC3339Nano), string(doc)); err != nil {
		return fmt.Errorf("sqlitestore: event: %w", err)
	}
	return nil
}

func (t *sqlTx) EventsSince(after int64, limit int) ([]spark.Event, error) {
	limit = spark.EventLimit(limit)
	rows, err := t.query(qEventsSince, after, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: events since %d: %w", after, err)
	}
	defer rows.Close()
	var out []spark.Event
	for rows.Next() {
		var id int64
		var doc []byte
		if err := rows.Scan(&id, &doc); err != nil {
			return nil, fmt.Errorf("sqlitestore: events since %d: %w", after, err)
		}
		var e spark.Event
		if err := json.Unmarshal(doc, &e); err != nil {
			return nil, fmt.Errorf("sqlitestore: decode event %d: %w", id, err)
		}
		e.ID = id
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: events since %d: %w", after, err)
	}
	return out, nil
}

func (t *sqlTx) Lineage() (string, error) {
	var l string
	if err := t.queryRow(qLineage).Scan(&l); err != nil {
		return "", fmt.Errorf("sqlitestore: lineage: %w", err)
	}
	return l, nil
}

func (t *sqlTx) Events(limit int) ([]spark.Event, error) {
	limit = spark.EventLimit(limit)
	rows, err := t.query(qEvents, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: events: %w", err)
	}
	return scan[spark.Event](rows)
}
