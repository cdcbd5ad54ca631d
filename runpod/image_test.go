package runpod_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpugate/gpugate/runpod"
)

const indexBody = `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}`

// registry is an httptest OCI registry with the anonymous token flow.
func registry(t *testing.T, digestOnHEAD bool) (*httptest.Server, *int) {
	t.Helper()
	heads := new(int)
	sum := sha256.Sum256([]byte(indexBody))
	digest := "sha256:" + hex.EncodeToString(sum[:])
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/token":
			if r.URL.Query().Get("scope") != "repository:actions/actions-runner:pull" || r.URL.Query().Get("service") != "test-registry" {
				http.Error(w, "bad scope", 400)
				return
			}
			fmt.Fprint(w, `{"token":"REGISTRYTOKEN"}`)
		case r.URL.Path == "/v2/actions/actions-runner/manifests/latest":
			if r.Header.Get("Authorization") != "Bearer REGISTRYTOKEN" {
				w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="%s/token",service="test-registry",scope="repository:actions/actions-runner:pull"`, srv.URL))
				w.WriteHeader(401)
				return
			}
			if !strings.Contains(r.Header.Get("Accept"), "application/vnd.oci.image.index.v1+json") {
				http.Error(w, "index not accepted", http.StatusNotAcceptable)
				return
			}
			w.Header().Set("Content-Type", "application/vnd.oci.image.index.v1+json")
			if digestOnHEAD || r.Method == http.MethodGet {
				if digestOnHEAD {
					w.Header().Set("Docker-Content-Digest", digest)
				}
			}
			if r.Method == http.MethodHead {
				*heads++
				return
			}
			fmt.Fprint(w, indexBody)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, heads
}

func TestResolveImage_PinsTheTagThroughTheTokenFlow(t *testing.T) {
	sum := sha256.Sum256([]byte(indexBody))
	want := "sha256:" + hex.EncodeToString(sum[:])
	for name, onHead := range map[string]bool{"digest on HEAD": true, "registry omits it: hash the manifest": false} {
		t.Run(name, func(t *testing.T) {
			srv, heads := registry(t, onHead)
			host := strings.TrimPrefix(srv.URL, "http://")
			r := &runpod.ImageResolver{HTTP: srv.Client(), PlainHTTP: true}
			got, err := r.Resolve(context.Background(), host+"/actions/actions-runner:latest")
			if err != nil {
				t.Fatal(err)
			}
			if got != host+"/actions/actions-runner:latest@"+want {
				t.Errorf("got %s", got)
			}
			if *heads != 1 {
				t.Errorf("%d authorized HEADs, want 1", *heads)
			}
		})
	}
}

func TestResolveImage_FailuresStopBeforeAllocation(t *testing.T) {
	srv, _ := registry(t, true)
	host := strings.TrimPrefix(srv.URL, "http://")
	r := &runpod.ImageResolver{HTTP: srv.Client(), PlainHTTP: true}
	for _, ref := range []string{host + "/actions/missing:latest", host + "/actions/actions-runner:v9", "UPPER/case", "bad@sha256:xyz"} {
		if got, err := r.Resolve(context.Background(), ref); !errors.Is(err, runpod.ErrImage) || got != "" {
			t.Errorf("%s: %q, %v; want ErrImage", ref, got, err)
		}
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	if _, err := r.Resolve(context.Background(), strings.TrimPrefix(closed.URL, "http://")+"/a/b:c"); !errors.Is(err, runpod.ErrImage) {
		t.Errorf("unreachable registry: %v", err)
	}
}

func TestResolveImage_TokenNeverInErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" {
			fmt.Fprint(w, `{"token":"REGISTRYTOKEN"}`)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="http://`+r.Host+`/token"`)
		w.WriteHeader(401)
	}))
	defer srv.Close()
	r := &runpod.ImageResolver{HTTP: srv.Client(), PlainHTTP: true}
	_, err := r.Resolve(context.Background(), strings.TrimPrefix(srv.URL, "http://")+"/a/b:c")
	if err == nil || strings.Contains(err.Error(), "REGISTRYTOKEN") {
		t.Errorf("err = %v", err)
	}
}

func TestResolveImage_AlreadyPinnedIsKept(t *testing.T) {
	ref := "ghcr.io/actions/actions-runner:latest@sha256:" + strings.Repeat("a", 64)
	got, err := runpod.ResolveImage(context.Background(), ref)
	if err != nil || got != ref {
		t.Errorf("got %q, %v", got, err)
	}
}

func TestParseImageRef(t *testing.T) {
	tests := map[string]runpod.ImageRef{
		"ghcr.io/actions/actions-runner:latest":  {Name: "ghcr.io/actions/actions-runner", Registry: "ghcr.io", Repository: "actions/actions-runner", Tag: "latest"},
		"ubuntu":                                 {Name: "ubuntu", Registry: "registry-1.docker.io", Repository: "library/ubuntu", Tag: "latest"},
		"localhost:5000/x/y:1.2":                 {Name: "localhost:5000/x/y", Registry: "localhost:5000", Repository: "x/y", Tag: "1.2"},
		"nvidia/cuda:12.8.0-runtime-ubuntu24.04": {Name: "nvidia/cuda", Registry: "registry-1.docker.io", Repository: "nvidia/cuda", Tag: "12.8.0-runtime-ubuntu24.04"},
	}
	for ref, want := range tests {
		got, err := runpod.ParseImageRef(ref)
		if err != nil {
			t.Errorf("%s: %v", ref, err)
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", ref, diff)
		}
	}
}

func TestParseChallenge(t *testing.T) {
	scheme, params, err := runpod.ParseChallenge(`Bearer realm="https://ghcr.io/token",service="ghcr.io", scope="repository:a/b:pull",x=tok`)
	want := map[string]string{"realm": "https://ghcr.io/token", "service": "ghcr.io", "scope": "repository:a/b:pull", "x": "tok"}
	if err != nil || scheme != "Bearer" || !cmp.Equal(want, params) {
		t.Errorf("%s %v %v", scheme, params, err)
	}
	for _, bad := range []string{"", `Bearer realm="unterminated`, `Bearer realm="a" service="b"`, `="x"`, `Bearer ,=`} {
		if _, _, err := runpod.ParseChallenge(bad); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}

func FuzzParseChallenge(f *testing.F) {
	f.Add(`Bearer realm="https://ghcr.io/token",service="ghcr.io",scope="repository:a/b:pull"`)
	f.Add(`Basic realm="x\"y"`)
	f.Fuzz(func(t *testing.T, h string) {
		scheme, params, err := runpod.ParseChallenge(h)
		if err == nil && (scheme == "" || params == nil) {
			t.Fatalf("%q parsed to %q %v", h, scheme, params)
		}
	})
}

func FuzzParseImageRef(f *testing.F) {
	f.Add("ghcr.io/actions/actions-runner:latest")
	f.Add("ubuntu@sha256:" + strings.Repeat("0", 64))
	f.Fuzz(func(t *testing.T, ref string) {
		img, err := runpod.ParseImageRef(ref)
		if err != nil {
			return
		}
		again, err := runpod.ParseImageRef(img.String())
		if err != nil || again != img {
			t.Fatalf("%q -> %q does not round-trip: %+v vs %+v (%v)", ref, img.String(), img, again, err)
		}
	})
}
