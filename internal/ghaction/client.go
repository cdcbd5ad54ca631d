package ghaction

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/go-github/v66/github"
	"golang.org/x/oauth2"
)

// ErrNoToken is returned by GitHubClient when GITHUB_TOKEN is unset.
var ErrNoToken = errors.New("ghaction: GITHUB_TOKEN is not set: pass the workflow's token (env: GITHUB_TOKEN: ${{ github.token }}) or a token with the permissions docs/adopting.md lists for the job")

// GitHubClient builds a go-github client authenticated with GITHUB_TOKEN
// (through golang.org/x/oauth2) that honours GITHUB_API_URL (GitHub
// Enterprise Server, or a test server).
func GitHubClient(ctx context.Context, getenv func(string) string) (*github.Client, error) {
	token := getenv("GITHUB_TOKEN")
	if token == "" {
		return nil, ErrNoToken
	}
	client := github.NewClient(oauth2.NewClient(ctx, oauth2.StaticTokenSource(&oauth2.Token{AccessToken: token})))
	if api := getenv("GITHUB_API_URL"); api != "" && api != "https://api.github.com" {
		c, err := client.WithEnterpriseURLs(api, api)
		if err != nil {
			return nil, fmt.Errorf("ghaction: GITHUB_API_URL %q is not a URL: %w", api, err)
		}
		client = c
	}
	return client, nil
}
