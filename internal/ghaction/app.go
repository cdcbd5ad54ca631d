package ghaction

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/google/go-github/v66/github"
	"golang.org/x/oauth2"
)

// The environment of GitHub App authentication, for a long-running
// process (sparkd) whose installation token would expire within the hour.
const (
	EnvAppID             = "GITHUB_APP_ID"               // the App's ID
	EnvAppInstallationID = "GITHUB_APP_INSTALLATION_ID"  // its installation on the organization or repositories
	EnvAppPrivateKeyFile = "GITHUB_APP_PRIVATE_KEY_FILE" // the App's private key (PEM), never printed
)

// ErrApp is returned by GitHubClient and GitHubAppClient for GitHub App
// settings they cannot use.
var ErrApp = errors.New("ghaction: GitHub App authentication")

// appTokens mints installation tokens for a GitHub App: each Token call
// signs a short-lived JWT with the App's key and exchanges it
// (POST /app/installations/{id}/access_tokens). oauth2.ReuseTokenSource
// caches each token until shortly before it expires.
type appTokens struct {
	appID, installation int64
	key                 *rsa.PrivateKey
	client              *github.Client // unauthenticated, with the API base URL
	now                 func() time.Time
}

// loadApp reads the App settings from getenv; nil when none is set.
func loadApp(getenv func(string) string, base *github.Client) (*appTokens, error) {
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
	return &appTokens{appID: appID, installation: installation, key: key, client: base, now: time.Now}, nil
}

// appJWTs is the App's own identity, for the endpoints under /app that
// installation tokens cannot call (its webhook deliveries).
type appJWTs struct{ a *appTokens }

// Token signs a fresh JWT; ReuseTokenSource keeps it for eight of its
// nine minutes.
func (j appJWTs) Token() (*oauth2.Token, error) {
	jwt, err := j.a.jwt()
	if err != nil {
		return nil, fmt.Errorf("%w: sign the App's JWT: %w", ErrApp, err)
	}
	return &oauth2.Token{AccessToken: jwt, TokenType: "Bearer", Expiry: j.a.now().Add(8 * time.Minute)}, nil
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

// jwt is the App's RS256 JSON Web Token: issued a minute in the past (for
// clock drift) and valid for nine minutes, inside GitHub's ten.
func (a *appTokens) jwt() (string, error) {
	now := a.now()
	enc := base64.RawURLEncoding
	header := enc.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT"}`))
	claims, err := json.Marshal(map[string]any{"iat": now.Add(-time.Minute).Unix(), "exp": now.Add(9 * time.Minute).Unix(), "iss": strconv.FormatInt(a.appID, 10)})
	if err != nil {
		return "", err
	}
	signing := header + "." + enc.EncodeToString(claims)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, a.key, crypto.SHA256, sum[:])
	if err != nil {
		return "", err
	}
	return signing + "." + enc.EncodeToString(sig), nil
}

// Token mints an installation token.
func (a *appTokens) Token() (*oauth2.Token, error) {
	jwt, err := a.jwt()
	if err != nil {
		return nil, fmt.Errorf("%w: sign the App's JWT: %w", ErrApp, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tok, _, err := a.client.WithAuthToken(jwt).Apps.CreateInstallationToken(ctx, a.installation, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: mint an installation token for installation %d: %w", ErrApp, a.installation, err)
	}
	if tok.GetToken() == "" {
		return nil, fmt.Errorf("%w: GitHub answered installation %d with no token", ErrApp, a.installation)
	}
	return &oauth2.Token{AccessToken: tok.GetToken(), TokenType: "Bearer", Expiry: tok.GetExpiresAt().Time}, nil
}

// appHTTPClient is the plain client that exchanges JWTs for tokens.
var appHTTPClient = &http.Client{Timeout: 30 * time.Second}
