package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpugate/gpugate/smoke"
)

// brokenEnv fails at nvidia-smi, like a pod without a visible driver.
type brokenEnv struct{ smoke.RealEnv }

func (brokenEnv) NvidiaSMI(context.Context) ([]byte, []byte, error) {
	return nil, nil, errors.New("nvidia-smi: executable file not found")
}

func TestExitCodePerFailureClass(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), nil, func(string) string { return "" }, brokenEnv{}, &out, &errOut); code != 10 {
		t.Errorf("exit %d, want 10 for the driver step\n%s%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "FAIL driver") {
		t.Errorf("%s", out.String())
	}
}

func TestBadConfigurationExitsTwo(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tiers.yml")
	os.WriteFile(p, []byte("tiers: []\n"), 0o644)
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"-tiers", p}, func(string) string { return "" }, brokenEnv{}, &out, &errOut); code != 2 {
		t.Errorf("exit %d", code)
	}
	env := map[string]string{"GPUGATE_MIN_VRAM_GB": "lots"}
	if code := run(context.Background(), nil, func(k string) string { return env[k] }, brokenEnv{}, &out, &errOut); code != 2 {
		t.Errorf("exit %d", code)
	}
}
