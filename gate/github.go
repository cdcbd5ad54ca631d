package gate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/go-github/v66/github"

	"github.com/gpugate/gpugate/internal/ghpage"
	"github.com/gpugate/gpugate/internal/textlimit"
)

// GitHub is the go-github adapter for Checks, Repo and Workflows on one
// repository.
type GitHub struct {
	Client      *github.Client
	Owner, Repo string
}

var (
	_ Checks    = (*GitHub)(nil)
	_ Repo      = (*GitHub)(nil)
	_ Workflows = (*GitHub)(nil)
	_ Commenter = (*GitHub)(nil)
)

// ListGates calls GET /repos/{owner}/{repo}/commits/{ref}/check-runs with
// check_name and filter=all over every page
// (https://docs.github.com/rest/checks/runs#list-check-runs-for-a-git-reference).
func (g *GitHub) ListGates(ctx context.Context, sha, name string) ([]Gate, error) {
	opts := &github.ListCheckRunsOptions{CheckName: github.String(name), Filter: github.String("all"), ListOptions: github.ListOptions{PerPage: ghpage.PerPage}}
	runs, err := ghpage.All(func(page int) ([]*github.CheckRun, *github.Response, error) {
		opts.Page = page
		res, resp, err := g.Client.Checks.ListCheckRunsForRef(ctx, g.Owner, g.Repo, sha, opts)
		if err != nil {
			return nil, resp, err
		}
		return res.CheckRuns, resp, nil
	})
	if err != nil {
		return nil, fmt.Errorf("gate: list check runs on %s: %w", textlimit.ShortSHA(sha), err)
	}
	out := make([]Gate, 0, len(runs))
	for _, c := range runs {
		out = append(out, gateOf(c))
	}
	return out, nil
}

func gateOf(c *github.CheckRun) Gate {
	return Gate{ID: c.GetID(), ExternalID: c.GetExternalID(), Status: c.GetStatus(), Conclusion: c.GetConclusion(),
		CompletedAt: c.GetCompletedAt().Time, URL: c.GetHTMLURL()}
}

func output(p Publication) *github.CheckRunOutput {
	return &github.CheckRunOutput{Title: github.String(p.Title), Summary: github.String(p.Summary)}
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// CreateGate calls POST /repos/{owner}/{repo}/check-runs
// (https://docs.github.com/rest/checks/runs#create-a-check-run).
func (g *GitHub) CreateGate(ctx context.Context, p Publication) (Gate, error) {
	opts := github.CreateCheckRunOptions{Name: p.Name, HeadSHA: p.HeadSHA, ExternalID: github.String(p.ID.String()),
		Status: github.String(p.Status), DetailsURL: optional(p.DetailsURL), Output: output(p)}
	if p.Status == "completed" {
		opts.Conclusion = github.String(p.Conclusion)
		opts.CompletedAt = &github.Timestamp{Time: p.CompletedAt}
	}
	c, _, err := g.Client.Checks.CreateCheckRun(ctx, g.Owner, g.Repo, opts)
	if err != nil {
		return Gate{}, fmt.Errorf("gate: create check run %q on %s: %w", p.Name, textlimit.ShortSHA(p.HeadSHA), err)
	}
	return gateOf(c), nil
}

// UpdateGate calls PATCH /repos/{owner}/{repo}/check-runs/{check_run_id}
// (https://docs.github.com/rest/checks/runs#update-a-check-run).
func (g *GitHub) UpdateGate(ctx context.Context, id int64, p Publication) (Gate, error) {
	opts := github.UpdateCheckRunOptions{Name: p.Name, ExternalID: github.String(p.ID.String()),
		Status: github.String(p.Status), DetailsURL: optional(p.DetailsURL), Output: output(p)}
	if p.Status == "completed" {
		opts.Conclusion = github.String(p.Conclusion)
		opts.CompletedAt = &github.Timestamp{Time: p.CompletedAt}
	}
	c, _, err := g.Client.Checks.UpdateCheckRun(ctx, g.Owner, g.Repo, id, opts)
	if err != nil {
		return Gate{}, fmt.Errorf("gate: update check run %d: %w", id, err)
	}
	return gateOf(c), nil
}

// Permission calls GET /repos/{owner}/{repo}/collaborators/{username}/permission
// (https://docs.github.com/rest/collaborators/collaborators#get-repository-permissions-for-a-user),
// preferring role_name (which distinguishes maintain and triage).
func (g *GitHub) Permission(ctx context.Context, user string) (string, error) {
	p, _, err := g.Client.Repositories.GetPermissionLevel(ctx, g.Owner, g.Repo, user)
	if err != nil {
		return "", fmt.Errorf("gate: read %s's permission: %w", user, err)
	}
	if r := p.GetRoleName(); r != "" {
		return r, nil
	}
	return p.GetPermission(), nil
}

// PullRequest calls GET /repos/{owner}/{repo}/pulls/{pull_number}
// (https://docs.github.com/rest/pulls/pulls#get-a-pull-request).
func (g *GitHub) PullRequest(ctx context.Context, number int) (PullRequest, error) {
	pr, _, err := g.Client.PullRequests.Get(ctx, g.Owner, g.Repo, number)
	if err != nil {
		return PullRequest{}, fmt.Errorf("gate: read PR #%d: %w", number, err)
	}
	out := PullRequest{Number: pr.GetNumber(), Open: pr.GetState() == "open", HeadSHA: pr.GetHead().GetSHA(),
		HeadRepoID: pr.GetHead().GetRepo().GetID(), BaseRepoID: pr.GetBase().GetRepo().GetID(), UpdatedAt: pr.GetUpdatedAt().Time}
	if pr.Mergeable == nil || pr.GetMergeable() {
		out.MergeSHA = pr.GetMergeCommitSHA()
	}
	for _, l := range pr.Labels {
		out.Labels = append(out.Labels, l.GetName())
	}
	return out, nil
}

// ResolveRef calls GET /repos/{owner}/{repo}/commits/{ref} with the SHA
// media type (https://docs.github.com/rest/commits/commits#get-a-commit).
func (g *GitHub) ResolveRef(ctx context.Context, ref string) (string, error) {
	sha, _, err := g.Client.Repositories.GetCommitSHA1(ctx, g.Owner, g.Repo, ref, "")
	if err != nil {
		return "", fmt.Errorf("gate: resolve %s: %w", ref, err)
	}
	return sha, nil
}

// Comments calls GET /repos/{owner}/{repo}/issues/{issue_number}/comments
// over every page (https://docs.github.com/rest/issues/comments#list-issue-comments).
func (g *GitHub) Comments(ctx context.Context, number int) ([]Comment, error) {
	opts := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: ghpage.PerPage}}
	cs, err := ghpage.All(func(page int) ([]*github.IssueComment, *github.Response, error) {
		opts.Page = page
		return g.Client.Issues.ListComments(ctx, g.Owner, g.Repo, number, opts)
	})
	if err != nil {
		return nil, fmt.Errorf("gate: list the comments of #%d: %w", number, err)
	}
	out := make([]Comment, 0, len(cs))
	for _, c := range cs {
		out = append(out, Comment{ID: c.GetID(), Author: c.GetUser().GetLogin(), Body: c.GetBody()})
	}
	return out, nil
}

// PostComment calls POST /repos/{owner}/{repo}/issues/{issue_number}/comments
// (https://docs.github.com/rest/issues/comments#create-an-issue-comment).
func (g *GitHub) PostComment(ctx context.Context, number int, body string) error {
	if _, _, err := g.Client.Issues.CreateComment(ctx, g.Owner, g.Repo, number, &github.IssueComment{Body: github.String(body)}); err != nil {
		return fmt.Errorf("gate: comment on #%d: %w", number, err)
	}
	return nil
}

// DefaultBranch calls GET /repos/{owner}/{repo}
// (https://docs.github.com/rest/repos/repos#get-a-repository).
func (g *GitHub) DefaultBranch(ctx context.Context) (string, error) {
	r, _, err := g.Client.Repositories.Get(ctx, g.Owner, g.Repo)
	if err != nil {
		return "", fmt.Errorf("gate: read the repository: %w", err)
	}
	if r.GetDefaultBranch() == "" {
		return "", errors.New("gate: the repository reports no default branch")
	}
	return r.GetDefaultBranch(), nil
}

// Dispatch calls POST /repos/{owner}/{repo}/actions/workflows/{workflow_id}/dispatches
// (https://docs.github.com/rest/actions/workflows#create-a-workflow-dispatch-event).
func (g *GitHub) Dispatch(ctx context.Context, workflow, ref string, inputs map[string]any) error {
	_, err := g.Client.Actions.CreateWorkflowDispatchEventByFileName(ctx, g.Owner, g.Repo, workflow, github.CreateWorkflowDispatchEventRequest{Ref: ref, Inputs: inputs})
	if err != nil {
		return fmt.Errorf("gate: dispatch %s at %s: %w", workflow, ref, err)
	}
	return nil
}

// Runs calls GET /repos/{owner}/{repo}/actions/workflows/{workflow_id}/runs
// with event=workflow_dispatch and created>=since
// (https://docs.github.com/rest/actions/workflow-runs#list-workflow-runs-for-a-workflow).
func (g *GitHub) Runs(ctx context.Context, workflow string, since time.Time) ([]Run, error) {
	opts := &github.ListWorkflowRunsOptions{Event: "workflow_dispatch", Created: ">=" + since.UTC().Format(time.RFC3339), ListOptions: github.ListOptions{PerPage: ghpage.PerPage}}
	runs, err := ghpage.All(func(page int) ([]*github.WorkflowRun, *github.Response, error) {
		opts.Page = page
		res, resp, err := g.Client.Actions.ListWorkflowRunsByFileName(ctx, g.Owner, g.Repo, workflow, opts)
		if err != nil {
			return nil, resp, err
		}
		return res.WorkflowRuns, resp, nil
	})
	if err != nil {
		return nil, fmt.Errorf("gate: list the runs of %s: %w", workflow, err)
	}
	var out []Run
	for _, r := range runs {
		out = append(out, runOf(r))
	}
	return out, nil
}

// Run calls GET /repos/{owner}/{repo}/actions/runs/{run_id}
// (https://docs.github.com/rest/actions/workflow-runs#get-a-workflow-run).
func (g *GitHub) Run(ctx context.Context, id int64) (Run, error) {
	r, _, err := g.Client.Actions.GetWorkflowRunByID(ctx, g.Owner, g.Repo, id)
	if err != nil {
		return Run{}, fmt.Errorf("gate: read run %d: %w", id, err)
	}
	return runOf(r), nil
}

func runOf(r *github.WorkflowRun) Run {
	return Run{ID: r.GetID(), Status: r.GetStatus(), Conclusion: r.GetConclusion(), URL: r.GetHTMLURL(), CreatedAt: r.GetCreatedAt().Time}
}
