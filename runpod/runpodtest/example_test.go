package runpodtest_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpugate/gpugate/internal/faketime"
	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/rest"
	"github.com/gpugate/gpugate/runpod/runpodtest"
)

// Example shows a test asserting what was paid and that nothing is left
// running. Inside testing/synctest the hour below passes instantly.
func Example() {
	synctest.Test(&testing.T{}, func(t *testing.T) {
		srv := runpodtest.New()
		srv.AddFault(runpodtest.Fault{Method: "POST", Path: "/v2/pods", Status: 429, RetryAfter: "5"})
		c, _ := srv.NewClient()
		ctx := context.Background()
		pod, err := c.CreatePod(ctx, rest.CreatePodRequest{Name: "gate-c1", Image: "img", GPU: rest.GPURequest{ID: "NVIDIA A100-SXM4-80GB", Count: 1}})
		if err != nil {
			panic(err)
		}
		faketime.Advance(time.Hour + time.Minute) // 20 s provisioning, then billed from the container start
		runpod.Delete(ctx, c, pod.ID)
		l := srv.Ledger()[0]
		fmt.Printf("requests: %d POST, running: %d\n", srv.Count("POST", "/v2/pods"), len(srv.Running()))
		fmt.Printf("billed %.0f s, USD %.4f\n", l.BilledSeconds(time.Now()), l.Cost(time.Now()))
	})
	// Output:
	// requests: 2 POST, running: 0
	// billed 3640 s, USD 1.5066
}
