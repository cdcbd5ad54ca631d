package retry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/google/go-cmp/cmp"

	"github.com/gpugate/gpugate/internal/retry"
)

// pauses reads up to n pauses from b (fewer when it stops).
func pauses(b backoff.BackOff, n int) []time.Duration {
	var out []time.Duration
	for range n {
		d := b.NextBackOff()
		if d == backoff.Stop {
			break
		}
		out = append(out, d)
	}
	return out
}

// A policy's pauses grow from Initial by Multiplier up to Max, stay
// constant without a multiplier, stop after Retries, and stop when the
// context ends.
func TestPolicy_PausesGrowToTheCapAndStopAtTheBound(t *testing.T) {
	s := time.Second
	for name, tc := range map[string]struct {
		p    retry.Policy
		want []time.Duration
	}{
		"doubling to a cap":  {retry.Policy{Initial: s, Max: 4 * s, Multiplier: 2}, []time.Duration{s, 2 * s, 4 * s, 4 * s, 4 * s}},
		"constant":           {retry.Policy{Initial: 30 * s}, []time.Duration{30 * s, 30 * s, 30 * s, 30 * s, 30 * s}},
		"bounded retries":    {retry.Policy{Initial: 2 * s, Multiplier: 2, Retries: 2}, []time.Duration{2 * s, 4 * s}},
		"no cap, no elapsed": {retry.Policy{Initial: time.Hour, Multiplier: 3}, []time.Duration{time.Hour, 3 * time.Hour, 9 * time.Hour, 27 * time.Hour, 81 * time.Hour}},
	} {
		if diff := cmp.Diff(tc.want, pauses(tc.p.BackOff(), 5)); diff != "" {
			t.Errorf("%s: pauses (-want +got):\n%s", name, diff)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := pauses(retry.Policy{Initial: s}.Context(ctx), 3); len(got) != 0 {
		t.Errorf("after the context ended: %v, want no pause", got)
	}
	tries := 0
	err := backoff.Retry(func() error { tries++; return errors.New("down") }, retry.Policy{Initial: time.Nanosecond, Retries: 2}.Context(context.Background()))
	if err == nil || tries != 3 {
		t.Errorf("backoff.Retry with 2 retries: %d tries, %v", tries, err)
	}
}
