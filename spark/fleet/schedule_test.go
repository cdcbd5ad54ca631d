package fleet

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpugate/gpugate/spark/sparktest"
	"github.com/gpugate/gpugate/spark/sqlitestore"

	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/sparkgh"
)

// Seed 004: "Scheduled benchmark … Controller schedule". Each schedule
// asks for its work when it is due: daily at its UTC time, or at its
// interval; a failed request is retried with backoff before its next
// time (TestScheduleRetriesUntilItsNextTime).
func TestSchedulesAskForTheirWorkWhenDue(t *testing.T) {
	fleet, err := Load([]byte(`hosts: [{name: a, managed: true}]
schedules:
  - {name: nightly, repo: o/butter, branch: main, class: benchmark, topology: pair, suite: performance, at: "03:00", duration: 3h}
  - {name: merge, repo: o/iron, branch: main, class: merge-ci, suite: smoke, every: 6h}
`))
	if err != nil {
		t.Fatal(err)
	}
	if s := fleet.Schedules[0].Scheduled; s.Class != spark.Benchmark || s.Topology != spark.Pair || s.Duration != 3*time.Hour || s.Repo != "o/butter" {
		t.Errorf("loaded %+v", s)
	}
	synctest.Test(t, func(t *testing.T) {
		start := time.Now() // the bubble's clock: midnight UTC
		var mu sync.Mutex
		asked := map[string][]time.Duration{}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		// Two days of asking: the bubble's clock moves to each timer while
		// everything waits, and the run stops at the second day's last
		// request (merge's at 48 h, its tenth: its first two fail).
		enough := make(chan struct{})
		var logs syncBuffer
		go func() {
			RunSchedules(ctx, fleet.Schedules, func(_ context.Context, s sparkgh.Scheduled) error {
				mu.Lock()
				defer mu.Unlock()
				asked[s.Name] = append(asked[s.Name], time.Since(start))
				if len(asked["merge"]) == 10 && s.Name == "merge" {
					close(enough)
				}
				if s.Name == "merge" && len(asked["merge"]) <= 2 {
					return context.DeadlineExceeded // a brief outage: retried
				}
				return nil
			}, neverAsked, slog.New(slog.NewTextHandler(&logs, nil)))
			close(done)
		}()
		<-enough
		synctest.Wait() // the last request is logged
		cancel()
		<-done
		h := time.Hour
		if want := []time.Duration{3 * h, 27 * h}; !slices.Equal(asked["nightly"], want) {
			t.Errorf("nightly asked at %v, want %v", asked["nightly"], want)
		}
		if want := []time.Duration{6 * h, 6*h + time.Minute, 6*h + 3*time.Minute, 12 * h, 18 * h, 24 * h, 30 * h, 36 * h, 42 * h, 48 * h}; !slices.Equal(asked["merge"], want) {
			t.Errorf("merge asked at %v, want %v", asked["merge"], want)
		}
		// The operator's log says when each will first ask, and after each
		// time what happened and when it asks next.
		for _, want := range []string{"schedule=nightly class=benchmark repo=o/butter branch=main first=2000-01-01T03:00:00Z",
			"schedule=nightly queued=benchmark next=2000-01-03T03:00:00Z", "schedule=merge error=\"context deadline exceeded\" retry=2000-01-01T06:01:00Z",
			"schedule=merge queued=merge-ci next=2000-01-01T12:00:00Z"} {
			if !strings.Contains(logs.String(), want) {
				t.Errorf("the log lacks %q:\n%s", want, logs.String())
			}
		}
	})
}

// A request that keeps failing is retried after 1, 2, 4, 8 and then every
// 15 minutes, never at or past the schedule's next time, which then asks
// as usual.
func TestScheduleRetriesUntilItsNextTime(t *testing.T) {
	fleet, err := Load([]byte(`hosts: [{name: a, managed: true}]
schedules: [{name: hourly, repo: o/iron, branch: main, class: background-ci, suite: smoke, every: 1h}]
`))
	if err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var asked []time.Duration
		ctx, cancel := context.WithCancel(t.Context())
		done, enough := make(chan struct{}), make(chan struct{})
		var logs syncBuffer
		go func() {
			RunSchedules(ctx, fleet.Schedules, func(context.Context, sparkgh.Scheduled) error {
				asked = append(asked, time.Since(start))
				if time.Since(start) == 2*time.Hour {
					close(enough)
				}
				return errors.New("github: 502")
			}, neverAsked, slog.New(slog.NewTextHandler(&logs, nil)))
			close(done)
		}()
		<-enough
		cancel()
		<-done
		m := time.Minute
		if want := []time.Duration{60 * m, 61 * m, 63 * m, 67 * m, 75 * m, 90 * m, 105 * m, 120 * m}; !slices.Equal(asked, want) {
			t.Errorf("asked at %v, want %v", asked, want)
		}
		if want := `schedule=hourly error="github: 502" next=2000-01-01T02:00:00Z`; !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, logs.String())
		}
	})
}

// A restart must not cost a run: sparkd asks at once for a daily run it
// missed while it was down, and an interval keeps its cadence from the
// last ask, not from the restart. A schedule that never asked waits for
// its time.
func TestScheduleFirst_ARunMissedWhileDownIsAskedForAtStart(t *testing.T) {
	h, m := time.Hour, time.Minute
	day := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	daily, every := Schedule{at: 3 * h}, Schedule{every: 6 * h}
	for name, tc := range map[string]struct {
		s         Schedule
		now, last time.Time
		asked     bool
		want      time.Time
	}{
		"daily, down at 03:00":       {daily, day.Add(3*h + 5*m), day.Add(-21 * h), true, day.Add(3*h + 5*m)},
		"daily, asked today already": {daily, day.Add(3*h + 5*m), day.Add(3 * h), true, day.Add(27 * h)},
		"daily, before today's time": {daily, day.Add(2 * h), day.Add(-21 * h), true, day.Add(3 * h)},
		"daily, never asked":         {daily, day.Add(3*h + 5*m), time.Time{}, false, day.Add(27 * h)},
		"every, cadence kept":        {every, day.Add(2 * h), day.Add(-1 * h), true, day.Add(5 * h)},
		"every, missed":              {every, day.Add(7 * h), day, true, day.Add(7 * h)},
		"every, never asked":         {every, day.Add(2 * h), time.Time{}, false, day.Add(8 * h)},
	} {
		if got := tc.s.first(tc.now, tc.last, tc.asked); !got.Equal(tc.want) {
			t.Errorf("%s: first = %s, want %s", name, got, tc.want)
		}
	}
}

// runSchedules asks at once for the run a restart missed, reading when the
// schedule last asked from the controller.
func TestSchedulesCatchUpAfterARestart(t *testing.T) {
	fleet, err := Load([]byte(`hosts: [{name: a, managed: true}]
schedules: [{name: nightly, repo: o/butter, branch: main, class: benchmark, suite: performance, at: "00:00"}]
`))
	if err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		start := time.Now() // midnight: today's run is due now, and sparkd was down for it
		ctx, cancel := context.WithCancel(t.Context())
		asked := make(chan time.Duration, 1)
		done := make(chan struct{})
		go func() {
			RunSchedules(ctx, fleet.Schedules, func(context.Context, sparkgh.Scheduled) error {
				asked <- time.Since(start)
				return nil
			}, func(_ context.Context, name string) (time.Time, bool, error) {
				return start.Add(-24*time.Hour - time.Minute), name == "nightly", nil // yesterday's, a minute late
			}, slog.New(slog.DiscardHandler))
			close(done)
		}()
		if got := <-asked; got != 0 {
			t.Errorf("asked %s after the restart, want at once", got)
		}
		cancel()
		<-done
	})
}

// The controller remembers when each schedule last asked, across
// restarts, on the same SQLite file sparkd uses.
func TestLastSubmitted_ReadsEveryRequestOfTheOwner(t *testing.T) {
	store, err := sqlitestore.Create(filepath.Join(t.TempDir(), "spark.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	opts := spark.DefaultOptions()
	opts.Service = &sparktest.Service{}
	c, err := spark.New(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, asked, err := c.LastSubmitted(ctx, sparkgh.ScheduleOwner("nightly")); asked || err != nil {
		t.Fatalf("before any request: %v %v", asked, err)
	}
	var last time.Time
	for range 2 {
		r, err := c.Submit(ctx, spark.SubmitRequest{Class: spark.Benchmark, Owner: sparkgh.ScheduleOwner("nightly")})
		if err != nil {
			t.Fatal(err)
		}
		c.Cancel(ctx, r.ID) // ended requests count too
		last = r.Submitted
	}
	c.Submit(ctx, spark.SubmitRequest{Class: spark.Benchmark, Owner: sparkgh.ScheduleOwner("other")})
	if got, asked, err := c.LastSubmitted(ctx, sparkgh.ScheduleOwner("nightly")); !asked || err != nil || !got.Equal(last) {
		t.Errorf("last submitted %s, %v, %v; want %s", got, asked, err, last)
	}
}

// neverAsked is a controller with no request from any schedule.
func neverAsked(context.Context, string) (time.Time, bool, error) { return time.Time{}, false, nil }

// syncBuffer is a log destination several goroutines write to.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A daily schedule's next time is today's until that has passed, then tomorrow's.
func TestScheduleNext(t *testing.T) {
	s := Schedule{at: 3*time.Hour + 30*time.Minute}
	day := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct{ now, want time.Time }{
		{day.Add(time.Hour), day.Add(3*time.Hour + 30*time.Minute)},
		{day.Add(3*time.Hour + 30*time.Minute), day.Add(27*time.Hour + 30*time.Minute)},
		{day.Add(23 * time.Hour), day.Add(27*time.Hour + 30*time.Minute)},
		{day.Add(time.Hour).In(time.FixedZone("UTC+9", 9*3600)), day.Add(3*time.Hour + 30*time.Minute)},
	} {
		if got := s.next(tc.now); !got.Equal(tc.want) {
			t.Errorf("next(%s) = %s, want %s", tc.now, got, tc.want)
		}
	}
	if got := (Schedule{every: 6 * time.Hour}).next(day); !got.Equal(day.Add(6 * time.Hour)) {
		t.Errorf("every 6h: %s", got)
	}
}
