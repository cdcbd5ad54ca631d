package sparkgh

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/go-github/v66/github"

	"github.com/gpugate/gpugate/internal/secret"
)

// GitHubAPI is the go-github adapter for GitHub. JIT runners are minted
// in the organization's runner group.
type GitHubAPI struct {
	Client        *github.Client
	Org           string
	RunnerGroupID int64
}

var _ GitHub = (*GitHubAPI)(nil)

func split(repo string) (string, string, error) {
	o, n, ok := strings.Cut(repo, "/")
	if !ok || o == "" || n == "" {
		return "", "", fmt.Errorf("sparkgh: repository %q: want owner/name", repo)
	}
	return o, n, nil
}

// Permission calls GET /repos/{owner}/{repo}/collaborators/{username}/permission.
func (g *GitHubAPI) Permission(ctx context.Context, repo, user string) (string, error) {
	o, n, err := split(repo)
	if err != nil {
		return "", err
	}
	p, _, err := g.Client.Repositories.GetPermissionLevel(ctx, o, n, user)
	if err != nil {
		return "", err
	}
	if r := p.GetRoleName(); r != "" {
		return r, nil
	}
	return p.GetPermission(), nil
}

// PullRequest calls GET /repos/{owner}/{repo}/pulls/{pull_number}.
func (g *GitHubAPI) PullRequest(ctx context.Context, repo string, number int) (PR, error) {
	o, n, err := split(repo)
	if err != nil {
		return PR{}, err
	}
	p, _, err := g.Client.PullRequests.Get(ctx, o, n, number)
	if err != nil {
		return PR{}, err
	}
	return prOf(repo, p), nil
}

func output(c Check) *github.CheckRunOutput {
	return &github.CheckRunOutput{Title: github.String(c.Title), Summary: github.String(c.Summary)}
}

// CreateCheck calls POST /repos/{owner}/{repo}/check-runs.
func (g *GitHubAPI) CreateCheck(ctx context.Context, repo, sha, name string, c Check) (int64, error) {
	o, n, err := split(repo)
	if err != nil {
		return 0, err
	}
	opts := github.CreateCheckRunOptions{Name: name, HeadSHA: sha, Status: github.String(c.Status), Output: output(c)}
	if c.Status == "completed" {
		opts.Conclusion = github.String(c.Conclusion)
		opts.CompletedAt = &github.Timestamp{Time: time.Now()}
	}
	run, _, err := g.Client.Checks.CreateCheckRun(ctx, o, n, opts)
	if err != nil {
		return 0, err
	}
	return run.GetID(), nil
}

// UpdateCheck calls PATCH /repos/{owner}/{repo}/check-runs/{check_run_id}.
func (g *GitHubAPI) UpdateCheck(ctx context.Context, repo string, id int64, name string, c Check) error {
	o, n, err := split(repo)
	if err != nil {
		return err
	}
	opts := github.UpdateCheckRunOptions{Name: name, Status: github.String(c.Status), Output: output(c)}
	if c.Status == "completed" {
		opts.Conclusion = github.String(c.Conclusion)
		opts.CompletedAt = &github.Timestamp{Time: time.Now()}
	}
	_, _, err = g.Client.Checks.UpdateCheckRun(ctx, o, n, id, opts)
	return err
}

// Comment calls POST /repos/{owner}/{repo}/issues/{issue_number}/comments.
func (g *GitHubAPI) Comment(ctx context.Context, repo string, number int, body string) error {
	o, n, err := split(repo)
	if err != nil {
		return err
	}
	_, _, err = g.Client.Issues.CreateComment(ctx, o, n, number, &github.IssueComment{Body: github.String(body)})
	return err
}

// Dispatch reads the default branch and calls
// POST /repos/{owner}/{repo}/actions/workflows/{workflow_id}/dispatches.
func (g *GitHubAPI) Dispatch(ctx context.Context, repo, workflow string, inputs map[string]any) error {
	o, n, err := split(repo)
	if err != nil {
		return err
	}
	r, _, err := g.Client.Repositories.Get(ctx, o, n)
	if err != nil {
		return err
	}
	if r.GetDefaultBranch() == "" {
		return errors.New("sparkgh: the repository reports no default branch")
	}
	_, err = g.Client.Actions.CreateWorkflowDispatchEventByFileName(ctx, o, n, workflow, github.CreateWorkflowDispatchEventRequest{Ref: r.GetDefaultBranch(), Inputs: inputs})
	return err
}

// MintJIT calls POST /orgs/{org}/actions/runners/generate-jitconfig.
func (g *GitHubAPI) MintJIT(ctx context.Context, name string, labels []string) (secret.Secret, error) {
	cfg, _, err := g.Client.Actions.GenerateOrgJITConfig(ctx, g.Org, &github.GenerateJITConfigRequest{Name: name, RunnerGroupID: max(g.RunnerGroupID, 1), Labels: labels})
	if err != nil {
		return "", err
	}
	return secret.Secret(cfg.GetEncodedJITConfig()), nil
}
