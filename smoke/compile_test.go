package smoke

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeCompiler answers like NVRTC: a PTX module for the requested target,
// or whatever a broken toolkit gives.
type fakeCompiler struct {
	ptx        string // "" : a PTX for the asked architecture
	versionErr error
	compileErr error
	arch       string   // what Compile was asked for
	includes   []string // and CompileIncluding's directories
	src        string
}

func (f *fakeCompiler) NVRTCVersion() (Version, error) { return Version{12, 8}, f.versionErr }

func (f *fakeCompiler) Compile(src, name, arch string) ([]byte, error) {
	f.arch = arch
	if f.compileErr != nil {
		return nil, f.compileErr
	}
	if f.ptx != "" {
		return []byte(f.ptx), nil
	}
	return []byte(".version 8.7\n.target sm_" + strings.TrimPrefix(arch, "compute_") + "\n.address_size 64\n\n.visible .entry gpugate_add(\n)\n{\n\tret;\n}\n\x00"), nil
}

// CompileIncluding makes the fake a HeaderCompiler: it records the
// include directories and "compiles" the headers kernel.
func (f *fakeCompiler) CompileIncluding(src, name, arch string, includeDirs []string) ([]byte, error) {
	f.arch, f.includes, f.src = arch, includeDirs, src
	if f.compileErr != nil {
		return nil, f.compileErr
	}
	if f.ptx != "" {
		return []byte(f.ptx), nil
	}
	return []byte(".target sm_" + strings.TrimPrefix(arch, "compute_") + "\n.visible .entry gpugate_headers(\n)\n\x00"), nil
}

// plainCompiler cannot search include directories: its CompileIncluding,
// of another signature, hides the fake's.
type plainCompiler struct{ fakeCompiler }

func (p *plainCompiler) CompileIncluding() {}

// The change-aware CI seed: hosted preparation "verifies the JIT headers
// with real NVRTC", the runtime trees carrying "CUDA JIT headers
// (including CRT and CCCL)". A kernel including every header must compile
// with the tree's include directory on NVRTC's path.
func TestCheckHeaders_TheRuntimeTreesJITHeadersCompileWithItsNVRTC(t *testing.T) {
	f := &fakeCompiler{}
	text, err := CheckHeaders(f, "compute_90", "/opt/ci/cuda-runtime-12.8/include", []string{"cuda_fp16.h", "cuda/std/cstdint"})
	if err != nil || !strings.Contains(text, "compiled cuda_fp16.h, cuda/std/cstdint from /opt/ci/cuda-runtime-12.8/include for compute_90") {
		t.Fatalf("%q %v", text, err)
	}
	if len(f.includes) != 1 || f.includes[0] != "/opt/ci/cuda-runtime-12.8/include" ||
		!strings.Contains(f.src, "#include <cuda_fp16.h>\n#include <cuda/std/cstdint>\n") || !strings.Contains(f.src, `extern "C" __global__ void gpugate_headers()`) {
		t.Errorf("compiled %q with %v", f.src, f.includes)
	}
	missing := &CUDAError{Call: "nvrtcCompileProgram", Code: 6, NVRTC: true, Log: `gpugate_headers.cu(1): catastrophic error: cannot open source file "cuda/std/cstdint"`}
	for name, tc := range map[string]struct {
		c       Compiler
		headers []string
		wantErr error // wrapped besides ErrToolkit; nil: ErrToolkit alone
		want    string
	}{
		"a header the tree lacks": {&fakeCompiler{compileErr: missing}, []string{"cuda/std/cstdint"}, missing, "cannot open source file"},
		"another target":          {&fakeCompiler{ptx: ".target sm_52\n.visible .entry gpugate_headers(\n"}, []string{"cuda_fp16.h"}, nil, "does not target sm_90"},
		"no headers":              {&fakeCompiler{}, nil, nil, "at least one header"},
		"an absolute header":      {&fakeCompiler{}, []string{"/etc/passwd"}, nil, "want a relative path"},
		"a climbing header":       {&fakeCompiler{}, []string{"../../etc/passwd"}, nil, "want a relative path"},
		"a spliced directive":     {&fakeCompiler{}, []string{"cuda_fp16.h>\n#include <x"}, nil, "want a relative path"},
		"no include search":       {&plainCompiler{}, []string{"cuda_fp16.h"}, nil, "cannot search include directories"},
	} {
		_, err := CheckHeaders(tc.c, "compute_90", "/opt/ci/include", tc.headers)
		// The message says what is wrong with the tree or the headers.
		if !errors.Is(err, ErrToolkit) || tc.wantErr != nil && !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrToolkit wrapping %v, naming %q", name, err, tc.wantErr, tc.want)
		}
	}
}

// The cache-trust seed: "Both restored and newly installed trees must
// compile a small PTX kernel before use/publication, rather than trusting
// a hit message." Only a PTX module for the asked target that defines the
// kernel proves the tree.
func TestCheckCompile_AToolkitTreeMustCompileTheKernelNotTrustACacheHit(t *testing.T) {
	f := &fakeCompiler{}
	text, err := CheckCompile(f, "compute_90a")
	if err != nil || f.arch != "compute_90a" || !strings.Contains(text, "NVRTC 12.8 compiled") || !strings.Contains(text, "for compute_90a") {
		t.Fatalf("a good tree: %q, %v (compiled for %q)", text, err, f.arch)
	}
	nvrtcErr := &CUDAError{Call: "nvrtcCompileProgram", Code: 6, NVRTC: true, Log: "error: unknown architecture"}
	versionErr := errors.New("nvrtcVersion: 1")
	for name, tc := range map[string]struct {
		f       *fakeCompiler
		arch    string
		wantErr error // wrapped besides ErrToolkit (NVRTC's error stays reachable); nil: ErrToolkit alone
		want    string
	}{
		"NVRTC refuses":         {&fakeCompiler{compileErr: nvrtcErr}, "compute_90", nvrtcErr, "NVRTC_ERROR_COMPILATION"},
		"NVRTC unreadable":      {&fakeCompiler{versionErr: versionErr}, "compute_90", versionErr, "nvrtcVersion"},
		"another target":        {&fakeCompiler{ptx: ".target sm_52\n.visible .entry gpugate_add(\n"}, "compute_90", nil, "does not target sm_90"},
		"a target's prefix":     {&fakeCompiler{ptx: ".target sm_900\n.visible .entry gpugate_add(\n"}, "compute_90", nil, "does not target sm_90"},
		"no kernel":             {&fakeCompiler{ptx: ".target sm_90\n"}, "compute_90", nil, "does not define the kernel"},
		"an sm_ architecture":   {&fakeCompiler{}, "sm_90", nil, "is not compute_XY"},
		"a bare number":         {&fakeCompiler{}, "90", nil, "is not compute_XY"},
		"one digit":             {&fakeCompiler{}, "compute_9", nil, "is not compute_XY"},
		"two letters":           {&fakeCompiler{}, "compute_90ab", nil, "is not compute_XY"},
		"an option smuggled in": {&fakeCompiler{}, "compute_90 --dopt=on", nil, "is not compute_XY"},
	} {
		_, err := CheckCompile(tc.f, tc.arch)
		// The message names the call that failed or what is wrong.
		if !errors.Is(err, ErrToolkit) || tc.wantErr != nil && !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want ErrToolkit wrapping %v, naming %q", name, err, tc.wantErr, tc.want)
		}
	}
	// A multi-target directive names the target first.
	if _, err := CheckCompile(&fakeCompiler{ptx: ".target sm_90, texmode_independent\n.visible .entry gpugate_add(\n"}, "compute_90"); err != nil {
		t.Errorf("a target with options: %v", err)
	}
}

// NVRTC through purego, with no driver call: the in-process fake.
func TestOpenNVRTC_CompilesWithoutTheDriver(t *testing.T) {
	d := loadFakeDriver(t)
	c, err := OpenNVRTC(d.dir)
	if err != nil {
		t.Fatal(err)
	}
	if text, err := CheckCompile(c, "compute_89"); err != nil || !strings.Contains(text, "for compute_89") {
		t.Errorf("%q, %v", text, err)
	}
	if n := d.nvrtcLeft(); n != 0 {
		t.Errorf("%d NVRTC programs left behind", n)
	}
	if _, err := OpenNVRTC(t.TempDir()); !errors.Is(err, ErrLibrary) {
		t.Errorf("an empty directory: %v, want ErrLibrary", err)
	}
}

// The same check through the purego bindings, against the C stand-in for
// NVRTC: a header present under the include path compiles, one missing
// fails with NVRTC's log.
func TestOpenNVRTC_ChecksHeadersOnTheIncludePath(t *testing.T) {
	d := loadFakeDriver(t)
	c, err := OpenNVRTC(d.dir)
	if err != nil {
		t.Fatal(err)
	}
	include := t.TempDir()
	os.MkdirAll(filepath.Join(include, "cuda", "std"), 0o755)
	os.WriteFile(filepath.Join(include, "cuda_fp16.h"), []byte("#pragma once\n"), 0o644)
	os.WriteFile(filepath.Join(include, "cuda", "std", "cstdint"), []byte("#pragma once\n"), 0o644)
	if text, err := CheckHeaders(c, "compute_89", include, []string{"cuda_fp16.h", "cuda/std/cstdint"}); err != nil || !strings.Contains(text, "for compute_89") {
		t.Errorf("present headers: %q, %v", text, err)
	}
	_, err = CheckHeaders(c, "compute_89", include, []string{"cuda_fp16.h", "cub/cub.cuh"})
	var cerr *CUDAError
	if !errors.Is(err, ErrToolkit) || !errors.As(err, &cerr) || !strings.Contains(cerr.Log, `cannot open source file "cub/cub.cuh"`) {
		t.Errorf("a missing header: %v", err)
	}
	if n := d.nvrtcLeft(); n != 0 {
		t.Errorf("%d NVRTC programs left behind", n)
	}
}

// CUDA 13 moved CCCL (cuda/std, thrust, cub) to include/cccl, which nvcc
// adds itself and NVRTC does not: on an H200's CUDA 13.0 toolkit,
// cuda/std/complex failed to open with include/ alone. A tree laid out so
// has both directories on the path; one without cccl/ has just its own.
func TestCheckHeaders_CUDA13KeepsCCCLUnderIncludeCCCL(t *testing.T) {
	d := loadFakeDriver(t)
	c, err := OpenNVRTC(d.dir)
	if err != nil {
		t.Fatal(err)
	}
	include := t.TempDir()
	os.MkdirAll(filepath.Join(include, "cccl", "cuda", "std"), 0o755)
	os.WriteFile(filepath.Join(include, "cuda_fp16.h"), []byte("#pragma once\n"), 0o644)
	os.WriteFile(filepath.Join(include, "cccl", "cuda", "std", "complex"), []byte("#pragma once\n"), 0o644)
	text, err := CheckHeaders(c, "compute_90", include, []string{"cuda_fp16.h", "cuda/std/complex"})
	if err != nil || !strings.Contains(text, "from "+include+" and "+filepath.Join(include, "cccl")+" for compute_90") {
		t.Errorf("a CUDA 13 tree: %q, %v", text, err)
	}

	f := &fakeCompiler{}
	if _, err := CheckHeaders(f, "compute_90", include, []string{"cuda_fp16.h"}); err != nil || !slices.Equal(f.includes, []string{include, filepath.Join(include, "cccl")}) {
		t.Errorf("include path %v, %v", f.includes, err)
	}
	os.RemoveAll(filepath.Join(include, "cccl"))
	if _, err := CheckHeaders(f, "compute_90", include, []string{"cuda_fp16.h"}); err != nil || !slices.Equal(f.includes, []string{include}) {
		t.Errorf("a tree without cccl/: include path %v, %v", f.includes, err)
	}
}

// Header names come from a workflow input and are spliced into source:
// an accepted one stays one #include line below the include directory.
func FuzzCheckHeaders(f *testing.F) {
	f.Add("cuda_fp16.h")
	f.Add("cuda/std/cstdint")
	f.Add("../x.h")
	f.Add("a>\n#include <b")
	f.Fuzz(func(t *testing.T, h string) {
		fc := &fakeCompiler{}
		if _, err := CheckHeaders(fc, "compute_90", "/inc", []string{h}); err != nil {
			if !errors.Is(err, ErrToolkit) {
				t.Fatalf("err %v is not ErrToolkit", err)
			}
			return
		}
		if strings.Count(fc.src, "\n") != 2 || strings.HasPrefix(h, "/") || strings.Contains("/"+h+"/", "/../") || !strings.HasPrefix(fc.src, "#include <"+h+">\n") {
			t.Fatalf("accepted header %q as source %q", h, fc.src)
		}
	})
}

func FuzzCheckCompile(f *testing.F) {
	f.Add("compute_90", ".target sm_90\n.visible .entry gpugate_add(\n")
	f.Add("compute_90a", ".target sm_90a, debug\n.visible .entry gpugate_add(\n")
	f.Add("sm_90", "")
	f.Fuzz(func(t *testing.T, arch, ptx string) {
		fc := &fakeCompiler{ptx: ptx}
		if ptx == "" {
			fc.ptx = "\x00"
		}
		text, err := CheckCompile(fc, arch)
		if err != nil {
			if !errors.Is(err, ErrToolkit) {
				t.Fatalf("err %v is not ErrToolkit", err)
			}
			return
		}
		xy := strings.TrimPrefix(arch, "compute_")
		if xy == arch || !strings.Contains(ptx, ".target sm_"+xy) || !strings.Contains(ptx, ".entry gpugate_add(") || !strings.Contains(text, arch) {
			t.Fatalf("accepted arch %q with PTX %q", arch, ptx)
		}
	})
}
