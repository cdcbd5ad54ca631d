package main

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/sparkgh"
)

// Seed 004: "Scheduled benchmark … Controller schedule". Each schedule
// asks for its work when it is due: daily at its UTC time, or at its
// interval; a failed request is retried with backoff before its next
// time (TestScheduleRetriesUntilItsNextTime).
func TestSchedulesAskForTheirWorkWhenDue(t *testing.T) {
	fleet, err := loadFleet([]byte(`hosts: [{name: a, managed: true}]
schedules:
  - {name: nightly, repo: o/butter, branch: main, class: benchmark, topology: pair, suite: performance, at: "03:00", duration: 3h}
  - {name: merge, repo: o/iron, branch: main, class: merge-ci, suite: smoke, every: 6h}
`))
	if err != nil {
		t.Fatal(err)
	}
	if s := fleet.schedules[0].Scheduled; s.Class != spark.Benchmark || s.Topology != spark.Pair || s.Duration != 3*time.Hour || s.Repo != "o/butter" {
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
			runSchedules(ctx, fleet.schedules, func(_ context.Context, s sparkgh.Scheduled) error {
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
			}, slog.New(slog.NewTextHandler(&logs, nil)))
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
	fleet, err := loadFleet([]byte(`hosts: [{name: a, managed: true}]
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
			runSchedules(ctx, fleet.schedules, func(context.Context, sparkgh.Scheduled) error {
				asked = append(asked, time.Since(start))
				if time.Since(start) == 2*time.Hour {
					close(enough)
				}
				return errors.New("github: 502")
			}, slog.New(slog.NewTextHandler(&logs, nil)))
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
	s := schedule{at: 3*time.Hour + 30*time.Minute}
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
	if got := (schedule{every: 6 * time.Hour}).next(day); !got.Equal(day.Add(6 * time.Hour)) {
		t.Errorf("every 6h: %s", got)
	}
}
