package ghclient

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"time"
)

// MaxRateLimitWait is the longest a GitHub call waits out a rate limit
// when its context has no deadline; with a deadline it waits only while
// the deadline allows.
const MaxRateLimitWait = 5 * time.Minute

// rateLimits is the transport of every GitHub client New and NewApp
// build: a response that says the rate limit is spent
// (403 or 429 with X-RateLimit-Remaining: 0, or with Retry-After for
// GitHub's secondary limits) is waited out and the request sent once
// more, when the wait fits the caller's deadline (MaxRateLimitWait
// without one). Otherwise the response goes back as it came, and go-github
// reports it as a *github.RateLimitError or *github.AbuseRateLimitError:
// the caller fails visibly, never silently retrying past its deadline.
type rateLimits struct {
	next http.RoundTripper
	now  func() time.Time
	wait func(ctx context.Context, d time.Duration) error
}

func newRateLimits(next http.RoundTripper) rateLimits {
	if next == nil {
		next = http.DefaultTransport
	}
	return rateLimits{next: next, now: time.Now, wait: sleepCtx}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (l rateLimits) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil && req.GetBody == nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	resp, err := l.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	d, limited := l.retryIn(resp)
	if !limited {
		return resp, nil
	}
	ctx := req.Context()
	budget := MaxRateLimitWait
	if dl, ok := ctx.Deadline(); ok {
		budget = dl.Sub(l.now())
	}
	if d > budget {
		return resp, nil // go-github reports the rate limit error
	}
	resp.Body.Close()
	if err := l.wait(ctx, d); err != nil {
		return nil, err
	}
	again := req.Clone(ctx)
	switch {
	case req.GetBody != nil:
		b, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		again.Body = b
	case body != nil:
		again.Body = io.NopCloser(bytes.NewReader(body))
	}
	return l.next.RoundTrip(again)
}

// retryIn says whether resp is a spent rate limit and how long until it
// resets (at least a second).
func (l rateLimits) retryIn(resp *http.Response) (time.Duration, bool) {
	if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusTooManyRequests {
		return 0, false
	}
	if s := resp.Header.Get("Retry-After"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 0 {
			return max(time.Duration(n)*time.Second, time.Second), true
		}
	}
	if resp.Header.Get("X-RateLimit-Remaining") == "0" {
		if reset, err := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			return max(time.Unix(reset, 0).Sub(l.now()), time.Second), true
		}
	}
	return 0, false
}
