package gate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v66/github"

	"github.com/gpugate/gpugate/gate"
	"github.com/gpugate/gpugate/internal/githubtest"
)

func setup(t *testing.T, mux *http.ServeMux) (*gate.GitHub, string) {
	t.Helper()
	c, srv := githubtest.New(t, mux)
	return &gate.GitHub{Client: c, Owner: "o", Repo: "r"}, srv.URL
}

func TestGitHub_ListGatesEveryPageWithFilterAll(t *testing.T) {
	mux := http.NewServeMux()
	var base string
	mux.HandleFunc("GET /repos/o/r/commits/"+head+"/check-runs", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("filter") != "all" || q.Get("check_name") != "CI GPU gate" {
			t.Errorf("query %s", r.URL.RawQuery)
		}
		if q.Get("page") == "" {
			w.Header().Set("Link", fmt.Sprintf(`<%s/repos/o/r/commits/%s/check-runs?page=2>; rel="next"`, base, head))
			fmt.Fprintf(w, `{"total_count":2,"check_runs":[{"id":1,"external_id":"runpod-gpu-gate:v1:%s:failed","status":"completed","conclusion":"failure","completed_at":"2026-11-29T10:00:00Z"}]}`, merge)
			return
		}
		fmt.Fprintf(w, `{"total_count":2,"check_runs":[{"id":2,"external_id":"runpod-gpu-gate:v1:%s:paid","status":"completed","conclusion":"success","completed_at":"2026-11-29T11:00:00Z","html_url":"https://github.com/o/r/runs/2"}]}`, merge)
	})
	gh, srvURL := setup(t, mux)
	base = srvURL
	d := gate.LookupReuse(context.Background(), gh, head, merge, gate.DefaultCheckName)
	if !d.Reuse || d.From.ID != 2 || d.From.URL != "https://github.com/o/r/runs/2" {
		t.Errorf("%+v", d)
	}
}

func TestGitHub_CreateAndUpdateGate(t *testing.T) {
	mux := http.NewServeMux()
	var created, updated map[string]any
	mux.HandleFunc("POST /repos/o/r/check-runs", func(w http.ResponseWriter, r *http.Request) {
		json.NewDecoder(r.Body).Decode(&created)
		fmt.Fprint(w, `{"id":5,"status":"completed","conclusion":"success"}`)
	})
	mux.HandleFunc("GET /repos/o/r/commits/"+head+"/check-runs", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"total_count":1,"check_runs":[{"id":5,"name":"CI GPU gate","status":"in_progress"}]}`)
	})
	mux.HandleFunc("PATCH /repos/o/r/check-runs/5", func(w http.ResponseWriter, r *http.Request) {
		json.NewDecoder(r.Body).Decode(&updated)
		fmt.Fprint(w, `{"id":5,"status":"completed","conclusion":"failure"}`)
	})
	gh, _ := setup(t, mux)
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	if _, err := gate.Publish(context.Background(), nil, gh, 0, "", gate.Report{HeadSHA: head, ID: gate.ExternalID{Ref: merge, Kind: gate.KindPaid}, Paid: &gate.PaidEvidence{TestsPassed: true}, DetailsURL: "https://x/run/1"}, now); err != nil {
		t.Fatal(err)
	}
	if created["name"] != "CI GPU gate" || created["head_sha"] != head || created["external_id"] != "runpod-gpu-gate:v1:"+merge+":paid" ||
		created["conclusion"] != "success" || created["completed_at"] != "2026-11-29T12:00:00Z" || created["output"].(map[string]any)["title"] != "passed" {
		t.Errorf("create body %v", created)
	}
	if _, err := gate.Publish(context.Background(), nil, gh, 0, "", gate.Report{HeadSHA: head, ID: gate.ExternalID{Ref: merge, Kind: gate.KindFailed}, ExistingID: 5}, now); err != nil {
		t.Fatal(err)
	}
	if updated["conclusion"] != "failure" || updated["status"] != "completed" {
		t.Errorf("update body %v", updated)
	}
}

func TestGitHub_RepoSurface(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /repos/o/r/collaborators/maint/permission", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"permission":"write","role_name":"maintain"}`)
	})
	mux.HandleFunc("GET /repos/o/r/pulls/7", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"number":7,"state":"open","mergeable":false,"merge_commit_sha":"%s","head":{"sha":"%s","repo":{"id":1}},"base":{"repo":{"id":1}},"labels":[{"name":"gpu"}]}`, merge, head)
	})
	mux.HandleFunc("GET /repos/o/r/commits/main", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") != "application/vnd.github.v3.sha" {
			t.Errorf("accept %q", r.Header.Get("Accept"))
		}
		fmt.Fprint(w, merge2)
	})
	mux.HandleFunc("GET /repos/o/r/issues/7/comments", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `[{"id":1,"user":{"login":"maint"},"body":"%s"}]`, gate.EvidenceMarker(head))
	})
	gh, _ := setup(t, mux)
	ctx := context.Background()
	if role, err := gh.Permission(ctx, "maint"); err != nil || role != "maintain" {
		t.Errorf("role %q %v", role, err)
	}
	pr, err := gh.PullRequest(ctx, 7)
	if err != nil || !pr.Open || pr.HeadSHA != head || pr.MergeSHA != "" || pr.HeadRepoID != 1 || pr.Labels[0] != "gpu" {
		t.Errorf("%+v %v (a conflicting PR has no usable merge SHA)", pr, err)
	}
	if sha, err := gh.ResolveRef(ctx, "main"); err != nil || sha != merge2 {
		t.Errorf("%q %v", sha, err)
	}
	if cs, err := gh.Comments(ctx, 7); err != nil || len(cs) != 1 || cs[0].Author != "maint" {
		t.Errorf("%+v %v", cs, err)
	}
}

func TestGitHub_Workflows(t *testing.T) {
	mux := http.NewServeMux()
	var dispatched map[string]any
	mux.HandleFunc("GET /repos/o/r", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"default_branch":"main"}`) })
	mux.HandleFunc("POST /repos/o/r/actions/workflows/gpu.yml/dispatches", func(w http.ResponseWriter, r *http.Request) {
		json.NewDecoder(r.Body).Decode(&dispatched)
		w.WriteHeader(204)
	})
	mux.HandleFunc("GET /repos/o/r/actions/workflows/gpu.yml/runs", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("event") != "workflow_dispatch" {
			t.Errorf("query %s", r.URL.RawQuery)
		}
		fmt.Fprint(w, `{"total_count":1,"workflow_runs":[{"id":9,"status":"completed","conclusion":"success","html_url":"https://x/9","created_at":"2026-11-29T12:00:00Z"}]}`)
	})
	gh, _ := setup(t, mux)
	res, err := gate.Recover(context.Background(), gh, gate.RecoverRequest{Workflow: "gpu.yml", PR: 3, Wait: true})
	if err != nil || res.Run.ID != 9 || dispatched["ref"] != "main" || dispatched["inputs"].(map[string]any)["pr_number"] != "3" {
		t.Errorf("%+v %v %v", res, err, dispatched)
	}
}

// Run reads one dispatched run; a failed call names what it was reading
// and keeps GitHub's error for callers that branch on it.
func TestGitHub_RunAndErrorsThatNameTheCall(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /repos/o/r/actions/runs/9", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"id":9,"status":"completed","conclusion":"failure","html_url":"https://x/9","created_at":"2026-11-29T12:00:00Z"}`)
	})
	gh, _ := setup(t, mux)
	run, err := gh.Run(context.Background(), 9)
	want := gate.Run{ID: 9, Status: "completed", Conclusion: "failure", URL: "https://x/9", CreatedAt: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	if err != nil || run != want {
		t.Errorf("Run = %+v, %v; want %+v", run, err, want)
	}
	for name, call := range map[string]func() error{
		"gate: read run 10":               func() error { _, err := gh.Run(context.Background(), 10); return err },
		"gate: read PR #4":                func() error { _, err := gh.PullRequest(context.Background(), 4); return err },
		"gate: read m's permission":       func() error { _, err := gh.Permission(context.Background(), "m"); return err },
		"gate: resolve refs/pull/4/merge": func() error { _, err := gh.ResolveRef(context.Background(), "refs/pull/4/merge"); return err },
		"gate: dispatch gpu.yml at main":  func() error { return gh.Dispatch(context.Background(), "gpu.yml", "main", nil) },
		"gate: list the runs of gpu.yml":  func() error { _, err := gh.Runs(context.Background(), "gpu.yml", time.Now()); return err },
		"gate: list the comments of #4":   func() error { _, err := gh.Comments(context.Background(), 4); return err },
		"gate: read the repository":       func() error { _, err := gh.DefaultBranch(context.Background()); return err },
		"gate: update check run 5":        func() error { _, err := gh.UpdateGate(context.Background(), 5, gate.Publication{}); return err },
		`gate: create check run "CI GPU gate"`: func() error {
			_, err := gh.CreateGate(context.Background(), gate.Publication{Name: "CI GPU gate"})
			return err
		},
	} {
		err := call()
		var ghErr *github.ErrorResponse
		if !strings.HasPrefix(fmt.Sprint(err), name) || !errors.As(err, &ghErr) || ghErr.Response.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %v, want it named and GitHub's 404 kept", name, err)
		}
	}
}

// A recovery looks for its dispatched run among every run since it
// dispatched, not only the first page of 100: a busy workflow's run can be
// on the second.
func TestGitHub_RunsReadsEveryPage(t *testing.T) {
	mux := http.NewServeMux()
	var base string
	mux.HandleFunc("GET /repos/o/r/actions/workflows/gpu.yml/runs", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("page") == "" {
			w.Header().Set("Link", fmt.Sprintf(`<%s/repos/o/r/actions/workflows/gpu.yml/runs?page=2>; rel="next"`, base))
			fmt.Fprint(w, `{"total_count":2,"workflow_runs":[{"id":8,"status":"completed","conclusion":"failure","created_at":"2026-11-29T12:00:00Z"}]}`)
			return
		}
		fmt.Fprint(w, `{"total_count":2,"workflow_runs":[{"id":9,"status":"queued","created_at":"2026-11-29T12:01:00Z"}]}`)
	})
	gh, srvURL := setup(t, mux)
	base = srvURL
	runs, err := gh.Runs(context.Background(), "gpu.yml", time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC))
	if err != nil || len(runs) != 2 || runs[1].ID != 9 {
		t.Errorf("%+v %v, want runs 8 and 9", runs, err)
	}
}
