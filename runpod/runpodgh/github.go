package runpodgh

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/google/go-github/v66/github"

	"github.com/gpugate/gpugate/internal/ghpage"
	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/rest"
)

// Registry is the go-github adapter of runpod.RunnerRegistry: JIT configs
// from the organization (or, with Repo set, the repository), and runner
// lookups by exact name.
type Registry struct {
	Client        *github.Client
	Owner         string // organization, or repository owner with Repo
	Repo          string // empty: organization runners
	RunnerGroupID int64  // organization runner group (1 is the default group)
}

var _ runpod.RunnerRegistry = (*Registry)(nil)

// MintJIT calls POST /orgs/{org}/actions/runners/generate-jitconfig
// (https://docs.github.com/rest/actions/self-hosted-runners#create-configuration-for-a-just-in-time-runner-for-an-organization)
// or the repository variant.
func (g *Registry) MintJIT(ctx context.Context, name string, labels []string) (rest.Secret, error) {
	req := &github.GenerateJITConfigRequest{Name: name, RunnerGroupID: max(g.RunnerGroupID, 1), Labels: labels}
	var (
		cfg *github.JITRunnerConfig
		err error
	)
	if g.Repo != "" {
		cfg, _, err = g.Client.Actions.GenerateRepoJITConfig(ctx, g.Owner, g.Repo, req)
	} else {
		cfg, _, err = g.Client.Actions.GenerateOrgJITConfig(ctx, g.Owner, req)
	}
	if err != nil {
		return "", fmt.Errorf("runpodgh: mint JIT config for %s: %w", name, err)
	}
	if cfg.GetEncodedJITConfig() == "" {
		return "", errors.New("runpodgh: GitHub returned an empty JIT config")
	}
	return rest.Secret(cfg.GetEncodedJITConfig()), nil
}

// Runners calls GET /orgs/{org}/actions/runners (or the repository
// variant) and follows every page; name, when set, is GitHub's name
// filter. An organization with more than 100 registrations can have a
// runner on a later page.
func (g *Registry) Runners(ctx context.Context, name string) ([]runpod.Runner, error) {
	opts := &github.ListRunnersOptions{ListOptions: github.ListOptions{PerPage: ghpage.PerPage}}
	what := "list the runners"
	if name != "" {
		opts.Name, what = github.String(name), "look up runner "+name
	}
	rs, err := ghpage.All(func(page int) ([]*github.Runner, *github.Response, error) {
		opts.Page = page
		var (
			rs   *github.Runners
			resp *github.Response
			err  error
		)
		if g.Repo != "" {
			rs, resp, err = g.Client.Actions.ListRunners(ctx, g.Owner, g.Repo, opts)
		} else {
			rs, resp, err = g.Client.Actions.ListOrganizationRunners(ctx, g.Owner, opts)
		}
		if err != nil {
			return nil, resp, err
		}
		return rs.Runners, resp, nil
	})
	if err != nil {
		return nil, fmt.Errorf("runpodgh: %s: %w", what, err)
	}
	out := make([]runpod.Runner, 0, len(rs))
	for _, r := range rs {
		one := runpod.Runner{ID: r.GetID(), Name: r.GetName(), Online: r.GetStatus() == "online", Busy: r.GetBusy()}
		for _, l := range r.Labels {
			one.Labels = append(one.Labels, l.GetName())
		}
		out = append(out, one)
	}
	return out, nil
}

// Runner looks the runner up by its exact name (Runners, filtered).
func (g *Registry) Runner(ctx context.Context, name string) (runpod.Runner, bool, error) {
	rs, err := g.Runners(ctx, name)
	if err != nil {
		return runpod.Runner{}, false, err
	}
	if i := slices.IndexFunc(rs, func(r runpod.Runner) bool { return r.Name == name }); i >= 0 {
		return rs[i], true, nil
	}
	return runpod.Runner{}, false, nil
}

// Remove finds the runner by name (Runner) and calls
// DELETE /orgs/{org}/actions/runners/{runner_id}
// (https://docs.github.com/rest/actions/self-hosted-runners#delete-a-self-hosted-runner-from-an-organization)
// or the repository variant. A runner that is gone, before the lookup or
// between it and the delete, is not an error.
func (g *Registry) Remove(ctx context.Context, name string) error {
	r, found, err := g.Runner(ctx, name)
	if err != nil || !found {
		return err
	}
	var resp *github.Response
	if g.Repo != "" {
		resp, err = g.Client.Actions.RemoveRunner(ctx, g.Owner, g.Repo, r.ID)
	} else {
		resp, err = g.Client.Actions.RemoveOrganizationRunner(ctx, g.Owner, r.ID)
	}
	if err != nil && (resp == nil || resp.StatusCode != http.StatusNotFound) {
		return fmt.Errorf("runpodgh: remove runner %s (id %d): %w", name, r.ID, err)
	}
	return nil
}

// PR is the go-github adapter of runpod.PRState: a pull request's state.
type PR struct {
	Client      *github.Client
	Owner, Repo string
	Number      int
}

var _ runpod.PRState = (*PR)(nil)

// Current calls GET /repos/{owner}/{repo}/pulls/{pull_number}
// (https://docs.github.com/rest/pulls/pulls#get-a-pull-request).
func (g *PR) Current(ctx context.Context) (runpod.PR, error) {
	pr, _, err := g.Client.PullRequests.Get(ctx, g.Owner, g.Repo, g.Number)
	if err != nil {
		return runpod.PR{}, fmt.Errorf("runpodgh: read PR #%d: %w", g.Number, err)
	}
	var labels []string
	for _, l := range pr.Labels {
		labels = append(labels, l.GetName())
	}
	return runpod.PR{Open: pr.GetState() == "open", HeadSHA: pr.GetHead().GetSHA(), Labels: labels}, nil
}

// Runs is the go-github adapter of runpod.Runs: a repository's workflow
// runs.
type Runs struct {
	Client      *github.Client
	Owner, Repo string
}

var _ runpod.Runs = (*Runs)(nil)

// Run calls GET /repos/{owner}/{repo}/actions/runs/{run_id}
// (https://docs.github.com/rest/actions/workflow-runs#get-a-workflow-run).
func (g *Runs) Run(ctx context.Context, runID int64) (runpod.RunInfo, error) {
	run, _, err := g.Client.Actions.GetWorkflowRunByID(ctx, g.Owner, g.Repo, runID)
	if err != nil {
		return runpod.RunInfo{}, fmt.Errorf("runpodgh: read run %d: %w", runID, err)
	}
	info := runpod.RunInfo{
		ID: run.GetID(), Repository: run.GetRepository().GetFullName(), Workflow: run.GetPath(),
		Event: run.GetEvent(), Status: run.GetStatus(), Attempt: run.GetRunAttempt(),
	}
	if info.Status == "completed" {
		info.CompletedAt = run.GetUpdatedAt().Time
	}
	return info, nil
}

// Cancel calls POST /repos/{owner}/{repo}/actions/runs/{run_id}/cancel
// (https://docs.github.com/rest/actions/workflow-runs#cancel-a-workflow-run).
// GitHub answers 202 Accepted, which go-github reports as an
// *AcceptedError: that is success.
func (g *Runs) Cancel(ctx context.Context, runID int64) error {
	_, err := g.Client.Actions.CancelWorkflowRunByID(ctx, g.Owner, g.Repo, runID)
	var accepted *github.AcceptedError
	if err != nil && !errors.As(err, &accepted) {
		return fmt.Errorf("runpodgh: cancel run %d: %w", runID, err)
	}
	return nil
}

// Retention is the go-github adapter of runpod.Retention: the run's
// artifact names.
type Retention struct {
	Client      *github.Client
	Owner, Repo string
}

var _ runpod.Retention = (*Retention)(nil)

// Records calls GET /repos/{owner}/{repo}/actions/runs/{run_id}/artifacts
// (https://docs.github.com/rest/actions/artifacts#list-workflow-run-artifacts)
// over every page.
func (g *Retention) Records(ctx context.Context, runID int64) ([]string, error) {
	opts := &github.ListOptions{PerPage: ghpage.PerPage}
	arts, err := ghpage.All(func(page int) ([]*github.Artifact, *github.Response, error) {
		opts.Page = page
		arts, resp, err := g.Client.Actions.ListWorkflowRunArtifacts(ctx, g.Owner, g.Repo, runID, opts)
		if err != nil {
			return nil, resp, err
		}
		return arts.Artifacts, resp, nil
	})
	if err != nil {
		return nil, fmt.Errorf("runpodgh: list artifacts of run %d: %w", runID, err)
	}
	var names []string
	for _, a := range arts {
		if !a.GetExpired() {
			names = append(names, a.GetName())
		}
	}
	return names, nil
}

// Progress is the go-github adapter of runpod.Progress: the GPU job of one
// run attempt, and the step that runs the tests.
type Progress struct {
	Client      *github.Client
	Owner, Repo string
	RunID       int64
	Attempt     int64
	Job         string // the GPU job's name, e.g. "Run GPU tests"; in a called workflow GitHub lists it as "<caller job> / Run GPU tests", which matches too
	TestStep    string // the step whose start disarms the setup deadline, e.g. "Run CUDA tests from archive"
}

var _ runpod.Progress = (*Progress)(nil)

// JobProgress calls GET /repos/{owner}/{repo}/actions/runs/{run_id}/attempts/{attempt_number}/jobs
// (https://docs.github.com/rest/actions/workflow-jobs#list-jobs-for-a-workflow-run-attempt)
// over every page. A job not yet listed has not started; the first listed
// job of that name is the one read.
func (g *Progress) JobProgress(ctx context.Context) (runpod.JobProgress, error) {
	opts := &github.ListOptions{PerPage: ghpage.PerPage}
	jobs, err := ghpage.All(func(page int) ([]*github.WorkflowJob, *github.Response, error) {
		opts.Page = page
		jobs, resp, err := g.Client.Actions.ListWorkflowJobsAttempt(ctx, g.Owner, g.Repo, g.RunID, g.Attempt, opts)
		if err != nil {
			return nil, resp, err
		}
		return jobs.Jobs, resp, nil
	})
	if err != nil {
		return runpod.JobProgress{}, fmt.Errorf("runpodgh: list jobs of run %d attempt %d: %w", g.RunID, g.Attempt, err)
	}
	for _, j := range jobs {
		if name := j.GetName(); name != g.Job && !strings.HasSuffix(name, " / "+g.Job) {
			continue
		}
		p := runpod.JobProgress{Completed: j.GetStatus() == "completed", Conclusion: j.GetConclusion(), JobStartedAt: j.GetStartedAt().Time}
		for _, s := range j.Steps {
			p.TestStepListed = p.TestStepListed || s.GetName() == g.TestStep
			if s.GetName() == g.TestStep && (s.GetStatus() == "in_progress" || s.GetStatus() == "completed") {
				p.TestsStarted = true
				p.TestsStartedAt, p.TestsEndedAt = s.GetStartedAt().Time, s.GetCompletedAt().Time
			}
		}
		return p, nil
	}
	return runpod.JobProgress{}, nil
}

// Repo is one repository on one GitHub client: it makes the adapters of
// the paid lifecycle for that repository, so that a run's adapters all
// read the same repository.
type Repo struct {
	Client      *github.Client
	Owner, Name string
}

// Registry is the runner registry the pods register with: the
// organization org's (in its default runner group), or with org empty the
// repository's own.
func (r Repo) Registry(org string) *Registry {
	if org != "" {
		return &Registry{Client: r.Client, Owner: org}
	}
	return &Registry{Client: r.Client, Owner: r.Owner, Repo: r.Name}
}

// PR is the state of the repository's pull request number.
func (r Repo) PR(number int) *PR {
	return &PR{Client: r.Client, Owner: r.Owner, Repo: r.Name, Number: number}
}

// Runs are the repository's workflow runs.
func (r Repo) Runs() *Runs { return &Runs{Client: r.Client, Owner: r.Owner, Repo: r.Name} }

// Retention is the repository's debug-retention records.
func (r Repo) Retention() *Retention {
	return &Retention{Client: r.Client, Owner: r.Owner, Repo: r.Name}
}

// Progress follows the job named job of one attempt of the run runID,
// and its step testStep (Progress).
func (r Repo) Progress(runID int64, attempt int, job, testStep string) *Progress {
	return &Progress{Client: r.Client, Owner: r.Owner, Repo: r.Name, RunID: runID, Attempt: int64(attempt), Job: job, TestStep: testStep}
}
