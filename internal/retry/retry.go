// Package retry is the one way the packages retry: a Policy value (how
// long the first pause is, how it grows, how many tries) turned into
// cenkalti/backoff's BackOff, which the caller runs with backoff.Retry
// (Context) or reads a pause at a time (NextBackOff) in its own loop.
package retry

import (
	"context"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Policy is a retry policy: pauses from Initial, multiplied by Multiplier
// (1 when zero: a constant pause) up to Max (no cap when zero), each
// randomized by Jitter (a factor in [0, 1)), for at most Retries retries
// after the first try (no bound when zero). Elapsed time never ends it:
// the caller's context does.
type Policy struct {
	Initial, Max time.Duration
	Multiplier   float64
	Jitter       float64
	Retries      uint64
}

// BackOff is the policy as a BackOff, for a loop that reads its pauses.
func (p Policy) BackOff() backoff.BackOff {
	mult := p.Multiplier
	if mult < 1 {
		mult = 1
	}
	max := p.Max
	if max <= 0 {
		max = time.Duration(1<<63 - 1)
	}
	b := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(p.Initial),
		backoff.WithMaxInterval(max),
		backoff.WithMultiplier(mult),
		backoff.WithRandomizationFactor(p.Jitter),
		backoff.WithMaxElapsedTime(0),
	)
	if p.Retries > 0 {
		return backoff.WithMaxRetries(b, p.Retries)
	}
	return b
}

// Context is the policy as a BackOff that also stops when ctx ends, for
// backoff.Retry.
func (p Policy) Context(ctx context.Context) backoff.BackOff {
	return backoff.WithContext(p.BackOff(), ctx)
}
