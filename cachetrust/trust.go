package cachetrust

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/google/go-github/v66/github"
)

// Policy says which producers of an artifact are trusted.
type Policy struct {
	Owner, Repo      string
	RepositoryID     int64    // this repository's ID; forks have their own
	DefaultBranch    string   // e.g. main
	TrustedWorkflows []string // workflow paths, e.g. .github/workflows/runpod-gpu-test.yml
}

// DefaultPolicy is the default trusted producers: the GPU test workflow and the
// cache publisher.
func DefaultPolicy(owner, repo string, repoID int64) Policy {
	return Policy{Owner: owner, Repo: repo, RepositoryID: repoID, DefaultBranch: "main",
		TrustedWorkflows: []string{".github/workflows/runpod-gpu-test.yml", ".github/workflows/ci-cache-publish.yml"}}
}

// Artifact is an Actions artifact.
type Artifact struct {
	ID        int64
	Name      string
	Expired   bool
	ExpiresAt time.Time
	CreatedAt time.Time
	RunID     int64
}

// Run is the workflow run that produced an artifact.
type Run struct {
	ID               int64
	WorkflowPath     string // .github/workflows/<file>
	Event            string
	HeadBranch       string
	HeadRepositoryID int64
}

// Trust rules, in Refusal.Rule.
const (
	RuleName       = "name"           // the name is not exactly the expected key
	RuleExpired    = "expired"        // the artifact expired
	RuleRepository = "repository"     // produced by another repository (a fork)
	RuleWorkflow   = "workflow"       // produced by an untrusted workflow file
	RuleEvent      = "event"          // the event's definition is PR-controlled
	RuleBranch     = "default-branch" // a directly triggered run off the default branch
)

// Refusal says which rule refused an artifact.
type Refusal struct {
	Rule   string
	Reason string
}

// Error names the rule that refused the artifact and why.
func (r *Refusal) Error() string {
	return fmt.Sprintf("cachetrust: untrusted artifact (%s): %s", r.Rule, r.Reason)
}

// ErrUntrusted is matched by every *Refusal.
var ErrUntrusted = errors.New("cachetrust: untrusted artifact")

// Is matches ErrUntrusted.
func (r *Refusal) Is(target error) bool { return target == ErrUntrusted }

// Trusted decides, purely, whether an artifact may be reused for key: its
// name is exactly key; it is unexpired at now; its run belongs to this
// repository by head repository ID (a fork can have its own main); the run's
// workflow file is trusted (its path as GitHub spells it, bare or in this
// repository's owner/repo/...@ref form); the event's definition comes from
// the default branch (workflow_run, workflow_dispatch, push, schedule; never
// pull_request or pull_request_target); and a directly triggered run
// (workflow_dispatch, push, schedule) ran on the default branch. nil means
// trusted.
func Trusted(p Policy, key string, a Artifact, run Run, now time.Time) error {
	switch {
	case a.Name != key:
		return &Refusal{RuleName, fmt.Sprintf("artifact %q is not named %q", a.Name, key)}
	case a.Expired || (!a.ExpiresAt.IsZero() && !now.Before(a.ExpiresAt)):
		return &Refusal{RuleExpired, fmt.Sprintf("artifact %d expired", a.ID)}
	case p.RepositoryID == 0 || run.HeadRepositoryID != p.RepositoryID:
		return &Refusal{RuleRepository, fmt.Sprintf("run %d came from repository %d, not %d", run.ID, run.HeadRepositoryID, p.RepositoryID)}
	case !slices.Contains(p.TrustedWorkflows, p.workflowFile(run.WorkflowPath)):
		return &Refusal{RuleWorkflow, fmt.Sprintf("run %d ran %q, which is not a trusted producer", run.ID, run.WorkflowPath)}
	}
	switch run.Event {
	case "workflow_run":
		return nil
	case "workflow_dispatch", "push", "schedule":
		if run.HeadBranch != p.DefaultBranch || p.DefaultBranch == "" {
			return &Refusal{RuleBranch, fmt.Sprintf("run %d (%s) ran on %q, not the default branch %q", run.ID, run.Event, run.HeadBranch, p.DefaultBranch)}
		}
		return nil
	}
	return &Refusal{RuleEvent, fmt.Sprintf("run %d was triggered by %q, whose workflow definition is not the default branch's", run.ID, run.Event)}
}

// workflowFile is the workflow file a run's path names in this repository.
// GitHub reports a run's path as ".github/workflows/x.yml" and also in its
// workflow-ref form, "owner/repo/.github/workflows/x.yml@refs/heads/main";
// both name the same file. A path in another repository's form names no
// file here ("").
func (p Policy) workflowFile(path string) string {
	const dir = ".github/workflows/"
	if i := strings.Index(path, dir); i > 0 {
		if !strings.EqualFold(path[:i], p.Owner+"/"+p.Repo+"/") {
			return ""
		}
		path = path[i:]
	}
	path, _, _ = strings.Cut(path, "@")
	return path
}

// FindRepoArtifact is FindArtifact in the repository owner/repo with the
// workflows trusted to produce the artifact: it reads the repository's ID
// and default branch, which the trust rules need, first. A failure to read
// them is a miss, as every lookup failure is.
func FindRepoArtifact(ctx context.Context, client *github.Client, owner, repo string, trusted []string, name string) (*Artifact, string) {
	r, _, err := client.Repositories.Get(ctx, owner, repo)
	if err != nil {
		return nil, fmt.Sprintf("miss: reading repository %s/%s failed: %v", owner, repo, err)
	}
	p := Policy{Owner: owner, Repo: repo, RepositoryID: r.GetID(), DefaultBranch: r.GetDefaultBranch(), TrustedWorkflows: trusted}
	return FindArtifact(ctx, client, p, name)
}

// FindArtifact lists this repository's artifacts named exactly name, newest
// first, checks each producer with Trusted, and returns the first trusted
// one. Any lookup failure returns no artifact and the reason: reuse is an
// optimisation, and a miss means a fresh build.
func FindArtifact(ctx context.Context, client *github.Client, p Policy, name string) (*Artifact, string) {
	// go-github v66's ListArtifacts has no name filter; GitHub's API does
	// (https://docs.github.com/rest/actions/artifacts#list-artifacts-for-a-repository).
	u := fmt.Sprintf("repos/%s/%s/actions/artifacts?name=%s&per_page=100", url.PathEscape(p.Owner), url.PathEscape(p.Repo), url.QueryEscape(name))
	req, err := client.NewRequest("GET", u, nil)
	if err != nil {
		return nil, "miss: " + err.Error()
	}
	var list github.ArtifactList
	if _, err := client.Do(ctx, req, &list); err != nil {
		return nil, "miss: listing artifacts failed: " + err.Error()
	}
	arts := list.Artifacts
	slices.SortStableFunc(arts, func(a, b *github.Artifact) int { return b.GetCreatedAt().Compare(a.GetCreatedAt().Time) })
	now := time.Now()
	var reasons []string
	for _, ga := range arts {
		a := Artifact{ID: ga.GetID(), Name: ga.GetName(), Expired: ga.GetExpired(), ExpiresAt: ga.GetExpiresAt().Time,
			CreatedAt: ga.GetCreatedAt().Time, RunID: ga.GetWorkflowRun().GetID()}
		wr, _, err := client.Actions.GetWorkflowRunByID(ctx, p.Owner, p.Repo, a.RunID)
		if err != nil {
			reasons = append(reasons, fmt.Sprintf("artifact %d: run %d unreadable: %v", a.ID, a.RunID, err))
			continue
		}
		run := Run{ID: wr.GetID(), WorkflowPath: wr.GetPath(), Event: wr.GetEvent(), HeadBranch: wr.GetHeadBranch(), HeadRepositoryID: wr.GetHeadRepository().GetID()}
		if err := Trusted(p, name, a, run, now); err != nil {
			reasons = append(reasons, fmt.Sprintf("artifact %d: %v", a.ID, err))
			continue
		}
		return &a, fmt.Sprintf("hit: artifact %d from run %d (%s, %s)", a.ID, run.ID, run.WorkflowPath, run.Event)
	}
	if len(reasons) == 0 {
		return nil, fmt.Sprintf("miss: no artifact named %q", name)
	}
	return nil, "miss: " + fmt.Sprint(reasons)
}
