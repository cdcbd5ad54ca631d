package ghclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/go-github/v66/github"
	"golang.org/x/oauth2"
)

// ErrNoToken is returned by New and RequireCredentials when neither
// GITHUB_TOKEN nor a GitHub App is configured.
var ErrNoToken = errors.New("ghclient: GITHUB_TOKEN is not set")

// noToken is ErrNoToken with what to do about it where the command runs:
// in a workflow, pass the job's token; at a terminal, export one.
func noToken(getenv func(string) string) error {
	if getenv("GITHUB_ACTIONS") == "true" {
		return fmt.Errorf("%w: pass the workflow's token (env: GITHUB_TOKEN: ${{ github.token }}) or a token with the permissions docs/adopting.md lists for the job; a long-running process authenticates as a GitHub App instead (%s, %s, %s)", ErrNoToken, EnvAppID, EnvAppInstallationID, EnvAppPrivateKeyFile)
	}
	return fmt.Errorf("%w: export a token that can read the repository (GITHUB_TOKEN=$(gh auth token)), or set %s, %s and %s for a GitHub App", ErrNoToken, EnvAppID, EnvAppInstallationID, EnvAppPrivateKeyFile)
}

// New builds the go-github client of a command that calls GitHub. It
// honours GITHUB_API_URL (GitHub Enterprise Server, or a test server).
// It authenticates as a
// GitHub App installation when GITHUB_APP_ID, GITHUB_APP_INSTALLATION_ID
// and GITHUB_APP_PRIVATE_KEY_FILE are set, minting a fresh installation
// token shortly before each one expires, as a process that outlives one
// token's hour needs (github.com/bradleyfalzon/ghinstallation); otherwise
// with GITHUB_TOKEN, through golang.org/x/oauth2. A spent rate limit is
// waited out within the caller's deadline, then reported (rateLimits).
func New(ctx context.Context, getenv func(string) string) (*github.Client, error) {
	withAPI, a, err := settings(getenv)
	if err != nil {
		return nil, err
	}
	if a != nil {
		return withAPI(github.NewClient(&http.Client{Transport: newRateLimits(a.installationTransport())}))
	}
	token := getenv("GITHUB_TOKEN")
	if token == "" {
		return nil, noToken(getenv)
	}
	auth := &oauth2.Transport{Source: oauth2.StaticTokenSource(&oauth2.Token{AccessToken: token}), Base: newRateLimits(nil)}
	return withAPI(github.NewClient(&http.Client{Transport: auth}))
}

// RequireCredentials checks, without calling GitHub, that getenv holds a
// GitHub credential New can use: a GitHub App's settings (its key file
// readable) or GITHUB_TOKEN. It is the one credential check of
// every command that calls GitHub: none asks for GITHUB_TOKEN by name
// when an App is configured.
func RequireCredentials(getenv func(string) string) error {
	_, a, err := settings(getenv)
	switch {
	case err != nil:
		return err
	case a == nil && getenv("GITHUB_TOKEN") == "":
		return noToken(getenv)
	}
	return nil
}

// settings reads GITHUB_API_URL, as withAPI that points a client at it
// when it names another server than github.com's, and the App's settings
// (nil when none is set).
func settings(getenv func(string) string) (withAPI func(*github.Client) (*github.Client, error), a *appAuth, err error) {
	api := getenv("GITHUB_API_URL")
	withAPI = func(c *github.Client) (*github.Client, error) {
		if api == "" || api == "https://api.github.com" {
			return c, nil
		}
		e, err := c.WithEnterpriseURLs(api, api)
		if err != nil {
			return nil, fmt.Errorf("ghclient: GITHUB_API_URL %q is not a URL: %w", api, err)
		}
		return e, nil
	}
	base, err := withAPI(github.NewClient(nil))
	if err != nil {
		return nil, nil, err
	}
	if a, err = loadApp(getenv, base); err != nil {
		return nil, nil, err
	}
	return withAPI, a, nil
}

// NewApp builds a client that authenticates as the GitHub App itself (a
// JWT signed with its key, GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY_FILE), for the
// endpoints under /app, such as its webhook deliveries, that an
// installation token cannot call. It refuses to work without the App's
// settings.
func NewApp(ctx context.Context, getenv func(string) string) (*github.Client, error) {
	withAPI, a, err := settings(getenv)
	switch {
	case err != nil:
		return nil, err
	case a == nil:
		return nil, fmt.Errorf("%w: set %s, %s and %s: only the App itself can read its webhook deliveries", ErrApp, EnvAppID, EnvAppInstallationID, EnvAppPrivateKeyFile)
	}
	return withAPI(github.NewClient(&http.Client{Transport: newRateLimits(a.appTransport())}))
}
