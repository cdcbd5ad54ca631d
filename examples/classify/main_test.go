package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
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

// -example classifies the bundled example; with no change named, classify
// refuses (exit 2) instead of classifying the example silently.
func TestExampleClassifiesTheBundledExampleAndNoChangeIsRefused(t *testing.T) {
	if code, out, errOut := runMain(t, nil, ""); code != 2 || out != "" || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Errorf("no change named: exit %d, stdout %q, stderr %q; want 2 and one line", code, out, errOut)
	}
	code, out, errOut := runMain(t, nil, "", "-example")
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
	code, out, errOut := runMain(t, env, "M\tsrc/lib.rs\n", "-policy", examplePolicy, "-changes", "-", "-json")
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
		"bad change":     {"-policy", examplePolicy, "-changes", "-"},
		"missing policy": {"-policy", "/nonexistent/policy.yml", "-example"},
		"pr no token":    {"-policy", examplePolicy, "-pr", "3", "-repo", "o/r"},
	}
	for name, args := range tests {
		t.Run(name, func(t *testing.T) {
			code, out, _ := runMain(t, map[string]string{"GITHUB_ACTIONS": "true"}, "M\t/etc/passwd\n", args...)
			if code != 1 || !strings.HasPrefix(out, "::error::") {
				t.Errorf("exit %d, stdout %q; want exit 1 and an ::error:: annotation", code, out)
			}
		})
	}
	// A command line that cannot name one change is refused: exit 2, one
	// line on stderr, no annotation.
	for name, args := range map[string][]string{
		"stray":            {"stray"},
		"two sources":      {"-changes", "-", "-pr", "3"},
		"pr no repo":       {"-pr", "3"},
		"pr bad repo":      {"-pr", "3", "-repo", "nope"},
		"example and pr":   {"-example", "-pr", "3", "-repo", "o/r"},
		"globs and a diff": {"-check-globs", "-base", "main"},
	} {
		code, out, errOut := runMain(t, map[string]string{"GITHUB_ACTIONS": "true"}, "", args...)
		if code != 2 || out != "" || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want 2 and one line on stderr", name, code, out, errOut)
		}
	}
}

// -check-globs names every fail-open glob that matches no file git tracks,
// and passes once the glob is fixed.
func TestCheckGlobsFailsOnAMisspeltDeviceControlGlob(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	git := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	policy := func(deviceControl string) string {
		return "ci: [\"scripts/ci/**\", \".github/**\"]\ngpu:\n  device_control: [\"" + deviceControl + "\"]\njobs:\n  - {name: \"CI GPU gate\", runs_for: [gpu]}\n"
	}
	os.MkdirAll(filepath.Join(dir, "scripts/ci"), 0o755)
	os.MkdirAll(filepath.Join(dir, ".github/gpugate"), 0o755)
	os.WriteFile(filepath.Join(dir, "scripts/ci/runpod_provision.py"), []byte("x\n"), 0o644)
	pol := filepath.Join(dir, ".github/gpugate/policy.yml")
	os.WriteFile(pol, []byte(policy("scripts/ci/runpod_provison.py")), 0o644)
	git("init", "-q")
	git("add", ".")
	env := map[string]string{"GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": filepath.Join(t.TempDir(), "out")}
	code, out, _ := runMain(t, env, "", "-policy", pol, "-dir", dir, "-check-globs")
	if code != 1 || !strings.Contains(out, `gpu.device_control: "scripts/ci/runpod_provison.py" matches no tracked file`) || !strings.Contains(out, "::error::") {
		t.Errorf("a misspelt glob: exit %d:\n%s", code, out)
	}
	if got, _ := os.ReadFile(env["GITHUB_OUTPUT"]); string(got) != "unmatched=1\n" {
		t.Errorf("GITHUB_OUTPUT %q", got)
	}
	os.WriteFile(pol, []byte(policy("scripts/ci/runpod_provision.py")), 0o644)
	if code, out, errOut := runMain(t, nil, "", "-policy", pol, "-dir", dir, "-check-globs"); code != 0 || !strings.Contains(out, "matches at least one of the 2 tracked files") {
		t.Errorf("the fixed glob: exit %d: %s%s", code, out, errOut)
	}
	if code, _, _ := runMain(t, nil, "", "-policy", pol, "-dir", dir, "-check-globs", "-changes", "-"); code != 2 {
		t.Errorf("-check-globs with -changes: exit %d, want 2", code)
	}
}

// A policy whose gpu lists reach outside ci, or whose glob paths-filter
// reads differently, is refused before anything is classified or checked:
// both the classify run and -check-globs fail with an ::error:: annotation,
// and a hosted-only glob never turns a code change into a ci-only one.
func TestARefusedPolicyFailsClassifyAndCheckGlobs(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	cmd := exec.Command("git", "init", "-q")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	for name, policy := range map[string]string{
		"hosted_only outside ci": "ci: [\"scripts/ci/**\"]\ngpu:\n  hosted_only: [\"**/cost*\"]\n",
		"extglob":                "docs: [\"docs/@(a|b).md\"]\n",
		"exclusions only":        "docs: [\"!**/*.md\"]\n",
	} {
		t.Run(name, func(t *testing.T) {
			pol := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".yml")
			if err := os.WriteFile(pol, []byte(policy), 0o644); err != nil {
				t.Fatal(err)
			}
			env := map[string]string{"GITHUB_ACTIONS": "true"}
			for _, args := range [][]string{{"-policy", pol, "-changes", "-"}, {"-policy", pol, "-check-globs", "-dir", dir}} {
				code, out, _ := runMain(t, env, "M\tsrc/cost.rs\n", args...)
				if code != 1 || !strings.HasPrefix(out, "::error::") {
					t.Errorf("%v: exit %d, stdout %q; want exit 1 and an ::error:: annotation", args, code, out)
				}
			}
		})
	}
}

// examplePolicy is the shipped example policy, which -policy names.
const examplePolicy = "../../changepolicy/example_policy.yml"
