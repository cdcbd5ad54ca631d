package sparkgh

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-github/v66/github"

	"github.com/gpugate/gpugate/internal/githubtest"
)

// The adapter reads a pull request's identity (fork detection compares
// the head and base repository IDs) and posts status comments.
func TestGitHubAPI_PullRequestAndComment(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /repos/o/butter/pulls/7", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"number":7,"state":"open","head":{"sha":"`+sha1+`","repo":{"id":1234}},"base":{"repo":{"id":99}},"labels":[{"name":"spark-test"}]}`)
	})
	var comment github.IssueComment
	mux.HandleFunc("POST /repos/o/butter/issues/7/comments", func(w http.ResponseWriter, r *http.Request) {
		json.NewDecoder(r.Body).Decode(&comment)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"id":1}`)
	})
	client, _ := githubtest.New(t, mux)
	api := &GitHubAPI{Client: client, Org: "acme"}
	pr, err := api.PullRequest(ctx, "o/butter", 7)
	want := PR{Repo: "o/butter", Number: 7, HeadSHA: sha1, Open: true, HeadRepoID: 1234, BaseRepoID: 99, Labels: []string{"spark-test"}}
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, pr); diff != "" {
		t.Errorf("PR (-want +got):\n%s", diff)
	}
	if err := api.Comment(ctx, "o/butter", 7, "Spark requests for this pull request: none"); err != nil || comment.GetBody() != "Spark requests for this pull request: none" {
		t.Errorf("Comment: %v, posted %q", err, comment.GetBody())
	}
	var ghErr *github.ErrorResponse
	if err := api.Comment(ctx, "o/butter", 8, "x"); !errors.As(err, &ghErr) || !strings.HasPrefix(err.Error(), "sparkgh: comment on o/butter#8") {
		t.Errorf("a failed comment: %v", err)
	}
	if _, err := api.PullRequest(ctx, "butter", 7); err == nil {
		t.Error("a repository without an owner was accepted")
	}
}

// A scheduled request runs the commit its branch points to when it is
// asked for.
func TestGitHubAPI_BranchSHA(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /repos/o/butter/branches/main", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"name":"main","commit":{"sha":"`+sha1+`"}}`)
	})
	mux.HandleFunc("GET /repos/o/butter/branches/empty", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"name":"empty"}`)
	})
	client, _ := githubtest.New(t, mux)
	api := &GitHubAPI{Client: client, Org: "acme"}
	if sha, err := api.BranchSHA(ctx, "o/butter", "main"); err != nil || sha != sha1 {
		t.Errorf("main: %q %v", sha, err)
	}
	if _, err := api.BranchSHA(ctx, "o/butter", "gone"); !errors.Is(err, ErrNoBranch) || !strings.HasPrefix(err.Error(), "sparkgh: read branch gone of o/butter") {
		t.Errorf("a missing branch: %v", err)
	}
	if _, err := api.BranchSHA(ctx, "o/butter", "empty"); !errors.Is(err, ErrNoBranch) || !strings.Contains(err.Error(), "names no commit") {
		t.Errorf("a branch without a commit: %v", err)
	}
}

// SuiteChecks asks for the named checks of the suite and follows every
// page.
func TestGitHubAPI_SuiteChecksFollowsEveryPage(t *testing.T) {
	mux := http.NewServeMux()
	var srvURL string
	mux.HandleFunc("GET /repos/o/butter/check-suites/5/check-runs", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("check_name") != "Spark test" {
			t.Errorf("query %s: want check_name", r.URL.RawQuery)
		}
		if r.URL.Query().Get("page") != "2" {
			w.Header().Set("Link", fmt.Sprintf(`<%s/repos/o/butter/check-suites/5/check-runs?check_name=Spark+test&page=2>; rel="next"`, srvURL))
			fmt.Fprint(w, `{"total_count":2,"check_runs":[{"id":1,"head_sha":"`+sha1+`","external_id":"r-1"}]}`)
			return
		}
		fmt.Fprint(w, `{"total_count":2,"check_runs":[{"id":2,"head_sha":"`+sha1+`","external_id":"r-2"}]}`)
	})
	client, srv := githubtest.New(t, mux)
	srvURL = srv.URL
	got, err := (&GitHubAPI{Client: client, Org: "acme"}).SuiteChecks(ctx, "o/butter", 5, "Spark test")
	want := []CheckRun{{ID: 1, HeadSHA: sha1, ExternalID: "r-1"}, {ID: 2, HeadSHA: sha1, ExternalID: "r-2"}}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("SuiteChecks = %+v, %v", got, err)
	}
}

// Runners lists the organization's runners over every page.
func TestGitHubAPI_RunnersFollowsEveryPage(t *testing.T) {
	mux := http.NewServeMux()
	var srvURL string
	mux.HandleFunc("GET /orgs/acme/actions/runners", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("page") != "2" {
			w.Header().Set("Link", fmt.Sprintf(`<%s/orgs/acme/actions/runners?page=2>; rel="next"`, srvURL))
			fmt.Fprint(w, `{"total_count":2,"runners":[{"id":1,"name":"spark-r-1","status":"offline","busy":false}]}`)
			return
		}
		fmt.Fprint(w, `{"total_count":2,"runners":[{"id":2,"name":"build-box","status":"online","busy":true}]}`)
	})
	client, srv := githubtest.New(t, mux)
	srvURL = srv.URL
	got, err := (&GitHubAPI{Client: client, Org: "acme"}).Runners(ctx)
	if want := []RegisteredRunner{{Name: "spark-r-1"}, {Name: "build-box", Busy: true}}; err != nil || !slices.Equal(got, want) {
		t.Errorf("Runners = %+v, %v", got, err)
	}
}
