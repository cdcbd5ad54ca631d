package smoke_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpugate/gpugate/smoke"
	"github.com/gpugate/gpugate/smoke/tiers"
)

func ExampleSelectTier() {
	cfg, _ := tiers.Load(tiers.Example)
	for _, driver := range []string{"13.0", "12.8", "12.7", "12.4"} {
		v, _ := smoke.ParseVersion(driver)
		t, err := smoke.SelectTier(v, cfg.Tiers)
		if err != nil {
			fmt.Printf("driver %s: rejected\n", driver)
			continue
		}
		fmt.Printf("driver %s: %s tier, NVRTC %s\n", driver, t.Name, t.CUDA)
	}
	// Output:
	// driver 13.0: full tier, NVRTC 12.8
	// driver 12.8: full tier, NVRTC 12.8
	// driver 12.7: baseline tier, NVRTC 12.6
	// driver 12.4: rejected
}

// The hosted side renders what each pod's create request carries: the tier
// table and the packed proof in the environment, and the startup command.
func ExampleNewPodStartup() {
	cfg, _ := tiers.Load(tiers.Example)
	// Stands in for the built ./examples/smoke: an x86-64 ELF header.
	proof := append([]byte("\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x3e\x00"), make([]byte, 300<<10)...)
	st, err := smoke.NewPodStartup(cfg, proof, smoke.ScriptParams{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(slices.Sorted(maps.Keys(st.Env)))
	fmt.Println(strings.HasPrefix(st.Command, "bash -c '"), strings.Contains(st.Command, "RUNNER_JIT_CONFIG"))
	// Output:
	// [GPUGATE_PROOF_00 GPUGATE_PROOF_RESULT GPUGATE_PROOF_SHA256 GPUGATE_TIERS NVIDIA_DRIVER_CAPABILITIES]
	// true true
}

// oldToolkit is a restored toolkit whose NVRTC predates the target: it
// compiles, but for sm_52.
type oldToolkit struct{}

func (oldToolkit) NVRTCVersion() (smoke.Version, error) {
	return smoke.Version{Major: 11, Minor: 0}, nil
}
func (oldToolkit) Compile(src, name, arch string) ([]byte, error) {
	return []byte(".version 7.0\n.target sm_52\n.visible .entry gpugate_add(\n"), nil
}

// A cache hit is not evidence: the tree's NVRTC must compile the proof's
// kernel for the target (on a hosted runner, with smoke.OpenNVRTC on the
// tree's library directory; no GPU needed).
func ExampleCheckCompile() {
	_, err := smoke.CheckCompile(oldToolkit{}, "compute_90")
	fmt.Println(err)
	// Output:
	// smoke: the CUDA toolkit cannot compile the proof kernel: NVRTC 11.0's PTX for compute_90 does not target sm_90
}

// treeWithoutCCCL is a runtime tree whose NVRTC cannot find one of the JIT
// headers the kernels include.
type treeWithoutCCCL struct{ oldToolkit }

func (treeWithoutCCCL) CompileIncluding(src, name, arch string, includeDirs []string) ([]byte, error) {
	return nil, &smoke.CUDAError{Call: "nvrtcCompileProgram", Code: 6, NVRTC: true,
		Log: `gpugate_headers.cu(2): catastrophic error: cannot open source file "cuda/std/cstdint"`}
}

// A runtime tree's JIT headers are proven with its own NVRTC: a kernel
// including each must compile with the tree's include directory.
func ExampleCheckHeaders() {
	_, err := smoke.CheckHeaders(treeWithoutCCCL{}, "compute_90", "/opt/gpugate-ci/cuda-runtime-12.8/include", []string{"cuda_fp16.h", "cuda/std/cstdint"})
	var cerr *smoke.CUDAError
	fmt.Println(errors.Is(err, smoke.ErrToolkit), errors.As(err, &cerr) && strings.Contains(cerr.Log, `cannot open source file "cuda/std/cstdint"`))
	// Output:
	// true true
}
