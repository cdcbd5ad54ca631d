package main

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

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
