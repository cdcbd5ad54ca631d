package rest

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// parseRetryAfter reads a Retry-After header value (RFC 9110 §10.2.3):
// delta-seconds or an HTTP-date. A date in the past means no wait. ok is
// false when the value is absent or malformed.
func parseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		n, err := strconv.ParseUint(v, 10, 63)
		if err != nil {
			return 0, false
		}
		const maxSeconds = uint64(1<<63-1) / uint64(time.Second)
		if n > maxSeconds {
			n = maxSeconds
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	if d := t.Sub(now); d > 0 {
		return d, true
	}
	return 0, true
}
