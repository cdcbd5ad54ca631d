package gate_test

import (
	"testing"

	"github.com/gpugate/gpugate/internal/workflowtest"
)

// The adoption workflow binds the gate to the classified head, and
// publishes a passing kind only with its evidence: authorize receives the
// head the classifier listed the files at, publish receives the same
// head (for not-required) and the GPU test job's result (for paid).
func TestTheAdoptionWorkflowPublishesOnlyForTheClassifiedHeadWithEvidence(t *testing.T) {
	wf := workflowtest.Read(t, "runpod-gpu-test.yml")
	g := wf.Jobs["gate"]
	auth := g.Step(t, "authorize", func(s workflowtest.Step) bool { return s.With["step"] == "authorize" })
	if got, want := auth.With["classified-head"], "${{ steps.classify.outputs.head_sha }}"; got != want {
		t.Errorf("authorize's classified-head is %q, want %q", got, want)
	}
	if got, want := g.Outputs["classified_head"], "${{ steps.classify.outputs.head_sha }}"; got != want {
		t.Errorf("the gate job's classified_head output is %q, want %q", got, want)
	}
	publish := wf.Jobs["publish-gate"].Step(t, "publish", func(s workflowtest.Step) bool { return s.With["step"] == "publish" })
	for input, want := range map[string]string{
		"classified-head": "${{ needs.gate.outputs.classified_head }}",
		"tests-passed":    "${{ needs.execute.outputs.tests_passed }}",
	} {
		if got := publish.With[input]; got != want {
			t.Errorf("publish's %s is %q, want %q", input, got, want)
		}
	}
}
