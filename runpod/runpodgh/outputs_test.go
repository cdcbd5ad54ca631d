package runpodgh_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/runpodgh"
)

// A provisioning step hands the GPU job the accepted pod and its runner
// label, and cleanup the whole result: also when no pod was accepted,
// since its rejected candidates were paid for; a step that attempted
// nothing hands nothing.
func TestProvisionOutputs_TheAcceptedPodAndTheWholeResultForCleanup(t *testing.T) {
	attempts := []runpod.Attempt{{N: 1, Name: "g-c1", PodID: "p1", Outcome: runpod.OutcomeExited, EstimatedCost: 0.01}}
	accepted := runpod.Result{PodID: "p2", Label: "g-c2", GPUTypeID: "NVIDIA L4", Tier: "cost-preferred", HourlyPrice: 0.43, Attempts: attempts}
	data, _ := json.Marshal(accepted)
	got, err := runpodgh.ProvisionOutputs(accepted)
	want := [][2]string{{"pod_id", "p2"}, {"runner_label", "g-c2"}, {"gpu", "NVIDIA L4"}, {"tier", "cost-preferred"}, {"gpu_cost_per_hr", "0.43"}, {"provision_result", string(data)}}
	if diff := cmp.Diff(want, got); err != nil || diff != "" {
		t.Errorf("accepted (-want +got):\n%s %v", diff, err)
	}
	none := runpod.Result{Attempts: attempts, RejectedCost: 0.01}
	data, _ = json.Marshal(none)
	got, err = runpodgh.ProvisionOutputs(none)
	if diff := cmp.Diff([][2]string{{"provision_result", string(data)}}, got); err != nil || diff != "" {
		t.Errorf("no pod accepted (-want +got):\n%s %v", diff, err)
	}
	if got, err := runpodgh.ProvisionOutputs(runpod.Result{}); err != nil || len(got) != 0 {
		t.Errorf("nothing attempted: %v, %v", got, err)
	}
}
