package changepolicy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-github/v66/github"

	"github.com/gpugate/gpugate/internal/githubtest"
)

const (
	headA      = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	headB      = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	baseA      = "cccccccccccccccccccccccccccccccccccccccc"
	mergeBaseA = "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"
)

// fakePR serves one pull request with n files, reporting changedFiles.
func fakePR(t *testing.T, n, changedFiles int) *github.Client {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /repos/o/r/pulls/7", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"number": 7, "changed_files": changedFiles,
			"head": map[string]any{"sha": headA}, "base": map[string]any{"sha": baseA}})
	})
	var base string
	mux.HandleFunc("GET /repos/o/r/pulls/7/files", func(w http.ResponseWriter, r *http.Request) {
		if got := r.URL.Query().Get("per_page"); got != "100" {
			t.Errorf("per_page = %q, want 100", got)
		}
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		if page == 0 {
			page = 1
		}
		start, end := (page-1)*100, min(page*100, n, GitHubFileCap)
		var files []map[string]any
		for i := start; i < end; i++ {
			f := map[string]any{"filename": fmt.Sprintf("docs/%d.md", i), "status": "modified"}
			if i == 0 {
				f = map[string]any{"filename": "docs/new.md", "previous_filename": "src/old.rs", "status": "renamed"}
			}
			files = append(files, f)
		}
		if end < min(n, GitHubFileCap) {
			next := fmt.Sprintf("%s/repos/o/r/pulls/7/files?per_page=100&page=%d", base, page+1)
			w.Header().Set("Link", fmt.Sprintf(`<%s>; rel="next"`, next))
		}
		json.NewEncoder(w).Encode(files)
	})
	mux.HandleFunc("GET /repos/o/r/compare/"+baseA+"..."+headA, func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"merge_base_commit": map[string]any{"sha": mergeBaseA}})
	})
	c, srv := githubtest.New(t, mux)
	base = srv.URL
	return c
}

func TestFromPullRequest_EveryPage(t *testing.T) {
	c := fakePR(t, 250, 250)
	got, err := FromPullRequest(context.Background(), c, "o", "r", 7)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 250 {
		t.Fatalf("listed %d files, want 250 over three pages", len(got))
	}
	if diff := cmp.Diff(Change{Path: "docs/new.md", OldPath: "src/old.rs", Status: Renamed}, got[0]); diff != "" {
		t.Errorf("rename (-want +got):\n%s", diff)
	}
	// The rename's old side is code: the whole change is code.
	d := classify(t, examplePolicy(t), got...)
	if d.Class != Code {
		t.Errorf("class %s, want code", d.Class)
	}
}

func TestFromPullRequest_IncompleteListIsAnError(t *testing.T) {
	tests := map[string]struct{ n, changed int }{
		"short of changed_files": {120, 121},
		"at the 3,000-file cap":  {3500, 3500},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := FromPullRequest(context.Background(), fakePR(t, tt.n, tt.changed), "o", "r", 7)
			if !errors.Is(err, ErrIncomplete) {
				t.Fatalf("err = %v, want ErrIncomplete", err)
			}
			if got != nil {
				t.Errorf("returned %d changes with ErrIncomplete; a partial list must not be classifiable", len(got))
			}
		})
	}
}

func TestFromPullRequest_APIError(t *testing.T) {
	c, _ := githubtest.New(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
	}))
	_, err := FromPullRequest(context.Background(), c, "o", "r", 7)
	var ge *github.ErrorResponse
	if !errors.As(err, &ge) || ge.Response.StatusCode != 404 {
		t.Errorf("err = %v, want the wrapped GitHub 404", err)
	}
	if _, err := FromPullRequest(context.Background(), nil, "o", "r", 7); err == nil {
		t.Error("nil client: want an error")
	}
}

// Classification is bound to the head it classified: the listing carries
// the head (and base) it was read at, the decision carries them on, and a
// push while the files are listed withholds the listing.
func TestListPullRequest_TheListingIsBoundToTheHeadItWasReadAt(t *testing.T) {
	l, err := ListPullRequest(context.Background(), fakePR(t, 3, 3), "o", "r", 7)
	if err != nil {
		t.Fatal(err)
	}
	d, err := l.Classify(examplePolicy(t))
	if err != nil {
		t.Fatal(err)
	}
	if l.HeadSHA != headA || l.BaseSHA != baseA || d.HeadSHA != headA || d.BaseSHA != baseA || d.MergeBaseSHA != mergeBaseA {
		t.Errorf("listing at %s/%s, decision at %s/%s (merge base %s); want head %s, base %s, merge base %s", l.HeadSHA, l.BaseSHA, d.HeadSHA, d.BaseSHA, d.MergeBaseSHA, headA, baseA, mergeBaseA)
	}

	reads := 0
	mux := http.NewServeMux()
	mux.HandleFunc("GET /repos/o/r/pulls/7", func(w http.ResponseWriter, r *http.Request) {
		reads++
		head := headA
		if reads > 1 {
			head = headB // a push while the files were listed
		}
		json.NewEncoder(w).Encode(map[string]any{"number": 7, "changed_files": 1, "head": map[string]any{"sha": head}, "base": map[string]any{"sha": baseA}})
	})
	mux.HandleFunc("GET /repos/o/r/pulls/7/files", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode([]map[string]any{{"filename": "README.md", "status": "modified"}})
	})
	c, _ := githubtest.New(t, mux)
	if l, err := ListPullRequest(context.Background(), c, "o", "r", 7); !errors.Is(err, ErrHeadMoved) || l.Changes != nil {
		t.Errorf("listing %+v, err %v; want ErrHeadMoved and no changes", l, err)
	}
}
