package rest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gpugate/gpugate/runpod/rest"
)

// The RunPod client never follows a redirect: the API key, the runner's
// JIT config and the startup command would go to wherever the Location
// points, a body re-sent on 307/308, a POST turned into GET on 301/302, to
// another port or from https to plain http. A redirect is an error naming
// the location, and the other server sees nothing.
func TestClient_NeverFollowsARedirect(t *testing.T) {
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer other.Close()
	for _, status := range []int{301, 302, 303, 307, 308} {
		for _, hc := range map[string]*http.Client{"default": nil, "caller's own": {}} {
			t.Run(fmt.Sprint(status), func(t *testing.T) {
				api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Location", other.URL+"/v2/pods?sig=SIGNED-0123456789")
					w.WriteHeader(status)
				}))
				defer api.Close()
				opts := []rest.Option{rest.WithAPIKey("rpa_REDIRECTKEY-0123"), rest.WithBaseURL(api.URL)}
				if hc != nil {
					opts = append(opts, rest.WithHTTPClient(hc))
				}
				c, err := rest.NewClient(opts...)
				if err != nil {
					t.Fatal(err)
				}
				_, err = c.CreatePod(context.Background(), podRequest("gate-c1", "NVIDIA L4"))
				var re *rest.RedirectError
				if !errors.Is(err, rest.ErrRedirect) || !errors.As(err, &re) {
					t.Fatalf("CreatePod err = %v, want a RedirectError", err)
				}
				if re.StatusCode != status || re.Location != other.URL+"/v2/pods" {
					t.Errorf("redirect = %+v, want status %d to %s (no query: a signed URL's token is not printed)", re, status, other.URL+"/v2/pods")
				}
				if errors.Is(err, rest.ErrCreateUnknown) {
					t.Errorf("a redirect is answered without processing, not an unknown create: %v", err)
				}
				if err := c.DeletePod(context.Background(), "pod1"); !errors.Is(err, rest.ErrRedirect) {
					t.Errorf("DeletePod err = %v, want ErrRedirect", err)
				}
				if _, err := c.GetPod(context.Background(), "pod1"); !errors.Is(err, rest.ErrRedirect) {
					t.Errorf("GetPod err = %v, want ErrRedirect", err)
				}
				if n := elsewhere.Load(); n != 0 {
					t.Fatalf("%d requests reached the redirect's target", n)
				}
				for _, s := range []string{"REDIRECTKEY", "JITSECRET", "STARTUPSECRET", "SIGNED"} {
					if strings.Contains(err.Error(), s) {
						t.Errorf("%s in %q", s, err)
					}
				}
			})
		}
	}
}

// Scrub before you cut: a plain-text error body is cut to a short excerpt,
// and every secret the request carried is removed from the whole body
// first, so no prefix of one survives the cut (as sent, or JSON-escaped).
func TestParseError_ScrubsTheWholeBodyBeforeCuttingIt(t *testing.T) {
	jit := "JITSECRET-" + strings.Repeat("a1b2c3d4/+", 30)
	for name, echo := range map[string]func(string) string{
		"plain":        func(s string) string { return s },
		"json-escaped": func(s string) string { return strings.ReplaceAll(s, "/", `\/`) },
	} {
		t.Run(name, func(t *testing.T) {
			api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/plain")
				w.WriteHeader(http.StatusBadRequest)
				// The secret starts before the 200-byte cut and ends after it.
				fmt.Fprintf(w, "%s env.RUNNER_JIT_CONFIG=%s is invalid", strings.Repeat("x", 150), echo(jit))
			}))
			defer api.Close()
			c, err := rest.NewClient(rest.WithAPIKey("rpa_key-0123456789"), rest.WithBaseURL(api.URL))
			if err != nil {
				t.Fatal(err)
			}
			req := podRequest("gate-c1", "NVIDIA L4")
			req.SecretEnv["RUNNER_JIT_CONFIG"] = rest.Secret(jit)
			_, err = c.CreatePod(context.Background(), req)
			if !errors.Is(err, rest.ErrRejected) {
				t.Fatalf("err = %v, want the 400", err)
			}
			if strings.Contains(err.Error(), "JITSECRET") || strings.Contains(err.Error(), "a1b2c3d4") {
				t.Errorf("part of the JIT config survived: %q", err)
			}
		})
	}
}
