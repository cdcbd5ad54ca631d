package ghclient

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v66/github"
)

// The environment of GitHub App authentication, for a long-running
// process (sparkd) whose installation token would expire within the hour.
const (
	EnvAppID             = "GITHUB_APP_ID"               // the App's ID
	EnvAppInstallationID = "GITHUB_APP_INSTALLATION_ID"  // its installation on the organization or repositories
	EnvAppPrivateKeyFile = "GITHUB_APP_PRIVATE_KEY_FILE" // the App's private key (PEM), never printed
)

// ErrApp is returned by New, NewApp and RequireCredentials for GitHub
// App settings they cannot use, and by a call whose installation token
// GitHub refuses to mint.
var ErrApp = errors.New("ghclient: GitHub App authentication")

// appAuth is a GitHub App's settings: the App, its installation, its key
// and the API base URL its tokens are minted at.
type appAuth struct {
	appID, installation int64
	key                 *rsa.PrivateKey
	baseURL             string // scheme, host and path prefix of the REST API, no trailing slash
}

// loadApp reads the App settings from getenv; nil when none is set. The
// API base URL is base's (GITHUB_API_URL, or github.com's).
func loadApp(getenv func(string) string, base *github.Client) (*appAuth, error) {
	id, inst, keyFile := getenv(EnvAppID), getenv(EnvAppInstallationID), getenv(EnvAppPrivateKeyFile)
	if id == "" && inst == "" && keyFile == "" {
		return nil, nil
	}
	if id == "" || inst == "" || keyFile == "" {
		return nil, fmt.Errorf("%w: set all of %s, %s and %s, or none", ErrApp, EnvAppID, EnvAppInstallationID, EnvAppPrivateKeyFile)
	}
	appID, err1 := strconv.ParseInt(id, 10, 64)
	installation, err2 := strconv.ParseInt(inst, 10, 64)
	if err1 != nil || err2 != nil || appID <= 0 || installation <= 0 {
		return nil, fmt.Errorf("%w: %s and %s must be the App's and its installation's numeric IDs", ErrApp, EnvAppID, EnvAppInstallationID)
	}
	pemData, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrApp, EnvAppPrivateKeyFile, err)
	}
	key, err := parseAppKey(pemData)
	if err != nil {
		return nil, fmt.Errorf("%w: %s %s: %w", ErrApp, EnvAppPrivateKeyFile, keyFile, err)
	}
	return &appAuth{appID: appID, installation: installation, key: key, baseURL: strings.TrimRight(base.BaseURL.String(), "/")}, nil
}

// appTransport signs each request with a fresh JWT as the App itself
// (ghinstallation, go-github's recommendation), for the endpoints under
// /app that installation tokens cannot call.
func (a *appAuth) appTransport() *ghinstallation.AppsTransport {
	t := ghinstallation.NewAppsTransportFromPrivateKey(http.DefaultTransport, a.appID, a.key)
	t.BaseURL = a.baseURL
	return t
}

// installationTransport authenticates as the App's installation: it mints
// an installation token with the App's JWT and mints a new one shortly
// before it expires (ghinstallation caches it). A token GitHub refuses to
// mint fails the call with ErrApp, before the request is sent.
func (a *appAuth) installationTransport() http.RoundTripper {
	t := ghinstallation.NewFromAppsTransport(a.appTransport(), a.installation)
	t.BaseURL = a.baseURL
	return installationAuth{t, a.installation, http.DefaultTransport}
}

// installationAuth sends each request with the installation token
// ghinstallation mints or reuses, and fails it with ErrApp, unsent, when
// GitHub refuses to mint one.
type installationAuth struct {
	tokens       *ghinstallation.Transport
	installation int64
	next         http.RoundTripper
}

func (a installationAuth) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := a.tokens.Token(req.Context())
	if err != nil {
		return nil, fmt.Errorf("%w: mint an installation token for installation %d: %w", ErrApp, a.installation, err)
	}
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+tok)
	return a.next.RoundTrip(req)
}

// parseAppKey reads the RSA key GitHub issues for an App (PKCS #1 PEM), or
// the same key as PKCS #8. Its errors never quote the key.
func parseAppKey(data []byte) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("not a PEM private key; download the key from the App's settings")
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, errors.New("not an RSA private key in PKCS #1 or PKCS #8")
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, errors.New("not an RSA private key; GitHub Apps sign with RS256")
	}
	return rk, nil
}
