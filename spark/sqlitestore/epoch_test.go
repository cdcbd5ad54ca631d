package sqlitestore

// A database that refuses damage: hand-copied older backups, truncation.

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpugate/gpugate/spark"
)

func nextToken(t *testing.T, s *Store) (tok int64) {
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

// Fencing tokens never go backwards, even after an older backup is put in
// place by hand (docs/fleet.md: "a database older than the last one it
// opened (a backup copied over it by hand) is refused, because its
// fencing tokens would go backwards"). Until a Restore has advanced the
// epoch, the backup's epoch equals the recorded one, so the older copy is
// accepted and reissues tokens already issued.
func TestOpen_AHandCopiedOlderBackupNeverReissuesFencingTokens(t *testing.T) {
	dir := t.TempDir()
	path, backup := filepath.Join(dir, "spark.db"), filepath.Join(dir, "backup.db")
	s := open(t, path)
	nextToken(t, s)
	if err := s.Backup(ctx, backup); err != nil {
		t.Fatal(err)
	}
	var last int64
	for range 5 {
		last = nextToken(t, s)
	}
	s.Close()

	data, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(path + "-wal")
	os.Remove(path + "-shm")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path)
	if errors.Is(err, ErrRolledBack) {
		return // refused: fine
	}
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if tok := nextToken(t, s); tok <= last {
		t.Errorf("the older copy was accepted and issued token %d; %d was already issued", tok, last)
	}
}

// A damaged fleet database is refused as damaged (ErrDamaged, "restore
// it from a backup"), not as a foreign file: a fleet database cut short
// (a partial copy, a full disk) is reported as ErrNotFleetDB, whose advice
// is to point -db elsewhere.
func TestOpen_ATruncatedFleetDatabaseIsDamaged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spark.db")
	s := open(t, path)
	s.Tx(ctx, func(tx spark.Tx) error {
		for i := range 200 {
			seq, _ := tx.NextSeq()
			tx.PutRequest(spark.Request{ID: "request-" + string(rune('a'+i%26)) + string(rune('a'+i/26)), State: spark.Queued, Seq: seq})
		}
		return nil
	})
	s.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data[:len(data)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path); !errors.Is(err, ErrDamaged) {
		t.Errorf("a truncated fleet database: err = %v, want ErrDamaged", err)
	}
}
