package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/gpugate/gpugate/internal/retry"
	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/sparkgh"
)

// scheduleYAML is one entry of the fleet file's schedules: work the
// controller asks for itself ("Scheduled benchmark … Controller
// schedule"), at a branch's current commit, through the same queue.
type scheduleYAML struct {
	Name     string `yaml:"name"`
	Repo     string `yaml:"repo"`   // owner/name
	Branch   string `yaml:"branch"` // whose commit runs
	Class    string `yaml:"class"`  // benchmark, merge-ci or background-ci
	Topology string `yaml:"topology"`
	Suite    string `yaml:"suite"`    // the workflow's suite input
	At       string `yaml:"at"`       // daily, HH:MM in UTC
	Every    string `yaml:"every"`    // or at this interval from its last ask (sparkd's start, the first time)
	Duration string `yaml:"duration"` // lease length (default: the class's)
}

// Schedule is a validated schedule of the fleet file: work the controller
// asks for itself, daily at a time of day (UTC) or at an interval.
type Schedule struct {
	sparkgh.Scheduled
	at    time.Duration // from midnight UTC, when daily
	every time.Duration // when periodic
}

// minEvery bounds how often a schedule may ask: more often would flood
// the queue with work that cannot finish before the next arrives.
const minEvery = 10 * time.Minute

// schedules validates the file's entries.
func (f fileYAML) schedules() ([]Schedule, error) {
	var out []Schedule
	seen := map[string]bool{}
	for i, e := range f.Schedules {
		where := fmt.Sprintf("schedules[%d]", i)
		if e.Name != "" {
			where = "schedule " + e.Name
		}
		s := Schedule{Scheduled: sparkgh.Scheduled{Name: e.Name, Repo: e.Repo, Branch: e.Branch, Class: spark.Class(e.Class),
			Topology: spark.Topology(e.Topology), Suite: e.Suite}}
		switch {
		case e.Name == "" || seen[e.Name]:
			return nil, fmt.Errorf("%w: %s: every schedule needs a name of its own", ErrInvalid, where)
		case (e.At == "") == (e.Every == ""):
			return nil, fmt.Errorf("%w: %s: give exactly one of at (daily, HH:MM UTC) and every (an interval such as 6h)", ErrInvalid, where)
		}
		if err := s.Validate(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		seen[e.Name] = true
		if e.At != "" {
			t, err := time.Parse("15:04", e.At)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: at %q: want HH:MM in UTC, such as 03:00", ErrInvalid, where, e.At)
			}
			s.at = time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute
		} else {
			d, err := time.ParseDuration(e.Every)
			if err != nil || d < minEvery {
				return nil, fmt.Errorf("%w: %s: every %q: an interval of at least %s, such as 6h", ErrInvalid, where, e.Every, minEvery)
			}
			s.every = d
		}
		if e.Duration != "" {
			d, err := time.ParseDuration(e.Duration)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("%w: %s: duration %q is not a positive duration such as 4h", ErrInvalid, where, e.Duration)
			}
			s.Duration = d
		}
		out = append(out, s)
	}
	return out, nil
}

// next is the schedule's first time strictly after t.
func (s Schedule) next(t time.Time) time.Time {
	if s.every > 0 {
		return t.Add(s.every)
	}
	day := t.UTC().Truncate(24 * time.Hour)
	if due := day.Add(s.at); due.After(t) {
		return due
	}
	return day.Add(24 * time.Hour).Add(s.at)
}

// prev is the schedule's latest daily time at or before t (daily
// schedules only).
func (s Schedule) prev(t time.Time) time.Time {
	due := t.UTC().Truncate(24 * time.Hour).Add(s.at)
	if due.After(t) {
		due = due.Add(-24 * time.Hour)
	}
	return due
}

// first is when the schedule first asks after sparkd starts at now, given
// when it last asked (asked false: never, so a new schedule waits for its
// time). A daily run missed while sparkd was down (a deploy at 03:00) is
// asked for at once; an interval keeps its cadence from the last ask, and
// one that has passed asks at once.
func (s Schedule) first(now, last time.Time, asked bool) time.Time {
	switch {
	case !asked:
		return s.next(now)
	case s.every > 0:
		if due := last.Add(s.every); due.After(now) {
			return due
		}
		return now
	case last.Before(s.prev(now)):
		return now
	}
	return s.next(now)
}

// Retry bounds of a schedule whose request failed (GitHub or the
// controller briefly unreachable): the first retry after a minute, then
// doubling to a quarter of an hour, never at or past its next regular time.
const (
	retryFirst = time.Minute
	retryMax   = 15 * time.Minute
)

// RunSchedules asks for each schedule's work when it is due, until ctx
// ends. A failed request is retried with backoff (retryFirst doubling to
// retryMax) until the schedule's next regular time, so a brief outage at
// 03:00 does not cost the night's run, and an outage that lasts only
// delays the next one. A sleeping machine that wakes late asks once, not
// once for every time it missed. lastAsked says when a schedule last
// asked, across restarts (the controller's requests), for its first time
// (Schedule.first); an error there only loses the catch-up.
func RunSchedules(ctx context.Context, scheds []Schedule, submit func(context.Context, sparkgh.Scheduled) error,
	lastAsked func(ctx context.Context, name string) (time.Time, bool, error), log *slog.Logger) {
	done := make(chan struct{})
	for _, s := range scheds {
		go func() {
			defer func() { done <- struct{}{} }()
			now := time.Now()
			last, asked, err := lastAsked(ctx, s.Name)
			if err != nil {
				log.Error("schedule", "schedule", s.Name, "error", err, "why", "when it last asked is unknown, so a run missed while sparkd was down is not asked for now")
			}
			regular := s.first(now, last, asked && err == nil)
			due := regular
			log.Info("schedule", "schedule", s.Name, "class", s.Class, "repo", s.Repo, "branch", s.Branch, "first", due.UTC().Format(time.RFC3339))
			pause := retry.Policy{Initial: retryFirst, Max: retryMax, Multiplier: 2}.BackOff()
			for {
				t := time.NewTimer(time.Until(due))
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
				err := submit(ctx, s.Scheduled)
				now := time.Now()
				next := s.next(regular)
				if !next.After(now) {
					next = s.next(now)
				}
				if err != nil {
					if again := now.Add(pause.NextBackOff()); again.Before(next) {
						due = again
						log.Error("schedule", "schedule", s.Name, "error", err, "retry", due.UTC().Format(time.RFC3339))
						continue
					}
				}
				pause.Reset()
				regular, due = next, next
				if err != nil {
					log.Error("schedule", "schedule", s.Name, "error", err, "next", due.UTC().Format(time.RFC3339))
				} else {
					log.Info("schedule", "schedule", s.Name, "queued", s.Class, "next", due.UTC().Format(time.RFC3339))
				}
			}
		}()
	}
	for range scheds {
		<-done
	}
}
