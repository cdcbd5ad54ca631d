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
	"testing/synctest"
	"time"

	"github.com/gpugate/gpugate/cost"
	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/rest"
	"github.com/gpugate/gpugate/runpod/runpodtest"
)

func TestSimulateDryRunThenExecute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "decisions.json")
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{"-simulate", "-out", out}, func(string) string { return "" }, &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		if !strings.Contains(stdout.String(), "dry run") || !strings.Contains(stdout.String(), "pods still running in the simulation: 6") {
			t.Errorf("dry run output:\n%s", stdout.String())
		}
		var doc Document
		data, _ := os.ReadFile(out)
		if err := json.Unmarshal(data, &doc); err != nil || len(doc.Decisions) != 6 {
			t.Fatalf("decisions document %s (%v)", data, err)
		}
		rules := map[string]int{}
		for _, d := range doc.Decisions {
			rules[d.Rule]++
		}
		if rules["untagged"] != 1 || rules["active"] != 1 || rules["superseded"] != 1 || rules["run-completed"] != 1 || rules["retained"] != 1 || rules["lifetime"] != 1 {
			t.Errorf("rules %v", rules)
		}
		stdout.Reset()
		if code := run(context.Background(), []string{"-simulate", "-execute"}, func(string) string { return "" }, &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		if !strings.Contains(stdout.String(), "pods still running in the simulation: 3") {
			t.Errorf("execute output:\n%s", stdout.String())
		}
	})
}

func TestRealModeNeedsCredentials(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"-repo", "o/r"}, func(string) string { return "" }, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "RUNPOD_API_KEY") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}

// Without the repository its pods must be tagged with, a real sweep is a
// refused command line: exit 2, before any credential is read.
func TestRealMode_ARepositoryIsRequired(t *testing.T) {
	env := map[string]string{"RUNPOD_API_KEY": "k", "GITHUB_TOKEN": "t"}
	for _, args := range [][]string{nil, {"-repo", "o"}, {"-repo", "o/r", "-workflow", ""}} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, func(k string) string { return env[k] }, &stdout, &stderr); code != 2 || stdout.Len() != 0 || strings.Count(strings.TrimSpace(stderr.String()), "\n") != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and one line", args, code, stdout.String(), stderr.String())
		}
	}
}

// Seed 001: "Independent reaper decision artifacts provide the separate
// recovery record when normal workflow logs cannot confirm deletion." What
// the reaper writes is what the cost history reads: its deletions, once
// per pod, and the runs whose own report lacked deletion evidence that a
// reaper deletion recovers.
func TestTheDecisionsAreTheCostHistorysRecoveryRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		sweep := filepath.Join(dir, "reaper", "900-1")
		os.MkdirAll(sweep, 0o755)
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{"-simulate", "-execute", "-out", filepath.Join(sweep, "decisions.json")}, func(string) string { return "" }, &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		var doc Document
		data, _ := os.ReadFile(filepath.Join(sweep, "decisions.json"))
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatal(err)
		}
		deleted, estimated, unknown := []string{}, 0.0, 0
		retained, retainedCost := 0, 0.0 // the simulation's debug pod, still billing
		for _, d := range doc.Decisions {
			if d.Rule == runpod.RuleRetained && d.EstimatedCost != nil {
				retained++
				retainedCost += *d.EstimatedCost
			}
			if d.Action == runpod.ActionDeleted {
				deleted = append(deleted, d.PodID)
				if d.EstimatedCost != nil {
					estimated += *d.EstimatedCost
				} else {
					unknown++
				}
			}
		}
		if len(deleted) == 0 {
			t.Fatal("the simulation deleted nothing")
		}
		// A GPU workflow run whose cleanup never confirmed deleting one of
		// those pods.
		runDir := filepath.Join(dir, "runs", "77-1")
		os.MkdirAll(filepath.Join(runDir, "cost"), 0o755)
		os.WriteFile(filepath.Join(runDir, "run.json"), []byte(`{"id":77,"attempt":1,"event":"workflow_run","created_at":"2026-11-28T10:00:00Z"}`), 0o644)
		rep, _ := json.Marshal(cost.Report{Version: cost.ReportVersion, PodID: deleted[0], GateKind: "failed"})
		os.WriteFile(filepath.Join(runDir, "cost", "cost-report.json"), rep, 0o644)

		s, err := cost.Summarize(dir)
		if err != nil {
			t.Fatal(err)
		}
		if retained == 0 {
			t.Fatal("the simulation retains no debug pod")
		}
		want := &cost.ReaperSpend{Sweeps: 1, Deleted: len(deleted), EstimatedCost: estimated, UnknownCost: unknown, Recovered: 1,
			Retained: retained, RetainedCost: retainedCost}
		if s.Reaper == nil || *s.Reaper != *want {
			t.Errorf("reaper %+v, want %+v", s.Reaper, want)
		}
		if s.Unknown.NoDeletionEvidence != 1 || !strings.Contains(s.Markdown(), "1 of its deletions recover a run whose own report had no deletion evidence") {
			t.Errorf("unknowns %+v\n%s", s.Unknown, s.Markdown())
		}
	})
}

// A misconfigured -workflow makes every pod of the GPU workflow foreign,
// and foreign pods are never reclaimed: the sweep says so, naming the
// workflows it saw, instead of quietly leaving orphans running.
func TestPodsOfThisRepositorysOtherWorkflowsAreCalledOut(t *testing.T) {
	doc := Document{Repository: "o/r", Workflow: ".github/workflows/runpod-gpu-tests.yml", Decisions: []runpod.ReapDecision{
		{PodID: "a", Rule: runpod.RuleForeign, Identity: &runpod.Ownership{Repository: "o/r", Workflow: ".github/workflows/runpod-gpu-test.yml"}},
		{PodID: "b", Rule: runpod.RuleForeign, Identity: &runpod.Ownership{Repository: "o/r", Workflow: ".github/workflows/runpod-gpu-test.yml"}},
		{PodID: "c", Rule: runpod.RuleForeign, Identity: &runpod.Ownership{Repository: "other/repo", Workflow: ".github/workflows/x.yml"}},
		{PodID: "d", Rule: runpod.RuleUntagged},
	}}
	want := "reap: pods tagged for o/r but another workflow than .github/workflows/runpod-gpu-tests.yml are never reclaimed: .github/workflows/runpod-gpu-test.yml (2); if one of these is the GPU workflow, fix -workflow"
	if got := otherWorkflows(doc); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	doc.Decisions = doc.Decisions[2:]
	if got := otherWorkflows(doc); got != "" {
		t.Errorf("another repository's pods are not ours to mention: %q", got)
	}
}

// Real mode, against RunPod's and GitHub's loopback stand-ins: a tagged
// pod whose run completed ten minutes ago is reported reclaimable by a dry
// run, which touches nothing, and deleted by -execute; a pod nobody tagged
// is never touched.
func TestRealModeReclaimsThePodOfACompletedRunOnlyWithExecute(t *testing.T) {
	fake := runpodtest.New(runpodtest.WithSchedule(0, 0))
	api, err := fake.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	owner := runpod.Ownership{Repository: "o/r", Workflow: ".github/workflows/runpod-gpu-test.yml", RunID: 77, RunAttempt: 1}
	ctx := context.Background()
	tagged, err := api.CreatePod(ctx, rest.CreatePodRequest{Name: owner.Prefix() + "-c1", Image: "ghcr.io/actions/actions-runner:latest", Env: owner.Tags(), GPU: rest.GPURequest{ID: "NVIDIA L4", Count: 1}})
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := api.CreatePod(ctx, rest.CreatePodRequest{Name: "alice-notebook", Image: "jupyter", GPU: rest.GPURequest{ID: "NVIDIA L4", Count: 1}})
	if err != nil {
		t.Fatal(err)
	}
	url := fake.Start()
	defer fake.Close()
	completed := time.Now().Add(-10 * time.Minute).UTC().Format(time.RFC3339)
	gh := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch strings.TrimPrefix(r.URL.Path, "/api/v3") { // the Enterprise prefix a GITHUB_API_URL implies
		case "/repos/o/r/actions/runs/77":
			fmt.Fprintf(w, `{"id": 77, "status": "completed", "conclusion": "success", "run_attempt": 1, "event": "workflow_run",
				"path": ".github/workflows/runpod-gpu-test.yml", "updated_at": %q, "repository": {"full_name": "o/r"}}`, completed)
		default:
			http.NotFound(w, r)
		}
	}))
	defer gh.Close()
	env := map[string]string{"RUNPOD_API_KEY": runpodtest.APIKey, "RUNPOD_API_URL": url, "GITHUB_TOKEN": "ghs_reap_test", "GITHUB_API_URL": gh.URL + "/", "GITHUB_REPOSITORY": "o/r"}
	sweep := func(args ...string) Document {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := run(ctx, append([]string{"-json"}, args...), func(k string) string { return env[k] }, &stdout, &stderr); code != 0 {
			t.Fatalf("reap %v: exit %d\n%s%s", args, code, stdout.String(), stderr.String())
		}
		if strings.Contains(stdout.String()+stderr.String(), runpodtest.APIKey) {
			t.Error("the API key was printed")
		}
		var doc Document
		if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil {
			t.Fatalf("%v\n%s", err, stdout.String())
		}
		return doc
	}
	actions := func(doc Document) map[string]string {
		m := map[string]string{}
		for _, d := range doc.Decisions {
			m[d.PodID] = d.Rule + "/" + d.Action
		}
		return m
	}
	dry := actions(sweep())
	if !strings.HasPrefix(dry[tagged.ID], runpod.RuleCompleted+"/") || strings.HasSuffix(dry[tagged.ID], runpod.ActionDeleted) || !strings.HasPrefix(dry[foreign.ID], runpod.RuleUntagged+"/") {
		t.Errorf("dry run decided %v", dry)
	}
	if n := len(fake.Running()); n != 2 {
		t.Fatalf("the dry run left %d pods, want both", n)
	}
	done := actions(sweep("-execute"))
	if done[tagged.ID] != runpod.RuleCompleted+"/"+runpod.ActionDeleted || strings.HasSuffix(done[foreign.ID], runpod.ActionDeleted) {
		t.Errorf("-execute decided %v", done)
	}
	if running := fake.Running(); len(running) != 1 || running[0] != foreign.ID {
		t.Errorf("running after -execute: %v, want only the untagged pod", running)
	}
}

// A sweep whose listing failed decided nothing: with -json it prints
// "decisions": [] beside the error, never null.
func TestJSON_ASweepThatDecidedNothingPrintsAnEmptyList(t *testing.T) {
	fake := runpodtest.New(runpodtest.WithSchedule(0, 0))
	fake.AddFault(runpodtest.Fault{Method: "GET", Path: "/v2/pods", Status: 400, Times: 1000}) // refused, not retried
	url := fake.Start()
	defer fake.Close()
	gh := httptest.NewServer(http.NotFoundHandler()) // no pod listed: no run is read
	defer gh.Close()
	env := map[string]string{"RUNPOD_API_KEY": runpodtest.APIKey, "RUNPOD_API_URL": url, "GITHUB_TOKEN": "t", "GITHUB_API_URL": gh.URL + "/"}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-json", "-repo", "o/r"}, func(k string) string { return env[k] }, &stdout, &stderr)
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(stdout.Bytes(), &doc); code != 1 || err != nil || string(doc["decisions"]) != "[]" || len(doc["error"]) == 0 {
		t.Errorf("exit %d, decisions %s (%v), want 1 and []:\n%s%s", code, doc["decisions"], err, stdout.String(), stderr.String())
	}
}
