package fleet

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpugate/gpugate/spark/sparkgh"
)

// countingLog is a delivery log with one failed delivery, counting reads.
type countingLog struct {
	reads       int
	fail        bool
	redelivered int
}

func (c *countingLog) Deliveries(context.Context, string) ([]sparkgh.Delivery, string, error) {
	c.reads++
	if c.fail {
		return nil, "", errors.New("502")
	}
	return []sparkgh.Delivery{{ID: 1, GUID: "g", At: time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)}}, "", nil
}

func (c *countingLog) Redeliver(context.Context, int64) error { c.redelivered++; return nil }

// The first sweep runs at once and reads back six hours (what sparkd
// missed while down); the next is due five minutes later and reads back to
// ten minutes before the last good one; a failed sweep reads back as far
// again next time.
func TestRedeliveries_SweepAtStartThenEveryFiveMinutes(t *testing.T) {
	start := time.Date(2026, 11, 29, 3, 30, 0, 0, time.UTC)
	dl := &countingLog{}
	d := newRedeliveries(dl, start, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	d.tick(ctx, start)
	if dl.reads != 1 || dl.redelivered != 1 || !d.since.Equal(start.Add(-redeliverOverlap)) {
		t.Fatalf("first sweep: %d reads, %d redelivered, since %s", dl.reads, dl.redelivered, d.since)
	}
	d.tick(ctx, start.Add(time.Minute))
	if dl.reads != 1 {
		t.Errorf("a sweep before its time: %d reads", dl.reads)
	}
	dl.fail = true
	d.tick(ctx, start.Add(redeliverEvery))
	if dl.reads != 2 || !d.since.Equal(start.Add(-redeliverOverlap)) {
		t.Errorf("a failed sweep: %d reads, since %s", dl.reads, d.since)
	}
	var none *redeliveries // without the App's credentials
	none.tick(ctx, start)
}

// The journal of deliveries sparkd could not process survives a restart:
// written whole (mode 0600) and read back; no file is an empty journal;
// a file that is not one is an error naming it and what to do.
func TestUnprocessedJournal_SurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, unprocessedFile)
	if m, err := loadUnprocessed(path); err != nil || m != nil {
		t.Fatalf("no file: %v, %v", m, err)
	}
	at := time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)
	want := map[string]time.Time{"label-7": at, "comment-3": at.Add(time.Minute)}
	if err := saveUnprocessed(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := loadUnprocessed(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("read back (-want +got):\n%s", diff)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, %v", fi.Mode(), err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("left beside it: %v", entries)
	}
	for _, bad := range []string{"{", `{"version":2,"deliveries":{}}`, `[]`} {
		os.WriteFile(path, []byte(bad), 0o600)
		if _, err := loadUnprocessed(path); !errors.Is(err, ErrJournal) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "remove it") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func FuzzLoadUnprocessed(f *testing.F) {
	f.Add([]byte(`{"version":1,"deliveries":{"label-7":"2026-11-29T03:00:00Z"}}`))
	f.Add([]byte(`{"version":1,"deliveries":null}`))
	path := filepath.Join(f.TempDir(), unprocessedFile)
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		m, err := loadUnprocessed(path)
		if err != nil {
			return
		}
		// What loads, saves and loads the same.
		if err := saveUnprocessed(path, m); err != nil {
			t.Fatal(err)
		}
		again, err := loadUnprocessed(path)
		if err != nil || len(again) != len(m) {
			t.Fatalf("round trip: %v, %v (was %v)", again, err, m)
		}
	})
}
