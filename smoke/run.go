package smoke

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Env is the proof's outside world. RealEnv is the real one; tests use
// fakes.
type Env interface {
	// NvidiaSMI returns the output of `nvidia-smi QueryArgs...` and of
	// plain `nvidia-smi`.
	NvidiaSMI(ctx context.Context) (query, banner []byte, err error)
	// Download saves url's body to dst.
	Download(ctx context.Context, url, dst string) error
	// Install installs a verified .deb directly (dpkg -i), with no package
	// index refresh.
	Install(ctx context.Context, deb string) error
	// CUDA loads the driver API and the tier's NVRTC.
	CUDA(ctx context.Context, tier Tier) (CUDA, error)
}

// Compiler is NVRTC: the part of the proof that needs no driver or GPU.
type Compiler interface {
	NVRTCVersion() (Version, error)
	// Compile compiles CUDA C++ source to PTX for arch (e.g. compute_89).
	Compile(src, name, arch string) (ptx []byte, err error)
}

// CUDA is the part of the driver API and NVRTC the proof uses.
type CUDA interface {
	Compiler
	DriverVersion() (Version, error)
	// DeviceTotalMem is cuDeviceTotalMem for the device at a CUDA
	// ordinal: the bytes the driver says it can address, its own VRAM or,
	// on a unified-memory device, the pool it shares with the host.
	DeviceTotalMem(ordinal int) (bytes uint64, err error)
	// Launch loads the PTX through the driver, runs kernel over a, b into
	// c (n floats), synchronizes and returns c read back.
	Launch(ptx []byte, kernel string, a, b []float32) ([]float32, error)
	Close() error
}

// Steps, in order.
const (
	StepDriver  = "driver"  // nvidia-smi: driver visible, CUDA API version
	StepTier    = "tier"    // runtime tier selection
	StepInstall = "install" // minimal NVRTC for the tier, verified
	StepCompile = "compile" // NVRTC compiles a kernel for the device
	StepLaunch  = "launch"  // the driver loads, launches, syncs, reads back
	StepVRAM    = "vram"    // at least min_vram_gb (the driver's figure where nvidia-smi has none)
)

// StepError says which step failed.
type StepError struct {
	Step string
	Err  error
}

// Error names the proof step that failed and why.
func (e *StepError) Error() string { return fmt.Sprintf("smoke: step %s failed: %v", e.Step, e.Err) }

// Unwrap returns the cause.
func (e *StepError) Unwrap() error { return e.Err }

// StepResult is one step's outcome.
type StepResult struct {
	Step     string        `json:"step"`
	Duration time.Duration `json:"duration"`
	Detail   string        `json:"detail,omitempty"`
	Error    string        `json:"error,omitempty"`
}

// Result is the proof's outcome.
type Result struct {
	Steps []StepResult `json:"steps"`
	SMI   SMI          `json:"smi"`
	Tier  Tier         `json:"tier"`
}

// Sentinels for failure classes.
var (
	ErrChecksum   = errors.New("smoke: checksum mismatch")
	ErrNoChecksum = errors.New("smoke: the tier has no pinned checksum")
	ErrNVRTCNewer = errors.New("smoke: NVRTC is newer than the driver")
	ErrNVRTCOlder = errors.New("smoke: NVRTC is older than the selected tier")
	ErrWrongValue = errors.New("smoke: the kernel computed a wrong result")
	ErrVRAM       = errors.New("smoke: not enough GPU memory")
	ErrLibrary    = errors.New("smoke: cannot load a CUDA library")
)

// KernelSource is the tiny kernel the proof compiles.
const KernelSource = `extern "C" __global__ void gpugate_add(const float *a, const float *b, float *c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
`

// Run is the on-pod CUDA compatibility proof. It runs before the runner
// registers: driver visibility and CUDA version, tier selection, a minimal
// verified NVRTC install for that tier only, NVRTC compilation for the
// device's compute capability, a real launch with read-back, and the VRAM
// floor. Each step is timed and logged; the first failure returns a
// *StepError naming the step.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, &StepError{StepTier, err}
	}
	env := cfg.Env
	if env == nil {
		env = RealEnv{}
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var res Result
	step := func(name string, fn func() (string, error)) error {
		start := time.Now()
		detail, err := fn()
		sr := StepResult{Step: name, Duration: time.Since(start), Detail: detail}
		attrs := []slog.Attr{slog.String("step", name), slog.Duration("duration", sr.Duration), slog.String("detail", detail)}
		if err != nil {
			sr.Error = err.Error()
			log.LogAttrs(ctx, slog.LevelError, "smoke.step_failed", append(attrs, slog.String("error", err.Error()))...)
		} else {
			log.LogAttrs(ctx, slog.LevelInfo, "smoke.step", attrs...)
		}
		res.Steps = append(res.Steps, sr)
		if err != nil {
			return &StepError{name, err}
		}
		return nil
	}
	if err := step(StepDriver, func() (string, error) {
		q, b, err := env.NvidiaSMI(ctx)
		if err != nil {
			return "", fmt.Errorf("nvidia-smi: %w", err)
		}
		if res.SMI, err = ParseNvidiaSMI(q, b); err != nil {
			return "", err
		}
		g := res.SMI.GPUs[0]
		mem := fmt.Sprintf("%d MiB", g.MemoryMiB)
		if g.MemoryUnreported {
			mem = "memory.total [N/A] (unified memory: the VRAM floor asks the driver)"
		}
		return fmt.Sprintf("%d GPU(s); GPU 0 %s, driver %s, CUDA %s, compute %s, %s", len(res.SMI.GPUs), g.Name, g.DriverVersion, res.SMI.CUDAVersion, g.ComputeCap, mem), nil
	}); err != nil {
		return res, err
	}
	if err := step(StepTier, func() (string, error) {
		t, err := SelectTier(res.SMI.CUDAVersion, cfg.Tiers)
		if err != nil {
			return "", err
		}
		res.Tier = t
		return fmt.Sprintf("tier %s (NVRTC %s) for driver CUDA %s", t.Name, t.CUDA, res.SMI.CUDAVersion), nil
	}); err != nil {
		return res, err
	}
	if err := step(StepInstall, func() (string, error) { return install(ctx, env, res.Tier, cfg.WorkDir) }); err != nil {
		return res, err
	}
	var cuda CUDA
	var ptx []byte
	arch := fmt.Sprintf("compute_%d%d", res.SMI.GPUs[0].ComputeCap.Major, res.SMI.GPUs[0].ComputeCap.Minor)
	if err := step(StepCompile, func() (string, error) {
		var err error
		if cuda, err = env.CUDA(ctx, res.Tier); err != nil {
			return "", err
		}
		drv, err := cuda.DriverVersion()
		if err != nil {
			return "", err
		}
		nv, err := cuda.NVRTCVersion()
		if err != nil {
			return "", err
		}
		if drv.Less(nv) {
			return "", fmt.Errorf("%w: NVRTC %s, driver CUDA %s", ErrNVRTCNewer, nv, drv)
		}
		// Another NVRTC in the tier's lib_dir (an image's older toolkit, a
		// lib_dir that is not where the package installs) would compile
		// for the wrong runtime. Validate has parsed the tier's version.
		if want, _ := ParseVersion(res.Tier.CUDA); nv.Less(want) {
			return "", fmt.Errorf("%w: NVRTC %s loaded from %s, tier %s is CUDA %s: set the tier's lib_dir to where its package installs NVRTC", ErrNVRTCOlder, nv, res.Tier.LibDir, res.Tier.Name, res.Tier.CUDA)
		}
		if ptx, err = cuda.Compile(KernelSource, "gpugate_add.cu", arch); err != nil {
			return "", err
		}
		return fmt.Sprintf("NVRTC %s compiled %d bytes of PTX for %s (driver CUDA %s)", nv, len(ptx), arch, drv), nil
	}); err != nil {
		if cuda != nil {
			cuda.Close()
		}
		return res, err
	}
	defer cuda.Close()
	if err := step(StepLaunch, func() (string, error) {
		const n = 1 << 12
		a, b := operands(n)
		c, err := cuda.Launch(ptx, "gpugate_add", a, b)
		if err != nil {
			return "", err
		}
		if len(c) != n {
			return "", fmt.Errorf("%w: read back %d values, want %d", ErrWrongValue, len(c), n)
		}
		for i := range c {
			if math.Abs(float64(c[i]-(a[i]+b[i]))) > 1e-3 {
				return "", fmt.Errorf("%w: c[%d] = %v, want %v", ErrWrongValue, i, c[i], a[i]+b[i])
			}
		}
		return fmt.Sprintf("launched, synchronized and verified %d values", n), nil
	}); err != nil {
		return res, err
	}
	if err := step(StepVRAM, func() (string, error) { return vramFloor(cuda, res.SMI.GPUs, cfg.MinVRAMGB) }); err != nil {
		return res, err
	}
	return res, nil
}

// vramFloor holds every GPU to the floor: by nvidia-smi's memory.total,
// and where nvidia-smi reports none (a unified-memory device such as DGX
// Spark's GB10) by the driver's cuDeviceTotalMem, the pool the device
// shares with the host. nvidia-smi's GPU order need not be CUDA's, so
// when any GPU's memory is unreported every CUDA ordinal the GPUs occupy
// is held to the floor.
func vramFloor(cuda CUDA, gpus []GPU, floorGB int) (string, error) {
	need := floorGB * 1024
	var unreported []string
	for _, g := range gpus {
		if g.MemoryUnreported {
			unreported = append(unreported, fmt.Sprintf("GPU %d (%s)", g.Index, g.Name))
			continue
		}
		if g.MemoryMiB < need {
			return "", fmt.Errorf("%w: GPU %d (%s) has %d MiB, the floor is %d GiB", ErrVRAM, g.Index, g.Name, g.MemoryMiB, floorGB)
		}
	}
	if len(unreported) == 0 {
		return fmt.Sprintf("every GPU has at least %d GiB", floorGB), nil
	}
	least := -1
	for i := range gpus {
		n, err := cuda.DeviceTotalMem(i)
		if err != nil {
			return "", fmt.Errorf("nvidia-smi reports no memory.total for %s: %w", strings.Join(unreported, ", "), err)
		}
		mib := int(min(n>>20, uint64(math.MaxInt32)))
		if mib < need {
			return "", fmt.Errorf("%w: CUDA device %d has %d MiB by cuDeviceTotalMem (nvidia-smi reports no memory.total for %s: unified memory, shared with the host), the floor is %d GiB", ErrVRAM, i, mib, strings.Join(unreported, ", "), floorGB)
		}
		if least < 0 || mib < least {
			least = mib
		}
	}
	return fmt.Sprintf("every GPU has at least %d GiB (%s: unified memory, %d MiB by cuDeviceTotalMem, shared with the host)", floorGB, strings.Join(unreported, ", "), least), nil
}

// operands are the kernel's inputs: every output value differs, so a
// misplaced element shows.
func operands(n int) (a, b []float32) {
	a, b = make([]float32, n), make([]float32, n)
	for i := range a {
		a[i], b[i] = float32(i), float32(2*i)+0.5
	}
	return a, b
}

// RequirePinned refuses a table with a tier whose checksum is not pinned:
// the proof would refuse to install it on the pod, after the pod was paid
// for.
func (c Config) RequirePinned() error {
	for _, t := range c.Tiers {
		if t.SHA256 == "" {
			return fmt.Errorf("%w: tier %s (%s %s): pin its sha256 from NVIDIA's Packages index in the tier table before buying pods (go run ./examples/nvrtcpin -tiers TABLE -o TABLE Packages)", ErrNoChecksum, t.Name, t.Package, t.Version)
		}
	}
	return nil
}

// install downloads the tier's package, verifies its checksum before
// anything is installed, then installs it directly.
func install(ctx context.Context, env Env, t Tier, dir string) (string, error) {
	if t.SHA256 == "" {
		return "", fmt.Errorf("%w: tier %s (%s %s): pin its sha256 in the configuration", ErrNoChecksum, t.Name, t.Package, t.Version)
	}
	if dir == "" {
		dir = os.TempDir()
	}
	deb := filepath.Join(dir, fmt.Sprintf("%s_%s.deb", t.Package, t.Version))
	if err := env.Download(ctx, t.URL, deb); err != nil {
		return "", fmt.Errorf("download %s: %w", t.URL, err)
	}
	f, err := os.Open(deb)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	_, err = io.Copy(h, f)
	f.Close()
	if err != nil {
		return "", err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != t.SHA256 {
		os.Remove(deb)
		return "", fmt.Errorf("%w: %s has sha256 %s, pinned %s: nothing was installed", ErrChecksum, filepath.Base(deb), got, t.SHA256)
	}
	if err := env.Install(ctx, deb); err != nil {
		return "", fmt.Errorf("dpkg -i %s: %w", filepath.Base(deb), err)
	}
	return fmt.Sprintf("installed %s %s (sha256 verified)", t.Package, t.Version), nil
}
