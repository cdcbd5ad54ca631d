package runpod

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

	"github.com/google/go-containerregistry/pkg/authn"
)

const indexBody = `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}`

// registry is an httptest OCI registry with the anonymous token flow, as
// the distribution spec has it: /v2/ answers 401 with the challenge.
func registry(t *testing.T, digestOnHEAD bool) (*httptest.Server, *int) {
	t.Helper()
	heads := new(int)
	sum := sha256.Sum256([]byte(indexBody))
	digest := "sha256:" + hex.EncodeToString(sum[:])
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v2/": // the API's base, where a client learns how to authenticate
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="%s/token",service="test-registry"`, srv.URL))
			w.WriteHeader(401)
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
			r := &imageResolver{HTTP: srv.Client(), PlainHTTP: true}
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
	r := &imageResolver{HTTP: srv.Client(), PlainHTTP: true}
	for _, ref := range []string{host + "/actions/missing:latest", host + "/actions/actions-runner:v9", "UPPER/case", "bad@sha256:xyz"} {
		if got, err := r.Resolve(context.Background(), ref); !errors.Is(err, ErrImage) || got != "" {
			t.Errorf("%s: %q, %v; want ErrImage", ref, got, err)
		}
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	if _, err := r.Resolve(context.Background(), strings.TrimPrefix(closed.URL, "http://")+"/a/b:c"); !errors.Is(err, ErrImage) {
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
	r := &imageResolver{HTTP: srv.Client(), PlainHTTP: true}
	_, err := r.Resolve(context.Background(), strings.TrimPrefix(srv.URL, "http://")+"/a/b:c")
	if err == nil || strings.Contains(err.Error(), "REGISTRYTOKEN") {
		t.Errorf("err = %v", err)
	}
}

func TestResolveImage_AlreadyPinnedIsKept(t *testing.T) {
	ref := "ghcr.io/actions/actions-runner:latest@sha256:" + strings.Repeat("a", 64)
	got, err := ResolveImage(context.Background(), ref)
	if err != nil || got != ref {
		t.Errorf("got %q, %v", got, err)
	}
}

// noNetwork fails every request and counts them: what is refused or kept
// without a registry must never reach one.
type noNetwork struct{ calls *int }

func (n noNetwork) RoundTrip(*http.Request) (*http.Response, error) {
	*n.calls++
	return nil, errors.New("no network in this test")
}

// A reference is refused, or kept as pinned, before any registry is asked.
func TestParseImageRef(t *testing.T) {
	calls := 0
	r := &imageResolver{HTTP: &http.Client{Transport: noNetwork{&calls}}}
	pinned := "sha256:" + strings.Repeat("0", 64)
	for _, ref := range []string{"ghcr.io/actions/actions-runner:2.323.0@" + pinned, "ubuntu@" + pinned, "localhost:5000/x/y@" + pinned} {
		if got, err := r.Resolve(context.Background(), ref); err != nil || got != ref {
			t.Errorf("%s: %q, %v; want it kept as it is", ref, got, err)
		}
	}
	for _, ref := range []string{"UPPER/case:latest", "bad@sha256:xyz", "a/b:" + strings.Repeat("t", 129), ""} {
		if got, err := r.Resolve(context.Background(), ref); !errors.Is(err, ErrImage) || got != "" {
			t.Errorf("%q: %q, %v; want ErrImage", ref, got, err)
		}
	}
	if calls != 0 {
		t.Errorf("%d registry requests for references that need none", calls)
	}
}

// The token flow follows a challenge as registries write it: spaces after
// commas, parameters in any order, extra ones.
func TestParseChallenge(t *testing.T) {
	sum := sha256.Sum256([]byte(indexBody))
	digest := "sha256:" + hex.EncodeToString(sum[:])
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v2/":
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer scope="repository:a/b:pull", service="reg", realm="%s/token",error="insufficient_scope"`, srv.URL))
			w.WriteHeader(401)
		case r.URL.Path == "/token" && r.URL.Query().Get("service") == "reg":
			fmt.Fprint(w, `{"access_token":"TOK"}`)
		case r.URL.Path == "/v2/a/b/manifests/c" && r.Header.Get("Authorization") == "Bearer TOK":
			w.Header().Set("Content-Type", "application/vnd.oci.image.index.v1+json")
			w.Header().Set("Docker-Content-Digest", digest)
			if r.Method == http.MethodGet {
				fmt.Fprint(w, indexBody)
			}
		default:
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer scope="repository:a/b:pull", service="reg", realm="%s/token"`, srv.URL))
			w.WriteHeader(401)
		}
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	got, err := (&imageResolver{HTTP: srv.Client(), PlainHTTP: true}).Resolve(context.Background(), host+"/a/b:c")
	if err != nil || got != host+"/a/b:c@"+digest {
		t.Errorf("%q, %v", got, err)
	}
}

// Whatever the registry answers to the challenge, resolving fails with
// ErrImage or pins: it never panics.
func FuzzParseChallenge(f *testing.F) {
	f.Add(`Bearer realm="https://ghcr.io/token",service="ghcr.io",scope="repository:a/b:pull"`)
	f.Add(`Basic realm="x\"y"`)
	f.Add(`Bearer realm="unterminated`)
	f.Fuzz(func(t *testing.T, h string) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("WWW-Authenticate", h)
			w.WriteHeader(401)
		}))
		defer srv.Close()
		hc := &http.Client{Transport: loopbackOnly{srv.Client().Transport}}
		_, err := (&imageResolver{HTTP: hc, PlainHTTP: true, Keychain: authn.NewMultiKeychain()}).Resolve(context.Background(), strings.TrimPrefix(srv.URL, "http://")+"/a/b:c")
		if !errors.Is(err, ErrImage) {
			t.Fatalf("%q: %v, want ErrImage", h, err)
		}
	})
}

// loopbackOnly refuses every request that would leave this machine (a
// fuzzed challenge's realm may name any host).
type loopbackOnly struct{ next http.RoundTripper }

func (l loopbackOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	if h := req.URL.Hostname(); h != "127.0.0.1" && h != "localhost" && h != "::1" {
		return nil, fmt.Errorf("no network in this test: %s", h)
	}
	return l.next.RoundTrip(req)
}

// Any reference is refused (ErrImage) or, when pinned, kept exactly,
// without a registry.
func FuzzParseImageRef(f *testing.F) {
	f.Add("ghcr.io/actions/actions-runner:latest")
	f.Add("ubuntu@sha256:" + strings.Repeat("0", 64))
	f.Fuzz(func(t *testing.T, ref string) {
		calls := 0
		r := &imageResolver{HTTP: &http.Client{Transport: noNetwork{&calls}}, Keychain: authn.NewMultiKeychain()}
		got, err := r.Resolve(context.Background(), ref)
		switch {
		case err != nil && !errors.Is(err, ErrImage):
			t.Fatalf("%q: %v, want ErrImage", ref, err)
		case err == nil && calls == 0 && got != ref:
			t.Fatalf("%q pinned already, came back as %q", ref, got)
		case err == nil && calls > 0:
			t.Fatalf("%q resolved to %q with no network", ref, got)
		}
	})
}
