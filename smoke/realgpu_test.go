package smoke_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/gpugate/gpugate/smoke"
	"github.com/gpugate/gpugate/smoke/tiers"
)

// TestRealGPU runs every step on real hardware. It needs a GPU, the driver
// and network access to the tier's package, and runs only with
// GPUGATE_REAL_GPU=1 and GPUGATE_REAL_GPU_TIERS naming a YAML tier table
// with pinned checksums.
func TestRealGPU(t *testing.T) {
	tiersFile := os.Getenv("GPUGATE_REAL_GPU_TIERS")
	if os.Getenv("GPUGATE_REAL_GPU") != "1" || tiersFile == "" {
		t.Skip("set GPUGATE_REAL_GPU=1 and GPUGATE_REAL_GPU_TIERS (a pinned tier table) on a GPU host that reaches NVIDIA's repository")
	}
	data, err := os.ReadFile(tiersFile)
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

// TestRealGPU_PreinstalledNVRTC proves the purego backend on a GPU host
// that cannot reach NVIDIA's repository: nvidia-smi, tier selection, then
// NVRTC compilation, a launch with read-back through the driver, and the
// VRAM floor, using the libnvrtc already in GPUGATE_REAL_GPU_NVRTC_LIBDIR
// (the install step is the only one left out). Runs only with
// GPUGATE_REAL_GPU=1.
func TestRealGPU_PreinstalledNVRTC(t *testing.T) {
	smi, cuda := realDevice(t)
	cfg, err := tiers.Load(tiers.Example)
	if err != nil {
		t.Fatal(err)
	}
	tier, err := smoke.SelectTier(smi.CUDAVersion, cfg.Tiers)
	t.Logf("%d GPU(s), %s, driver CUDA %s, compute %s, %d MiB; tier %s (%v)", len(smi.GPUs), smi.GPUs[0].Name, smi.CUDAVersion, smi.GPUs[0].ComputeCap, smi.GPUs[0].MemoryMiB, tier.Name, err)
	if err != nil {
		t.Fatal(err)
	}
	drv, err := cuda.DriverVersion()
	if err != nil {
		t.Fatal(err)
	}
	nv, err := cuda.NVRTCVersion()
	if err != nil {
		t.Fatal(err)
	}
	cc := smi.GPUs[0].ComputeCap
	ptx, err := cuda.Compile(smoke.KernelSource, "gpugate_add.cu", fmt.Sprintf("compute_%d%d", cc.Major, cc.Minor))
	if err != nil {
		t.Fatalf("driver CUDA %s, NVRTC %s: %v", drv, nv, err)
	}
	a, bb := make([]float32, 4096), make([]float32, 4096)
	for i := range a {
		a[i], bb[i] = float32(i), 0.5
	}
	c, err := cuda.Launch(ptx, "gpugate_add", a, bb)
	if err != nil {
		t.Fatal(err)
	}
	for i := range c {
		if c[i] != a[i]+0.5 {
			t.Fatalf("c[%d] = %v, want %v", i, c[i], a[i]+0.5)
		}
	}
	t.Logf("driver CUDA %s, NVRTC %s: %d bytes of PTX, 4096 values verified", drv, nv, len(ptx))
	// The VRAM floor's figure where nvidia-smi has none: on a card that
	// reports its memory.total, the driver's cuDeviceTotalMem is the same
	// memory (within 2%: nvidia-smi may leave out what the driver reserves).
	total, err := cuda.DeviceTotalMem(0)
	if err != nil {
		t.Fatal(err)
	}
	mib := int(total >> 20)
	t.Logf("cuDeviceTotalMem(0) = %d MiB; nvidia-smi memory.total %d MiB (unreported: %v)", mib, smi.GPUs[0].MemoryMiB, smi.GPUs[0].MemoryUnreported)
	if g := smi.GPUs[0]; !g.MemoryUnreported && len(smi.GPUs) == 1 && (mib*100 < g.MemoryMiB*98 || mib*100 > g.MemoryMiB*102) {
		t.Errorf("cuDeviceTotalMem says %d MiB, nvidia-smi %d MiB", mib, g.MemoryMiB)
	}
}

// The rule, "map every CUDA and NVRTC error code to its name", on
// the real driver: a kernel the module lacks is CUDA_ERROR_NOT_FOUND, and
// PTX for an architecture newer than the card fails by a CUDA_ERROR_ name,
// never a bare number. Runs only with GPUGATE_REAL_GPU=1.
func TestRealGPU_ADriverErrorIsNamed(t *testing.T) {
	smi, cuda := realDevice(t)
	cc := smi.GPUs[0].ComputeCap
	ptx, err := cuda.Compile(smoke.KernelSource, "gpugate_add.cu", fmt.Sprintf("compute_%d%d", cc.Major, cc.Minor))
	if err != nil {
		t.Fatal(err)
	}
	one := []float32{1}
	var ce *smoke.CUDAError
	_, err = cuda.Launch(ptx, "gpugate_no_such_kernel", one, one)
	if !errors.As(err, &ce) || ce.Name() != "CUDA_ERROR_NOT_FOUND" || ce.Call != "cuModuleGetFunction" {
		t.Errorf("a kernel the module lacks: %v", err)
	}
	// PTX whose target is newer than the card (compute_100 on compute 9.x
	// and older), where this NVRTC can write it.
	if cc.Major < 10 {
		newer, err := cuda.Compile(smoke.KernelSource, "gpugate_add.cu", "compute_100")
		switch {
		case errors.As(err, &ce):
			t.Logf("this NVRTC cannot target compute_100: %s", ce.Name())
		case err != nil:
			t.Fatal(err)
		default:
			_, err = cuda.Launch(newer, "gpugate_add", one, one)
			if !errors.As(err, &ce) || !strings.HasPrefix(ce.Name(), "CUDA_ERROR_") {
				t.Errorf("PTX for compute_100 on compute %s: %v", cc, err)
			} else {
				t.Logf("PTX for compute_100 on compute %s: %v", cc, err)
			}
		}
	}
}

// realDevice reads this GPU host's nvidia-smi and opens its driver with the
// NVRTC in GPUGATE_REAL_GPU_NVRTC_LIBDIR, closed when the test ends; it
// skips the test unless GPUGATE_REAL_GPU=1.
func realDevice(t *testing.T) (smoke.SMI, smoke.CUDA) {
	t.Helper()
	dir := os.Getenv("GPUGATE_REAL_GPU_NVRTC_LIBDIR")
	if os.Getenv("GPUGATE_REAL_GPU") != "1" || dir == "" {
		t.Skip("set GPUGATE_REAL_GPU=1 and GPUGATE_REAL_GPU_NVRTC_LIBDIR on a GPU host")
	}
	q, b, err := smoke.RealEnv{}.NvidiaSMI(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	smi, err := smoke.ParseNvidiaSMI(q, b)
	if err != nil {
		t.Fatal(err)
	}
	cuda, err := smoke.OpenCUDA(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cuda.Close() })
	return smi, cuda
}
