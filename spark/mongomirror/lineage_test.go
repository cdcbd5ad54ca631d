package mongomirror

import (
	"path/filepath"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/sparktest"
	"github.com/gpugate/gpugate/spark/sqlitestore"
)

// The history is never lost silently, also across the documented restore
// (sparkd restore, sqlitestore.Restore): a restored database's event log
// goes on from the backup's last event ID, and the events it appends
// after the restore get IDs that the mirror already holds (for the
// pre-restore events). The mirror takes them for events already mirrored
// and never appends them.
func TestSync_TheHistoryIsNeverLostSilently_AfterARestore(t *testing.T) {
	client := testClient(t, ferretURI(t))
	db, name := database(t, client)
	dir := t.TempDir()
	path, backup := filepath.Join(dir, "spark.db"), filepath.Join(dir, "backup.db")
	opts := spark.DefaultOptions()
	opts.Service = &sparktest.Service{}

	store, err := sqlitestore.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := spark.New(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Submit(t.Context(), spark.SubmitRequest{Class: spark.BackgroundCI}); err != nil {
		t.Fatal(err)
	}
	if err := store.Backup(t.Context(), backup); err != nil {
		t.Fatal(err)
	}
	for range 5 { // events after the backup, mirrored
		if _, err := c.Submit(t.Context(), spark.SubmitRequest{Class: spark.BackgroundCI}); err != nil {
			t.Fatal(err)
		}
	}
	if err := New(c, client, Options{Database: name}).Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	store.Close()

	// The operator restores the backup and sparkd starts again.
	if err := sqlitestore.Restore(backup, path); err != nil {
		t.Fatal(err)
	}
	store, err = sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	c, err = spark.New(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	after, err := c.Submit(t.Context(), spark.SubmitRequest{Class: spark.MergeCI})
	if err != nil {
		t.Fatal(err)
	}
	if err := New(c, client, Options{Database: name}).Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	n, err := db.Collection("history").CountDocuments(t.Context(), bson.D{{Key: "reservation", Value: after.ID}})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Errorf("the submission after the restore (%s) is not in the mirrored history: its event ID was taken for one already mirrored", after.ID)
	}
}

// The same for a new fleet (sparkd -init) pointed at the database an
// earlier fleet mirrored into: its first events are silently skipped.
func TestSync_TheHistoryIsNeverLostSilently_ANewFleetOnTheSameDatabase(t *testing.T) {
	client := testClient(t, ferretURI(t))
	db, name := database(t, client)
	old, _ := busyFleet(t)
	if err := New(old, client, Options{Database: name}).Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	opts := spark.DefaultOptions()
	opts.Service = &sparktest.Service{}
	c, err := spark.New(sparktest.NewStore(), opts)
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Submit(t.Context(), spark.SubmitRequest{Class: spark.MergeCI})
	if err != nil {
		t.Fatal(err)
	}
	err = New(c, client, Options{Database: name}).Sync(t.Context())
	n, cerr := db.Collection("history").CountDocuments(t.Context(), bson.D{{Key: "reservation", Value: r.ID}})
	if cerr != nil {
		t.Fatal(cerr)
	}
	if n == 0 && err == nil {
		t.Errorf("the new fleet's submission (%s) was neither mirrored nor reported", r.ID)
	}
}
