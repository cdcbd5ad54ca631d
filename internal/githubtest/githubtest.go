// Package githubtest points a go-github client at a loopback test server,
// for the tests of packages that call GitHub.
package githubtest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
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

// AppEnv writes a fresh GitHub App private key (PKCS #1 PEM, as GitHub
// issues them) to a temporary file and returns the environment that
// configures the App: GITHUB_APP_ID 12, GITHUB_APP_INSTALLATION_ID 77 and
// GITHUB_APP_PRIVATE_KEY_FILE, and no GITHUB_TOKEN.
func AppEnv(t testing.TB) map[string]string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "app.pem")
	data := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return map[string]string{"GITHUB_APP_ID": "12", "GITHUB_APP_INSTALLATION_ID": "77", "GITHUB_APP_PRIVATE_KEY_FILE": path}
}

// CheckCredentials runs start, a command's start before it calls GitHub,
// under each way of authenticating (a GitHub App, a token, neither), with
// RUNPOD_API_KEY set and nothing else: start must stop (the run's other
// settings are missing), and refuse for want of a credential (isNoToken
// true) only when there is none.
func CheckCredentials(t *testing.T, start func(getenv func(string) string) error, isNoToken func(error) bool) {
	t.Helper()
	for name, tc := range map[string]struct {
		env    map[string]string
		noCred bool
	}{
		"a GitHub App": {env: AppEnv(t)},
		"a token":      {env: map[string]string{"GITHUB_TOKEN": "ghs_x"}},
		"neither":      {env: map[string]string{}, noCred: true},
	} {
		t.Run(name, func(t *testing.T) {
			tc.env["RUNPOD_API_KEY"] = "rpa_x"
			err := start(func(k string) string { return tc.env[k] })
			if err == nil {
				t.Fatal("without the run's other settings the command must still stop")
			}
			if got := isNoToken(err); got != tc.noCred {
				t.Errorf("err = %v; refused for want of a credential: %v, want %v", err, got, tc.noCred)
			}
		})
	}
}
