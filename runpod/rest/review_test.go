package rest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gpugate/gpugate/runpod/rest"
)

// A redirect's error prints no credentials in any spelling, nor the API
// key however the Location encodes it.
func TestRedirectError_NeverPrintsCredentials(t *testing.T) {
	const key = "rpa_KEY/with+slash=="
	for name, loc := range map[string]string{
		"opaque userinfo":   "https:admin:hunter2@evil.example/x",
		"scheme-less":       "admin:hunter2@evil.example/x",
		"path-escaped key":  "https://evil.example/k/rpa_KEY%2Fwith+slash==",
		"query-escaped key": "https://evil.example/k/rpa_KEY%2Fwith%2Bslash%3D%3D",
		"userinfo":          "https://admin:hunter2@evil.example/x",
	} {
		t.Run(name, func(t *testing.T) {
			api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Location", loc)
				w.WriteHeader(http.StatusTemporaryRedirect)
			}))
			defer api.Close()
			c, err := rest.NewClient(rest.WithAPIKey(key), rest.WithBaseURL(api.URL))
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.GetPod(context.Background(), "pod1")
			if !errors.Is(err, rest.ErrRedirect) {
				t.Fatalf("err = %v, want ErrRedirect", err)
			}
			for _, s := range []string{"hunter2", "rpa_KEY"} {
				if strings.Contains(err.Error(), s) {
					t.Errorf("%s in %q", s, err)
				}
			}
		})
	}
}

// Scrub before you cut, whatever the JSON encoder: Node's and Python's
// escape quotes but not & < >, and a body that is no problem document is
// cut; no part of the startup command survives.
func TestParseError_ScrubsPlainJSONEscapingBeforeTheCut(t *testing.T) {
	args := `bash -c "STARTUPSECRET-` + strings.Repeat("0123456789", 8) + ` && exec /run.sh"`
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		fmt.Fprintf(w, `{"message":"%s invalid dockerStartCmd: %s"}`, strings.Repeat("x", 120), strings.ReplaceAll(args, `"`, `\"`))
	}))
	defer api.Close()
	c, err := rest.NewClient(rest.WithAPIKey("rpa_key-0123456789"), rest.WithBaseURL(api.URL))
	if err != nil {
		t.Fatal(err)
	}
	req := podRequest("gate-c1", "NVIDIA L4")
	req.Args = rest.Secret(args)
	_, err = c.CreatePod(context.Background(), req)
	if err == nil || strings.Contains(err.Error(), "STARTUPSECRET") || strings.Contains(err.Error(), "0123456789012345") {
		t.Errorf("survived: %v", err)
	}
}
