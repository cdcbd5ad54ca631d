package smoke_test

import (
	"context"
	"os"
	"testing"

	"github.com/gpugate/gpugate/smoke"
	"github.com/gpugate/gpugate/smoke/tiers"
)

// TestRealGPU runs every step on real hardware. It needs a GPU, the driver
// and network access to the tier's package, and runs only with
// GPUGATE_REAL_GPU=1 and GPUGATE_REAL_GPU_TIERS naming a YAML tier table
// with pinned checksums.
func TestRealGPU(t *testing.T) {
	if os.Getenv("GPUGATE_REAL_GPU") != "1" {
		t.Skip("set GPUGATE_REAL_GPU=1 on a GPU host to run the proof for real")
	}
	data, err := os.ReadFile(os.Getenv("GPUGATE_REAL_GPU_TIERS"))
	if err != nil {
		t.Fatalf("GPUGATE_REAL_GPU_TIERS: %v", err)
	}
	cfg, err := tiers.Load(data)
	if err != nil {
		t.Fatal(err)
	}
	cfg.WorkDir = t.TempDir()
	res, err := smoke.Run(context.Background(), cfg)
	for _, s := range res.Steps {
		t.Logf("%-8s %10s %s %s", s.Step, s.Duration, s.Detail, s.Error)
	}
	if err != nil {
		t.Fatal(err)
	}
}
