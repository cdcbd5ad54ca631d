package sparkgh

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/google/go-github/v66/github"

	"github.com/gpugate/gpugate/gate"
	"github.com/gpugate/gpugate/internal/cli"
	"github.com/gpugate/gpugate/internal/ghpage"
	"github.com/gpugate/gpugate/runpod/runpodgh"
)

// GitHubAPI is the go-github adapter for GitHub. Repository reads and
// dispatch go through gate.GitHub and JIT runners are minted through
// runpodgh.Registry, in the organization's runner group.
type GitHubAPI struct {
	Client        *github.Client
	Org           string
	RunnerGroupID int64
}

var _ GitHub = (*GitHubAPI)(nil)

// repo is the gate adapter for one owner/name.
func (g *GitHubAPI) repo(repo string) (*gate.GitHub, error) {
	o, n, ok := cli.ParseRepo(repo)
	if !ok {
		return nil, fmt.Errorf("sparkgh: repository %q: want owner/name", repo)
	}
	return &gate.GitHub{Client: g.Client, Owner: o, Repo: n}, nil
}

// Permission is gate.GitHub.Permission: the role name, else the permission.
func (g *GitHubAPI) Permission(ctx context.Context, repo, user string) (string, error) {
	r, err := g.repo(repo)
	if err != nil {
		return "", err
	}
	return r.Permission(ctx, user)
}

// PullRequest is gate.GitHub.PullRequest.
func (g *GitHubAPI) PullRequest(ctx context.Context, repo string, number int) (PR, error) {
	r, err := g.repo(repo)
	if err != nil {
		return PR{}, err
	}
	p, err := r.PullRequest(ctx, number)
	if err != nil {
		return PR{}, err
	}
	return PR{Repo: repo, Number: p.Number, HeadSHA: p.HeadSHA, Open: p.Open, HeadRepoID: p.HeadRepoID, BaseRepoID: p.BaseRepoID, Labels: p.Labels,
		UpdatedAt: p.UpdatedAt}, nil
}

func output(c Check) *github.CheckRunOutput {
	return &github.CheckRunOutput{Title: github.String(c.Title), Summary: github.String(c.Summary)}
}

// CreateCheck calls POST /repos/{owner}/{repo}/check-runs
// (https://docs.github.com/rest/checks/runs#create-a-check-run).
func (g *GitHubAPI) CreateCheck(ctx context.Context, repo, sha, name string, c Check) (int64, error) {
	r, err := g.repo(repo)
	if err != nil {
		return 0, err
	}
	opts := github.CreateCheckRunOptions{Name: name, HeadSHA: sha, Status: github.String(c.Status), Output: output(c)}
	if c.ExternalID != "" {
		opts.ExternalID = github.String(c.ExternalID)
	}
	if c.Status == "completed" {
		opts.Conclusion = github.String(c.Conclusion)
		opts.CompletedAt = &github.Timestamp{Time: time.Now()}
	}
	run, _, err := g.Client.Checks.CreateCheckRun(ctx, r.Owner, r.Repo, opts)
	if err != nil {
		return 0, fmt.Errorf("sparkgh: create check run %q on %s: %w", name, sha, err)
	}
	return run.GetID(), nil
}

// UpdateCheck calls PATCH /repos/{owner}/{repo}/check-runs/{check_run_id}
// (https://docs.github.com/rest/checks/runs#update-a-check-run).
func (g *GitHubAPI) UpdateCheck(ctx context.Context, repo string, id int64, name string, c Check) error {
	r, err := g.repo(repo)
	if err != nil {
		return err
	}
	opts := github.UpdateCheckRunOptions{Name: name, Status: github.String(c.Status), Output: output(c)}
	if c.Status == "completed" {
		opts.Conclusion = github.String(c.Conclusion)
		opts.CompletedAt = &github.Timestamp{Time: time.Now()}
	}
	if _, _, err = g.Client.Checks.UpdateCheckRun(ctx, r.Owner, r.Repo, id, opts); err != nil {
		return fmt.Errorf("sparkgh: update check run %d: %w", id, err)
	}
	return nil
}

// Comment calls POST /repos/{owner}/{repo}/issues/{issue_number}/comments
// (https://docs.github.com/rest/issues/comments#create-an-issue-comment).
func (g *GitHubAPI) Comment(ctx context.Context, repo string, number int, body string) error {
	r, err := g.repo(repo)
	if err != nil {
		return err
	}
	if _, _, err = g.Client.Issues.CreateComment(ctx, r.Owner, r.Repo, number, &github.IssueComment{Body: github.String(body)}); err != nil {
		return fmt.Errorf("sparkgh: comment on %s#%d: %w", repo, number, err)
	}
	return nil
}

// Dispatch runs workflow at the repository's default branch
// (gate.GitHub.DefaultBranch, then gate.GitHub.Dispatch).
func (g *GitHubAPI) Dispatch(ctx context.Context, repo, workflow string, inputs map[string]any) error {
	r, err := g.repo(repo)
	if err != nil {
		return err
	}
	ref, err := r.DefaultBranch(ctx)
	if err != nil {
		return err
	}
	return r.Dispatch(ctx, workflow, ref, inputs)
}

// MintJIT is runpodgh.Registry.MintJIT for the organization.
func (g *GitHubAPI) MintJIT(ctx context.Context, name string, labels []string) (Secret, error) {
	return g.registry().MintJIT(ctx, name, labels)
}

// SuiteChecks calls GET /repos/{owner}/{repo}/check-suites/{check_suite_id}/check-runs
// (https://docs.github.com/rest/checks/runs#list-check-runs-in-a-check-suite)
// with check_name, over every page.
func (g *GitHubAPI) SuiteChecks(ctx context.Context, repo string, suite int64, name string) ([]CheckRun, error) {
	r, err := g.repo(repo)
	if err != nil {
		return nil, err
	}
	opts := &github.ListCheckRunsOptions{CheckName: github.String(name), ListOptions: github.ListOptions{PerPage: ghpage.PerPage}}
	runs, err := ghpage.All(func(page int) ([]*github.CheckRun, *github.Response, error) {
		opts.Page = page
		res, resp, err := g.Client.Checks.ListCheckRunsCheckSuite(ctx, r.Owner, r.Repo, suite, opts)
		if err != nil {
			return nil, resp, err
		}
		return res.CheckRuns, resp, nil
	})
	if err != nil {
		return nil, fmt.Errorf("sparkgh: list the check runs of suite %d: %w", suite, err)
	}
	out := make([]CheckRun, 0, len(runs))
	for _, cr := range runs {
		out = append(out, CheckRun{ID: cr.GetID(), HeadSHA: cr.GetHeadSHA(), ExternalID: cr.GetExternalID()})
	}
	return out, nil
}

// Runners is runpodgh.Registry.Runners for the organization.
func (g *GitHubAPI) Runners(ctx context.Context) ([]RegisteredRunner, error) {
	rs, err := g.registry().Runners(ctx, "")
	if err != nil {
		return nil, err
	}
	out := make([]RegisteredRunner, len(rs))
	for i, r := range rs {
		out[i] = RegisteredRunner{Name: r.Name, Busy: r.Busy}
	}
	return out, nil
}

// registry is the organization's runner registry, in the runner group.
func (g *GitHubAPI) registry() *runpodgh.Registry {
	return &runpodgh.Registry{Client: g.Client, Owner: g.Org, RunnerGroupID: g.RunnerGroupID}
}

// RemoveRunner is runpodgh.Registry.Remove for the organization.
func (g *GitHubAPI) RemoveRunner(ctx context.Context, name string) error {
	return g.registry().Remove(ctx, name)
}

// BranchSHA calls GET /repos/{owner}/{repo}/branches/{branch}
// (https://docs.github.com/rest/branches/branches#get-a-branch).
func (g *GitHubAPI) BranchSHA(ctx context.Context, repo, branch string) (string, error) {
	r, err := g.repo(repo)
	if err != nil {
		return "", err
	}
	b, resp, err := g.Client.Repositories.GetBranch(ctx, r.Owner, r.Repo, branch, 1)
	if err != nil && resp != nil && resp.StatusCode == http.StatusNotFound {
		return "", fmt.Errorf("sparkgh: read branch %s of %s: %w: %w", branch, repo, ErrNoBranch, err)
	}
	if err != nil {
		return "", fmt.Errorf("sparkgh: read branch %s of %s: %w", branch, repo, err)
	}
	sha := b.GetCommit().GetSHA()
	if sha == "" {
		return "", fmt.Errorf("%w: branch %s of %s names no commit", ErrNoBranch, branch, repo)
	}
	return sha, nil
}
