package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpugate/gpugate/smoke"
	"github.com/gpugate/gpugate/smoke/tiers"
)

// brokenEnv fails at nvidia-smi, like a pod without a visible driver.
type brokenEnv struct{ smoke.RealEnv }

func (brokenEnv) NvidiaSMI(context.Context) ([]byte, []byte, error) {
	return nil, nil, errors.New("nvidia-smi: executable file not found")
}

// exampleEnv is a pod's environment with the example tier table, as
// provision renders it.
func exampleEnv(t *testing.T) func(string) string {
	t.Helper()
	cfg, err := tiers.Load(tiers.Example)
	if err != nil {
		t.Fatal(err)
	}
	js, err := cfg.JSON()
	if err != nil {
		t.Fatal(err)
	}
	return func(k string) string { return map[string]string{smoke.EnvTiers: js}[k] }
}

func TestExitCodePerFailureClass(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), nil, exampleEnv(t), brokenEnv{}, &out, &errOut); code != 10 {
		t.Errorf("exit %d, want 10 for the driver step\n%s%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "FAIL driver") {
		t.Errorf("%s", out.String())
	}
}

func TestBadConfigurationExitsTwo(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tiers.json")
	os.WriteFile(p, []byte(`{"tiers": []}`), 0o644)
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"-tiers", p}, exampleEnv(t), brokenEnv{}, &out, &errOut); code != 2 {
		t.Errorf("an empty tier table: exit %d", code)
	}
	if code := run(context.Background(), nil, func(string) string { return "" }, brokenEnv{}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), smoke.EnvTiers) {
		t.Errorf("no tier table: exit %d, %s", code, errOut.String())
	}
	tiers := exampleEnv(t)
	env := func(k string) string {
		if k == "GPUGATE_MIN_VRAM_GB" {
			return "lots"
		}
		return tiers(k)
	}
	if code := run(context.Background(), nil, env, brokenEnv{}, &out, &errOut); code != 2 {
		t.Errorf("a VRAM floor that is not a number: exit %d", code)
	}
}

// TestTheBuiltProofTravelsInTheCreateRequest builds this program the way
// provision does (static, stripped), packs it into the pod's environment,
// and starts the rendered startup command under the real exec limit: the
// proof is rebuilt from the environment, verified and run (here it fails
// at the driver step, as on a host without a GPU) and the runner never
// registers.
func TestTheBuiltProofTravelsInTheCreateRequest(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go toolchain to build the proof")
	}
	for _, tool := range []string{"bash", "base64", "gunzip", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "gpugate-smoke")
	build := exec.Command(gobin, append(smoke.ProofBuildArgs, "-o", bin, ".")...)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	proof, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := tiers.Load(tiers.Example)
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "runner")
	st, err := smoke.NewPodStartup(cfg, proof, smoke.ScriptParams{RunnerDir: home})
	if err != nil {
		t.Fatalf("the proof must fit the create request: %v", err)
	}
	t.Logf("%v", st.Payload)
	// A pod: sudo runs its command, the runner's run.sh records that it
	// ran, nvidia-smi is absent.
	os.Mkdir(home, 0o755)
	os.WriteFile(filepath.Join(dir, "sudo"), []byte("#!/bin/sh\nshift\nexec \"$@\"\n"), 0o755)
	os.WriteFile(filepath.Join(home, "run.sh"), []byte("#!/bin/sh\ntouch registered\n"), 0o755)
	cmd := exec.Command("sh", "-c", st.Command)
	cmd.Env = []string{"PATH=" + dir + ":/usr/bin:/bin", "TMPDIR=" + dir, "RUNNER_JIT_CONFIG=JITSECRET"}
	for k, v := range st.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("without a GPU the proof must fail:\n%s", out)
	}
	if !strings.Contains(string(out), "FAIL driver") || !strings.Contains(string(out), "never registers a runner") {
		t.Errorf("the rebuilt proof must run and fail at the driver step:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(home, "registered")); err == nil {
		t.Error("the runner registered without a proof")
	}
}
