package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpugate/gpugate/gate"
)

var (
	head  = strings.Repeat("a", 40)
	merge = strings.Repeat("b", 40)
)

// fakeGitHub serves the JSON shapes the subcommands read, under the
// Enterprise API prefix that GITHUB_API_URL implies.
func fakeGitHub(t *testing.T) (map[string]string, *[]string) {
	t.Helper()
	var created []string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /repos/o/r/commits/"+head+"/check-runs", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"total_count":1,"check_runs":[{"id":11,"external_id":"runpod-gpu-gate:v1:%s:paid","status":"completed","conclusion":"success","completed_at":"2026-11-29T10:00:00Z","html_url":"https://github.com/o/r/runs/11"}]}`, merge)
	})
	mux.HandleFunc("POST /repos/o/r/check-runs", func(w http.ResponseWriter, r *http.Request) {
		var b bytes.Buffer
		b.ReadFrom(r.Body)
		created = append(created, b.String())
		fmt.Fprint(w, `{"id":12}`)
	})
	mux.HandleFunc("GET /repos/o/r/collaborators/{user}/permission", func(w http.ResponseWriter, r *http.Request) {
		role := map[string]string{"maint": "maintain"}[r.PathValue("user")]
		if role == "" {
			role = "read"
		}
		fmt.Fprintf(w, `{"permission":"read","role_name":%q}`, role)
	})
	mux.HandleFunc("GET /repos/o/r/pulls/7", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"number":7,"state":"open","merge_commit_sha":"%s","head":{"sha":"%s","repo":{"id":1}},"base":{"repo":{"id":1}},"labels":[{"name":"gpu-validated-locally"}]}`, merge, head)
	})
	mux.HandleFunc("GET /repos/o/r/pulls/8", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"number":8,"state":"open","merge_commit_sha":"%s","head":{"sha":"%s","repo":{"id":1}},"base":{"repo":{"id":1}},"labels":[{"name":"gpu"}]}`, merge, head)
	})
	mux.HandleFunc("GET /repos/o/r/issues/7/comments", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `[{"id":1,"user":{"login":"maint"},"body":"%s\nall passed"}]`, gate.EvidenceMarker(head))
	})
	mux.HandleFunc("GET /repos/o/r", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"default_branch":"main"}`) })
	mux.HandleFunc("POST /repos/o/r/actions/workflows/runpod-gpu-test.yml/dispatches", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	srv := httptest.NewServer(http.StripPrefix("/api/v3", mux))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	return map[string]string{"GITHUB_TOKEN": "t", "GITHUB_API_URL": srv.URL, "GITHUB_REPOSITORY": "o/r", "GITHUB_OUTPUT": filepath.Join(dir, "out"), "GITHUB_ACTIONS": "true"}, &created
}

func runGate(t *testing.T, env map[string]string, args ...string) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, func(k string) string { return env[k] }, &out, &errOut)
	return code, out.String() + errOut.String()
}

func TestSubcommands(t *testing.T) {
	env, created := fakeGitHub(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"reuse", "-head", head, "-tested-ref", merge}, "reuse=true"},
		{[]string{"reuse", "-head", head, "-tested-ref", strings.Repeat("c", 40)}, "reuse=false"},
		{[]string{"authorize", "-actor", "maint", "-pr", "7"}, "tested_ref=" + merge},
		{[]string{"authorize", "-actor", "maint", "-pr", "7"}, "local_gpu_validation=true"},
		{[]string{"publish", "-head", head, "-tested-ref", merge, "-kind", "reused", "-reused-from-id", "11"}, "check_id=12"},
		{[]string{"local-relay", "-dispatcher", "maint", "-pr", "7", "-sha", head}, "check_id=12"},
		{[]string{"recover", "-pr", "7"}, "ref=main"},
	}
	for _, tt := range tests {
		if code, out := runGate(t, env, tt.args...); code != 0 || !strings.Contains(out, tt.want) {
			t.Errorf("%v: exit %d, output %q; want %q", tt.args, code, out, tt.want)
		}
	}
	if len(*created) != 2 || !strings.Contains((*created)[1], `"external_id":"local-gpu-gate:v1:`+head+`"`) {
		t.Errorf("published %v", *created)
	}
	got, _ := os.ReadFile(env["GITHUB_OUTPUT"])
	if !strings.Contains(string(got), "reuse=true\n") || !strings.Contains(string(got), "head_sha="+head+"\n") {
		t.Errorf("GITHUB_OUTPUT:\n%s", got)
	}
	// A refused recovery dispatches nothing and prints no empty output.
	if code, out := runGate(t, env, "recover"); code != 2 || strings.Contains(out, "ref=") {
		t.Errorf("a refused recovery: exit %d, output %q", code, out)
	}
}

// -json prints the outputs as one JSON object instead of name=value lines;
// a failure still annotates the log.
func TestJSONPrintsTheOutputsAsOneObject(t *testing.T) {
	env, _ := fakeGitHub(t)
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"reuse", "-json", "-head", head, "-tested-ref", merge}, func(k string) string { return env[k] }, &out, &errOut)
	var got map[string]string
	if err := json.Unmarshal(out.Bytes(), &got); code != 0 || err != nil || got["reuse"] != "true" || strings.Contains(out.String(), "reuse=true") {
		t.Errorf("reuse -json: exit %d, %v, stdout %q", code, err, out.String())
	}
	env["GITHUB_ACTIONS"] = "true"
	if code, out := runGate(t, env, "publish", "-json", "-pr", "9", "-head", head, "-tested-ref", merge, "-kind", "paid"); code != 1 || !strings.Contains(out, "::error::") {
		t.Errorf("a failure with -json: exit %d, %q; want an ::error:: annotation", code, out)
	}
}

// "ci-gpu-gate publishes nothing (it re-reads the label, which may have
// been added after authorize), so the RunPod workflow can never override
// the local publication."
func TestPublishReReadsTheLocalLabelAndPublishesNothingForALabelledPR(t *testing.T) {
	env, created := fakeGitHub(t)
	code, out := runGate(t, env, "publish", "-pr", "7", "-head", head, "-tested-ref", merge, "-kind", "failed")
	if code != 0 || !strings.Contains(out, "published=false") || len(*created) != 0 {
		t.Errorf("labelled PR: exit %d, %q, published %v", code, out, *created)
	}
	code, out = runGate(t, env, "publish", "-pr", "8", "-head", head, "-tested-ref", merge, "-kind", "failed")
	if code != 0 || !strings.Contains(out, "published=true") || len(*created) != 1 {
		t.Errorf("unlabelled PR: exit %d, %q, published %v", code, out, *created)
	}
	if code, out := runGate(t, env, "publish", "-pr", "9", "-head", head, "-tested-ref", merge, "-kind", "paid"); code != 1 || len(*created) != 1 {
		t.Errorf("an unreadable PR must fail, not publish: exit %d, %q", code, out)
	}
}

func TestRefusalsFail(t *testing.T) {
	env, _ := fakeGitHub(t)
	for _, args := range [][]string{
		{"authorize", "-actor", "someone", "-pr", "7"},
		{"local-relay", "-dispatcher", "someone", "-pr", "7", "-sha", head},
		{"publish", "-head", head, "-tested-ref", merge, "-kind", "not-required", "-gpu-required", "true"},
	} {
		if code, out := runGate(t, env, args...); code != 1 || !strings.Contains(out, "::error::") {
			t.Errorf("%v: exit %d, output %q", args, code, out)
		}
	}
	if code, _ := runGate(t, env, "bogus"); code != 2 {
		t.Error("unknown subcommand must exit 2")
	}
	delete(env, "GITHUB_TOKEN")
	if code, out := runGate(t, env, "reuse", "-head", head, "-tested-ref", merge); code != 1 || !strings.Contains(out, "GITHUB_TOKEN") {
		t.Errorf("no token: exit %d %q", code, out)
	}
}
