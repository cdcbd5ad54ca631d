//go:build linux

package smoke_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpugate/gpugate/smoke"
)

// The real NVIDIA libraries without a GPU: what a machine with no device
// can prove about the purego bindings. GPUGATE_REAL_NVRTC_LIBDIR names a
// directory holding a real libnvrtc.so* (and its builtins); with
// GPUGATE_REAL_DRIVER_WITHOUT_GPU=1 a real libcuda.so.1 must also be on the
// loader's path, on a machine with no NVIDIA device. scripts/real-libs-check.sh
// fetches both from Debian's non-free archive and runs these tests.

func realNVRTCDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("GPUGATE_REAL_NVRTC_LIBDIR")
	if dir == "" {
		t.Skip("set GPUGATE_REAL_NVRTC_LIBDIR to a directory with a real libnvrtc (scripts/real-libs-check.sh)")
	}
	return dir
}

// Seed: "NVRTC compilation of a tiny kernel for the device's compute
// capability", through a real libnvrtc: the proof's kernel compiles for
// every architecture the tiers serve, a compile error carries NVRTC's own
// log, and an architecture NVRTC does not know is its named error.
func TestRealLibraries_NVRTCCompilesTheProofKernelWithoutAGPU(t *testing.T) {
	nvrtc, err := smoke.OpenNVRTC(realNVRTCDir(t))
	if err != nil {
		t.Fatal(err)
	}
	v, err := nvrtc.NVRTCVersion()
	if err != nil || v.Major < 11 {
		t.Fatalf("NVRTC version %v, %v", v, err)
	}
	for _, arch := range []string{"compute_75", "compute_80", "compute_86", "compute_90"} {
		text, err := smoke.CheckCompile(nvrtc, arch)
		if err != nil || !strings.Contains(text, arch) {
			t.Errorf("%s: %q, %v", arch, text, err)
		}
	}
	var ce *smoke.CUDAError
	_, err = nvrtc.Compile(`extern "C" __global__ void broken(float *x) { x[0] = gpugate_undefined; }`, "broken.cu", "compute_90")
	if !errors.As(err, &ce) || ce.Name() != "NVRTC_ERROR_COMPILATION" || !strings.Contains(ce.Log, "gpugate_undefined") {
		t.Errorf("a broken kernel: %v (log %q)", err, logOf(ce))
	}
	_, err = nvrtc.Compile(smoke.KernelSource, "gpugate_add.cu", "compute_9")
	if !errors.As(err, &ce) || ce.Name() != "NVRTC_ERROR_INVALID_OPTION" {
		t.Errorf("an unknown architecture: %v", err)
	}
	t.Logf("NVRTC %s compiled the proof kernel for compute_75 to compute_90", v)
}

func logOf(e *smoke.CUDAError) string {
	if e == nil {
		return ""
	}
	return e.Log
}

// noDevice is the outside world of a machine with the real driver library
// but no NVIDIA device: nvidia-smi's answer is canned, the tier's package
// "installs" as the already unpacked NVRTC, and the CUDA backend is the
// real purego one.
type noDevice struct{ deb []byte }

func (noDevice) NvidiaSMI(context.Context) ([]byte, []byte, error) {
	return []byte("NVIDIA L4, 535.261.03, 23034, 8.9\n"),
		[]byte("| NVIDIA-SMI 535.261.03   Driver Version: 535.261.03   CUDA Version: 12.2 |\n"), nil
}

func (e noDevice) Download(_ context.Context, _, dst string) error {
	return os.WriteFile(dst, e.deb, 0o644)
}

func (noDevice) Install(context.Context, string) error { return nil }

func (noDevice) CUDA(ctx context.Context, t smoke.Tier) (smoke.CUDA, error) {
	return smoke.RealEnv{}.CUDA(ctx, t)
}

// Seed: "On failure it exits nonzero, the container stops, and the pod
// never becomes a runner": with the real driver library and no device,
// every driver symbol the proof binds resolves, and the proof fails at the
// compile step (where it opens the driver) with the driver's own error
// name, never a pass.
func TestRealLibraries_ADriverWithoutADeviceFailsTheProofByName(t *testing.T) {
	dir := realNVRTCDir(t)
	if os.Getenv("GPUGATE_REAL_DRIVER_WITHOUT_GPU") != "1" {
		t.Skip("set GPUGATE_REAL_DRIVER_WITHOUT_GPU=1 with a real libcuda.so.1 on the loader path and no NVIDIA device")
	}
	deb := []byte("stands in for the tier's package")
	sum := sha256.Sum256(deb)
	cfg := smoke.Config{
		Tiers: []smoke.Tier{{Name: "debian", CUDA: "11.8", Package: "libnvrtc11.2", Version: "11.8.89",
			URL:    "https://deb.debian.org/debian/pool/non-free/n/nvidia-cuda-toolkit/libnvrtc11.2_11.8.89_amd64.deb",
			SHA256: hex.EncodeToString(sum[:]), LibDir: dir}},
		MinVRAMGB: 16,
		Env:       noDevice{deb: deb},
		WorkDir:   t.TempDir(),
	}
	res, err := smoke.Run(context.Background(), cfg)
	var se *smoke.StepError
	var ce *smoke.CUDAError
	if !errors.As(err, &se) || se.Step != smoke.StepCompile || !errors.As(err, &ce) || ce.Call != "cuInit" {
		t.Fatalf("err = %v, want the compile step failing in cuInit", err)
	}
	switch ce.Name() {
	case "CUDA_ERROR_NO_DEVICE", "CUDA_ERROR_UNKNOWN", "CUDA_ERROR_OPERATING_SYSTEM":
	default:
		t.Errorf("cuInit without a device failed with %s, not a known no-device answer", ce.Name())
	}
	if n := len(res.Steps); n == 0 || res.Steps[n-1].Step != smoke.StepCompile || res.Steps[n-1].Error == "" {
		t.Errorf("steps %+v: the last must be the failed compile step", res.Steps)
	}
	t.Logf("%v", err)
}

// The change-aware seed: hosted preparation "verifies the JIT headers with
// real NVRTC". With NVIDIA's own headers (GPUGATE_REAL_CUDA_INCLUDE, from
// Debian's nvidia-cuda-dev: scripts/real-libs-check.sh --headers), the
// runtime tree's header check compiles them with the real NVRTC, and a
// header the tree lacks fails with NVRTC's log naming it.
func TestRealLibraries_TheJITHeaderCheckCompilesNVIDIAsHeaders(t *testing.T) {
	include := os.Getenv("GPUGATE_REAL_CUDA_INCLUDE")
	if include == "" {
		t.Skip("set GPUGATE_REAL_CUDA_INCLUDE to a CUDA include directory (scripts/real-libs-check.sh --headers)")
	}
	nvrtc, err := smoke.OpenNVRTC(realNVRTCDir(t))
	if err != nil {
		t.Fatal(err)
	}
	headers := []string{"cuda_fp16.h", "cuda_bf16.h", "cuComplex.h"}
	// CCCL, where the headers carry it: include/cuda/std up to CUDA 12,
	// include/cccl/cuda/std from CUDA 13.
	for _, dir := range []string{filepath.Join(include, "cuda", "std"), filepath.Join(include, "cccl", "cuda", "std")} {
		if _, err := os.Stat(filepath.Join(dir, "complex")); err == nil {
			headers = append(headers, "cuda/std/complex")
			break
		}
	}
	text, err := smoke.CheckHeaders(nvrtc, "compute_90", include, headers)
	if err != nil || !strings.Contains(text, "compiled "+strings.Join(headers, ", ")) {
		t.Fatalf("%q, %v", text, err)
	}
	_, err = smoke.CheckHeaders(nvrtc, "compute_90", include, []string{"cuda_fp16.h", "gpugate/not-in-the-tree.h"})
	var ce *smoke.CUDAError
	if !errors.Is(err, smoke.ErrToolkit) || !errors.As(err, &ce) || !strings.Contains(ce.Log, "gpugate/not-in-the-tree.h") {
		t.Errorf("a header the tree lacks: %v", err)
	}
	t.Log(text)
}

// scripts/real-libs-check.sh says what it cannot do before it fetches
// anything: an unknown argument, and a machine without apt.
func TestRealLibsCheckRefusesWhatItCannotDo(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip(err)
	}
	script := filepath.Join("..", "scripts", "real-libs-check.sh")
	for name, tc := range map[string]struct {
		args []string
		path string
		want string
	}{
		"an unknown argument":      {[]string{"--bogus"}, os.Getenv("PATH"), "usage: real-libs-check.sh [--install] [--headers] | --pack-nvrtc FILE"},
		"a tarball with no name":   {[]string{"--pack-nvrtc"}, os.Getenv("PATH"), "--pack-nvrtc needs the file to write"},
		"no apt-get, packing only": {[]string{"--pack-nvrtc", "nvrtc.tar.gz"}, t.TempDir(), "real-libs-check: needs apt-get"},
		"no apt-get":               {nil, t.TempDir(), "real-libs-check: needs apt-get"},
	} {
		cmd := exec.Command(bash, append([]string{script}, tc.args...)...)
		cmd.Env = []string{"PATH=" + tc.path}
		out, _ := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(out), tc.want) {
			t.Errorf("%s: exit %d, want 2 and %q:\n%s", name, code, tc.want, out)
		}
	}
}
