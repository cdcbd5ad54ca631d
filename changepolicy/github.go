package changepolicy

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/go-github/v66/github"
)

// ErrIncomplete is returned by FromPullRequest when it could not list every
// changed file: the list stopped at GitHub's 3,000-file cap or is short of
// the pull request's changed_files count. The changes are withheld, so a
// partial list can never be classified docs-only or ci-only.
var ErrIncomplete = errors.New("changepolicy: incomplete changed-file list")

// GitHubFileCap is the most files GitHub's pull request files API returns.
const GitHubFileCap = 3000

// FromPullRequest lists every file a pull request changes, 100 per page over
// every page, and checks the count against the pull request's changed_files.
// It calls GET /repos/{owner}/{repo}/pulls/{pull_number} and
// GET /repos/{owner}/{repo}/pulls/{pull_number}/files
// (https://docs.github.com/rest/pulls/pulls#list-pull-requests-files).
func FromPullRequest(ctx context.Context, client *github.Client, owner, repo string, number int) ([]Change, error) {
	if client == nil {
		return nil, errors.New("changepolicy: FromPullRequest needs a GitHub client")
	}
	pr, _, err := client.PullRequests.Get(ctx, owner, repo, number)
	if err != nil {
		return nil, fmt.Errorf("changepolicy: get pull request %s/%s#%d: %w", owner, repo, number, err)
	}
	want := pr.GetChangedFiles()
	var changes []Change
	opts := &github.ListOptions{PerPage: 100}
	for pages := 0; ; pages++ {
		if pages > GitHubFileCap/100 {
			return nil, fmt.Errorf("%w: %s/%s#%d: more than %d pages", ErrIncomplete, owner, repo, number, pages)
		}
		files, resp, err := client.PullRequests.ListFiles(ctx, owner, repo, number, opts)
		if err != nil {
			return nil, fmt.Errorf("changepolicy: list files of %s/%s#%d (page %d): %w", owner, repo, number, opts.Page, err)
		}
		for _, f := range files {
			changes = append(changes, Change{Path: f.GetFilename(), OldPath: f.GetPreviousFilename(), Status: Status(f.GetStatus())})
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	switch {
	case len(changes) >= GitHubFileCap:
		return nil, fmt.Errorf("%w: %s/%s#%d lists %d files, GitHub's cap: classify from git (FromGitDiff) instead", ErrIncomplete, owner, repo, number, len(changes))
	case len(changes) != want:
		return nil, fmt.Errorf("%w: %s/%s#%d: listed %d files but the pull request reports changed_files=%d; retry, or classify from git (FromGitDiff)", ErrIncomplete, owner, repo, number, len(changes), want)
	}
	return changes, nil
}
