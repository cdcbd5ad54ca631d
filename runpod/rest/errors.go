package rest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"
)

// Sentinels callers branch on. An *APIError matches the one its status (and,
// for 400, its detail) maps to, per the create retry table of POST /v2/pods.
var (
	// ErrNoCapacity: a 400 whose detail says no instances are available.
	// Move to the next candidate without sleeping; nothing was paid for.
	ErrNoCapacity = errors.New("runpod: no capacity for the requested GPU")
	// ErrRejected: any other 400, a cross-field rule or a placement the API
	// refused. Try the next candidate; if every candidate answers 400, the
	// request itself is wrong.
	ErrRejected = errors.New("runpod: request rejected")
	// ErrInsufficientBalance: 402. Stop everything: no candidate will succeed.
	ErrInsufficientBalance = errors.New("runpod: insufficient balance")
	// ErrForbidden: 403. The key cannot use this pool: skip the candidate.
	ErrForbidden = errors.New("runpod: forbidden")
	// ErrInvalidRequest: 422. The body breaks the published contract; never
	// retried.
	ErrInvalidRequest = errors.New("runpod: request does not match the API contract")
	// ErrUnauthorized: 401. The API key is missing or wrong.
	ErrUnauthorized = errors.New("runpod: unauthorized")
	// ErrNotFound: 404. For a pod, it is gone (a DELETE's confirmation).
	ErrNotFound = errors.New("runpod: not found")
	// ErrConflict: 409, e.g. a cluster member pod that the pod endpoints
	// cannot delete.
	ErrConflict = errors.New("runpod: conflict")
	// ErrTransient: 408, 429, 5xx, a transport failure or a malformed
	// response, retried with backoff; matched by the final error when the
	// retries ran out.
	ErrTransient = errors.New("runpod: transient failure")
	// ErrMalformed: a response that does not parse. Its state is unknown:
	// never "container died", never "healthy".
	ErrMalformed = errors.New("runpod: malformed response")
	// ErrDeadline: a required pause (backoff, Retry-After or the shared
	// cooldown) is longer than the call's remaining deadline, so the call
	// ended at once rather than sleeping past it.
	ErrDeadline = errors.New("runpod: deadline too short for the required pause")

	// ErrCreateUnknown: a create failed in a way that may still have
	// created the pod (a lost response, then no successful lookup). Find it
	// by its name and delete it.
	ErrCreateUnknown = errors.New("runpod: create outcome unknown")
)

// APIError is an HTTP failure from the RunPod API, parsed from its RFC 9457
// problem document. Messages are scrubbed of every secret the client sent.
type APIError struct {
	Method, Path string // the request, without query or host
	StatusCode   int
	Title        string
	Detail       string
	Errors       []string      // individual validation failures (422)
	RetryAfter   time.Duration // from the Retry-After header; 0 when absent

	kind error
}

// Error renders the request's method and path (no query, no body), the
// status code, RunPod's problem document (title, detail and errors) and any
// Retry-After.
func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "runpod: %s %s: %d", e.Method, e.Path, e.StatusCode)
	if e.Title != "" {
		b.WriteString(" " + e.Title)
	} else if t := http.StatusText(e.StatusCode); t != "" {
		b.WriteString(" " + t)
	}
	if e.Detail != "" {
		b.WriteString(": " + e.Detail)
	}
	if len(e.Errors) > 0 {
		b.WriteString(" [" + strings.Join(e.Errors, "; ") + "]")
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %s)", e.RetryAfter)
	}
	return b.String()
}

// Is reports whether target is the sentinel this error's status maps to.
func (e *APIError) Is(target error) bool {
	return target == e.kind || (target == ErrTransient && retryableStatus(e.StatusCode))
}

// DefaultCapacityPattern recognises RunPod's capacity-miss detail ("There are
// no longer any instances available with the requested specifications").
// Capacity carries no machine-readable code, only this human text.
var DefaultCapacityPattern = regexp.MustCompile(`(?i)\bno (longer )?(any )?(instances?|machines?|gpus?) (are )?(currently )?available|\binsufficient capacity\b|\bout of capacity\b`)

func retryableStatus(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500
}

// problem is the RFC 9457 body: {title, status, detail, errors[]}.
type problem struct {
	Title  string   `json:"title"`
	Status int      `json:"status"`
	Detail string   `json:"detail"`
	Errors []string `json:"errors"`
}

// parseError builds the *APIError for a non-2xx response from its status,
// body and Retry-After header value. A body that is not a problem document
// keeps a short, printable excerpt as the detail. capacity decides which
// 400s are capacity misses (nil: DefaultCapacityPattern).
func parseError(method, path string, status int, body []byte, retryAfter string, now time.Time, capacity *regexp.Regexp) *APIError {
	e := &APIError{Method: method, Path: path, StatusCode: status}
	var p problem
	if err := json.Unmarshal(body, &p); err == nil && (p.Title != "" || p.Detail != "" || len(p.Errors) > 0) {
		e.Title, e.Detail, e.Errors = p.Title, p.Detail, p.Errors
	} else if text := strings.TrimSpace(strings.ToValidUTF8(string(body), "?")); text != "" {
		if len(text) > 200 {
			text = text[:200] + "..."
		}
		e.Detail = text
	}
	if d, ok := parseRetryAfter(retryAfter, now); ok {
		e.RetryAfter = d
	}
	if capacity == nil {
		capacity = DefaultCapacityPattern
	}
	switch {
	case status == http.StatusBadRequest && capacity.MatchString(e.Detail):
		e.kind = ErrNoCapacity
	case status == http.StatusBadRequest:
		e.kind = ErrRejected
	case status == http.StatusUnauthorized:
		e.kind = ErrUnauthorized
	case status == http.StatusPaymentRequired:
		e.kind = ErrInsufficientBalance
	case status == http.StatusForbidden:
		e.kind = ErrForbidden
	case status == http.StatusNotFound:
		e.kind = ErrNotFound
	case status == http.StatusConflict:
		e.kind = ErrConflict
	case status == http.StatusUnprocessableEntity:
		e.kind = ErrInvalidRequest
	}
	return e
}
