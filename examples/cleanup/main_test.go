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
	"github.com/gpugate/gpugate/internal/faketime"
	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/rest"
	"github.com/gpugate/gpugate/runpod/runpodtest"
)

func TestCleanupDeletesThenReportsCost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		out := filepath.Join(dir, "cost-report.json")
		env := map[string]string{"GITHUB_OUTPUT": filepath.Join(dir, "out"), "GITHUB_STEP_SUMMARY": filepath.Join(dir, "summary")}
		var stdout, stderr strings.Builder
		code := run(context.Background(), []string{"-simulate", "-out", out, "-tested-ref", "abc", "-gate-kind", "paid"}, func(k string) string { return env[k] }, &stdout, &stderr)
		if code != 0 {
			t.Fatalf("exit %d: %s%s", code, stdout.String(), stderr.String())
		}
		if !strings.Contains(stdout.String(), "(confirmed)") {
			t.Errorf("%s", stdout.String())
		}
		var rep cost.Report
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &rep); err != nil || rep.DeletedAt == nil || rep.TestedRef != "abc" || !rep.Window.Known {
			t.Errorf("report %+v %v", rep, err)
		}
		outputs, _ := os.ReadFile(env["GITHUB_OUTPUT"])
		if !strings.Contains(string(outputs), "deleted<<") && !strings.Contains(string(outputs), "deleted=true") {
			t.Errorf("outputs: %s", outputs)
		}
	})
}

// -json prints the outputs as one JSON object instead of the text; the
// report is written all the same.
func TestCleanupJSONPrintsItsOutputs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "cost-report.json")
		var stdout, stderr strings.Builder
		code := run(context.Background(), []string{"-simulate", "-json", "-out", out}, func(string) string { return "" }, &stdout, &stderr)
		var got map[string]string
		if err := json.Unmarshal([]byte(stdout.String()), &got); code != 0 || err != nil || got["deleted"] != "true" || got["cost_known"] != "true" {
			t.Errorf("exit %d, %v: stdout %q stderr %q", code, err, stdout.String(), stderr.String())
		}
		if _, err := os.Stat(out); err != nil {
			t.Errorf("the report: %v", err)
		}
	})
}

// The change-aware CI seed: the report carries the run's cache-hit
// observations, and "Missing cache outputs remain unknown"; a malformed
// observation never stands between the pod and its deletion.
func TestCleanupRecordsCacheObservationsAfterTheDeletion(t *testing.T) {
	for name, tc := range map[string]struct {
		cache string
		want  string // the report's cache object; "" for none
		says  string
	}{
		"observed":  {"archive=true,cuda-runtime=false,cuda-toolkit=", `{"archive":true,"cuda-runtime":false,"cuda-toolkit":null}`, ""},
		"malformed": {"archive=maybe", "", "cache observations left out of the report (best effort)"},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				out := filepath.Join(t.TempDir(), "cost-report.json")
				var stdout, stderr strings.Builder
				code := run(context.Background(), []string{"-simulate", "-out", out, "-cache", tc.cache}, func(string) string { return "" }, &stdout, &stderr)
				if code != 0 || !strings.Contains(stdout.String(), "(confirmed)") || !strings.Contains(stdout.String(), tc.says) {
					t.Fatalf("exit %d: %s%s", code, stdout.String(), stderr.String())
				}
				data, _ := os.ReadFile(out)
				var raw struct {
					Cache json.RawMessage `json:"cache"`
				}
				json.Unmarshal(data, &raw)
				var got bytes.Buffer
				json.Compact(&got, raw.Cache)
				if got.String() != tc.want {
					t.Errorf("the report's cache is %s, want %s", got.String(), tc.want)
				}
			})
		})
	}
}

// Without its key cleanup fails (exit 1); without a pod to delete, key or
// not, the command line is refused (exit 2, one line on stderr).
func TestCleanupRefusesWithoutKeyOrPod(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		args []string
		code int
		want string
	}{
		{nil, []string{"-pod", "p1"}, 1, "RUNPOD_API_KEY is not set"},
		{map[string]string{"RUNPOD_API_KEY": "rpa_x"}, nil, 2, "-pod is required"},
		{nil, []string{"-pod", ""}, 2, "-pod is required"},
	} {
		var stdout, stderr strings.Builder
		if code := run(context.Background(), tc.args, func(k string) string { return tc.env[k] }, &stdout, &stderr); code != tc.code || !strings.Contains(stdout.String()+stderr.String(), tc.want) {
			t.Errorf("%v: exit %d: %s%s", tc.args, code, stdout.String(), stderr.String())
		}
	}
}

// useFakeRunPod points the command's RunPod client at an in-process fake
// for the test, and returns a client of its own.
func useFakeRunPod(t *testing.T) (*runpodtest.Server, *rest.Client) {
	t.Helper()
	fake := runpodtest.New()
	orig := connect
	connect = func(func(string) string) (*rest.Client, error) { return fake.NewClient() }
	t.Cleanup(func() { connect = orig })
	api, err := fake.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	return fake, api
}

func createPod(t *testing.T, api *rest.Client, name string) *rest.Pod {
	t.Helper()
	pod, err := api.CreatePod(context.Background(), rest.CreatePodRequest{Name: name, Image: "img", GPU: rest.GPURequest{ID: "NVIDIA L4", Count: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// A run that accepted no pod still paid for its rejected candidates; its
// report says so, and a candidate whose deletion provisioning could not
// confirm is deleted now.
func TestCleanupWithoutAnAcceptedPodReportsTheRejectedAndDeletesTheUnconfirmed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake, api := useFakeRunPod(t)
		stuck := createPod(t, api, "gpugate-9-1-c2")
		dir := t.TempDir()
		result, _ := json.Marshal(runpod.Result{LivePodID: stuck.ID, Attempts: []runpod.Attempt{
			{N: 1, Name: "gpugate-9-1-c1", Candidate: runpod.Candidate{GPUTypeID: "NVIDIA GeForce RTX 4090"}, PodID: "p1", Outcome: runpod.OutcomeExited, Seconds: 95, EstimatedCost: 0.018},
			{N: 2, Name: "gpugate-9-1-c2", Candidate: runpod.Candidate{GPUTypeID: "NVIDIA L4"}, PodID: stuck.ID, Outcome: runpod.OutcomeTimeout, Seconds: 420, EstimatedCost: 0.05},
		}})
		provFile := filepath.Join(dir, "provision.json")
		os.WriteFile(provFile, result, 0o644)
		out := filepath.Join(dir, "cost-report.json")
		env := map[string]string{"RUNPOD_API_KEY": "rpa_x", "GITHUB_OUTPUT": filepath.Join(dir, "out"), "GITHUB_STEP_SUMMARY": filepath.Join(dir, "summary")}
		var stdout, stderr strings.Builder
		code := run(context.Background(), []string{"-provision", provFile, "-out", out, "-gate-kind", "failed"}, func(k string) string { return env[k] }, &stdout, &stderr)
		if code != 0 {
			t.Fatalf("exit %d: %s%s", code, stdout.String(), stderr.String())
		}
		if len(fake.Running()) != 0 {
			t.Errorf("running %v: the unconfirmed candidate must be deleted", fake.Running())
		}
		var rep cost.Report
		data, _ := os.ReadFile(out)
		if err := json.Unmarshal(data, &rep); err != nil || rep.PodID != "" || len(rep.Rejected) != 2 || rep.RejectedCost() != 0.068 || rep.GateKind != "failed" {
			t.Errorf("report %+v, %v", rep, err)
		}
		outputs, _ := os.ReadFile(env["GITHUB_OUTPUT"])
		summary, _ := os.ReadFile(env["GITHUB_STEP_SUMMARY"])
		if !strings.Contains(string(outputs), "deleted=none\n") || !strings.Contains(string(outputs), "cost_known=true\n") || !strings.Contains(string(summary), "No pod was accepted") {
			t.Errorf("outputs:\n%s\nsummary:\n%s", outputs, summary)
		}
	})
}

func TestCleanupReadsMarksAndRefusesUnreadableFiles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		marks := filepath.Join(dir, "marks.json")
		// Every mark before the pod started: each is clamped to the start,
		// so the stages are known (zero), not unknown.
		os.WriteFile(marks, []byte(`{"job_started":"1999-12-31T00:00:00Z","tests_started":"1999-12-31T00:00:00Z","tests_ended":"1999-12-31T00:00:00Z"}`), 0o644)
		out := filepath.Join(dir, "cost-report.json")
		var stdout, stderr strings.Builder
		if code := run(context.Background(), []string{"-simulate", "-marks", marks, "-out", out}, func(string) string { return "" }, &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s%s", code, stdout.String(), stderr.String())
		}
		var rep cost.Report
		data, _ := os.ReadFile(out)
		json.Unmarshal(data, &rep)
		if len(rep.Stages) < 3 || rep.Stages[1].Seconds == nil || rep.Stages[2].Seconds == nil {
			t.Errorf("with marks the setup and execution stages are known: %+v", rep.Stages)
		}
		bad := filepath.Join(dir, "bad.json")
		os.WriteFile(bad, []byte("{"), 0o644)
		for _, args := range [][]string{{"-simulate", "-marks", bad}, {"-simulate", "-provision", filepath.Join(dir, "missing.json")}} {
			stdout.Reset()
			stderr.Reset()
			if code := run(context.Background(), args, func(string) string { return "" }, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "cleanup: ") {
				t.Errorf("%v: exit %d: %s", args, code, stderr.String())
			}
		}
	})
}

// Seed 001: cleanup "reports its paid window by stage". In a workflow run
// without a marks file, the marks are GitHub's own timestamps for the GPU
// job and its test step, read after the confirmed deletion; so each stage
// is known and they add up to the paid window.
func TestCleanupReadsTheStageMarksFromTheRunsJobs(t *testing.T) {
	var jobsCalls int
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v3/repos/o/r/actions/runs/42/attempts/2/jobs", func(w http.ResponseWriter, r *http.Request) {
		jobsCalls++
		fmt.Fprint(w, `{"total_count":2,"jobs":[{"name":"execute / start-runpod","status":"completed","started_at":"2000-01-01T00:00:00Z"},
			{"name":"execute / Run GPU tests","status":"completed","conclusion":"success","started_at":"2000-01-01T00:02:00Z","steps":[
			{"name":"Run CUDA tests from archive","status":"completed","started_at":"2000-01-01T00:04:00Z","completed_at":"2000-01-01T00:09:00Z"}]}]}`)
	})
	gh := httptest.NewServer(mux)
	defer gh.Close()
	synctest.Test(t, func(t *testing.T) {
		fake, api := useFakeRunPod(t)
		pod := createPod(t, api, "gpugate-42-2-c1") // started 20 s after its creation
		faketime.Advance(11 * time.Minute)
		dir := t.TempDir()
		out := filepath.Join(dir, "cost-report.json")
		env := map[string]string{"RUNPOD_API_KEY": "rpa_x", "GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": filepath.Join(dir, "out"), "GITHUB_STEP_SUMMARY": filepath.Join(dir, "summary"),
			"GITHUB_REPOSITORY": "o/r", "GITHUB_RUN_ID": "42", "GITHUB_RUN_ATTEMPT": "2", "GITHUB_TOKEN": "ghs_cleanup_test", "GITHUB_API_URL": gh.URL + "/"}
		var stdout, stderr strings.Builder
		if code := run(context.Background(), []string{"-pod", pod.ID, "-out", out}, func(k string) string { return env[k] }, &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s%s", code, stdout.String(), stderr.String())
		}
		// The bubble ends only when its goroutines do: close the loopback
		// connection the GitHub client keeps alive.
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
		if jobsCalls != 1 || len(fake.Running()) != 0 {
			t.Fatalf("jobs read %d time(s), running %v", jobsCalls, fake.Running())
		}
		var rep cost.Report
		data, _ := os.ReadFile(out)
		if err := json.Unmarshal(data, &rep); err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, s := range rep.Stages {
			if s.Seconds == nil {
				t.Errorf("stage %s unknown: %+v", s.Name, rep.Stages)
				continue
			}
			got[s.Name] = *s.Seconds
		}
		// Created at 00:00:00 and started at 00:00:20 (the fake's startedAt);
		// the job at 00:02, the tests 00:04 to 00:09; deleted at 00:11.
		want := map[string]float64{cost.StageStartup: 100, cost.StageSetup: 120, cost.StageExecution: 300, cost.StageCleanup: 120, cost.StageUnassigned: 0}
		for name, sec := range want {
			if got[name] != sec {
				t.Errorf("stage %s = %v s, want %v (stages %v)", name, got[name], sec, got)
			}
		}

		// A run whose jobs cannot be read still deletes and reports; its
		// stages are unknown, with a warning.
		pod2 := createPod(t, api, "gpugate-43-1-c1")
		faketime.Advance(time.Minute)
		env["GITHUB_RUN_ID"] = "43"
		stdout.Reset()
		code := run(context.Background(), []string{"-pod", pod2.ID, "-out", out}, func(k string) string { return env[k] }, &stdout, &stderr)
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
		if code != 0 || !strings.Contains(stdout.String(), "::warning::cleanup: stage marks unread") || len(fake.Running()) != 0 {
			t.Errorf("exit %d: %s", code, stdout.String())
		}
		data, _ = os.ReadFile(out)
		rep = cost.Report{}
		json.Unmarshal(data, &rep)
		if len(rep.Stages) == 0 || rep.Stages[0].Seconds != nil || !rep.Window.Known {
			t.Errorf("unread marks: want unknown stages in a known window: %+v", rep)
		}
	})
}

// A pod known only by its name (its create's response was lost while the
// listing failed) is resolved by listing before cleanup claims anything:
// while the listing fails the step fails naming the pod, and once it
// works the pod is found and deleted.
func TestCleanup_APodKnownOnlyByNameIsResolvedBeforeAnyClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake, api := useFakeRunPod(t)
		lost := createPod(t, api, "gpugate-9-1-c1")
		dir := t.TempDir()
		result, _ := json.Marshal(runpod.Result{UnresolvedPodNames: []string{lost.Name}, Attempts: []runpod.Attempt{
			{N: 1, Name: lost.Name, Candidate: runpod.Candidate{GPUTypeID: "NVIDIA L4"}, Outcome: runpod.OutcomeCreateError},
		}})
		provFile := filepath.Join(dir, "provision.json")
		os.WriteFile(provFile, result, 0o644)
		env := map[string]string{"RUNPOD_API_KEY": "rpa_x", "GITHUB_OUTPUT": filepath.Join(dir, "out"), "GITHUB_STEP_SUMMARY": filepath.Join(dir, "summary")}
		args := []string{"-provision", provFile, "-out", filepath.Join(dir, "cost-report.json")}

		fake.AddFault(runpodtest.Fault{Method: "GET", Path: "/v2/pods", Status: 503, Times: 1000})
		var stdout, stderr strings.Builder
		if code := run(context.Background(), args, func(k string) string { return env[k] }, &stdout, &stderr); code != 1 {
			t.Fatalf("exit %d while the pod could not be listed: %s%s", code, stdout.String(), stderr.String())
		}
		if !strings.Contains(stderr.String(), lost.Name) || strings.Contains(stdout.String(), "(confirmed)") {
			t.Errorf("the failure must name %s and confirm nothing:\n%s%s", lost.Name, stdout.String(), stderr.String())
		}
		if got := fake.Running(); len(got) != 1 {
			t.Fatalf("running %v", got)
		}

		fake.ClearFaults()
		stdout.Reset()
		stderr.Reset()
		if code := run(context.Background(), args, func(k string) string { return env[k] }, &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s%s", code, stdout.String(), stderr.String())
		}
		if got := fake.Running(); len(got) != 0 {
			t.Errorf("still running after the resolution: %v", got)
		}
	})
}

// Cleanup's pre-delete read failing is a warning, and the cost falls back
// to the record provisioning saved at startup, so the paid window is still
// known.
func TestCleanup_AFailedPreDeleteReadWarnsAndUsesTheStartupSnapshot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake, api := useFakeRunPod(t)
		pod := createPod(t, api, "gpugate-9-1-c1")
		// What provisioning saved when it accepted the pod: started five
		// minutes ago at the pod's price.
		started := time.Now().Add(-5 * time.Minute)
		snap := *pod
		snap.StartedAt, snap.Status = &started, rest.StatusRunning
		dir := t.TempDir()
		result, _ := json.Marshal(runpod.Result{PodID: pod.ID, Snapshot: &snap})
		provFile := filepath.Join(dir, "provision.json")
		os.WriteFile(provFile, result, 0o644)
		out := filepath.Join(dir, "cost-report.json")
		env := map[string]string{"RUNPOD_API_KEY": "rpa_x", "GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": filepath.Join(dir, "out"), "GITHUB_STEP_SUMMARY": filepath.Join(dir, "summary")}
		fake.AddFault(runpodtest.Fault{Method: "GET", Path: "/v2/pods/" + pod.ID, Status: 503, Times: 1000})
		var stdout, stderr strings.Builder
		if code := run(context.Background(), []string{"-provision", provFile, "-out", out}, func(k string) string { return env[k] }, &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s%s", code, stdout.String(), stderr.String())
		}
		if !strings.Contains(stdout.String(), "::warning::") {
			t.Errorf("no warning for the failed read:\n%s", stdout.String())
		}
		var rep cost.Report
		data, _ := os.ReadFile(out)
		if err := json.Unmarshal(data, &rep); err != nil || !rep.Window.CostKnown() || rep.Window.HourlyPrice != snap.Cost {
			t.Errorf("report window %+v (%v); want it known from the startup snapshot at $%.2f/h", rep.Window, err, snap.Cost)
		}
		if len(fake.Running()) != 0 {
			t.Errorf("running %v", fake.Running())
		}
	})
}

// A name passed as -pod (the runner label the summary shows) is never
// "confirmed deleted" by the 404 a DELETE of it answers: the pod of that
// name is found by listing and deleted.
func TestCleanup_ANameIsNeverConfirmedDeleted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake, api := useFakeRunPod(t)
		pod := createPod(t, api, "gpugate-9-1-c1")
		dir := t.TempDir()
		env := map[string]string{"RUNPOD_API_KEY": "rpa_x", "GITHUB_OUTPUT": filepath.Join(dir, "out"), "GITHUB_STEP_SUMMARY": filepath.Join(dir, "summary")}
		var stdout, stderr strings.Builder
		code := run(context.Background(), []string{"-pod", pod.Name, "-out", filepath.Join(dir, "c.json")}, func(k string) string { return env[k] }, &stdout, &stderr)
		if code != 0 || len(fake.Running()) != 0 {
			t.Fatalf("exit %d, running %v: the pod named %s must be found and deleted\n%s%s", code, fake.Running(), pod.Name, stdout.String(), stderr.String())
		}
		fake.AddFault(runpodtest.Fault{Method: "GET", Path: "/v2/pods", Status: 503, Times: 1000})
		other := createPod(t, api, "gpugate-9-1-c2")
		stdout.Reset()
		stderr.Reset()
		code = run(context.Background(), []string{"-pod", other.Name, "-out", filepath.Join(dir, "c2.json")}, func(k string) string { return env[k] }, &stdout, &stderr)
		if code != 1 || !strings.Contains(stderr.String()+stdout.String(), other.Name) || len(fake.Running()) != 1 {
			t.Errorf("while the listing fails: exit %d, running %v; want a failure naming %s\n%s%s", code, fake.Running(), other.Name, stdout.String(), stderr.String())
		}
	})
}
