package cachetrust

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpugate/gpugate/internal/githubtest"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func trustedCase() (Policy, Artifact, Run) {
	p := DefaultPolicy("o", "r", 42)
	a := Artifact{ID: 1, Name: "cuda-archive-v1-abc", ExpiresAt: now.Add(24 * time.Hour), RunID: 9}
	r := Run{ID: 9, WorkflowPath: ".github/workflows/runpod-gpu-test.yml", Event: "workflow_run", HeadBranch: "feature", HeadRepositoryID: 42}
	return p, a, r
}

func TestTrusted_Rules(t *testing.T) {
	tests := map[string]struct {
		mutate func(p *Policy, a *Artifact, r *Run)
		rule   string
	}{
		"trusted workflow_run": {func(*Policy, *Artifact, *Run) {}, ""},
		"publisher push on main": {func(_ *Policy, _ *Artifact, r *Run) {
			r.WorkflowPath, r.Event, r.HeadBranch = ".github/workflows/ci-cache-publish.yml", "push", "main"
		}, ""},
		"name must match exactly": {func(_ *Policy, a *Artifact, _ *Run) { a.Name = "cuda-archive-v1-abc-extra" }, RuleName},
		"expired flag":            {func(_ *Policy, a *Artifact, _ *Run) { a.Expired = true }, RuleExpired},
		"past expiry":             {func(_ *Policy, a *Artifact, _ *Run) { a.ExpiresAt = now }, RuleExpired},
		"fork with its own main":  {func(_ *Policy, _ *Artifact, r *Run) { r.HeadRepositoryID, r.HeadBranch, r.Event = 77, "main", "push" }, RuleRepository},
		"untrusted workflow":      {func(_ *Policy, _ *Artifact, r *Run) { r.WorkflowPath = ".github/workflows/ci.yml" }, RuleWorkflow},
		// GitHub also reports a run's path in its workflow-ref form.
		"workflow ref form": {func(_ *Policy, _ *Artifact, r *Run) {
			r.WorkflowPath = "O/R/.github/workflows/runpod-gpu-test.yml@refs/heads/main"
		}, ""},
		"path at a ref": {func(_ *Policy, _ *Artifact, r *Run) { r.WorkflowPath = ".github/workflows/runpod-gpu-test.yml@main" }, ""},
		"another repository's workflow": {func(_ *Policy, _ *Artifact, r *Run) {
			r.WorkflowPath = "evil/r/.github/workflows/runpod-gpu-test.yml@refs/heads/main"
		}, RuleWorkflow},
		"untrusted workflow ref form":   {func(_ *Policy, _ *Artifact, r *Run) { r.WorkflowPath = "o/r/.github/workflows/ci.yml@refs/heads/main" }, RuleWorkflow},
		"pull_request definition":       {func(_ *Policy, _ *Artifact, r *Run) { r.Event = "pull_request" }, RuleEvent},
		"pull_request_target":           {func(_ *Policy, _ *Artifact, r *Run) { r.Event = "pull_request_target" }, RuleEvent},
		"dispatch aimed at another ref": {func(_ *Policy, _ *Artifact, r *Run) { r.Event, r.HeadBranch = "workflow_dispatch", "feature" }, RuleBranch},
		"dispatch on main":              {func(_ *Policy, _ *Artifact, r *Run) { r.Event, r.HeadBranch = "workflow_dispatch", "main" }, ""},
		"schedule off main":             {func(_ *Policy, _ *Artifact, r *Run) { r.Event, r.HeadBranch = "schedule", "release" }, RuleBranch},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			p, a, r := trustedCase()
			tt.mutate(&p, &a, &r)
			err := Trusted(p, "cuda-archive-v1-abc", a, r, now)
			var ref *Refusal
			switch {
			case tt.rule == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.rule != "" && (!errors.As(err, &ref) || ref.Rule != tt.rule || !errors.Is(err, ErrUntrusted)):
				t.Errorf("err = %v, want rule %s", err, tt.rule)
			}
		})
	}
}

func TestFindArtifact_NewestTrustedByExactName(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /repos/o/r/actions/artifacts", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("name") != "cuda-archive-v1-abc" {
			t.Errorf("query %s", r.URL.RawQuery)
		}
		fmt.Fprint(w, `{"total_count":3,"artifacts":[
 {"id":1,"name":"cuda-archive-v1-abc","expired":false,"created_at":"2026-11-28T10:00:00Z","expires_at":"2099-01-01T00:00:00Z","workflow_run":{"id":100}},
 {"id":2,"name":"cuda-archive-v1-abc","expired":false,"created_at":"2026-11-29T10:00:00Z","expires_at":"2099-01-01T00:00:00Z","workflow_run":{"id":200}},
 {"id":3,"name":"cuda-archive-v1-abc","expired":false,"created_at":"2026-11-29T11:00:00Z","expires_at":"2099-01-01T00:00:00Z","workflow_run":{"id":300}}]}`)
	})
	mux.HandleFunc("GET /repos/o/r/actions/runs/{id}", func(w http.ResponseWriter, r *http.Request) {
		switch r.PathValue("id") {
		case "300": // newest, but from a fork PR build
			fmt.Fprint(w, `{"id":300,"path":".github/workflows/runpod-gpu-test.yml","event":"pull_request","head_branch":"main","head_repository":{"id":77}}`)
		case "200":
			fmt.Fprint(w, `{"id":200,"path":".github/workflows/runpod-gpu-test.yml","event":"workflow_run","head_branch":"x","head_repository":{"id":42}}`)
		default:
			fmt.Fprint(w, `{"id":100,"path":".github/workflows/ci-cache-publish.yml","event":"push","head_branch":"main","head_repository":{"id":42}}`)
		}
	})
	c, srv := githubtest.New(t, mux)
	a, reason := FindArtifact(context.Background(), c, DefaultPolicy("o", "r", 42), "cuda-archive-v1-abc")
	if a == nil || a.ID != 2 || !strings.HasPrefix(reason, "hit: artifact 2 from run 200") {
		t.Errorf("%+v %s", a, reason)
	}
	// A failing lookup is a miss with a reason, never an error that blocks.
	srv.Close()
	if a, reason := FindArtifact(context.Background(), c, DefaultPolicy("o", "r", 42), "cuda-archive-v1-abc"); a != nil || !strings.HasPrefix(reason, "miss: ") {
		t.Errorf("%+v %s", a, reason)
	}
}

// A run's path, however GitHub spells it, is trusted only when it names a
// trusted workflow file of this repository.
func FuzzTrustedWorkflowPath(f *testing.F) {
	for _, p := range []string{".github/workflows/runpod-gpu-test.yml", "o/r/.github/workflows/runpod-gpu-test.yml@refs/heads/main",
		"evil/r/.github/workflows/runpod-gpu-test.yml@main", ".github/workflows/ci.yml", "O/R/.github/workflows/ci-cache-publish.yml@x"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, path string) {
		p, a, r := trustedCase()
		r.WorkflowPath = path
		if Trusted(p, a.Name, a, r, now) != nil {
			return
		}
		bare, _, _ := strings.Cut(path, "@")
		if i := strings.Index(bare, ".github/workflows/"); i > 0 {
			if !strings.EqualFold(bare[:i], "o/r/") {
				t.Fatalf("trusted %q, a path of another repository", path)
			}
			bare = bare[i:]
		}
		if bare != ".github/workflows/runpod-gpu-test.yml" && bare != ".github/workflows/ci-cache-publish.yml" {
			t.Fatalf("trusted %q, which names %q", path, bare)
		}
	})
}

// The trust rules need the repository's own ID and default branch:
// FindRepoArtifact reads them first, so a fork's run under the same name,
// or a run on another branch, is refused; a repository it cannot read is
// a miss.
func TestFindRepoArtifact_TheRepositorysIDAndDefaultBranchDecideTrust(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /repos/o/r", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"id":42,"default_branch":"trunk"}`)
	})
	mux.HandleFunc("GET /repos/o/r/actions/artifacts", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"total_count":2,"artifacts":[
 {"id":7,"name":"k","created_at":"2026-11-29T11:00:00Z","expires_at":"2099-01-01T00:00:00Z","workflow_run":{"id":70}},
 {"id":5,"name":"k","created_at":"2026-11-29T10:00:00Z","expires_at":"2099-01-01T00:00:00Z","workflow_run":{"id":50}}]}`)
	})
	mux.HandleFunc("GET /repos/o/r/actions/runs/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") == "70" { // a push to main, which is not this repository's default branch
			fmt.Fprint(w, `{"id":70,"path":".github/workflows/ci-cache-publish.yml","event":"push","head_branch":"main","head_repository":{"id":42}}`)
			return
		}
		fmt.Fprint(w, `{"id":50,"path":".github/workflows/ci-cache-publish.yml","event":"push","head_branch":"trunk","head_repository":{"id":42}}`)
	})
	c, srv := githubtest.New(t, mux)
	trusted := DefaultPolicy("", "", 0).TrustedWorkflows
	if a, reason := FindRepoArtifact(context.Background(), c, "o", "r", trusted, "k"); a == nil || a.ID != 5 {
		t.Errorf("%+v %s: want artifact 5, from the default branch", a, reason)
	}
	if a, reason := FindRepoArtifact(context.Background(), c, "o", "r", []string{".github/workflows/other.yml"}, "k"); a != nil || !strings.HasPrefix(reason, "miss: ") {
		t.Errorf("no trusted workflow: %+v %s", a, reason)
	}
	srv.Close()
	if a, reason := FindRepoArtifact(context.Background(), c, "o", "r", trusted, "k"); a != nil || !strings.HasPrefix(reason, "miss: reading repository o/r failed") {
		t.Errorf("an unreadable repository: %+v %s", a, reason)
	}
}
