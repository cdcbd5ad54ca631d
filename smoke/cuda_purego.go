//go:build linux

package smoke

import (
	"bytes"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"unsafe"

	"github.com/ebitengine/purego"
)

// purego binds libcuda and libnvrtc without cgo, so the proof is a static
// Go binary that runs on a stock runner image.
type puregoCUDA struct {
	ctx uintptr

	cuInit              func(flags uint32) int32
	cuDriverGetVersion  func(v *int32) int32
	cuDeviceGet         func(dev *int32, ordinal int32) int32
	cuDeviceTotalMem    func(bytes *uintptr, dev int32) int32
	cuCtxCreate         func(ctx *uintptr, flags uint32, dev int32) int32
	cuCtxDestroy        func(ctx uintptr) int32
	cuCtxSynchronize    func() int32
	cuModuleLoadData    func(mod *uintptr, image unsafe.Pointer) int32
	cuModuleUnload      func(mod uintptr) int32
	cuModuleGetFunction func(fn *uintptr, mod uintptr, name string) int32
	cuMemAlloc          func(ptr *uint64, size uintptr) int32
	cuMemFree           func(ptr uint64) int32
	cuMemcpyHtoD        func(dst uint64, src unsafe.Pointer, size uintptr) int32
	cuMemcpyDtoH        func(dst unsafe.Pointer, src uint64, size uintptr) int32
	cuLaunchKernel      func(fn uintptr, gx, gy, gz, bx, by, bz, shared uint32, stream uintptr, params, extra unsafe.Pointer) int32

	*puregoNVRTC
}

// puregoNVRTC is NVRTC alone: it compiles without a driver or a GPU.
type puregoNVRTC struct {
	nvrtcVersion           func(major, minor *int32) int32
	nvrtcCreateProgram     func(prog *uintptr, src, name string, numHeaders int32, headers, includeNames unsafe.Pointer) int32
	nvrtcCompileProgram    func(prog uintptr, numOptions int32, options unsafe.Pointer) int32
	nvrtcGetPTXSize        func(prog uintptr, size *uintptr) int32
	nvrtcGetPTX            func(prog uintptr, ptx *byte) int32
	nvrtcGetProgramLogSize func(prog uintptr, size *uintptr) int32
	nvrtcGetProgramLog     func(prog uintptr, log *byte) int32
	nvrtcDestroyProgram    func(prog *uintptr) int32
}

func bind(handle uintptr, lib string, fns map[string]any) error {
	for name, ptr := range fns {
		sym, err := purego.Dlsym(handle, name)
		if err != nil {
			return fmt.Errorf("%w: %s has no %s (%v): it is not the driver or NVRTC the proof binds", ErrLibrary, lib, name, err)
		}
		purego.RegisterFunc(ptr, sym)
	}
	return nil
}

// OpenCUDA loads libcuda.so.1 (the driver, provided by the container
// toolkit) and libnvrtc from libDir (the tier's package), creates a context
// on GPU 0 and returns the proof's CUDA backend.
func OpenCUDA(libDir string) (CUDA, error) {
	c := &puregoCUDA{}
	cuda, err := purego.Dlopen("libcuda.so.1", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, fmt.Errorf("%w: the CUDA driver libcuda.so.1 (%v): the NVIDIA container runtime mounts it into pods created with NVIDIA_DRIVER_CAPABILITIES including compute", ErrLibrary, err)
	}
	if c.puregoNVRTC, err = loadNVRTC(libDir); err != nil {
		return nil, err
	}
	if err := bind(cuda, "libcuda", map[string]any{
		"cuInit": &c.cuInit, "cuDriverGetVersion": &c.cuDriverGetVersion, "cuDeviceGet": &c.cuDeviceGet, "cuDeviceTotalMem_v2": &c.cuDeviceTotalMem,
		"cuCtxCreate_v2": &c.cuCtxCreate, "cuCtxDestroy_v2": &c.cuCtxDestroy, "cuCtxSynchronize": &c.cuCtxSynchronize,
		"cuModuleLoadData": &c.cuModuleLoadData, "cuModuleUnload": &c.cuModuleUnload, "cuModuleGetFunction": &c.cuModuleGetFunction,
		"cuMemAlloc_v2": &c.cuMemAlloc, "cuMemFree_v2": &c.cuMemFree, "cuMemcpyHtoD_v2": &c.cuMemcpyHtoD,
		"cuMemcpyDtoH_v2": &c.cuMemcpyDtoH, "cuLaunchKernel": &c.cuLaunchKernel,
	}); err != nil {
		return nil, err
	}
	// The context is current only on the thread that creates it: driver
	// calls stay on this OS thread until Close.
	runtime.LockOSThread()
	if err := c.createContext(); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	return c, nil
}

// OpenNVRTC loads the NVRTC in libDir alone, with no driver and no GPU:
// what a hosted runner can prove about a restored or newly installed CUDA
// toolkit tree before using or publishing it (CheckCompile).
func OpenNVRTC(libDir string) (Compiler, error) {
	return loadNVRTC(libDir)
}

// loadNVRTC loads libnvrtc from libDir, its builtins first, and binds it.
func loadNVRTC(libDir string) (*puregoNVRTC, error) {
	// NVRTC loads its builtins library by soname: load it first.
	if builtins, _ := filepath.Glob(filepath.Join(libDir, "libnvrtc-builtins.so.*")); len(builtins) > 0 {
		slices.Sort(builtins)
		if _, err := purego.Dlopen(builtins[len(builtins)-1], purego.RTLD_NOW|purego.RTLD_GLOBAL); err != nil {
			return nil, fmt.Errorf("%w: %s (%v)", ErrLibrary, builtins[len(builtins)-1], err)
		}
	}
	candidates, _ := filepath.Glob(filepath.Join(libDir, "libnvrtc.so*"))
	slices.Sort(candidates)
	var handle uintptr
	var err error
	for _, p := range candidates {
		if handle, err = purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_GLOBAL); err == nil {
			break
		}
	}
	if handle == 0 {
		return nil, fmt.Errorf("%w: no loadable libnvrtc.so in %s (%v): check the tier's lib_dir against where its package installs NVRTC", ErrLibrary, libDir, err)
	}
	n := &puregoNVRTC{}
	if err := bind(handle, "libnvrtc", map[string]any{
		"nvrtcVersion": &n.nvrtcVersion, "nvrtcCreateProgram": &n.nvrtcCreateProgram, "nvrtcCompileProgram": &n.nvrtcCompileProgram,
		"nvrtcGetPTXSize": &n.nvrtcGetPTXSize, "nvrtcGetPTX": &n.nvrtcGetPTX, "nvrtcGetProgramLogSize": &n.nvrtcGetProgramLogSize,
		"nvrtcGetProgramLog": &n.nvrtcGetProgramLog, "nvrtcDestroyProgram": &n.nvrtcDestroyProgram,
	}); err != nil {
		return nil, err
	}
	return n, nil
}

func (c *puregoCUDA) createContext() error {
	if err := cuCheck("cuInit", c.cuInit(0)); err != nil {
		return err
	}
	var dev int32
	if err := cuCheck("cuDeviceGet", c.cuDeviceGet(&dev, 0)); err != nil {
		return err
	}
	return cuCheck("cuCtxCreate", c.cuCtxCreate(&c.ctx, 0, dev))
}

func (c *puregoCUDA) DriverVersion() (Version, error) {
	var v int32
	if err := cuCheck("cuDriverGetVersion", c.cuDriverGetVersion(&v)); err != nil {
		return Version{}, err
	}
	return VersionFromInt(int(v)), nil
}

// DeviceTotalMem asks the driver (cuDeviceTotalMem_v2) how much memory
// the device at ordinal has: its VRAM, or on a unified-memory device the
// pool it shares with the host.
func (c *puregoCUDA) DeviceTotalMem(ordinal int) (uint64, error) {
	var dev int32
	if err := cuCheck("cuDeviceGet", c.cuDeviceGet(&dev, int32(ordinal))); err != nil {
		return 0, err
	}
	var n uintptr
	if err := cuCheck("cuDeviceTotalMem", c.cuDeviceTotalMem(&n, dev)); err != nil {
		return 0, err
	}
	return uint64(n), nil
}

func (c *puregoNVRTC) NVRTCVersion() (Version, error) {
	var major, minor int32
	if err := nvrtcCheck("nvrtcVersion", c.nvrtcVersion(&major, &minor)); err != nil {
		return Version{}, err
	}
	return Version{int(major), int(minor)}, nil
}

func cstr(s string) *byte {
	b := append([]byte(s), 0)
	return &b[0]
}

func (c *puregoNVRTC) Compile(src, name, arch string) ([]byte, error) {
	return c.CompileIncluding(src, name, arch, nil)
}

// CompileIncluding compiles with includeDirs as NVRTC's --include-path.
func (c *puregoNVRTC) CompileIncluding(src, name, arch string, includeDirs []string) ([]byte, error) {
	var prog uintptr
	if err := nvrtcCheck("nvrtcCreateProgram", c.nvrtcCreateProgram(&prog, src, name, 0, nil, nil)); err != nil {
		return nil, err
	}
	defer c.nvrtcDestroyProgram(&prog)
	opts := []*byte{cstr("--gpu-architecture=" + arch), cstr("--std=c++17")}
	for _, d := range includeDirs {
		opts = append(opts, cstr("--include-path="+d))
	}
	code := c.nvrtcCompileProgram(prog, int32(len(opts)), unsafe.Pointer(&opts[0]))
	runtime.KeepAlive(opts)
	if code != 0 {
		e := &CUDAError{Call: "nvrtcCompileProgram", Code: code, NVRTC: true}
		var n uintptr
		if c.nvrtcGetProgramLogSize(prog, &n) == 0 && n > 1 {
			buf := make([]byte, n)
			if c.nvrtcGetProgramLog(prog, &buf[0]) == 0 {
				e.Log = string(bytes.TrimRight(buf, "\x00"))
			}
		}
		return nil, e
	}
	var n uintptr
	if err := nvrtcCheck("nvrtcGetPTXSize", c.nvrtcGetPTXSize(prog, &n)); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, &CUDAError{Call: "nvrtcGetPTXSize", Code: 11, NVRTC: true}
	}
	ptx := make([]byte, n)
	if err := nvrtcCheck("nvrtcGetPTX", c.nvrtcGetPTX(prog, &ptx[0])); err != nil {
		return nil, err
	}
	return ptx, nil
}

func (c *puregoCUDA) Launch(ptx []byte, kernel string, a, b []float32) ([]float32, error) {
	if len(a) != len(b) || len(a) == 0 || len(ptx) == 0 {
		return nil, fmt.Errorf("smoke: launch needs PTX and two equal, non-empty inputs (got %d bytes of PTX, %d and %d values)", len(ptx), len(a), len(b))
	}
	if ptx[len(ptx)-1] != 0 {
		ptx = append(ptx, 0)
	}
	var mod, fn uintptr
	if err := cuCheck("cuModuleLoadData", c.cuModuleLoadData(&mod, unsafe.Pointer(&ptx[0]))); err != nil {
		return nil, err
	}
	runtime.KeepAlive(ptx)
	defer c.cuModuleUnload(mod)
	if err := cuCheck("cuModuleGetFunction", c.cuModuleGetFunction(&fn, mod, kernel)); err != nil {
		return nil, err
	}
	size := uintptr(len(a) * 4)
	var da, db, dc uint64
	for _, p := range []*uint64{&da, &db, &dc} {
		if err := cuCheck("cuMemAlloc", c.cuMemAlloc(p, size)); err != nil {
			return nil, err
		}
		defer c.cuMemFree(*p)
	}
	if err := cuCheck("cuMemcpyHtoD", c.cuMemcpyHtoD(da, unsafe.Pointer(&a[0]), size)); err != nil {
		return nil, err
	}
	if err := cuCheck("cuMemcpyHtoD", c.cuMemcpyHtoD(db, unsafe.Pointer(&b[0]), size)); err != nil {
		return nil, err
	}
	n := int32(len(a))
	params := []unsafe.Pointer{unsafe.Pointer(&da), unsafe.Pointer(&db), unsafe.Pointer(&dc), unsafe.Pointer(&n)}
	const block = 256
	grid := uint32((len(a) + block - 1) / block)
	if err := cuCheck("cuLaunchKernel", c.cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, 0, unsafe.Pointer(&params[0]), nil)); err != nil {
		return nil, err
	}
	runtime.KeepAlive(params)
	if err := cuCheck("cuCtxSynchronize", c.cuCtxSynchronize()); err != nil {
		return nil, err
	}
	out := make([]float32, len(a))
	if err := cuCheck("cuMemcpyDtoH", c.cuMemcpyDtoH(unsafe.Pointer(&out[0]), dc, size)); err != nil {
		return nil, err
	}
	return out, nil
}

func (c *puregoCUDA) Close() error {
	defer runtime.UnlockOSThread()
	if c.ctx != 0 {
		return cuCheck("cuCtxDestroy", c.cuCtxDestroy(c.ctx))
	}
	return nil
}
