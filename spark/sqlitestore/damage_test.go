package sqlitestore

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpugate/gpugate/spark"
)

// A missing database is never taken for a new fleet: Open refuses it and
// creates nothing; only Create (sparkd -init) starts one, and Create never
// overwrites.
func TestOpen_AMissingDatabaseIsNeverANewFleet(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spark.db")
	if _, err := Open(path); !errors.Is(err, ErrNoDatabase) {
		t.Fatalf("err = %v, want ErrNoDatabase", err)
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatal("Open created the file")
	}
	s, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Create(path); !errors.Is(err, ErrExists) {
		t.Errorf("Create over an existing database: %v, want ErrExists", err)
	}
}

// An empty (0-byte) or foreign file is refused, and left as it was: a
// 0-byte file used to become a new fleet, forgetting every lease and
// reissuing fencing tokens from 1.
func TestOpen_AnEmptyOrForeignFileIsRefused(t *testing.T) {
	dir := t.TempDir()
	foreign := filepath.Join(dir, "other.db")
	db, err := sql.Open("sqlite", "file:"+foreign)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE notes (body TEXT)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	files := map[string][]byte{"empty.db": {}, "text.db": []byte("this is not a database\n")}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"empty.db", "text.db", "other.db"} {
		path := filepath.Join(dir, name)
		before, _ := os.ReadFile(path)
		if _, err := Open(path); !errors.Is(err, ErrNotFleetDB) {
			t.Errorf("%s: err = %v, want ErrNotFleetDB", name, err)
		}
		if after, _ := os.ReadFile(path); string(after) != string(before) {
			t.Errorf("%s: Open changed the file", name)
		}
	}
}

// SQLite's integrity check runs at open: a damaged database is refused
// before anything is served.
func TestOpen_ADamagedDatabaseIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spark.db")
	s := open(t, path)
	s.Tx(ctx, func(tx spark.Tx) error {
		for i := range 2000 {
			tx.PutRequest(spark.Request{ID: fmt.Sprintf("request-%04d", i), State: spark.Queued, Seq: int64(i)})
		}
		return nil
	})
	if _, err := s.db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Overwrite the middle pages (the header and the schema page stay).
	for i := len(data) / 3; i < 2*len(data)/3; i++ {
		data[i] = 0x5a
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path); !errors.Is(err, ErrDamaged) {
		t.Errorf("err = %v, want ErrDamaged", err)
	}
}

// Fencing tokens never go backwards, even after a restore from an older
// backup: an older copy put in place by hand is refused (its epoch is
// older than the one recorded beside it), and Restore advances the epoch,
// so the next token is above every token issued before.
func TestRestore_FencingTokensNeverGoBackwards(t *testing.T) {
	dir := t.TempDir()
	path, backup := filepath.Join(dir, "spark.db"), filepath.Join(dir, "backup.db")
	next := func(s *Store) (tok int64) {
		t.Helper()
		if err := s.Tx(ctx, func(tx spark.Tx) error {
			var err error
			tok, err = tx.NextToken()
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return tok
	}
	s := open(t, path)
	next(s)
	if err := s.Backup(ctx, backup); err != nil { // online, while open
		t.Fatal(err)
	}
	var last int64
	for range 5 {
		last = next(s)
	}
	s.Close()

	// The backup copied over the database by hand.
	data, _ := os.ReadFile(backup)
	os.Remove(path + "-wal")
	os.Remove(path + "-shm")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	// The live database moved past the backup's epoch when the backup was
	// taken (and at every open since): the hand copy is refused.
	if _, err := Open(path); !errors.Is(err, ErrRolledBack) {
		t.Fatalf("the backup copied back by hand: %v, want ErrRolledBack", err)
	}
	if err := Restore(backup, path); err != nil {
		t.Fatal(err)
	}
	s = open(t, path)
	if tok := next(s); tok <= last {
		t.Errorf("token %d after a restore; %d was already issued", tok, last)
	}
	s.Close()

	// Now the restored epoch is recorded: the old backup put back by hand
	// is older, and refused.
	os.Remove(path + "-wal")
	os.Remove(path + "-shm")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path); !errors.Is(err, ErrRolledBack) {
		t.Errorf("an older copy in place: err = %v, want ErrRolledBack", err)
	}
	if err := Restore(backup, path); err != nil {
		t.Fatal(err)
	}
	s = open(t, path)
	defer s.Close()
	if err := s.Backup(ctx, backup); !errors.Is(err, ErrExists) {
		t.Errorf("a backup over an existing file: %v, want ErrExists", err)
	}
}
