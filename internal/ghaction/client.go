package ghaction

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/go-github/v66/github"
	"golang.org/x/oauth2"
)

// ErrNoToken is returned by GitHubClient when neither GITHUB_TOKEN nor a
// GitHub App is configured.
var ErrNoToken = errors.New("ghaction: GITHUB_TOKEN is not set: pass the workflow's token (env: GITHUB_TOKEN: ${{ github.token }}) or a token with the permissions docs/adopting.md lists for the job; a long-running process authenticates as a GitHub App instead (" + EnvAppID + ", " + EnvAppInstallationID + ", " + EnvAppPrivateKeyFile + ")")

// GitHubClient builds a go-github client that honours GITHUB_API_URL
// (GitHub Enterprise Server, or a test server). It authenticates as a
// GitHub App installation when GITHUB_APP_ID, GITHUB_APP_INSTALLATION_ID
// and GITHUB_APP_PRIVATE_KEY_FILE are set, minting a fresh installation
// token shortly before each one expires, as a process that outlives one
// token's hour needs; otherwise with GITHUB_TOKEN. Both go through
// golang.org/x/oauth2.
func GitHubClient(ctx context.Context, getenv func(string) string) (*github.Client, error) {
	withAPI := apiURL(getenv)
	minting, err := withAPI(github.NewClient(appHTTPClient))
	if err != nil {
		return nil, err
	}
	ts, app, err := appTokenSource(getenv, minting)
	if err != nil {
		return nil, err
	}
	if !app {
		token := getenv("GITHUB_TOKEN")
		if token == "" {
			return nil, ErrNoToken
		}
		ts = oauth2.StaticTokenSource(&oauth2.Token{AccessToken: token})
	}
	return withAPI(github.NewClient(oauth2.NewClient(ctx, ts)))
}

// apiURL points a client at GITHUB_API_URL, when it names another server
// than github.com's.
func apiURL(getenv func(string) string) func(*github.Client) (*github.Client, error) {
	api := getenv("GITHUB_API_URL")
	return func(c *github.Client) (*github.Client, error) {
		if api == "" || api == "https://api.github.com" {
			return c, nil
		}
		e, err := c.WithEnterpriseURLs(api, api)
		if err != nil {
			return nil, fmt.Errorf("ghaction: GITHUB_API_URL %q is not a URL: %w", api, err)
		}
		return e, nil
	}
}

// GitHubAppClient authenticates as the GitHub App itself (a JWT signed
// with its key, GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY_FILE), for the
// endpoints under /app, such as its webhook deliveries, that an
// installation token cannot call. It refuses to work without the App's
// settings.
func GitHubAppClient(ctx context.Context, getenv func(string) string) (*github.Client, error) {
	withAPI := apiURL(getenv)
	minting, err := withAPI(github.NewClient(appHTTPClient))
	if err != nil {
		return nil, err
	}
	a, ok, err := loadApp(getenv, minting)
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, fmt.Errorf("%w: set %s, %s and %s: only the App itself can read its webhook deliveries", ErrApp, EnvAppID, EnvAppInstallationID, EnvAppPrivateKeyFile)
	}
	return withAPI(github.NewClient(oauth2.NewClient(ctx, oauth2.ReuseTokenSource(nil, appJWTs{a}))))
}
