package ghclient

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpugate/gpugate/internal/wait"
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
//
// A successful answer can say the limit is now spent (Remaining 0 until
// the reset); go-github would then refuse every call until the reset
// without sending it, however long the caller may wait. The transport
// keeps that reset itself (spent) and hides it from go-github: the next
// call waits for it when that fits the caller's deadline, and is sent
// otherwise, so GitHub's own answer fails it visibly.
type rateLimits struct {
	next  http.RoundTripper
	now   func() time.Time
	wait  func(ctx context.Context, d time.Duration) error
	spent *spentLimits // nil: no memory across calls
}

// spentLimits is when each spent rate limit resets, by resource.
type spentLimits struct {
	mu    sync.Mutex
	until map[string]time.Time
}

func (s *spentLimits) get(resource string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.until[resource]
}

func (s *spentLimits) set(resource string, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.until == nil {
		s.until = map[string]time.Time{}
	}
	s.until[resource] = t
}

// resource is the rate limit a request counts against: GitHub limits its
// search API apart from the rest.
func resource(req *http.Request) string {
	if strings.Contains(req.URL.Path, "/search/") {
		return "search"
	}
	return "core"
}

func newRateLimits(next http.RoundTripper) rateLimits {
	if next == nil {
		next = http.DefaultTransport
	}
	return rateLimits{next: next, now: time.Now, wait: wait.For, spent: &spentLimits{}}
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
	ctx := req.Context()
	budget := MaxRateLimitWait
	if dl, ok := ctx.Deadline(); ok {
		budget = dl.Sub(l.now())
	}
	if l.spent != nil {
		// A limit an earlier answer said is spent: wait for its reset when
		// that fits, or send the call for GitHub to refuse it visibly.
		if d := l.spent.get(resource(req)).Sub(l.now()); d > 0 && d <= budget {
			if err := l.wait(ctx, d); err != nil {
				return nil, err
			}
			budget -= d
		}
	}
	resp, err := l.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	d, limited := l.retryIn(resp)
	if !limited {
		l.remember(req, resp)
		return resp, nil
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

// remember keeps the reset of a limit a successful answer says is now
// spent, and takes it out of the answer so that go-github does not refuse
// the next call before it is sent.
func (l rateLimits) remember(req *http.Request, resp *http.Response) {
	if l.spent == nil || resp.Header.Get("X-RateLimit-Remaining") != "0" {
		return
	}
	reset, err := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64)
	if err != nil {
		return
	}
	l.spent.set(resource(req), time.Unix(reset, 0))
	resp.Header.Del("X-RateLimit-Reset")
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

// RateLimited returns a copy of hc (nil: a default client) whose
// transport waits out GitHub's rate limits as the clients New and NewApp
// build do, for a library user building their own go-github client:
// github.NewClient(ghclient.RateLimited(hc)).
func RateLimited(hc *http.Client) *http.Client {
	out := &http.Client{}
	if hc != nil {
		*out = *hc
	}
	out.Transport = newRateLimits(out.Transport)
	return out
}
