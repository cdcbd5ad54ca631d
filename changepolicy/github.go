package changepolicy

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/go-github/v66/github"

	"github.com/gpugate/gpugate/internal/ghpage"
)

// ErrIncomplete is returned by FromPullRequest when it could not list every
// changed file: the list stopped at GitHub's 3,000-file cap or is short of
// the pull request's changed_files count. The changes are withheld, so a
// partial list can never be classified docs-only or ci-only.
var ErrIncomplete = errors.New("changepolicy: incomplete changed-file list")

// GitHubFileCap is the most files GitHub's pull request files API returns.
const GitHubFileCap = 3000

// ErrHeadMoved is returned by ListPullRequest when the pull request's head
// changed while its files were listed: the listing belongs to no one head,
// so it is withheld. Classify again.
var ErrHeadMoved = errors.New("changepolicy: the pull request's head moved while its files were listed")

// Listing is a pull request's changed files as GitHub listed them at one
// head. A classification of it is evidence for that head only: a later
// push changes the files, so the gate that classification publishes goes
// to HeadSHA and nowhere else.
type Listing struct {
	Changes []Change
	HeadSHA string // the head the files were listed at (the same before and after the listing)
	BaseSHA string // the base branch's commit the pull request was read with (base.sha)
	// MergeBaseSHA is the merge base of BaseSHA and HeadSHA, the commit the
	// changed files are the difference from (GitHub's compare); empty
	// when the compare could not be read, which the classification does
	// not depend on.
	MergeBaseSHA string
}

// Classify classifies the listing and binds the decision to its head and
// base (Decision.HeadSHA, Decision.BaseSHA).
func (l Listing) Classify(p *Policy) (Decision, error) {
	d, err := Classify(p, l.Changes)
	if err != nil {
		return d, err
	}
	d.HeadSHA, d.BaseSHA, d.MergeBaseSHA = l.HeadSHA, l.BaseSHA, l.MergeBaseSHA
	return d, nil
}

// FromPullRequest lists every file a pull request changes; it is
// ListPullRequest without the head the files belong to.
func FromPullRequest(ctx context.Context, client *github.Client, owner, repo string, number int) ([]Change, error) {
	l, err := ListPullRequest(ctx, client, owner, repo, number)
	if err != nil {
		return nil, err
	}
	return l.Changes, nil
}

// ListPullRequest lists every file a pull request changes, 100 per page
// over every page, checks the count against the pull request's
// changed_files, and binds the list to the head it was read at: the pull
// request is read before and after the listing, and a head that moved in
// between is ErrHeadMoved. It calls GET /repos/{owner}/{repo}/pulls/{pull_number}
// and GET /repos/{owner}/{repo}/pulls/{pull_number}/files
// (https://docs.github.com/rest/pulls/pulls#list-pull-requests-files).
func ListPullRequest(ctx context.Context, client *github.Client, owner, repo string, number int) (Listing, error) {
	if client == nil {
		return Listing{}, errors.New("changepolicy: FromPullRequest needs a GitHub client")
	}
	pr, _, err := client.PullRequests.Get(ctx, owner, repo, number)
	if err != nil {
		return Listing{}, fmt.Errorf("changepolicy: get pull request %s/%s#%d: %w", owner, repo, number, err)
	}
	head, base := pr.GetHead().GetSHA(), pr.GetBase().GetSHA()
	if head == "" {
		return Listing{}, fmt.Errorf("changepolicy: pull request %s/%s#%d has no head SHA: a classification must name the head it is for", owner, repo, number)
	}
	want := pr.GetChangedFiles()
	opts := &github.ListOptions{PerPage: ghpage.PerPage}
	files, err := ghpage.All(func(page int) ([]*github.CommitFile, *github.Response, error) {
		opts.Page = page
		return client.PullRequests.ListFiles(ctx, owner, repo, number, opts)
	})
	if errors.Is(err, ghpage.ErrTooManyPages) {
		return Listing{}, fmt.Errorf("%w: %s/%s#%d: %w", ErrIncomplete, owner, repo, number, err)
	}
	if err != nil {
		return Listing{}, fmt.Errorf("changepolicy: list files of %s/%s#%d (page %d): %w", owner, repo, number, opts.Page, err)
	}
	changes := make([]Change, 0, len(files))
	for _, f := range files {
		changes = append(changes, Change{Path: f.GetFilename(), OldPath: f.GetPreviousFilename(), Status: Status(f.GetStatus())})
	}
	switch {
	case len(changes) >= GitHubFileCap:
		return Listing{}, fmt.Errorf("%w: %s/%s#%d lists %d files, GitHub's cap: classify from git (FromGitDiff) instead", ErrIncomplete, owner, repo, number, len(changes))
	case len(changes) != want:
		return Listing{}, fmt.Errorf("%w: %s/%s#%d: listed %d files but the pull request reports changed_files=%d; retry, or classify from git (FromGitDiff)", ErrIncomplete, owner, repo, number, len(changes), want)
	}
	after, _, err := client.PullRequests.Get(ctx, owner, repo, number)
	if err != nil {
		return Listing{}, fmt.Errorf("changepolicy: re-read pull request %s/%s#%d after listing its files: %w", owner, repo, number, err)
	}
	if got := after.GetHead().GetSHA(); got != head || after.GetBase().GetSHA() != base {
		return Listing{}, fmt.Errorf("%w: %s/%s#%d: listed at head %s, now %s", ErrHeadMoved, owner, repo, number, head, got)
	}
	l := Listing{Changes: changes, HeadSHA: head, BaseSHA: base}
	if base != "" {
		// GET /repos/{owner}/{repo}/compare/{base}...{head}
		// (https://docs.github.com/rest/commits/commits#compare-two-commits)
		if cmp, _, err := client.Repositories.CompareCommits(ctx, owner, repo, base, head, &github.ListOptions{PerPage: 1}); err == nil {
			l.MergeBaseSHA = cmp.GetMergeBaseCommit().GetSHA()
		}
	}
	return l, nil
}
