package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpugate/gpugate/spark/sqlitestore"
)

// sparkd never takes a missing or empty -db for a new fleet: without
// -init a missing file is refused, and an empty (0-byte) file is refused
// even with -init.
func TestSparkd_AMissingOrEmptyDatabaseIsNotANewFleet(t *testing.T) {
	dir := t.TempDir()
	missing, empty := filepath.Join(dir, "missing.db"), filepath.Join(dir, "empty.db")
	os.WriteFile(empty, nil, 0o600)
	for _, args := range [][]string{{"-db", missing}, {"-db", empty}, {"-init", "-db", empty}} {
		var logs bytes.Buffer
		if code := run(context.Background(), append([]string{"-addr", "127.0.0.1:0"}, args...), &logs, nil); code != 1 {
			t.Errorf("%v: exit %d, want 1: %s", args, code, logs.String())
		}
	}
	if _, err := os.Stat(missing); err == nil {
		t.Error("sparkd created the missing database without -init")
	}
	if info, _ := os.Stat(empty); info.Size() != 0 {
		t.Error("sparkd wrote into the empty file")
	}
}

// sparkd backup copies the database; sparkd restore puts a backup in
// place. Both refuse to run without -db and -file.
func TestSparkd_BackupAndRestore(t *testing.T) {
	dir := t.TempDir()
	db, backup := filepath.Join(dir, "spark.db"), filepath.Join(dir, "backup.db")
	s, err := sqlitestore.Create(db)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	var logs bytes.Buffer
	if code := run(context.Background(), []string{"backup", "-db", db, "-file", backup}, &logs, nil); code != 0 {
		t.Fatalf("backup: exit %d: %s", code, logs.String())
	}
	if code := run(context.Background(), []string{"backup", "-db", db, "-file", backup}, &logs, nil); code != 1 {
		t.Errorf("a backup over an existing file: exit %d", code)
	}
	if code := run(context.Background(), []string{"restore", "-db", db, "-file", backup}, &logs, nil); code != 0 {
		t.Fatalf("restore: exit %d: %s", code, logs.String())
	}
	if code := run(context.Background(), []string{"restore", "-db", db}, &logs, nil); code != 2 {
		t.Errorf("restore without -file: exit %d, want 2", code)
	}
	if s, err := sqlitestore.Open(db); err != nil {
		t.Errorf("the restored database does not open: %v", err)
	} else {
		s.Close()
	}
}

// sparkd's subcommands share the suite's one dispatcher: help lists them
// (exit 0), an unknown one is a refused command line (exit 2), and flags
// alone serve, as sparkd serve does.
func TestSparkd_SubcommandsShareTheSuitesDispatcher(t *testing.T) {
	var logs bytes.Buffer
	if code := run(context.Background(), []string{"help"}, &logs, nil); code != 0 || !bytes.Contains(logs.Bytes(), []byte("sparkd token -tokens FILE")) {
		t.Errorf("help: exit %d: %s", code, logs.String())
	}
	logs.Reset()
	if code := run(context.Background(), []string{"bakcup", "-db", "x"}, &logs, nil); code != 2 || !bytes.Contains(logs.Bytes(), []byte(`unknown subcommand "bakcup"`)) {
		t.Errorf("a misspelt subcommand: exit %d: %s", code, logs.String())
	}
	logs.Reset()
	if code := run(context.Background(), []string{"backup"}, &logs, nil); code != 2 {
		t.Errorf("backup without its flags: exit %d: %s", code, logs.String())
	}
}
