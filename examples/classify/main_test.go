package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpugate/gpugate/changepolicy"
)

func runMain(t *testing.T, env map[string]string, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, func(k string) string { return env[k] }, strings.NewReader(stdin), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestDefaultRunClassifiesTheBundledExample(t *testing.T) {
	code, out, errOut := runMain(t, nil, "")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"class: ci-only (docs: yes, ci: yes, gpu: no)", "no-op CI GPU gate", "run   Documentation [docs]"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestActionsOutputsAndSummary(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"GITHUB_OUTPUT": filepath.Join(dir, "out"), "GITHUB_STEP_SUMMARY": filepath.Join(dir, "sum")}
	code, out, errOut := runMain(t, env, "M\tsrc/lib.rs\n", "-changes", "-", "-json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var d changepolicy.Decision
	if err := json.Unmarshal([]byte(out), &d); err != nil || d.Class != changepolicy.Code {
		t.Fatalf("-json printed %q (%v), want a code decision", out, err)
	}
	got, _ := os.ReadFile(env["GITHUB_OUTPUT"])
	for _, want := range []string{"class=code\n", "docs=true\n", "ci=true\n", "gpu=true\n", `lanes={"macos":true}` + "\n", `jobs=[{"name":"Linux workspace tests","outcome":"run","profile":"full"`} {
		if !strings.Contains(string(got), want) {
			t.Errorf("GITHUB_OUTPUT lacks %q:\n%s", want, got)
		}
	}
	sum, _ := os.ReadFile(env["GITHUB_STEP_SUMMARY"])
	if !strings.Contains(string(sum), "| `src/lib.rs` | unknown | code |") {
		t.Errorf("summary lacks the per-file row:\n%s", sum)
	}
}

func TestFailureIsAnErrorAnnotation(t *testing.T) {
	tests := map[string][]string{
		"bad change":     {"-changes", "-"},
		"two sources":    {"-changes", "-", "-pr", "3"},
		"missing policy": {"-policy", "/nonexistent/policy.yml"},
		"pr no token":    {"-pr", "3", "-repo", "o/r"},
		"pr bad repo":    {"-pr", "3", "-repo", "nope"},
	}
	for name, args := range tests {
		t.Run(name, func(t *testing.T) {
			code, out, _ := runMain(t, map[string]string{"GITHUB_ACTIONS": "true"}, "M\t/etc/passwd\n", args...)
			if code != 1 || !strings.HasPrefix(out, "::error::") {
				t.Errorf("exit %d, stdout %q; want exit 1 and an ::error:: annotation", code, out)
			}
		})
	}
	if code, _, _ := runMain(t, nil, "", "stray"); code != 2 {
		t.Errorf("stray argument: exit %d, want 2", code)
	}
}
