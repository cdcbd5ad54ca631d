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
test -d "$RUNNER_TEMP"
exit 3`}
	os.MkdirAll(filepath.Join(r.Workspace, "sub"), 0o755)
	res := r.Run(t, s, map[string]string{"CELL": "natten"})
	if res.Code != 3 || res.Output("here") != "sub" || res.Output("cell") != "natten" || res.Summary != "### natten\n" {
		t.Errorf("%+v", res)
	}
	// pipefail: a failing stage fails the step, as on a hosted runner.
	if res := r.Run(t, Step{Name: "pipe", Run: "false | true\necho reached"}, nil); res.Code != 1 || strings.Contains(res.Out, "reached") {
		t.Errorf("%+v", res)
	}
}
