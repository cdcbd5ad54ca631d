package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	empty := filepath.Join(t.TempDir(), "empty.json")
	os.WriteFile(empty, nil, 0o644)
	errOut.Reset()
	if code := run(context.Background(), []string{"-tiers", empty}, exampleEnv(t), brokenEnv{}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "-tiers "+empty+" is empty") {
		t.Errorf("an empty -tiers file: exit %d, %s", code, errOut.String())
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

// -compile-only proves a tree without a GPU: a directory without NVRTC
// fails the compile step (exit 13); -include and -header go together.
func TestCompileOnlyChecksATreeAndRefusesHalfAHeaderCheck(t *testing.T) {
	tree := t.TempDir()
	for name, tc := range map[string]struct {
		args []string
		code int
		want string
	}{
		"no NVRTC in the tree":        {[]string{"-compile-only", filepath.Join(tree, "lib64")}, 13, "libnvrtc"},
		"headers without a directory": {[]string{"-compile-only", tree, "-header", "cuda_fp16.h"}, 2, "-include and -header go together"},
		"a directory without headers": {[]string{"-compile-only", tree, "-include", tree}, 2, "-include and -header go together"},
		"headers without a tree":      {[]string{"-include", tree, "-header", "cuda_fp16.h"}, 2, "-include and -header go together"},
	} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), tc.args, func(string) string { return "" }, brokenEnv{}, &out, &errOut); code != tc.code || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%s: exit %d, want %d and %q:\n%s%s", name, code, tc.code, tc.want, out.String(), errOut.String())
		}
	}
}

// -compile-only -json prints one document, also when the tree fails: what
// compiled, in order, and the error.
func TestCompileOnlyJSONSaysWhatCompiledAndWhy(t *testing.T) {
	var out, errOut bytes.Buffer
	lib := filepath.Join(t.TempDir(), "lib64")
	if code := run(context.Background(), []string{"-compile-only", lib, "-arch", "compute_89", "-json"}, func(string) string { return "" }, brokenEnv{}, &out, &errOut); code != 13 {
		t.Fatalf("exit %d, want 13:\n%s%s", code, out.String(), errOut.String())
	}
	var got compileTreeResult
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("stdout is not one JSON document: %v\n%s", err, out.String())
	}
	if got.OK || got.LibDir != lib || got.Arch != "compute_89" || got.Checks == nil || len(got.Checks) != 0 || !strings.Contains(got.Error, "libnvrtc") {
		t.Errorf("%+v", got)
	}
	if !strings.Contains(errOut.String(), "libnvrtc") {
		t.Errorf("the error is not in the log too: %q", errOut.String())
	}
}

// The proof leaves its result for the job that runs on the pod, passed or
// failed, where the pod's environment says (smoke.EnvResult).
func TestTheProofWritesItsResultWhereThePodSays(t *testing.T) {
	file := filepath.Join(t.TempDir(), "proof.json")
	tiers := exampleEnv(t)
	env := func(k string) string {
		if k == smoke.EnvResult {
			return file
		}
		return tiers(k)
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), nil, env, brokenEnv{}, &out, &errOut); code != 10 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errOut.String())
	}
	data, err := os.ReadFile(file)
	var res resultJSON
	if err != nil || json.Unmarshal(data, &res) != nil || len(res.Steps) == 0 || res.Steps[0].Step != smoke.StepDriver || res.Steps[0].Error == "" {
		t.Errorf("result file %s (%v)", data, err)
	}
	if _, err := time.ParseDuration(res.Steps[0].Duration); err != nil {
		t.Errorf("the step's duration %q is not a duration string: %v", res.Steps[0].Duration, err)
	}
	if info, err := os.Stat(file); err != nil || info.Mode().Perm() != 0o644 {
		t.Errorf("the job (another user) must read it: %v %v", info, err)
	}
}
