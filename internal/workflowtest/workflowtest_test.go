package workflowtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadTheAdoptionWorkflows(t *testing.T) {
	for _, name := range []string{"ci.yml", "runpod-gpu-test.yml", "runpod-gpu-execute.yml", "runpod-reap.yml", "ci-cache-publish.yml", "cuda-chain-build.yml", "cuda-build-link.yml", "cuda-sharded-build.yml", "runpod-delete-fallback.yml"} {
		if wf := Read(t, name); len(wf.Jobs) == 0 {
			t.Errorf("%s: no jobs read", name)
		}
	}
	gate := Read(t, "runpod-gpu-test.yml")
	if !gate.Jobs["publish-gate"].NeedsJob("execute") || gate.Jobs["cuda-archive"].NeedsJob("execute") || !gate.Jobs["cuda-archive"].NeedsJob("gate") {
		t.Error("NeedsJob reads neither a list nor a single name")
	}
}

func TestRunnerRunsAStepAsAHostedRunnerDoes(t *testing.T) {
	r := NewRunner(t)
	s := Step{Name: "demo", WorkingDirectory: "sub", Run: `echo "here=$(basename "$PWD")" >>"$GITHUB_OUTPUT"
echo "cell=$CELL" >>"$GITHUB_OUTPUT"
echo "### $CELL" >>"$GITHUB_STEP_SUMMARY"
echo "LATER=$CELL" >>"$GITHUB_ENV"
test -d "$RUNNER_TEMP"
exit 3`}
	os.MkdirAll(filepath.Join(r.Workspace, "sub"), 0o755)
	res := r.Run(t, s, map[string]string{"CELL": "natten"})
	if res.Code != 3 || res.Output("here") != "sub" || res.Output("cell") != "natten" || res.Summary != "### natten\n" || res.Env != "LATER=natten\n" {
		t.Errorf("%+v", res)
	}
	// pipefail: a failing stage fails the step, as on a hosted runner.
	if res := r.Run(t, Step{Name: "pipe", Run: "false | true\necho reached"}, nil); res.Code != 1 || strings.Contains(res.Out, "reached") {
		t.Errorf("%+v", res)
	}
}

// The Runner runs scripts with bash -eo pipefail, which GitHub applies only
// under shell: bash (an unspecified shell is bash -e: a failing command
// inside a pipeline passes). Every run step of every adoption workflow
// runs under shell: bash, so what the Runner tests is what runs.
func TestEveryRunStepRunsUnderTheShellTheRunnerTests(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(Dir(), "*.yml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no adoption workflows: %v", err)
	}
	steps := 0
	for _, f := range files {
		wf := Read(t, filepath.Base(f))
		for name, job := range wf.Jobs {
			for i, s := range job.Steps {
				if s.Run == "" {
					continue
				}
				steps++
				shell := s.Shell
				if shell == "" {
					shell = job.Defaults.Run.Shell
				}
				if shell == "" {
					shell = wf.Defaults.Run.Shell
				}
				if shell != "bash" {
					t.Errorf("%s job %s step %d (%q) runs under shell %q: want bash (-eo pipefail), as the tests run it", filepath.Base(f), name, i, s.Name, shell)
				}
			}
		}
	}
	if steps == 0 {
		t.Fatal("no run steps found")
	}
}
