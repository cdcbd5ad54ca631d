package runpod_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/google/go-github/v66/github"

	"github.com/gpugate/gpugate/internal/githubtest"
	"github.com/gpugate/gpugate/runpod"
)

func TestGitHubRegistry_MintsJITAndFindsTheRunnerOnALaterPage(t *testing.T) {
	mux := http.NewServeMux()
	var minted github.GenerateJITConfigRequest
	mux.HandleFunc("POST /orgs/acme/actions/runners/generate-jitconfig", func(w http.ResponseWriter, r *http.Request) {
		json.NewDecoder(r.Body).Decode(&minted)
		w.WriteHeader(201)
		fmt.Fprint(w, `{"runner":{"id":1,"name":"gpugate-1-1-c1"},"encoded_jit_config":"ENCODED"}`)
	})
	var srvURL string
	mux.HandleFunc("GET /orgs/acme/actions/runners", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("name") != "gpugate-1-1-c1" {
			t.Errorf("runner lookup without the exact name filter: %s", r.URL.RawQuery)
		}
		if r.URL.Query().Get("page") != "2" {
			w.Header().Set("Link", fmt.Sprintf(`<%s/orgs/acme/actions/runners?name=gpugate-1-1-c1&page=2>; rel="next"`, srvURL))
			fmt.Fprint(w, `{"total_count":2,"runners":[{"id":9,"name":"someone-else","status":"online"}]}`)
			return
		}
		fmt.Fprint(w, `{"total_count":2,"runners":[{"id":1,"name":"gpugate-1-1-c1","status":"online","busy":false,"labels":[{"name":"self-hosted"},{"name":"gpugate-1-1-c1"}]}]}`)
	})
	c, srv := githubtest.New(t, mux)
	srvURL = srv.URL
	reg := &runpod.GitHubRegistry{Client: c, Owner: "acme"}
	jit, err := reg.MintJIT(context.Background(), "gpugate-1-1-c1", []string{"gpugate-1-1-c1"})
	if err != nil || jit.Reveal() != "ENCODED" {
		t.Fatalf("MintJIT = %v, %v", jit, err)
	}
	if minted.Name != "gpugate-1-1-c1" || minted.RunnerGroupID != 1 || len(minted.Labels) != 1 {
		t.Errorf("mint request %+v", minted)
	}
	r, found, err := reg.Runner(context.Background(), "gpugate-1-1-c1")
	if err != nil || !found || !r.Online || len(r.Labels) != 2 {
		t.Errorf("Runner = %+v, %v, %v", r, found, err)
	}
}

func TestGitHubPR_Current(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /repos/o/r/pulls/5", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"number":5,"state":"closed","head":{"sha":"abc"}}`)
	})
	c, _ := githubtest.New(t, mux)
	pr := &runpod.GitHubPR{Client: c, Owner: "o", Repo: "r", Number: 5}
	got, err := pr.Current(context.Background())
	if err != nil || got.Open || got.HeadSHA != "abc" {
		t.Errorf("Current = %+v, %v", got, err)
	}
	missing, _ := githubtest.New(t, http.NewServeMux())
	if _, err := (&runpod.GitHubPR{Client: missing, Owner: "o", Repo: "r", Number: 6}).Current(context.Background()); err == nil {
		t.Error("a 404 must be an error (unknown state)")
	}
}
