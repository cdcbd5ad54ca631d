package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/gpugate/gpugate/spark/sparkgh"
)

// The cadence of redelivery sweeps, how far back the first one looks (what
// sparkd missed while it was down, well inside the three days GitHub keeps
// deliveries), and the overlap between sweeps (a delivery is logged with
// the time it was sent, which can precede the sweep that first sees it).
const (
	redeliverEvery   = 5 * time.Minute
	redeliverBack    = 6 * time.Hour
	redeliverOverlap = 10 * time.Minute
)

// redeliveries runs a Redeliverer at its cadence from sparkd's loop.
type redeliveries struct {
	r     *sparkgh.Redeliverer
	since time.Time // the next sweep reads back to here
	next  time.Time // and is due then
	log   *slog.Logger
}

func newRedeliveries(dl sparkgh.DeliveryLog, start time.Time, log *slog.Logger) *redeliveries {
	return &redeliveries{r: &sparkgh.Redeliverer{Log: dl, Logger: log}, since: start.Add(-redeliverBack), next: start, log: log}
}

// tick sweeps when one is due. A sweep that fails is logged, and the next
// reads back as far again.
func (d *redeliveries) tick(ctx context.Context, now time.Time) {
	if d == nil || now.Before(d.next) {
		return
	}
	d.next = now.Add(redeliverEvery)
	if _, err := d.r.Sweep(ctx, d.since); err != nil {
		d.log.Error("sparkd.redeliver", "error", err, "since", d.since.UTC().Format(time.RFC3339))
		return
	}
	d.since = now.Add(-redeliverOverlap)
}

// unprocessedFile, beside the database, keeps the deliveries sparkd
// accepted but could not process (sparkgh.Webhook.Journal), so a restart
// still redelivers them.
const unprocessedFile = "unprocessed-deliveries.json"

// unprocessedJournal is the file's content: each delivery's GUID and when
// it arrived.
type unprocessedJournal struct {
	Version    int                  `json:"version"`
	Deliveries map[string]time.Time `json:"deliveries"`
}

// ErrJournal marks a journal of unprocessed deliveries that cannot be
// read back.
var ErrJournal = errors.New("fleet: unreadable journal")

// Unprocessed reads the journal a Daemon keeps in its StateDir: each
// webhook delivery accepted but not processed, by GUID, with when it
// arrived. No journal is an empty one.
func Unprocessed(stateDir string) (map[string]time.Time, error) {
	return loadUnprocessed(filepath.Join(stateDir, unprocessedFile))
}

// loadUnprocessed reads the journal; a missing file is an empty one.
func loadUnprocessed(path string) (map[string]time.Time, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var j unprocessedJournal
	if err := json.Unmarshal(data, &j); err != nil || j.Version != 1 {
		return nil, fmt.Errorf("%w: %s is not a version 1 journal of unprocessed deliveries (%v): remove it to start afresh", ErrJournal, path, err)
	}
	return j.Deliveries, nil
}

// saveUnprocessed writes the journal whole.
func saveUnprocessed(path string, m map[string]time.Time) error {
	data, err := json.Marshal(unprocessedJournal{Version: 1, Deliveries: m})
	if err != nil {
		return err
	}
	return writeWhole(path, data)
}
