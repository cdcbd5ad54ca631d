package smoke

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

const banner = `+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 570.124.06             Driver Version: 570.124.06     CUDA Version: 12.8     |
|-----------------------------------------+------------------------+----------------------+
`

const query = "NVIDIA GeForce RTX 4090, 570.124.06, 24564, 8.9\nNVIDIA GeForce RTX 4090, 570.124.06, 24564, 8.9\n"

func TestParseNvidiaSMI_SeveralGPUs(t *testing.T) {
	got, err := ParseNvidiaSMI([]byte(query), []byte(banner))
	if err != nil {
		t.Fatal(err)
	}
	want := SMI{CUDAVersion: Version{12, 8}, KMDVersion: "570.124.06", GPUs: []GPU{
		{Index: 0, Name: "NVIDIA GeForce RTX 4090", DriverVersion: "570.124.06", MemoryMiB: 24564, ComputeCap: Version{8, 9}},
		{Index: 1, Name: "NVIDIA GeForce RTX 4090", DriverVersion: "570.124.06", MemoryMiB: 24564, ComputeCap: Version{8, 9}},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// What nvidia-smi printed on an H200 (driver 580.159.04, CUDA 13.0),
// captured where the real-hardware tests ran: the banner with its date
// line, and the query the proof runs.
func TestParseNvidiaSMI_ARealH200(t *testing.T) {
	q, err := os.ReadFile(filepath.Join("testdata", "h200", "query.txt"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join("testdata", "h200", "banner.txt"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseNvidiaSMI(q, b)
	if err != nil {
		t.Fatal(err)
	}
	want := SMI{CUDAVersion: Version{13, 0}, KMDVersion: "580.159.04", GPUs: []GPU{{Index: 0, Name: "NVIDIA H200", DriverVersion: "580.159.04", MemoryMiB: 143771, ComputeCap: Version{9, 0}}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestParseNvidiaSMI_MissingOrGarbledOutputIsAClearError(t *testing.T) {
	// An unreadable banner is a *BannerError:
	// TestParseNvidiaSMI_UnreadableBannerNamesItsFirstLine.
	tests := map[string]struct{ query, banner, want string }{
		"no GPUs":          {"", banner, "lists no GPU"},
		"too few fields":   {"NVIDIA L4, 550.54, 23034\n", banner, "has 3 fields"},
		"memory with unit": {"NVIDIA L4, 550.54, 23034 MiB, 8.9\n", banner, "nounits"},
		"memory garbled":   {"NVIDIA L4, 550.54, lots, 8.9\n", banner, "neither a positive MiB count nor [N/A]"},
		"bad compute cap":  {"NVIDIA L4, 550.54, 23034, [N/A]\n", banner, "compute capability"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseNvidiaSMI([]byte(tt.query), []byte(tt.banner))
			if !errors.Is(err, ErrSMI) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want ErrSMI mentioning %q", err, tt.want)
			}
		})
	}
}

func TestParseVersion_ComparesNumerically(t *testing.T) {
	a, _ := ParseVersion("12.10")
	b, _ := ParseVersion("12.9")
	if !b.Less(a) || a.Less(b) {
		t.Error("12.10 must be newer than 12.9")
	}
	if v := VersionFromInt(12080); v != (Version{12, 8}) {
		t.Errorf("%v", v)
	}
	for _, bad := range []string{"", "x", "12.", "-1.0", "+12.6", "12.6.1"} {
		if _, err := ParseVersion(bad); !errors.Is(err, ErrVersion) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func FuzzParseNvidiaSMI(f *testing.F) {
	f.Add([]byte(query), []byte(banner))
	f.Add([]byte("a,b,1,9.0"), []byte("CUDA Version: 13.0"))
	f.Add([]byte("a,b,[N/A],12.1"), []byte("KMD Version: 610.57.04 CUDA UMD Version: 13.3"))
	if q, err := os.ReadFile(filepath.Join("testdata", "h200", "query.txt")); err == nil {
		if b, err := os.ReadFile(filepath.Join("testdata", "h200", "banner.txt")); err == nil {
			f.Add(q, b)
		}
	}
	// Every banner of the corpus, with the query its own host answered
	// where the capture has one, else a GB10's unified-memory row.
	for _, c := range corpusSeeds(f) {
		f.Add(c.query, c.banner)
	}
	f.Fuzz(func(t *testing.T, q, b []byte) {
		s, err := ParseNvidiaSMI(q, b)
		if err != nil {
			if !errors.Is(err, ErrSMI) {
				t.Fatal(err)
			}
			var be *BannerError
			if errors.As(err, &be) && (len(be.Line) > BannerLineMax+len("…") || len(be.Value) > BannerLineMax+len("…") || strings.Contains(be.Line, "\n")) {
				t.Fatalf("the error quotes more than one clipped line: %+v", be)
			}
			return
		}
		if len(s.GPUs) == 0 {
			t.Fatal("parsed with no GPU")
		}
		for _, g := range s.GPUs {
			if g.Name == "" || (g.MemoryMiB <= 0) != g.MemoryUnreported {
				t.Fatalf("%+v", g)
			}
		}
	})
}

func FuzzParseVersion(f *testing.F) {
	f.Add("12.8")
	f.Add("13")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseVersion(s)
		if err == nil {
			if again, err := ParseVersion(v.String()); err != nil || again != v {
				t.Fatalf("%q -> %v does not round-trip", s, v)
			}
		}
	})
}

// example is the seed's tier table, read from tiers/example.yml (this
// package's tests cannot import package tiers, which imports this one).
func example() Config {
	data, err := os.ReadFile(filepath.Join("tiers", "example.yml"))
	if err != nil {
		panic(err)
	}
	var cfg Config
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		panic(err)
	}
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	return cfg
}

// exampleJSON is the example in the JSON form the pod receives.
func exampleJSON() string {
	js, err := example().JSON()
	if err != nil {
		panic(err)
	}
	return js
}

func tiers() []Tier { return example().Tiers }

func TestSelectTier_FullBaselineAndRejectionBelow(t *testing.T) {
	tests := map[string]struct {
		driver Version
		want   string
	}{
		"driver 12.8 gets the full tier": {Version{12, 8}, "full"},
		"driver 13.2 gets the full tier": {Version{13, 2}, "full"},
		"driver 12.7 gets the baseline":  {Version{12, 7}, "baseline"},
		"driver 12.6 gets the baseline":  {Version{12, 6}, "baseline"},
		"driver 12.10 is above 12.8":     {Version{12, 10}, "full"},
	}
	for name, tt := range tests {
		got, err := SelectTier(tt.driver, tiers())
		if err != nil || got.Name != tt.want {
			t.Errorf("%s: %v %v", name, got.Name, err)
		}
		nv, _ := ParseVersion(got.CUDA)
		if tt.driver.Less(nv) {
			t.Errorf("%s: NVRTC %s newer than the driver", name, nv)
		}
	}
	if _, err := SelectTier(Version{12, 5}, tiers()); !errors.Is(err, ErrTier) {
		t.Errorf("below 12.6: %v", err)
	}
}

// fakeEnv is a pod whose every part a test can break.
type fakeEnv struct {
	query, banner string
	smiErr        error
	deb           []byte
	downloadErr   error
	installed     []string
	cuda          *fakeCUDA
}

func (e *fakeEnv) NvidiaSMI(context.Context) ([]byte, []byte, error) {
	return []byte(e.query), []byte(e.banner), e.smiErr
}

func (e *fakeEnv) Download(_ context.Context, url, dst string) error {
	if e.downloadErr != nil {
		return e.downloadErr
	}
	return os.WriteFile(dst, e.deb, 0o644)
}

func (e *fakeEnv) Install(_ context.Context, deb string) error {
	e.installed = append(e.installed, filepath.Base(deb))
	return nil
}

func (e *fakeEnv) CUDA(context.Context, Tier) (CUDA, error) { return e.cuda, nil }

type fakeCUDA struct {
	driver, nvrtc Version
	compileErr    error
	launchErr     error
	wrong         bool
	compiledArch  string
	closed        bool
	totalMem      []uint64 // cuDeviceTotalMem by CUDA ordinal
	totalMemErr   error
	totalMemAsked []int
}

func (c *fakeCUDA) DriverVersion() (Version, error) { return c.driver, nil }
func (c *fakeCUDA) DeviceTotalMem(ordinal int) (uint64, error) {
	c.totalMemAsked = append(c.totalMemAsked, ordinal)
	if c.totalMemErr != nil {
		return 0, c.totalMemErr
	}
	if ordinal < 0 || ordinal >= len(c.totalMem) {
		return 0, &CUDAError{Call: "cuDeviceGet", Code: 101}
	}
	return c.totalMem[ordinal], nil
}
func (c *fakeCUDA) NVRTCVersion() (Version, error) { return c.nvrtc, nil }
func (c *fakeCUDA) Compile(src, name, arch string) ([]byte, error) {
	c.compiledArch = arch
	return []byte(".version 8.7\n.target " + strings.Replace(arch, "compute", "sm", 1)), c.compileErr
}
func (c *fakeCUDA) Launch(ptx []byte, kernel string, a, b []float32) ([]float32, error) {
	if c.launchErr != nil {
		return nil, c.launchErr
	}
	out := make([]float32, len(a))
	for i := range a {
		out[i] = a[i] + b[i]
	}
	if c.wrong {
		out[7]++
	}
	return out, nil
}
func (c *fakeCUDA) Close() error { c.closed = true; return nil }

var debBytes = []byte("!<arch>\ndebian-binary   fake nvrtc package")

func pinned() Config {
	sum := sha256.Sum256(debBytes)
	cfg := example()
	for i := range cfg.Tiers {
		cfg.Tiers[i].SHA256 = hex.EncodeToString(sum[:])
	}
	return cfg
}

func healthy() *fakeEnv {
	return &fakeEnv{query: query, banner: banner, deb: debBytes, cuda: &fakeCUDA{driver: Version{12, 8}, nvrtc: Version{12, 8}}}
}

func run(t *testing.T, env *fakeEnv, mutate func(*Config)) (Result, error) {
	t.Helper()
	cfg := pinned()
	cfg.Env, cfg.WorkDir = env, t.TempDir()
	if mutate != nil {
		mutate(&cfg)
	}
	return Run(context.Background(), cfg)
}

func TestRun_EveryStepPassesOnAHealthyHost(t *testing.T) {
	var logs bytes.Buffer
	env := healthy()
	res, err := run(t, env, func(c *Config) { c.Log = slog.New(slog.NewJSONHandler(&logs, nil)) })
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, s := range res.Steps {
		steps = append(steps, s.Step)
	}
	if diff := cmp.Diff([]string{StepDriver, StepTier, StepInstall, StepCompile, StepLaunch, StepVRAM}, steps); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if env.cuda.compiledArch != "compute_89" || res.Tier.Name != "full" || !env.cuda.closed {
		t.Errorf("arch %s tier %s closed %v", env.cuda.compiledArch, res.Tier.Name, env.cuda.closed)
	}
	if !cmp.Equal(env.installed, []string{"cuda-nvrtc-12-8_12.8.93-1.deb"}) {
		t.Errorf("installed %v: only the selected tier's package", env.installed)
	}
	if strings.Count(logs.String(), `"msg":"smoke.step"`) != 6 {
		t.Errorf("want one log record per step:\n%s", logs.String())
	}
}

// The seed: "Before tests, the runner logs both versions" (NVRTC's and
// the driver's, as the driver API reports it).
func TestRun_LogsBothTheNVRTCAndTheDriverVersions(t *testing.T) {
	var logs bytes.Buffer
	env := healthy()
	env.cuda.driver = Version{12, 9}
	if _, err := run(t, env, func(c *Config) { c.Log = slog.New(slog.NewTextHandler(&logs, nil)) }); err != nil {
		t.Fatal(err)
	}
	var compile string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "step="+StepCompile) {
			compile = line
		}
	}
	if !strings.Contains(compile, "NVRTC 12.8") || !strings.Contains(compile, "driver CUDA 12.9") {
		t.Errorf("the compile step must log both versions: %q", compile)
	}
}

func failedStep(t *testing.T, err error) string {
	t.Helper()
	var se *StepError
	if !errors.As(err, &se) {
		t.Fatalf("err = %v, want a StepError", err)
	}
	return se.Step
}

func TestRun_DriverVisibilityAndCUDAVersion(t *testing.T) {
	env := healthy()
	env.smiErr = errors.New("nvidia-smi: executable file not found in $PATH")
	_, err := run(t, env, nil)
	if failedStep(t, err) != StepDriver {
		t.Error(err)
	}
}

func TestRun_RuntimesBelowTheBaselineAreRejected(t *testing.T) {
	env := healthy()
	env.banner = strings.Replace(banner, "CUDA Version: 12.8", "CUDA Version: 12.4", 1)
	res, err := run(t, env, nil)
	if failedStep(t, err) != StepTier || !errors.Is(err, ErrTier) || len(env.installed) != 0 {
		t.Errorf("%v (installed %v)", err, env.installed)
	}
	// The failed step names no tier it did not choose.
	if last := res.Steps[len(res.Steps)-1]; last.Detail != "" || last.Error == "" {
		t.Errorf("the failed tier step: detail %q, error %q", last.Detail, last.Error)
	}
}

func TestRun_BaselineDriverGetsTheBaselineNVRTCOnly(t *testing.T) {
	env := healthy()
	env.banner = strings.Replace(banner, "CUDA Version: 12.8", "CUDA Version: 12.6", 1)
	env.cuda.driver, env.cuda.nvrtc = Version{12, 6}, Version{12, 6}
	res, err := run(t, env, nil)
	if err != nil || res.Tier.Name != "baseline" || !cmp.Equal(env.installed, []string{"cuda-nvrtc-12-6_12.6.85-1.deb"}) {
		t.Errorf("%v %v %v", res.Tier.Name, env.installed, err)
	}
}

func TestRun_TheChecksumIsVerifiedBeforeAnythingIsInstalled(t *testing.T) {
	env := healthy()
	env.deb = []byte("tampered")
	_, err := run(t, env, nil)
	if failedStep(t, err) != StepInstall || !errors.Is(err, ErrChecksum) || len(env.installed) != 0 {
		t.Errorf("%v (installed %v)", err, env.installed)
	}
}

func TestRun_ADownloadFailureStops(t *testing.T) {
	env := healthy()
	env.downloadErr = errors.New("connection reset")
	_, err := run(t, env, nil)
	if failedStep(t, err) != StepInstall || len(env.installed) != 0 {
		t.Error(err)
	}
}

func TestRun_ATierWithoutAPinnedChecksumIsNeverInstalled(t *testing.T) {
	env := healthy()
	_, err := run(t, env, func(c *Config) { c.Tiers[0].SHA256 = "" })
	if !errors.Is(err, ErrNoChecksum) || len(env.installed) != 0 {
		t.Error(err)
	}
}

func TestRun_NVRTCNewerThanTheDriverIsRejected(t *testing.T) {
	env := healthy()
	env.cuda.driver = Version{12, 6}
	_, err := run(t, env, nil)
	if failedStep(t, err) != StepCompile || !errors.Is(err, ErrNVRTCNewer) {
		t.Error(err)
	}
}

// The seed's runner "logs both versions": the NVRTC it loaded must be the
// selected tier's, not an older one the tier's lib_dir happens to hold.
func TestRun_LoadedNVRTCOlderThanTheTierIsRejected(t *testing.T) {
	env := healthy()
	env.cuda.nvrtc = Version{11, 8}
	_, err := run(t, env, nil)
	if failedStep(t, err) != StepCompile || !errors.Is(err, ErrNVRTCOlder) || !strings.Contains(err.Error(), "NVRTC 11.8 loaded from /usr/local/cuda-12.8/targets/x86_64-linux/lib, tier full is CUDA 12.8") {
		t.Error(err)
	}
	if env.cuda.compiledArch != "" {
		t.Error("the kernel was compiled with the wrong NVRTC")
	}
}

func TestRun_CompileFailureNamesTheNVRTCError(t *testing.T) {
	env := healthy()
	env.cuda.compileErr = &CUDAError{Call: "nvrtcCompileProgram", Code: 6, NVRTC: true, Log: "error: identifier undefined"}
	_, err := run(t, env, nil)
	var ce *CUDAError
	if failedStep(t, err) != StepCompile || !errors.As(err, &ce) || ce.Name() != "NVRTC_ERROR_COMPILATION" || !strings.Contains(err.Error(), "identifier undefined") {
		t.Error(err)
	}
}

func TestRun_PTXTheDriverCannotLoadIsRejected(t *testing.T) {
	env := healthy()
	env.cuda.launchErr = &CUDAError{Call: "cuModuleLoadData", Code: 222}
	_, err := run(t, env, nil)
	var ce *CUDAError
	if failedStep(t, err) != StepLaunch || !errors.As(err, &ce) || ce.Name() != "CUDA_ERROR_UNSUPPORTED_PTX_VERSION" {
		t.Fatal(err)
	}
	// What the log shows names the driver's refusal.
	if !strings.Contains(err.Error(), "CUDA_ERROR_UNSUPPORTED_PTX_VERSION") {
		t.Errorf("the message does not name the driver's error: %v", err)
	}
}

func TestRun_AWrongKernelResultIsRejected(t *testing.T) {
	env := healthy()
	env.cuda.wrong = true
	_, err := run(t, env, nil)
	if failedStep(t, err) != StepLaunch || !errors.Is(err, ErrWrongValue) {
		t.Error(err)
	}
}

func TestRun_VRAMBelowTheFloorIsRejected(t *testing.T) {
	env := healthy()
	_, err := run(t, env, func(c *Config) { c.MinVRAMGB = 40 })
	if failedStep(t, err) != StepVRAM || !errors.Is(err, ErrVRAM) {
		t.Error(err)
	}
}

func TestCUDAError_EveryCodeHasItsName(t *testing.T) {
	for code, name := range map[int32]string{0: "CUDA_SUCCESS", 100: "CUDA_ERROR_NO_DEVICE", 209: "CUDA_ERROR_NO_BINARY_FOR_GPU", 218: "CUDA_ERROR_INVALID_PTX", 803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", 999: "CUDA_ERROR_UNKNOWN"} {
		if got := (&CUDAError{Code: code}).Name(); got != name {
			t.Errorf("%d: %s", code, got)
		}
	}
	if got := (&CUDAError{Code: 5, NVRTC: true}).Name(); got != "NVRTC_ERROR_INVALID_OPTION" {
		t.Error(got)
	}
	if got := (&CUDAError{Code: 12345}).Name(); got != "unknown code 12345" {
		t.Error(got)
	}
}

var update = flag.Bool("update", false, "rewrite golden files")

func TestStartupScript_Golden(t *testing.T) {
	payload, err := PackProof(fakeBinary(200 << 10))
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]ScriptParams{
		"startup.golden.sh":          {Env: map[string]string{"GPUGATE_MIN_VRAM_GB": "20"}, Proof: payload},
		"startup-in-image.golden.sh": {Env: map[string]string{"GPUGATE_MIN_VRAM_GB": "20"}},
	} {
		got, err := StartupScript(p)
		if err != nil {
			t.Fatal(err)
		}
		golden := filepath.Join("testdata", name)
		if *update {
			os.WriteFile(golden, []byte(got), 0o644)
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want), got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
		proof := strings.Index(got, "sudo --preserve-env env -u RUNNER_JIT_CONFIG ")
		register := strings.Index(got, "exec ./run.sh")
		if proof < 0 || register < proof || !strings.Contains(got[proof:register], "exit 1") {
			t.Errorf("%s: the proof must run, JIT config stripped, before the runner registers, and a failure must stop", name)
		}
		if strings.Contains(got, "'") {
			t.Errorf("%s: the script must not need quoting inside bash -c '...'", name)
		}
		if !Fits(StartupCommand(got)) {
			t.Errorf("%s: the command (%d bytes) must fit one exec argument", name, len(got))
		}
	}
}

func TestStartupScript_NeverCarriesASecret(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"jit":     {"RUNNER_JIT_CONFIG": "eyJhIjoiYiJ9"},
		"api key": {"RUNPOD_API_KEY": "rpa_x"},
		"token":   {"GITHUB_TOKEN": "ghs_x"},
	} {
		if _, err := StartupScript(ScriptParams{Env: env}); !errors.Is(err, ErrScript) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	if _, err := StartupScript(ScriptParams{ProofPath: "relative/path"}); !errors.Is(err, ErrScript) {
		t.Error("a relative proof path must be refused")
	}
}
