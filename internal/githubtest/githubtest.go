// Package githubtest points a go-github client at a loopback test server,
// for the tests of packages that call GitHub.
package githubtest

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/google/go-github/v66/github"
)

// New starts a loopback server serving h, closed when the test ends, and
// returns a go-github client whose API base URL is that server, and the
// server (srv.URL has no trailing slash; srv.Close makes every later call
// fail).
func New(t testing.TB, h http.Handler) (*github.Client, *httptest.Server) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c := github.NewClient(srv.Client())
	base, err := url.Parse(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	c.BaseURL = base
	return c, srv
}
