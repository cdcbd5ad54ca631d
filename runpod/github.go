package runpod

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/go-github/v66/github"
)

// GitHubRegistry is the go-github adapter for RunnerRegistry: JIT configs
// from the organization (or, with Repo set, the repository), and runner
// lookups by exact name.
type GitHubRegistry struct {
	Client        *github.Client
	Owner         string // organization, or repository owner with Repo
	Repo          string // empty: organization runners
	RunnerGroupID int64  // organization runner group (1 is the default group)
}

var _ RunnerRegistry = (*GitHubRegistry)(nil)

// MintJIT calls POST /orgs/{org}/actions/runners/generate-jitconfig
// (https://docs.github.com/rest/actions/self-hosted-runners#create-configuration-for-a-just-in-time-runner-for-an-organization)
// or the repository variant.
func (g *GitHubRegistry) MintJIT(ctx context.Context, name string, labels []string) (Secret, error) {
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
		return "", fmt.Errorf("runpod: mint JIT config for %s: %w", name, err)
	}
	if cfg.GetEncodedJITConfig() == "" {
		return "", errors.New("runpod: GitHub returned an empty JIT config")
	}
	return Secret(cfg.GetEncodedJITConfig()), nil
}

// Runner calls GET /orgs/{org}/actions/runners?name=… (or the repository
// variant) and follows every page: an organization with more than 100
// registrations can have the runner on a later page.
func (g *GitHubRegistry) Runner(ctx context.Context, name string) (Runner, bool, error) {
	opts := &github.ListRunnersOptions{Name: github.String(name), ListOptions: github.ListOptions{PerPage: 100}}
	for range 100 {
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
			return Runner{}, false, fmt.Errorf("runpod: look up runner %s: %w", name, err)
		}
		for _, r := range rs.Runners {
			if r.GetName() != name {
				continue
			}
			out := Runner{Name: name, Online: r.GetStatus() == "online", Busy: r.GetBusy()}
			for _, l := range r.Labels {
				out.Labels = append(out.Labels, l.GetName())
			}
			return out, true, nil
		}
		if resp.NextPage == 0 {
			return Runner{}, false, nil
		}
		opts.Page = resp.NextPage
	}
	return Runner{}, false, fmt.Errorf("runpod: look up runner %s: more than 100 pages", name)
}

// GitHubPR is the go-github adapter for PRState.
type GitHubPR struct {
	Client      *github.Client
	Owner, Repo string
	Number      int
}

var _ PRState = (*GitHubPR)(nil)

// Current calls GET /repos/{owner}/{repo}/pulls/{pull_number}
// (https://docs.github.com/rest/pulls/pulls#get-a-pull-request).
func (g *GitHubPR) Current(ctx context.Context) (PR, error) {
	pr, _, err := g.Client.PullRequests.Get(ctx, g.Owner, g.Repo, g.Number)
	if err != nil {
		return PR{}, fmt.Errorf("runpod: read PR #%d: %w", g.Number, err)
	}
	return PR{Open: pr.GetState() == "open", HeadSHA: pr.GetHead().GetSHA()}, nil
}
