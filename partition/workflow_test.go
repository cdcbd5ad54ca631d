package partition

import (
	"strings"
	"testing"

	"github.com/gpugate/gpugate/internal/workflowtest"
)

// The change-aware seed: the partition "checks the real nextest inventory
// for exhaustive, disjoint membership before selecting a lane"; hosted
// preparation "executes device-independent tests from the same ...
// archives used on RunPod ... This execution must succeed before
// provisioning"; "The paid node executes only the audited single-GPU
// partition"; and "The single-GPU workflow explicitly reports NOT RUN,
// never PASS". The adoption workflows wire each.
func TestTheAdoptionWorkflowsRunTheAuditedLanesAndReportNotRun(t *testing.T) {
	gate, lifecycle := workflowtest.Read(t, "runpod-gpu-test.yml"), workflowtest.Read(t, "runpod-gpu-execute.yml")
	prep := gate.Jobs["cuda-archive"]
	check, host, gpu, hostRun := -1, "", "", -1
	for i, s := range prep.Steps {
		switch {
		case s.With["step"] == "partition-check":
			check = i
		case s.With["step"] == "partition-select" && s.With["category"] == "host":
			if check < 0 || check > i {
				t.Errorf("the host lane is selected before the inventory is checked")
			}
			host = s.ID
		case s.With["step"] == "partition-select" && s.With["category"] == "single-gpu":
			gpu = s.ID
		case host != "" && s.Env["FILTER"] == "${{ steps."+host+".outputs.filter }}" && strings.Contains(s.Run, `-E "$FILTER"`):
			hostRun = i
		}
	}
	if check < 0 || host == "" || hostRun < 0 || gpu == "" {
		t.Fatalf("cuda-archive: partition-check at %d, host lane %q run at %d, GPU lane %q", check, host, hostRun, gpu)
	}
	if prep.Outputs["gpu_filter"] != "${{ steps."+gpu+".outputs.filter }}" || prep.Outputs["not_run"] != "${{ steps."+gpu+".outputs.not_run }}" {
		t.Errorf("cuda-archive outputs %v", prep.Outputs)
	}
	if got := gate.Jobs["execute"].With["gpu_filter"]; got != "${{ needs.cuda-archive.outputs.gpu_filter }}" {
		t.Errorf("the lifecycle gets gpu_filter %q", got)
	}
	ran := false
	for _, s := range lifecycle.Jobs["gpu-tests"].Steps {
		if s.Name == "Run CUDA tests from archive" {
			ran = s.Env["FILTER"] == "${{ inputs.gpu_filter }}" && strings.Contains(s.Run, `-E "$FILTER"`)
		}
	}
	if !ran {
		t.Error("the pod does not run only the single-GPU lane")
	}
	publish := gate.Jobs["publish-gate"]
	if !publish.NeedsJob("cuda-archive") {
		t.Errorf("publish-gate needs %v: the NOT RUN list comes from cuda-archive", publish.Needs)
	}
	for _, s := range publish.Steps {
		if s.With["step"] == "publish" && s.With["not-run"] != "${{ needs.cuda-archive.outputs.not_run }}" {
			t.Errorf("publish's not-run is %q", s.With["not-run"])
		}
	}
}
