package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/gpugate/gpugate/runpod"
)

// The simulation runs on the fake's clock: inside a synctest bubble its
// seconds pass instantly.
func TestSimulateRunsTheBundledScenario(t *testing.T) {
	synctest.Test(t, testSimulate)
}

func testSimulate(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"GITHUB_OUTPUT": filepath.Join(dir, "out"), "GITHUB_STEP_SUMMARY": filepath.Join(dir, "sum")}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"-simulate"}, func(k string) string { return env[k] }, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"no-capacity", "exited", "accepted: pod", "deleted pod", "1 answered 429", "pods left running: 0"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	got, _ := os.ReadFile(env["GITHUB_OUTPUT"])
	if !strings.Contains(string(got), "runner_label=gpugate-1-1-c3\n") || !strings.Contains(string(got), "gpu=NVIDIA RTX 6000 Ada Generation\n") {
		t.Errorf("GITHUB_OUTPUT:\n%s", got)
	}
	if sum, _ := os.ReadFile(env["GITHUB_STEP_SUMMARY"]); !strings.Contains(string(sum), "**Accepted:**") {
		t.Errorf("summary:\n%s", sum)
	}
}

func TestSimulateJSON(t *testing.T) {
	synctest.Test(t, testSimulateJSON)
}

func testSimulateJSON(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"-simulate", "-json"}, func(string) string { return "" }, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var res runpod.Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || res.PodID == "" || len(res.Attempts) != 3 {
		t.Errorf("-json printed %q (%v)", out.String(), err)
	}
}

func TestRealModeNeedsCredentials(t *testing.T) {
	env := map[string]string{"GITHUB_ACTIONS": "true"}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), nil, func(k string) string { return env[k] }, &out, &errOut); code != 1 || !strings.Contains(out.String(), "::error::provision: RUNPOD_API_KEY is not set") {
		t.Errorf("exit %d, stdout %q", code, out.String())
	}
	env["RUNPOD_API_KEY"] = "k"
	out.Reset()
	if code := run(context.Background(), nil, func(k string) string { return env[k] }, &out, &errOut); code != 1 || !strings.Contains(out.String(), "GITHUB_TOKEN") {
		t.Errorf("exit %d, stdout %q", code, out.String())
	}
}
