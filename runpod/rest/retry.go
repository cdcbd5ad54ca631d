package rest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gpugate/gpugate/internal/retry"
	"github.com/gpugate/gpugate/internal/wait"
)

// RetryPolicy is how a call retries transient failures (408, 429, 5xx,
// transport failures, malformed responses): bounded, jittered exponential
// backoff inside one deadline shared by the call and all its retries.
// Retry-After is a minimum, honoured even above MaxInterval; a pause that
// would outlast the deadline ends the call at once with ErrDeadline.
type RetryPolicy struct {
	Deadline        time.Duration // the call and its retries (60 s)
	MaxAttempts     int           // requests per call, first included (6)
	RequestTimeout  time.Duration // one request, capped by what is left (20 s)
	InitialInterval time.Duration // first backoff (1 s)
	MaxInterval     time.Duration // backoff cap (60 s); Retry-After may exceed it
	Multiplier      float64       // growth per retry (2)
	Jitter          float64       // randomization factor in [0, 1) (0.2)
}

// DefaultRetryPolicy is the default request policy: a 60-second deadline
// shared by a call and its retries.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{
		Deadline:        60 * time.Second,
		MaxAttempts:     6,
		RequestTimeout:  20 * time.Second,
		InitialInterval: time.Second,
		MaxInterval:     60 * time.Second,
		Multiplier:      2,
		Jitter:          0.2,
	}
}

// DefaultCreateRetryPolicy is one CreatePod call's policy: an unrelated
// transient failure gets one short retry in the current tier (two
// requests, a second's backoff), then provisioning moves on. All the
// create calls of one provisioning also share runpod.Config.CreateDeadline.
func DefaultCreateRetryPolicy() RetryPolicy {
	p := DefaultRetryPolicy()
	p.MaxAttempts, p.MaxInterval = 2, 5*time.Second
	return p
}

func (p RetryPolicy) validate() error {
	switch {
	case p.Deadline <= 0, p.RequestTimeout <= 0, p.InitialInterval <= 0, p.MaxInterval < p.InitialInterval:
		return fmt.Errorf("runpod: retry policy: deadline, request timeout and intervals must be positive, max interval at least the initial one")
	case p.MaxAttempts < 1:
		return fmt.Errorf("runpod: retry policy: max attempts must be at least 1")
	case p.Multiplier < 1, p.Jitter < 0, p.Jitter >= 1:
		return fmt.Errorf("runpod: retry policy: multiplier must be at least 1 and jitter in [0, 1)")
	}
	return nil
}

// retryAfterOf returns the server's Retry-After carried by err, if any.
func retryAfterOf(err error) time.Duration {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.RetryAfter
	}
	return 0
}

// Run calls attempt until it succeeds, fails with an error that is not
// ErrTransient, runs out of attempts, or would have to pause past the
// deadline. Before each attempt it waits out the shared cooldown that cool
// reports (nil: none); each attempt then gets its own request timeout. It
// is the one retry loop of the client, and of a caller that retries
// requests under its own budget (the bounded cleanup). A policy whose
// numbers are out of range fails at once.
func (p RetryPolicy) Run(ctx context.Context, cool func() time.Duration, attempt func(ctx context.Context, n int) error) error {
	if err := p.validate(); err != nil {
		return err
	}
	deadline := time.Now().Add(p.Deadline)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	b := retry.Policy{Initial: p.InitialInterval, Max: p.MaxInterval, Multiplier: p.Multiplier, Jitter: p.Jitter}.BackOff()
	for n := 1; ; n++ {
		if cool != nil {
			if d := cool(); d > 0 {
				if left := time.Until(deadline); d > left {
					return fmt.Errorf("%w: the shared cooldown lasts %s more but %s is left", ErrDeadline, d.Round(time.Millisecond), left.Round(time.Millisecond))
				}
				if err := wait.For(ctx, d); err != nil {
					return fmt.Errorf("runpod: %w during the shared cooldown", err)
				}
			}
		}
		actx, acancel := context.WithTimeout(ctx, min(p.RequestTimeout, time.Until(deadline)))
		err := attempt(actx, n)
		acancel()
		switch {
		case err == nil:
			return nil
		case !errors.Is(err, ErrTransient), errors.Is(err, ErrDeadline):
			return err
		case n >= p.MaxAttempts:
			return fmt.Errorf("runpod: gave up after %d attempts: %w", n, err)
		}
		pause := max(b.NextBackOff(), retryAfterOf(err))
		if left := time.Until(deadline); pause > left {
			return fmt.Errorf("%w: attempt %d needs a %s pause but %s is left: %w", ErrDeadline, n, pause.Round(time.Millisecond), left.Round(time.Millisecond), err)
		}
		if err := wait.For(ctx, pause); err != nil {
			return fmt.Errorf("runpod: %w while backing off after: %w", err, ErrDeadline)
		}
	}
}

// cooldown is the process-local pause shared by every call of one client:
// a 429 (or any Retry-After) on one call pauses the others.
type cooldown struct {
	mu    sync.Mutex
	until time.Time
}

func (c *cooldown) extend(d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.Now().Add(d)
	c.mu.Lock()
	if t.After(c.until) {
		c.until = t
	}
	c.mu.Unlock()
}

func (c *cooldown) remaining() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Until(c.until)
}

// wait blocks until the cooldown has passed, or fails at once with
// ErrDeadline when ctx's deadline comes first.
func (c *cooldown) wait(ctx context.Context) error {
	d := c.remaining()
	if d <= 0 {
		return nil
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		return fmt.Errorf("%w: the shared cooldown lasts %s more, past this call's deadline", ErrDeadline, d.Round(time.Millisecond))
	}
	return wait.For(ctx, d)
}
