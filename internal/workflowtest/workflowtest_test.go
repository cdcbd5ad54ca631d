package workflowtest

import "testing"

func TestReadTheAdoptionWorkflows(t *testing.T) {
	for _, name := range []string{"ci.yml", "runpod-gpu-test.yml", "runpod-gpu-execute.yml", "runpod-reap.yml", "ci-cache-publish.yml", "cuda-chain-build.yml", "cuda-build-link.yml", "cuda-sharded-build.yml"} {
		if wf := Read(t, name); len(wf.Jobs) == 0 {
			t.Errorf("%s: no jobs read", name)
		}
	}
	gate := Read(t, "runpod-gpu-test.yml")
	if !gate.Jobs["publish-gate"].NeedsJob("execute") || gate.Jobs["cuda-archive"].NeedsJob("execute") || !gate.Jobs["cuda-archive"].NeedsJob("gate") {
		t.Error("NeedsJob reads neither a list nor a single name")
	}
}
