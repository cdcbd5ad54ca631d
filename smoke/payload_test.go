package smoke

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// amd64ELF is the start of a 64-bit little-endian x86-64 ELF header (the
// pods' platform), up to and including e_machine.
const amd64ELF = "\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x3e\x00"

// fakeBinary is 4+n bytes: an x86-64 ELF header, then incompressible bytes.
func fakeBinary(n int) []byte {
	b := make([]byte, max(4+n, len(amd64ELF)))
	copy(b, amd64ELF)
	r := rand.NewChaCha8([32]byte{7})
	r.Read(b[len(amd64ELF):])
	return b
}

func TestPackProof_ChunksFitOneExecStringAndRoundTrip(t *testing.T) {
	bin := fakeBinary(600 << 10)
	p, err := PackProof(bin)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Chunks) < 2 {
		t.Fatalf("%d chunks: a 600 KiB proof must span several exec strings", len(p.Chunks))
	}
	var joined strings.Builder
	for i, name := range p.Chunks {
		v := p.Env[name]
		if got := len(name) + 1 + len(v) + 1; got > MaxArgBytes {
			t.Errorf("chunk %d is %d bytes as an environment string, over %d", i, got, MaxArgBytes)
		}
		joined.WriteString(v)
	}
	z, err := base64.StdEncoding.DecodeString(joined.String())
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(z))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(zr)
	if err != nil || !bytes.Equal(got, bin) {
		t.Fatalf("the chunks do not decode to the binary (err %v)", err)
	}
	sum := sha256.Sum256(bin)
	if p.Env[EnvProofSHA256] != hex.EncodeToString(sum[:]) || p.SHA256 != p.Env[EnvProofSHA256] {
		t.Errorf("checksum %q", p.Env[EnvProofSHA256])
	}
	if p.EnvBytes <= len(joined.String()) || p.EnvBytes > MaxPayloadBytes {
		t.Errorf("EnvBytes %d", p.EnvBytes)
	}
}

func TestPackProof_RefusesWhatCannotFitTheExecLimit(t *testing.T) {
	_, err := PackProof(fakeBinary(MaxExecBytes))
	if !errors.Is(err, ErrPayload) || !strings.Contains(err.Error(), "ProofPath") {
		t.Fatalf("err = %v; want ErrPayload naming the alternative", err)
	}
}

func TestPackProof_RefusesSomethingThatIsNotAnExecutable(t *testing.T) {
	for name, b := range map[string][]byte{"empty": nil, "gzip": {0x1f, 0x8b, 8, 0}, "script": []byte("#!/bin/sh\n")} {
		if _, err := PackProof(b); !errors.Is(err, ErrPayload) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

// pod is a container for the rendered startup command: a fake sudo that
// runs its command as is, a preinstalled runner whose run.sh records its
// arguments, and the pod's environment.
type pod struct {
	t         *testing.T
	bin, home string
	env       map[string]string
}

func newPod(t *testing.T) *pod {
	t.Helper()
	for _, tool := range []string{"bash", "base64", "gunzip", "sha256sum", "mktemp", "env"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed: %v", tool, err)
		}
	}
	p := &pod{t: t, bin: t.TempDir(), home: t.TempDir(), env: map[string]string{}}
	write := func(path, body string) {
		if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Both record, in order, into the pod's event log.
	write(filepath.Join(p.bin, "sudo"), "#!/bin/sh\necho sudo \"$@\" >> "+p.events()+"\n[ \"$1\" = --preserve-env ] && shift\nexec \"$@\"\n")
	write(filepath.Join(p.home, "run.sh"), "#!/bin/sh\necho register >> "+p.events()+"\necho \"$@\" > registered\nenv > registered-env\n")
	return p
}

// start runs the pod's startup command the way the container's shell
// would, and returns its exit code and output.
func (p *pod) start(command string) (int, string) {
	p.t.Helper()
	cmd := exec.Command("sh", "-c", command)
	cmd.Env = []string{"PATH=" + p.bin + ":" + os.Getenv("PATH"), "TMPDIR=" + p.t.TempDir()}
	for k, v := range p.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), string(out)
	}
	if err != nil {
		p.t.Fatal(err)
	}
	return 0, string(out)
}

// events is the file where the pod's sudo and runner record what ran.
func (p *pod) events() string { return filepath.Join(p.home, "events") }

func (p *pod) registered() (string, bool) {
	b, err := os.ReadFile(filepath.Join(p.home, "registered"))
	return strings.TrimSpace(string(b)), err == nil
}

func executable(t *testing.T, name string) []byte {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Skip(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || !bytes.HasPrefix(b, []byte("\x7fELF")) {
		t.Skipf("%s is not a readable ELF executable", path)
	}
	return b
}

// startup renders the pod's startup for a proof binary and puts its
// environment, plus a JIT config, into the pod.
func (p *pod) startup(proof []byte) PodStartup {
	p.t.Helper()
	return p.startupWith(example(), proof)
}

func (p *pod) startupWith(cfg Config, proof []byte) PodStartup {
	p.t.Helper()
	st, err := NewPodStartup(cfg, proof, ScriptParams{RunnerDir: p.home})
	if err != nil {
		p.t.Fatal(err)
	}
	maps.Copy(p.env, st.Env)
	p.env["RUNNER_JIT_CONFIG"] = "JITSECRET-0123456789"
	return st
}

// The seed: the proof "is embedded into the startup script by the trusted
// start-runpod job from its own checkout (no pod-side network fetch), and
// receives its parameters through non-secret pod environment variables".
// Here the proof is env(1), so its output is the environment it ran with.
func TestStartupScript_ProofTravelsInsideTheStartupPayload(t *testing.T) {
	p := newPod(t)
	st := p.startup(executable(t, "env"))
	if strings.Contains(st.Command, "curl") || strings.Contains(st.Command, "wget") || strings.Contains(st.Command, "http") {
		t.Error("the startup command must not fetch anything")
	}
	code, out := p.start(st.Command)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if !strings.Contains(out, EnvTiers+"={") {
		t.Errorf("the proof did not receive the tier table:\n%s", out)
	}
	// It leaves its result (the tier it chose) where the job reads it.
	if !strings.Contains(out, EnvResult+"="+DefaultResultPath+"\n") {
		t.Errorf("the proof was not told to write its result to %s:\n%s", DefaultResultPath, out)
	}
	for _, leaked := range []string{EnvProofChunk + "00=", EnvProofSHA256 + "="} {
		if strings.Contains(out, leaked) {
			t.Errorf("the proof's environment carries %s", leaked)
		}
	}
	if args, ok := p.registered(); !ok || args != "--jitconfig JITSECRET-0123456789" {
		t.Errorf("after a passing proof the runner must register with the JIT config: %q %v", args, ok)
	}
}

// The seed: "the single-use, single-job JIT runner config is the one
// credential that necessarily does [reach the pod], and the smoke child
// runs with it stripped from its environment (env -u RUNNER_JIT_CONFIG)".
// Nor does the runner keep it in the environment its jobs inherit.
func TestStartupScript_TheProofRunsWithTheJITConfigStripped(t *testing.T) {
	p := newPod(t)
	st := p.startup(executable(t, "env"))
	code, out := p.start(st.Command)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, leaked := range []string{"RUNNER_JIT_CONFIG=", "JITSECRET"} {
		if strings.Contains(out, leaked) {
			t.Errorf("the proof's environment carries %s", leaked)
		}
	}
	runnerEnv, err := os.ReadFile(filepath.Join(p.home, "registered-env"))
	if err != nil {
		t.Fatal(err)
	}
	for _, leaked := range []string{"JITSECRET", EnvProofChunk + "00="} {
		if strings.Contains(string(runnerEnv), leaked) {
			t.Errorf("the runner's environment, which its jobs inherit, carries %s", leaked)
		}
	}
}

// The seed: the proof "runs on the pod, as root, inside the startup script
// BEFORE the GitHub runner registers".
func TestStartupScript_TheProofRunsAsRootBeforeTheRunnerRegisters(t *testing.T) {
	p := newPod(t)
	st := p.startup(executable(t, "true"))
	if code, out := p.start(st.Command); code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	events, err := os.ReadFile(p.events())
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(events)), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "sudo --preserve-env env -u RUNNER_JIT_CONFIG /") || lines[1] != "register" {
		t.Errorf("want the proof under sudo, then the registration; the pod ran:\n%s", events)
	}
}

// The seed: the NVRTC packages "have no package dependencies and are
// installed directly with dpkg, avoiding a package-index refresh before
// registration".
func TestRealEnv_InstallsWithDpkgAndNoPackageIndexRefresh(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	for _, tool := range []string{"dpkg", "apt-get", "apt"} {
		os.WriteFile(filepath.Join(dir, tool), []byte("#!/bin/sh\necho "+tool+" \"$@\" >> \"$(dirname \"$0\")/calls\"\n"), 0o755)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	if err := (RealEnv{}).Install(context.Background(), "/tmp/cuda-nvrtc-12-8_12.8.93-1.deb"); err != nil {
		t.Fatal(err)
	}
	calls, _ := os.ReadFile(filepath.Join(dir, "calls"))
	if string(calls) != "dpkg -i /tmp/cuda-nvrtc-12-8_12.8.93-1.deb\n" {
		t.Errorf("install ran:\n%s", calls)
	}
}

// The seed: "On failure it exits nonzero, the container stops, and the pod
// never becomes a runner."
func TestStartupScript_AFailedProofStopsTheContainerBeforeRegistration(t *testing.T) {
	p := newPod(t)
	st := p.startup(executable(t, "false"))
	code, out := p.start(st.Command)
	if code == 0 {
		t.Fatalf("a failed proof must exit non-zero:\n%s", out)
	}
	if _, ok := p.registered(); ok {
		t.Error("the runner registered after a failed proof")
	}
	if !strings.Contains(out, "never registers a runner") {
		t.Errorf("the failure must say why:\n%s", out)
	}
}

func TestStartupScript_AProofThatDoesNotMatchItsChecksumNeverRuns(t *testing.T) {
	p := newPod(t)
	st := p.startup(executable(t, "true"))
	p.env[EnvProofSHA256] = strings.Repeat("0", 64)
	code, out := p.start(st.Command)
	if code == 0 || strings.Contains(out, "running the CUDA proof") {
		t.Fatalf("a payload that does not match its checksum must stop before the proof runs (exit %d):\n%s", code, out)
	}
	if _, ok := p.registered(); ok {
		t.Error("the runner registered")
	}
	p = newPod(t)
	st = p.startup(executable(t, "true"))
	delete(p.env, st.Payload.Chunks[len(st.Payload.Chunks)-1])
	if code, out := p.start(st.Command); code == 0 {
		t.Fatalf("a missing chunk must stop startup:\n%s", out)
	}
}

// The proof downloads NVRTC with the image's curl (no HTTP stack in the
// binary): HTTPS only, redirects included, failing on an HTTP error.
func TestRealEnv_DownloadsWithTheImagesCurlOverHTTPSOnly(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	curl := filepath.Join(dir, "curl")
	os.WriteFile(curl, []byte(`#!/bin/sh
echo "$@" > "$(dirname "$0")/args"
while [ "$#" -gt 0 ]; do
  if [ "$1" = --output ]; then printf 'deb' > "$2"; fi
  shift
done
[ -z "$FAIL" ] || { echo "curl: (22) The requested URL returned error: 404" >&2; exit 22; }
`), 0o755)
	dst := filepath.Join(dir, "p.deb")
	env := RealEnv{Curl: curl}
	if err := env.Download(context.Background(), "https://example.invalid/p.deb", dst); err != nil {
		t.Fatal(err)
	}
	args, _ := os.ReadFile(filepath.Join(dir, "args"))
	for _, want := range []string{"--fail", "--proto =https", "--proto-redir =https", "-- https://example.invalid/p.deb"} {
		if !strings.Contains(string(args), want) {
			t.Errorf("curl %s lacks %q", args, want)
		}
	}
	if b, _ := os.ReadFile(dst); string(b) != "deb" {
		t.Errorf("downloaded %q", b)
	}
	t.Setenv("FAIL", "1")
	err := env.Download(context.Background(), "https://example.invalid/p.deb", dst)
	var ce *CommandError
	if !errors.As(err, &ce) || ce.Command != curl {
		t.Fatalf("err = %v, want a CommandError from %s", err, curl)
	}
	if !strings.Contains(err.Error(), "404") {
		t.Errorf("a failed download must say why: %v", err)
	}
}

// The seed: "NVIDIA compute/utility capabilities are passed explicitly
// because this is not a CUDA base image." The container runtime reads them
// at creation, so they belong in the create request, not the script.
func TestNewPodStartup_PassesTheNVIDIACapabilitiesAtCreation(t *testing.T) {
	st, err := NewPodStartup(example(), nil, ScriptParams{})
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Env["NVIDIA_DRIVER_CAPABILITIES"]; got != "compute,utility" {
		t.Errorf("NVIDIA_DRIVER_CAPABILITIES = %q", got)
	}
	if _, ok := st.Env["NVIDIA_VISIBLE_DEVICES"]; ok {
		t.Error("the provider assigns the GPU; the request must not widen NVIDIA_VISIBLE_DEVICES")
	}
}

func TestExecFits_LinuxLimits(t *testing.T) {
	full := strings.Repeat("a", MaxArgBytes-1) // with its NUL, exactly one exec string
	tests := map[string]struct {
		args []string
		env  map[string]string
		want bool
	}{
		"an argument at the string limit":    {[]string{full}, nil, true},
		"an argument one byte over":          {[]string{full + "a"}, nil, false},
		"a variable one byte over":           {nil, map[string]string{"K": full[2:] + "a"}, false},
		"many strings within the total":      {nil, manyStrings(15, full[8:]), true},
		"many strings over the 2 MiB total":  {nil, manyStrings(17, full[8:]), false},
		"arguments and environment together": {[]string{full}, manyStrings(15, full[8:]), false},
	}
	for name, tt := range tests {
		if got := ExecFits(tt.args, tt.env); got != tt.want {
			t.Errorf("%s: ExecFits = %v, want %v", name, got, tt.want)
		}
	}
}

func manyStrings(n int, v string) map[string]string {
	m := map[string]string{}
	for i := range n {
		m[fmt.Sprintf("V%02d", i)] = v
	}
	return m
}

// TestTheBuiltProof builds ./examples/smoke the way provision does
// (ProofBuildArgs, CGO_ENABLED=0), packs it into the pod's environment and
// starts the rendered startup command under this machine's real exec
// limit. The proof is rebuilt from the environment, verified and run: on a
// host without a driver it fails and the runner never registers; on a host
// with nvidia-smi, curl, dpkg and a dynamically loaded driver (the C
// stand-ins in testdata/fakecuda) it passes every step through purego's
// ABI, and only then does the runner register.
// buildProof builds examples/smoke as the Action does (ProofBuildArgs,
// CGO_ENABLED=0) and returns its path and bytes, skipping the test without
// a Go toolchain.
func buildProof(t *testing.T) (string, []byte) {
	t.Helper()
	// A GPU host without Go runs the proof built where Go is:
	//   CGO_ENABLED=0 go build -trimpath -gcflags=all=-l -ldflags="-s -w" -o bin/gpugate-smoke ./examples/smoke
	// (ProofBuildArgs), named by GPUGATE_PROOF_BIN.
	if bin := os.Getenv("GPUGATE_PROOF_BIN"); bin != "" {
		proof, err := os.ReadFile(bin)
		if err != nil {
			t.Fatalf("GPUGATE_PROOF_BIN: %v", err)
		}
		return bin, proof
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go toolchain to build the proof")
	}
	bin := filepath.Join(t.TempDir(), "gpugate-smoke")
	build := exec.Command(gobin, append(slices.Clone(ProofBuildArgs), "-o", bin, "../examples/smoke")...)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	proof, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	return bin, proof
}

func TestTheBuiltProof(t *testing.T) {
	bin, proof := buildProof(t)

	t.Run("travels in the create request and fails without a driver", func(t *testing.T) {
		p := newPod(t)
		st := p.startup(proof)
		t.Logf("%v", st.Payload)
		code, out := p.start(st.Command)
		if code == 0 || !strings.Contains(out, "smoke: the CUDA proof failed at step") || !strings.Contains(out, "never registers a runner") {
			t.Errorf("the rebuilt proof must run and fail (exit %d):\n%s", code, out)
		}
		if _, ok := p.registered(); ok {
			t.Error("the runner registered without a proof")
		}
	})

	// The cache-trust seed: a restored or newly installed toolkit tree
	// "must compile a small PTX kernel before use/publication". The same
	// binary proves it on a hosted runner: NVRTC alone, no driver on the
	// loader's path, no GPU.
	t.Run("-compile-only proves a toolkit tree without a driver", func(t *testing.T) {
		compiler(t)
		libs := fakeLibs(t, t.TempDir())
		for name, tc := range map[string]struct {
			args []string
			code int
			want string
		}{
			"a good tree":        {[]string{"-compile-only", libs.nvrtc, "-arch", "compute_90"}, 0, "NVRTC 12.8 compiled"},
			"a tree without it":  {[]string{"-compile-only", libs.driver}, 13, "no loadable libnvrtc.so"},
			"not an arch":        {[]string{"-compile-only", libs.nvrtc, "-arch", "sm_90"}, 13, "is not compute_XY"},
			"the default target": {[]string{"-compile-only", libs.nvrtc}, 0, "for compute_90"},
		} {
			cmd := exec.Command(bin, tc.args...)
			cmd.Env = []string{"PATH=/usr/bin:/bin"} // no LD_LIBRARY_PATH: libcuda.so.1 is nowhere
			out, _ := cmd.CombinedOutput()
			if got := cmd.ProcessState.ExitCode(); got != tc.code || !strings.Contains(string(out), tc.want) {
				t.Errorf("%s: exit %d, want %d and %q:\n%s", name, got, tc.code, tc.want, out)
			}
		}
	})

	t.Run("passes every step on a GPU host, then the runner registers", func(t *testing.T) {
		p := gpuPod(t)
		code, out := p.start(p.startupWith(p.cfg, proof).Command)
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		for _, step := range []string{StepDriver, StepTier, StepInstall, StepCompile, StepLaunch, StepVRAM} {
			if !strings.Contains(out, "ok   "+step) {
				t.Errorf("step %s did not pass:\n%s", step, out)
			}
		}
		for _, want := range []string{"tier full (NVRTC 12.8)", "for compute_90", "verified 4096 values", "CUDA proof passed"} {
			if !strings.Contains(out, want) {
				t.Errorf("the proof's output lacks %q:\n%s", want, out)
			}
		}
		if calls, _ := os.ReadFile(filepath.Join(p.bin, "calls")); string(calls) != "curl\ndpkg -i\n" {
			t.Errorf("the pod ran %q, want one download and one dpkg -i", calls)
		}
		if args, ok := p.registered(); !ok || args != "--jitconfig JITSECRET-0123456789" {
			t.Errorf("after a passing proof the runner must register: %q %v", args, ok)
		}
	})

	t.Run("a launch failure stops the container before registration", func(t *testing.T) {
		p := gpuPod(t)
		p.env["FAKE_CUDA_FAIL"] = "cuLaunchKernel=719"
		code, out := p.start(p.startupWith(p.cfg, proof).Command)
		if code == 0 || !strings.Contains(out, "failed at step launch") || !strings.Contains(out, "cuLaunchKernel failed: CUDA_ERROR_LAUNCH_FAILED (719)") {
			t.Errorf("exit %d:\n%s", code, out)
		}
		if _, ok := p.registered(); ok {
			t.Error("the runner registered after a failed launch")
		}
	})
}

// gpuPod is a pod on a GPU host: an H200 behind nvidia-smi, curl serving
// the tier's package, dpkg installing its NVRTC (libnvrtc and its
// builtins) into the tier's lib_dir, and the fake driver on the loader's
// path, as the NVIDIA runtime puts it. Its cfg pins the package.
type podWithGPU struct {
	*pod
	cfg Config
}

func gpuPod(t *testing.T) podWithGPU {
	t.Helper()
	libs := fakeLibs(t, t.TempDir())
	p := newPod(t)
	deb := filepath.Join(t.TempDir(), "cuda-nvrtc.deb")
	if err := os.WriteFile(deb, debBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	libDir := t.TempDir()
	cfg := pinned()
	for i := range cfg.Tiers {
		cfg.Tiers[i].LibDir = libDir
	}
	calls := filepath.Join(p.bin, "calls")
	for name, body := range map[string]string{
		"nvidia-smi": `case "$1" in
--query-gpu=*) echo "NVIDIA H200, 570.124.06, 143771, 9.0" ;;
*) echo '| NVIDIA-SMI 570.124.06             Driver Version: 570.124.06     CUDA Version: 12.8     |' ;;
esac`,
		"curl": `echo curl >> ` + calls + `
while [ $# -gt 0 ]; do [ "$1" = --output ] && out="$2"; shift; done
cp ` + deb + ` "$out"`,
		"dpkg": `echo dpkg "$1" >> ` + calls + `
cmp -s "$2" ` + deb + ` && cp -P ` + libs.nvrtc + "/* " + libDir + "/",
	} {
		if err := os.WriteFile(filepath.Join(p.bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p.env["LD_LIBRARY_PATH"] = libs.driver
	return podWithGPU{p, cfg}
}

// The seed: the proof "receives its parameters through non-secret pod
// environment variables". Whatever a parameter's value holds (quotes,
// backslashes, dollars, backticks, braces), the proof receives it exactly.
func FuzzStartupScript_ParametersReachTheProofExactly(f *testing.F) {
	for _, v := range []string{"", "plain", `a"b`, `a\b`, "a$b${c}`d`", "}{", `\}`, "x}y", "'single'", "$(id)", "a b\tc", "\\", "$"} {
		f.Add(v)
	}
	env, err := exec.LookPath("env")
	if err != nil {
		f.Skip(err)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if strings.ContainsAny(v, "\n\r\x00") || !utf8.ValidString(v) {
			return // refused: a value spans lines (tested apart)
		}
		p := newPod(t)
		script, err := StartupScript(ScriptParams{Env: map[string]string{"GPUGATE_PARAM": v}, ProofPath: env, RunnerDir: p.home})
		if err != nil {
			t.Fatal(err)
		}
		p.env["RUNNER_JIT_CONFIG"] = "JITSECRET-0123456789"
		code, out := p.start(StartupCommand(script))
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		if !strings.Contains(out, "\nGPUGATE_PARAM="+v+"\n") {
			t.Errorf("the proof did not receive %q:\n%s", v, out)
		}
	})
}
