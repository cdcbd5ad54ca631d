package smoke

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/ebitengine/purego"
)

// fakeLibs builds the C stand-ins in testdata/fakecuda (the real symbol
// names and signatures, no GPU) under base: the driver, libcuda.so.1, in
// base/driver, and NVRTC 12.8 in base/nvrtc laid out as the
// cuda-nvrtc-12-8 package installs it (libnvrtc.so.12.8.93 and
// libnvrtc-builtins.so.12.8.93, each with its soname as a link).
func fakeLibs(t *testing.T, base string) fakeLibDirs {
	t.Helper()
	cc := compiler(t)
	dirs := fakeLibDirs{driver: filepath.Join(base, "driver"), nvrtc: filepath.Join(base, "nvrtc")}
	for _, dir := range []string{dirs.driver, dirs.nvrtc} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, lib := range []struct{ dir, file, soname, src, ldflags string }{
		{dirs.driver, "libcuda.so.1", "libcuda.so.1", "libcuda.c", ""},
		{dirs.nvrtc, "libnvrtc.so.12.8.93", "libnvrtc.so.12", "libnvrtc.c", "-ldl"},
		{dirs.nvrtc, "libnvrtc-builtins.so.12.8.93", "libnvrtc-builtins.so.12.8", "libnvrtc-builtins.c", ""},
	} {
		args := []string{"-Wall", "-shared", "-fPIC", "-Wl,-soname," + lib.soname, "-o", filepath.Join(lib.dir, lib.file), filepath.Join("testdata", "fakecuda", lib.src)}
		if lib.ldflags != "" {
			args = append(args, lib.ldflags)
		}
		if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", lib.file, err, out)
		}
		if lib.file != lib.soname {
			if err := os.Symlink(lib.file, filepath.Join(lib.dir, lib.soname)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dirs
}

type fakeLibDirs struct{ driver, nvrtc string }

// compiler returns the C compiler, or skips the test where the fakes cannot
// be built or the backend cannot run.
func compiler(t *testing.T) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the proof's CUDA backend runs on Linux only")
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler to build the fake driver")
	}
	return cc
}

// fakeDriver is the fake libcuda and libnvrtc loaded into this process:
// the proof's OpenCUDA finds the driver by its soname, which the fake
// already loaded carries.
type fakeDriver struct {
	keep                  string // everything built, removed by TestMain
	dir                   string // NVRTC's directory, the tier's lib_dir
	cudaSet, nvrtcSet     func(name string, value int32)
	cudaReset, nvrtcReset func()
	cudaLeft, nvrtcLeft   func() int64
}

// loadFakeDriver loads the fakes once per test binary (the dynamic loader
// never unloads them) and resets their settings after each test.
func loadFakeDriver(t *testing.T) *fakeDriver {
	t.Helper()
	if os.Getenv("GPUGATE_REAL_GPU") == "1" {
		t.Skip("GPUGATE_REAL_GPU=1: the real driver is tested; a fake must not shadow it in this process")
	}
	if loaded == nil {
		// The libraries stay for the life of the process (TestMain
		// removes them). The driver is loaded here by path; OpenCUDA
		// then finds it by its soname. NVRTC's directory stands for the
		// tier's lib_dir, which is not on the loader's search path.
		compiler(t)
		keep, err := os.MkdirTemp("", "gpugate-fakecuda")
		if err != nil {
			t.Fatal(err)
		}
		libs := fakeLibs(t, keep)
		d := &fakeDriver{keep: keep, dir: libs.nvrtc}
		cuda, nvrtc := dlopen(t, filepath.Join(libs.driver, "libcuda.so.1")), dlopen(t, filepath.Join(libs.nvrtc, "libnvrtc.so.12"))
		purego.RegisterLibFunc(&d.cudaSet, cuda, "fake_cuda_set")
		purego.RegisterLibFunc(&d.cudaReset, cuda, "fake_cuda_reset")
		purego.RegisterLibFunc(&d.cudaLeft, cuda, "fake_cuda_outstanding")
		purego.RegisterLibFunc(&d.nvrtcSet, nvrtc, "fake_nvrtc_set")
		purego.RegisterLibFunc(&d.nvrtcReset, nvrtc, "fake_nvrtc_reset")
		purego.RegisterLibFunc(&d.nvrtcLeft, nvrtc, "fake_nvrtc_outstanding")
		loaded = d
	}
	t.Cleanup(func() {
		loaded.cudaReset()
		loaded.nvrtcReset()
	})
	return loaded
}

func dlopen(t *testing.T, lib string) uintptr {
	t.Helper()
	h, err := dlopenFake(lib)
	if err != nil {
		t.Fatalf("load the fake %s: %v", lib, err)
	}
	return h
}

var loaded *fakeDriver

// TestMain removes the fake driver's libraries, which outlive each test.
func TestMain(m *testing.M) {
	code := m.Run()
	if loaded != nil {
		os.RemoveAll(loaded.keep)
	}
	os.Exit(code)
}

// open opens the backend against the fakes and checks, when the test
// ends, that everything it created was released.
func (d *fakeDriver) open(t *testing.T) CUDA {
	t.Helper()
	cuda, err := OpenCUDA(d.dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cuda.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if n, m := d.cudaLeft(), d.nvrtcLeft(); n != 0 || m != 0 {
			t.Errorf("left behind %d driver objects (contexts, modules, allocations) and %d NVRTC programs", n, m)
		}
	})
	return cuda
}

func cudaError(t *testing.T, err error, call, name string) *CUDAError {
	t.Helper()
	var ce *CUDAError
	if !errors.As(err, &ce) || ce.Call != call || ce.Name() != name {
		t.Fatalf("err = %v, want %s from %s", err, name, call)
	}
	return ce
}

// The purego bindings against a dynamically loaded driver with the real
// symbols and C signatures: versions, NVRTC compilation for the device's
// architecture, PTX loaded by the driver, kernel parameters passed by
// pointer, a launch over 16 blocks, read-back, and every driver object
// released.
func TestOpenCUDA_CompilesLoadsLaunchesAndReadsBackThroughTheDriverABI(t *testing.T) {
	cuda := loadFakeDriver(t).open(t)
	drv, err := cuda.DriverVersion()
	if err != nil || drv != (Version{12, 8}) {
		t.Fatalf("DriverVersion = %v, %v", drv, err)
	}
	nv, err := cuda.NVRTCVersion()
	if err != nil || nv != (Version{12, 8}) {
		t.Fatalf("NVRTCVersion = %v, %v", nv, err)
	}
	ptx, err := cuda.Compile(KernelSource, "gpugate_add.cu", "compute_90")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ptx), ".target sm_90") || ptx[len(ptx)-1] != 0 {
		t.Errorf("PTX for compute_90 must target sm_90 and end in NUL:\n%s", ptx)
	}
	a, b := operands(4096)
	c, err := cuda.Launch(ptx, "gpugate_add", a, b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range c {
		if c[i] != a[i]+b[i] {
			t.Fatalf("c[%d] = %v, want %v", i, c[i], a[i]+b[i])
		}
	}
}

// Seed: the proof fails at compilation when NVRTC cannot build the kernel,
// and says why: the error is named and carries NVRTC's log.
func TestOpenCUDA_ACompileFailureCarriesNVRTCsLog(t *testing.T) {
	d := loadFakeDriver(t)
	cuda := d.open(t)
	d.nvrtcSet("nvrtcCompileProgram", 6)
	_, err := cuda.Compile(KernelSource, "gpugate_add.cu", "compute_90")
	ce := cudaError(t, err, "nvrtcCompileProgram", "NVRTC_ERROR_COMPILATION")
	if !strings.Contains(ce.Log, "gpugate_add.cu(1): error: injected failure") || !strings.Contains(err.Error(), ce.Log) {
		t.Errorf("the error must carry the compile log: %v", err)
	}
}

// Seed: compile "for the device's compute capability" with an NVRTC
// "never newer than the driver". The reasons, at the driver's interface:
// PTX from a newer NVRTC, or for a newer architecture than the device's,
// does not load, and the error names why.
func TestOpenCUDA_PTXTheDeviceCannotRunDoesNotLoad(t *testing.T) {
	tests := map[string]struct {
		driver int32
		arch   string
		want   string
	}{
		"NVRTC 12.8 on a 12.6 driver": {12060, "compute_90", "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"},
		"compute_100 on an sm_90 GPU": {12080, "compute_100", "CUDA_ERROR_NO_BINARY_FOR_GPU"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			d := loadFakeDriver(t)
			d.cudaSet("version", tt.driver)
			cuda := d.open(t)
			ptx, err := cuda.Compile(KernelSource, "gpugate_add.cu", tt.arch)
			if err != nil {
				t.Fatal(err)
			}
			a, b := operands(16)
			_, err = cuda.Launch(ptx, "gpugate_add", a, b)
			cudaError(t, err, "cuModuleLoadData", tt.want)
		})
	}
}

// A failed launch or synchronize is named, and the module and device
// memory are released all the same.
func TestOpenCUDA_ALaunchFailureIsNamedAndReleasesEverything(t *testing.T) {
	for _, tt := range []struct {
		call string
		code int32
		name string
	}{
		{"cuLaunchKernel", 719, "CUDA_ERROR_LAUNCH_FAILED"},
		{"cuCtxSynchronize", 700, "CUDA_ERROR_ILLEGAL_ADDRESS"},
		{"cuMemcpyDtoH_v2", 214, "CUDA_ERROR_ECC_UNCORRECTABLE"},
	} {
		t.Run(tt.call, func(t *testing.T) {
			d := loadFakeDriver(t)
			cuda := d.open(t)
			ptx, err := cuda.Compile(KernelSource, "gpugate_add.cu", "compute_90")
			if err != nil {
				t.Fatal(err)
			}
			d.cudaSet(tt.call, tt.code)
			a, b := operands(16)
			_, err = cuda.Launch(ptx, "gpugate_add", a, b)
			cudaError(t, err, strings.TrimSuffix(tt.call, "_v2"), tt.name)
		})
	}
}

// The VRAM floor on a unified-memory device asks the driver: through the
// real symbol and signature (cuDeviceTotalMem_v2, size_t bytes), the
// device's memory in bytes; a device the driver lacks, or a failing call,
// comes back by name.
func TestOpenCUDA_DeviceTotalMemIsTheDriversFigure(t *testing.T) {
	d := loadFakeDriver(t)
	d.cudaSet("totalmem", 124546) // a GB10's unified pool, in MiB
	cuda := d.open(t)
	n, err := cuda.DeviceTotalMem(0)
	if err != nil || n != 124546<<20 {
		t.Errorf("DeviceTotalMem(0) = %d, %v; want %d", n, err, uint64(124546)<<20)
	}
	_, err = cuda.DeviceTotalMem(1)
	cudaError(t, err, "cuDeviceGet", "CUDA_ERROR_INVALID_DEVICE")
	d.cudaSet("cuDeviceTotalMem_v2", 801)
	_, err = cuda.DeviceTotalMem(0)
	cudaError(t, err, "cuDeviceTotalMem", "CUDA_ERROR_NOT_SUPPORTED")
}

// Seed: the driver must be visible. A host whose driver has no usable
// device fails at OpenCUDA with the code's name.
func TestOpenCUDA_NoDeviceIsNamed(t *testing.T) {
	d := loadFakeDriver(t)
	d.cudaSet("cuInit", 100)
	_, err := OpenCUDA(d.dir)
	cudaError(t, err, "cuInit", "CUDA_ERROR_NO_DEVICE")
	if n := d.cudaLeft(); n != 0 {
		t.Errorf("%d driver objects left after a failed open", n)
	}
}

func TestOpenCUDA_NoNVRTCInTheTiersLibDirIsAClearError(t *testing.T) {
	loadFakeDriver(t)
	dir := t.TempDir()
	_, err := OpenCUDA(dir)
	if !errors.Is(err, ErrLibrary) || !strings.Contains(err.Error(), dir) {
		t.Errorf("err = %v", err)
	}
}

// scripts/gpu-check.sh runs the real-hardware test on a GPU host from a
// prebuilt test binary. Here it runs this test binary against the fakes, so
// TestRealGPU_PreinstalledNVRTC itself is exercised, not only skipped. It
// finds NVRTC by its directory, or unpacks it from a tarball (a host with
// neither NVRTC nor network: scripts/real-libs-check.sh --pack-nvrtc), named
// or beside the test binary.
func TestGPUCheckScript_RunsTheRealGPUTestWithTheInstalledNVRTC(t *testing.T) {
	for _, tool := range []string{"bash", "tar", "gzip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skip(err)
		}
	}
	libs := fakeLibs(t, t.TempDir())
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The fake NVRTC as a tarball, links kept, and a copy of this test
	// binary's path with the tarball beside it.
	tarball := tarNVRTC(t, libs.nvrtc)
	beside := t.TempDir()
	os.Symlink(self, filepath.Join(beside, "smoke.test"))
	data, _ := os.ReadFile(tarball)
	os.WriteFile(filepath.Join(beside, "nvrtc.tar.gz"), data, 0o644)
	check := func(binary string, env ...string) (string, error) { return gpuCheck(t, libs.driver, binary, env...) }
	passed := []string{"--- PASS: TestRealGPU_PreinstalledNVRTC", "4096 values verified"}
	for name, tc := range map[string]struct {
		binary string
		env    []string
		want   string
	}{
		"its directory":       {self, []string{"GPUGATE_REAL_GPU_NVRTC_LIBDIR=" + libs.nvrtc}, "NVRTC from " + libs.nvrtc},
		"a tarball named":     {self, []string{"GPUGATE_NVRTC_TARBALL=" + tarball}, "NVRTC unpacked from " + tarball},
		"a tarball beside it": {filepath.Join(beside, "smoke.test"), nil, "NVRTC unpacked from " + filepath.Join(beside, "nvrtc.tar.gz")},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.env == nil {
				// Only where this machine has no NVRTC of its own, which the
				// script would find first.
				if out, _ := check(self); !strings.Contains(out, "no libnvrtc found") {
					t.Skip("this machine has an NVRTC the script finds before the tarball")
				} else if !strings.Contains(out, "--pack-nvrtc") {
					t.Errorf("the refusal does not say how to make a tarball:\n%s", out)
				}
			}
			out, err := check(tc.binary, tc.env...)
			if err != nil {
				t.Fatalf("gpu-check: %v\n%s", err, out)
			}
			for _, want := range append([]string{tc.want}, passed...) {
				if !strings.Contains(out, want) {
					t.Errorf("the output lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

// tarNVRTC packs an NVRTC directory, links kept, as
// scripts/real-libs-check.sh --pack-nvrtc does.
func tarNVRTC(t *testing.T, dir string) string {
	t.Helper()
	tarball := filepath.Join(t.TempDir(), "nvrtc.tar.gz")
	if out, err := exec.Command("tar", "-czf", tarball, "-C", dir, ".").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	return tarball
}

// gpuCheck runs scripts/gpu-check.sh on binary with a stand-in nvidia-smi
// (an H200 whose driver supports CUDA 13.0) and the driver library in
// driverDir, which reports the H200's memory, with env on top.
func gpuCheck(t *testing.T, driverDir, binary string, env ...string) (string, error) {
	t.Helper()
	bin := t.TempDir()
	smi := "#!/bin/sh\ncase \"$1\" in\n--query-gpu=*) echo 'NVIDIA H200, 580.159.03, 143771, 9.0' ;;\n" +
		"*) echo '| NVIDIA-SMI 580.159.03    Driver Version: 580.159.03    CUDA Version: 13.0 |' ;;\nesac\n"
	if err := os.WriteFile(filepath.Join(bin, "nvidia-smi"), []byte(smi), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", filepath.Join("..", "scripts", "gpu-check.sh"), binary)
	cmd.Env = append(append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "LD_LIBRARY_PATH="+driverDir,
		"GPUGATE_REAL_GPU_NVRTC_LIBDIR=", "GPUGATE_NVRTC_TARBALL=", "FAKE_CUDA_TOTALMEM=143771"), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// The tarball a device run carries (scripts/real-libs-check.sh
// --pack-nvrtc), made of NVIDIA's real NVRTC: gpu-check.sh unpacks it,
// and the real-hardware test compiles with it for the device's compute
// capability (9.0 here) and runs the kernel through the C stand-in of the
// driver. Only the GPU itself is not real.
func TestRealLibraries_GPUCheckRunsWithTheRealNVRTCFromItsTarball(t *testing.T) {
	dir := os.Getenv("GPUGATE_REAL_NVRTC_LIBDIR")
	if dir == "" {
		t.Skip("set GPUGATE_REAL_NVRTC_LIBDIR to a directory with a real libnvrtc (scripts/real-libs-check.sh)")
	}
	for _, tool := range []string{"bash", "tar", "gzip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skip(err)
		}
	}
	libs := fakeLibs(t, t.TempDir())
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tarball := tarNVRTC(t, dir)
	out, err := gpuCheck(t, libs.driver, self, "GPUGATE_NVRTC_TARBALL="+tarball)
	if err != nil {
		t.Fatalf("gpu-check: %v\n%s", err, out)
	}
	for _, want := range []string{"NVRTC unpacked from " + tarball, "--- PASS: TestRealGPU_PreinstalledNVRTC", "bytes of PTX, 4096 values verified"} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
	t.Log(out)
}
