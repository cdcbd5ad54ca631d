package rest

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func TestParseError_CreateRetryTable(t *testing.T) {
	tests := map[string]struct {
		status    int
		detail    string
		want      error
		retryable bool
	}{
		"422 never retried":           {422, "Request validation failed.", ErrInvalidRequest, false},
		"400 capacity":                {400, "There are no longer any instances available with the requested specifications. Please refresh and try again.", ErrNoCapacity, false},
		"400 capacity, other wording": {400, "No GPUs are currently available for this type", ErrNoCapacity, false},
		"400 other is rejected":       {400, "gpu.minCudaVersion and gpu.allowedCudaVersions are mutually exclusive", ErrRejected, false},
		"402 insufficient balance":    {402, "Insufficient balance", ErrInsufficientBalance, false},
		"403 skips the candidate":     {403, "forbidden", ErrForbidden, false},
		"404 not found":               {404, "pod not found", ErrNotFound, false},
		"401 unauthorized":            {401, "", ErrUnauthorized, false},
		"409 conflict":                {409, "", ErrConflict, false},
		"408 retryable":               {408, "", ErrTransient, true},
		"429 retryable":               {429, "", ErrTransient, true},
		"500 retryable":               {500, "", ErrTransient, true},
		"503 retryable":               {503, "", ErrTransient, true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			body := fmt.Appendf(nil, `{"title":%q,"status":%d,"detail":%q}`, http.StatusText(tt.status), tt.status, tt.detail)
			e := parseError("POST", "/v2/pods", tt.status, body, "", t0, nil)
			if !errors.Is(e, tt.want) {
				t.Errorf("%v does not match %v", e, tt.want)
			}
			if got := errors.Is(e, ErrTransient); got != tt.retryable {
				t.Errorf("retryable = %v, want %v", got, tt.retryable)
			}
		})
	}
}

func TestParseError_ProblemBody(t *testing.T) {
	body := []byte(`{"title":"Unprocessable Entity","status":422,"detail":"Request validation failed.","errors":["$: additional properties 'bogus' not allowed"]}`)
	got := parseError("POST", "/v2/pods", 422, body, "", t0, nil)
	want := &APIError{Method: "POST", Path: "/v2/pods", StatusCode: 422, Title: "Unprocessable Entity", Detail: "Request validation failed.", Errors: []string{"$: additional properties 'bogus' not allowed"}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(APIError{}), cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".kind" }, cmp.Ignore())); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got.Error() != "runpod: POST /v2/pods: 422 Unprocessable Entity: Request validation failed. [$: additional properties 'bogus' not allowed]" {
		t.Errorf("Error() = %q", got.Error())
	}
	// A body that is not a problem document keeps a printable excerpt.
	html := parseError("GET", "/v2/pods", 502, []byte("<html>bad gateway</html>"), "", t0, nil)
	if html.Detail != "<html>bad gateway</html>" || !errors.Is(html, ErrTransient) {
		t.Errorf("non-problem body: %+v", html)
	}
}

func TestParseRetryAfter(t *testing.T) {
	tests := map[string]struct {
		in   string
		want time.Duration
		ok   bool
	}{
		"seconds":       {"12", 12 * time.Second, true},
		"zero":          {"0", 0, true},
		"above the cap": {"90", 90 * time.Second, true},
		"http date":     {"Sun, 29 Nov 2026 12:00:30 GMT", 30 * time.Second, true},
		"rfc850 date":   {"Sunday, 29-Nov-26 12:01:00 GMT", time.Minute, true},
		"asctime date":  {"Sun Nov 29 12:00:05 2026", 5 * time.Second, true},
		"past date":     {"Sun, 29 Nov 2026 11:00:00 GMT", 0, true},
		"empty":         {"", 0, false},
		"negative":      {"-5", 0, false},
		"fraction":      {"1.5", 0, false},
		"garbage":       {"soon", 0, false},
		"huge":          {"99999999999999999999", 0, false},
		"padded":        {" 7 ", 7 * time.Second, true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := parseRetryAfter(tt.in, t0)
			if got != tt.want || ok != tt.ok {
				t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"12", "Sun, 29 Nov 2026 12:00:30 GMT", "", "-1", "1e9", "18446744073709551615"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := parseRetryAfter(v, t0)
		if d < 0 || (!ok && d != 0) {
			t.Fatalf("parseRetryAfter(%q) = %v, %v", v, d, ok)
		}
	})
}

func FuzzParseError(f *testing.F) {
	f.Add(400, []byte(`{"title":"Bad Request","status":400,"detail":"There are no longer any instances available"}`), "")
	f.Add(429, []byte(`{"title":"Too Many Requests","status":429,"detail":"rate limit"}`), "12")
	f.Add(422, []byte(`{"errors":["a","b"]}`), "")
	f.Add(502, []byte("\xff<html>"), "Sun, 29 Nov 2026 12:00:30 GMT")
	f.Fuzz(func(t *testing.T, status int, body []byte, retryAfter string) {
		e := parseError("GET", "/v2/pods", status, body, retryAfter, t0, nil)
		if e.StatusCode != status || e.RetryAfter < 0 || len(e.Detail) > 100_000 {
			t.Fatalf("parseError gave %+v", e)
		}
		_ = e.Error()
		if status >= 500 && !errors.Is(e, ErrTransient) {
			t.Fatalf("a %d must be retryable", status)
		}
	})
}
