package ghclient

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-github/v66/github"
	"golang.org/x/oauth2"
)

// limitedGitHub answers the first request with a spent rate limit and
// the rest with 200; it records each request's body.
type limitedGitHub struct {
	headers map[string]string
	status  int
	bodies  []string
}

func (g *limitedGitHub) RoundTrip(req *http.Request) (*http.Response, error) {
	var b []byte
	if req.Body != nil {
		b, _ = io.ReadAll(req.Body)
	}
	g.bodies = append(g.bodies, string(b))
	resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(`{"id":1}`)), Request: req}
	if len(g.bodies) == 1 {
		resp.StatusCode = g.status
		for k, v := range g.headers {
			resp.Header.Set(k, v)
		}
		// GitHub's own bodies for the two limits
		body := `{"message":"API rate limit exceeded for installation ID 77.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"}`
		if _, secondary := g.headers["Retry-After"]; secondary {
			body = `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`
		}
		resp.Body = io.NopCloser(strings.NewReader(body))
	}
	return resp, nil
}

// Every GitHub call waits out a spent rate limit (primary, until
// X-RateLimit-Reset; secondary, for Retry-After) when the wait fits its
// deadline, sending the request again with its body; when it does not
// fit, the call fails at once with go-github's RateLimitError or
// AbuseRateLimitError.
func TestRateLimits_AreWaitedOutWithinTheDeadlineThenFailVisibly(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	reset := strconv.FormatInt(now.Add(30*time.Second).Unix(), 10)
	primary := map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Limit": "5000", "X-RateLimit-Reset": reset}
	for name, tc := range map[string]struct {
		headers  map[string]string
		status   int
		deadline time.Duration // 0: none
		wantWait []time.Duration
		wantErr  any // a pointer to the error type wanted, nil for success
	}{
		"primary, the reset within the deadline":  {primary, 403, time.Minute, []time.Duration{30 * time.Second}, nil},
		"primary, the reset past the deadline":    {primary, 403, 10 * time.Second, nil, new(*github.RateLimitError)},
		"secondary, Retry-After within":           {map[string]string{"Retry-After": "7"}, 403, 0, []time.Duration{7 * time.Second}, nil},
		"secondary as 429":                        {map[string]string{"Retry-After": "3"}, 429, time.Minute, []time.Duration{3 * time.Second}, nil},
		"secondary, longer than the longest wait": {map[string]string{"Retry-After": "600"}, 403, 0, nil, new(*github.AbuseRateLimitError)},
	} {
		t.Run(name, func(t *testing.T) {
			gh := &limitedGitHub{headers: tc.headers, status: tc.status}
			var waited []time.Duration
			l := rateLimits{next: gh, now: func() time.Time { return now },
				wait: func(_ context.Context, d time.Duration) error { waited = append(waited, d); return nil }}
			c := github.NewClient(&http.Client{Transport: l})
			ctx := context.Background()
			if tc.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, now.Add(tc.deadline))
				defer cancel()
			}
			_, _, err := c.Issues.CreateComment(ctx, "o", "r", 1, &github.IssueComment{Body: github.String("evidence")})
			switch want := tc.wantErr.(type) {
			case nil:
				if err != nil {
					t.Fatalf("err = %v, want the call to succeed after the wait", err)
				}
				if len(gh.bodies) != 2 || gh.bodies[1] != gh.bodies[0] || !strings.Contains(gh.bodies[1], "evidence") {
					t.Errorf("bodies sent %q, want the same body twice", gh.bodies)
				}
			case **github.RateLimitError:
				if !errors.As(err, want) {
					t.Errorf("err = %v, want a *github.RateLimitError", err)
				}
			case **github.AbuseRateLimitError:
				if !errors.As(err, want) {
					t.Errorf("err = %v, want a *github.AbuseRateLimitError", err)
				}
			}
			if d := cmp.Diff(tc.wantWait, waited); d != "" {
				t.Errorf("waits (-want +got):\n%s", d)
			}
		})
	}
}

// New's token client goes through the rate-limit transport.
func TestGitHubClient_HonoursRateLimits(t *testing.T) {
	c, err := New(context.Background(), func(k string) string { return map[string]string{"GITHUB_TOKEN": "t"}[k] })
	if err != nil {
		t.Fatal(err)
	}
	auth, ok := c.Client().Transport.(*oauth2.Transport)
	if !ok {
		t.Fatalf("transport %T, want the token's", c.Client().Transport)
	}
	if _, ok := auth.Base.(rateLimits); !ok {
		t.Errorf("under the token: %T, want the rate-limit transport", auth.Base)
	}
}

// A successful answer that spends the limit (Remaining 0 until the
// reset) does not make the next call fail without being sent, as
// go-github alone would: the call waits for the reset when that fits its
// deadline, and is sent for GitHub to refuse visibly when it does not.
func TestRateLimits_ALimitASuccessSpentIsWaitedOutNotRefusedUnsent(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	spent := map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Limit": "5000", "X-RateLimit-Reset": strconv.FormatInt(now.Add(3*time.Second).Unix(), 10)}
	for name, tc := range map[string]struct {
		deadline time.Duration
		wantWait []time.Duration
	}{
		"the reset within the deadline": {30 * time.Second, []time.Duration{3 * time.Second}},
		"the reset past the deadline":   {time.Second, nil},
	} {
		t.Run(name, func(t *testing.T) {
			gh := &limitedGitHub{headers: spent, status: 200}
			var waited []time.Duration
			l := rateLimits{next: gh, now: func() time.Time { return now }, spent: &spentLimits{},
				wait: func(_ context.Context, d time.Duration) error { waited = append(waited, d); return nil }}
			c := github.NewClient(&http.Client{Transport: l})
			ctx, cancel := context.WithDeadline(context.Background(), now.Add(tc.deadline))
			defer cancel()
			for i := range 2 {
				if _, _, err := c.Issues.CreateComment(ctx, "o", "r", 1, &github.IssueComment{Body: github.String("evidence")}); err != nil {
					t.Fatalf("call %d: %v", i+1, err)
				}
			}
			if len(gh.bodies) != 2 {
				t.Errorf("%d requests reached GitHub, want both", len(gh.bodies))
			}
			if d := cmp.Diff(tc.wantWait, waited); d != "" {
				t.Errorf("waits (-want +got):\n%s", d)
			}
		})
	}
}

// A library user's own client gets the same waits.
func TestRateLimited_AUsersOwnClientWaitsToo(t *testing.T) {
	hc := RateLimited(&http.Client{Timeout: time.Minute})
	if _, ok := hc.Transport.(rateLimits); !ok || hc.Timeout != time.Minute {
		t.Errorf("transport %T, timeout %s", hc.Transport, hc.Timeout)
	}
}
