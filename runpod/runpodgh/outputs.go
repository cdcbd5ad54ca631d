package runpodgh

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/gpugate/gpugate/runpod"
)

// ProvisionOutputs are what a provisioning step hands the jobs after it
// through GitHub Actions, as step outputs in order: for an accepted pod
// pod_id, runner_label (the label the GPU job runs on), gpu, tier and
// gpu_cost_per_hr; and whenever an attempt was made provision_result, the
// whole result as JSON, from which cleanup reports what the rejected
// candidates cost and deletes a pod whose deletion was not confirmed, even
// when no pod was accepted.
func ProvisionOutputs(res runpod.Result) ([][2]string, error) {
	var out [][2]string
	if res.PodID != "" {
		out = append(out,
			[2]string{"pod_id", res.PodID}, [2]string{"runner_label", res.Label},
			[2]string{"gpu", res.GPUTypeID}, [2]string{"tier", res.Tier},
			[2]string{"gpu_cost_per_hr", strconv.FormatFloat(res.HourlyPrice, 'f', -1, 64)})
	}
	if len(res.Attempts) > 0 {
		data, err := json.Marshal(res)
		if err != nil {
			return nil, fmt.Errorf("runpodgh: the provision result: %w", err)
		}
		out = append(out, [2]string{"provision_result", string(data)})
	}
	return out, nil
}
