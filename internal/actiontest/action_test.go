// Package actiontest checks the composite actions (action.yml at the
// repository root, the compatibility dispatcher, and one action per step,
// <step>/action.yml): every input and output is wired, every step's
// command runs against the fakes, and the commands are installed from a
// verified release or built from source.
package actiontest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/gpugate/gpugate/gate"
	"github.com/gpugate/gpugate/smoke"
	"github.com/gpugate/gpugate/smoke/tiers"
)

type action struct {
	Name        string                       `yaml:"name"`
	Description string                       `yaml:"description"`
	Branding    struct{ Icon, Color string } `yaml:"branding"`
	Inputs      map[string]struct {
		Description, Default string
		Required             bool
	} `yaml:"inputs"`
	Outputs map[string]struct{ Description, Value string } `yaml:"outputs"`
	Runs    struct {
		Using string       `yaml:"using"`
		Steps []actionStep `yaml:"steps"`
	} `yaml:"runs"`
}

type actionStep struct {
	ID    string            `yaml:"id"`
	Name  string            `yaml:"name"`
	If    string            `yaml:"if"`
	Uses  string            `yaml:"uses"`
	With  map[string]string `yaml:"with"`
	Env   map[string]string `yaml:"env"`
	Shell string            `yaml:"shell"`
	Run   string            `yaml:"run"`
}

// step returns the action's step with the id, or nil.
func (a action) step(id string) *actionStep {
	for i := range a.Runs.Steps {
		if a.Runs.Steps[i].ID == id {
			return &a.Runs.Steps[i]
		}
	}
	return nil
}

const root = "../.."

func loadAction(t *testing.T) action { return loadActionFile(t, "action.yml") }

// loadActionFile reads the action.yml at rel, relative to the repository.
func loadActionFile(t *testing.T, rel string) action {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	var a action
	if err := yaml.Unmarshal(data, &a); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	return a
}

func envName(input string) string {
	switch input {
	case "github-token":
		return "GITHUB_TOKEN"
	case "runpod-api-key":
		return "RUNPOD_API_KEY"
	}
	return "GPUGATE_" + strings.ToUpper(strings.ReplaceAll(input, "-", "_"))
}

// fakeGitHub serves the REST calls the gate and classify steps make.
func fakeGitHub(t *testing.T) *httptest.Server {
	var mu sync.Mutex
	var created []string
	mux := http.NewServeMux()
	const pr = `{"number":5,"state":"open","changed_files":2,"mergeable":true,"merge_commit_sha":"2222222222222222222222222222222222222222",
		"head":{"sha":"1111111111111111111111111111111111111111","repo":{"id":1}},"base":{"repo":{"id":1}},"labels":[{"name":"gpu-validated-locally"}]}`
	mux.HandleFunc("GET /api/v3/repos/o/r/pulls/5", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, pr) })
	mux.HandleFunc("GET /api/v3/repos/o/r/pulls/5/files", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `[{"filename":"crates/kernels/src/gemv.cu","status":"modified"},{"filename":"README.md","status":"modified"}]`)
	})
	mux.HandleFunc("GET /api/v3/repos/o/r/collaborators/{user}/permission", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"permission":"admin","role_name":"maintain"}`)
	})
	mux.HandleFunc("GET /api/v3/repos/o/r/commits/{sha}/check-runs", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"total_count":0,"check_runs":[]}`)
	})
	mux.HandleFunc("POST /api/v3/repos/o/r/check-runs", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		created = append(created, r.URL.Path)
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"id":77,"status":"completed","conclusion":"success","external_id":"x"}`)
	})
	mux.HandleFunc("GET /api/v3/repos/o/r/issues/5/comments", func(w http.ResponseWriter, r *http.Request) {
		body, _ := json.Marshal([]map[string]any{{"body": gate.EvidenceMarker(strings.Repeat("1", 40)) + "\nall CUDA tests passed", "user": map[string]any{"login": "maint"}}})
		w.Write(body)
	})
	mux.HandleFunc("GET /api/v3/repos/o/r", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"id":1,"default_branch":"main"}`) })
	mux.HandleFunc("GET /api/v3/repos/o/r/actions/artifacts", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"total_count":1,"artifacts":[{"id":8,"name":%q,"expires_at":"2099-01-01T00:00:00Z","workflow_run":{"id":80}}]}`, r.URL.Query().Get("name"))
	})
	mux.HandleFunc("GET /api/v3/repos/o/r/actions/runs/80", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"id":80,"path":".github/workflows/ci-cache-publish.yml","event":"push","head_branch":"main","head_repository":{"id":1}}`)
	})
	mux.HandleFunc("POST /api/v3/repos/o/r/actions/workflows/runpod-gpu-test.yml/dispatches", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("unexpected GitHub call %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestEveryStepRunsAgainstTheFakes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the example programs")
	}
	for _, tool := range []string{"bash", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
	a := loadAction(t)
	abs, _ := filepath.Abs(root)
	bin := t.TempDir()
	bindir := bin
	progs := []string{"classify", "gate", "provision", "watch", "cleanup", "reap", "partition", "cachecheck", "costreport", "smoke"}
	build := exec.Command("go", append([]string{"build", "-o", bin + "/"}, func() []string {
		var p []string
		for _, n := range progs {
			p = append(p, "./examples/"+n)
		}
		return p
	}()...)...)
	build.Dir = abs
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	// A stub go: the dispatcher's `go build -o .../gpugate-run/X
	// ./examples/X` copies the prebuilt X; any other `go build` records its
	// arguments (one per line) and writes a stand-in ELF to -o; `go run
	// ./examples/X args` (cuda-tree's checks) runs the prebuilt X.
	stub := t.TempDir()
	os.WriteFile(filepath.Join(stub, "go"), []byte(`#!/usr/bin/env bash
if [ "$1" = run ]; then
	p=$(basename "$2"); shift 2
	exec "`+bin+`/$p" "$@"
fi
[ "$1" = build ] || exit 99
out=; prev=
for a in "$@"; do [ "$prev" = -o ] && out=$a; prev=$a; done
if [ "$(basename "$(dirname "$out")")" = gpugate-run ]; then
	mkdir -p "$(dirname "$out")"
	exec cp "`+bin+`/$(basename "$prev")" "$out"
fi
printf '%s\n' "$@" > "$HOME/go-build-args"
printf '%s\n' "${GOOS:-}/${GOARCH:-}" > "$HOME/go-build-platform"
# An x86-64 ELF header, up to e_machine: the pods' platform.
printf '\177ELF\002\001\001\000\000\000\000\000\000\000\000\000\002\000\076\000' > "$out"
`), 0o755)
	gh := fakeGitHub(t)
	// The bundled partition example leaves one test out on purpose; the
	// action's check passes once it is categorized.
	tsv, err := os.ReadFile(filepath.Join(abs, "examples/partition/example/cuda_test_partition.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	fixed := filepath.Join(t.TempDir(), "cuda_test_partition.tsv")
	os.WriteFile(fixed, append(tsv, "tenferro-cuda::capability\ttwo_device_registration\ttwo-device\n"...), 0o644)
	pinned := filepath.Join(t.TempDir(), "nvrtc-tiers.yml")
	os.WriteFile(pinned, []byte(strings.ReplaceAll(string(tiers.Example), `sha256: ""`, "sha256: "+strings.Repeat("ab", 32))), 0o644)
	// free-disk deletes the toolchains it is given (here one of ours).
	freeable := filepath.Join(t.TempDir(), "dotnet")
	os.MkdirAll(filepath.Join(freeable, "sdk"), 0o755)
	os.WriteFile(filepath.Join(freeable, "sdk", "big"), make([]byte, 1<<16), 0o644)
	// cuda-tree's trees and the repository script that installs one: a
	// complete runtime tree, or with BROKEN set one missing cuFFT.
	trees := t.TempDir()
	installTree := filepath.Join(t.TempDir(), "install_cuda_runtime.sh")
	os.WriteFile(installTree, []byte(`#!/usr/bin/env bash
set -e
mkdir -p "$1/lib"
echo abi >"$1/lib/libcutensor.so.2.1.0"
ln -sf libcutensor.so.2.1.0 "$1/lib/libcutensor.so.2"
[ -n "$BROKEN" ] || echo fft >"$1/lib/libcufft.so.11"
[ -z "$STATIC" ] || echo '!<arch>' >"$1/lib/libcutensor_static.a"
env >"$1/install-env"
`), 0o755)
	runtimeReq := "lib/libcutensor.so.2 lib/libcufft.so*"
	rules := filepath.Join(abs, ".github/cache-rules.yml")
	const apiKey = "rpa_action_test_secret_value"
	declared := map[string]bool{}
	for name := range a.Outputs {
		declared[name] = false
	}
	// Each per-step action's outputs, by the name the program writes.
	perStep := map[string]map[string]bool{}
	for _, d := range perStepActions(t) {
		perStep[d] = map[string]bool{}
		for name := range loadActionFile(t, d+"/action.yml").Outputs {
			perStep[d][strings.ReplaceAll(name, "-", "_")] = false
		}
	}
	// Installed from a release, a step runs the verified commands
	// scripts/install.sh put in GPUGATE_BIN (here the prebuilt ones it
	// names for the step, and nothing else), and never Go.
	noGo := t.TempDir()
	os.WriteFile(filepath.Join(noGo, "go"), []byte("#!/bin/sh\necho \"go $*: a step installed from a release ran Go\" >&2\nexit 97\n"), 0o755)
	released := func(t *testing.T, step, commands string) string {
		t.Helper()
		dir := t.TempDir()
		cmd := exec.Command("bash", filepath.Join(abs, "scripts/install.sh"))
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "GPUGATE_ACTION_REF=main", "GPUGATE_STEP=" + step, "GPUGATE_COMMANDS=" + commands, "ACTION_PATH=" + abs, "RUNNER_TEMP=" + dir}
		out, err := cmd.CombinedOutput()
		m := regexp.MustCompile(`building (.*) from source`).FindSubmatch(out)
		if err != nil || m == nil {
			t.Fatalf("install.sh names no commands for %s: %v\n%s", step, err, out)
		}
		bin := filepath.Join(dir, "release")
		os.Mkdir(bin, 0o755)
		for _, c := range strings.Fields(string(m[1])) {
			switch c {
			case "nothing":
			case "smoke":
				// The release's smoke is the proof, built small with
				// smoke.ProofBuildArgs; a stand-in ELF travels as well.
				os.WriteFile(filepath.Join(bin, c), []byte("\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x3e\x00 release proof"), 0o755)
			default:
				os.Symlink(filepath.Join(bindir, c), filepath.Join(bin, c))
			}
		}
		return bin
	}
	steps := []struct {
		step  string
		env   map[string]string
		wants []string // outputs it must write
		is    map[string]string
	}{
		{"classify", map[string]string{"GPUGATE_POLICY": "changepolicy/example_policy.yml", "GPUGATE_PR": "5"}, []string{"class", "docs", "ci", "gpu", "lanes", "jobs", "reason"}, nil},
		// The policy check over the workspace's tracked files (this
		// repository's own checkout).
		{"classify", map[string]string{"GPUGATE_POLICY": "internal/actiontest/testdata/globs-policy.yml", "GPUGATE_CHECK_GLOBS": "true"}, []string{"unmatched"}, map[string]string{"unmatched": "0"}},
		{"authorize", map[string]string{"GPUGATE_ACTOR": "maint", "GPUGATE_PR": "5"}, []string{"head_sha", "tested_ref", "local_gpu_validation"}, map[string]string{"local_gpu_validation": "true"}},
		// A repository that names its own label: PR 5's default label no
		// longer marks it validated locally, at each step that reads it.
		{"authorize", map[string]string{"GPUGATE_ACTOR": "maint", "GPUGATE_PR": "5", "GPUGATE_LOCAL_LABEL": "validated-on-own-gpu"}, nil, map[string]string{"local_gpu_validation": "false"}},
		{"publish", map[string]string{"GPUGATE_PR": "5", "GPUGATE_HEAD_SHA": strings.Repeat("1", 40), "GPUGATE_TESTED_REF": strings.Repeat("2", 40), "GPUGATE_KIND": "failed", "GPUGATE_LOCAL_LABEL": "validated-on-own-gpu"}, nil, map[string]string{"published": "true"}},
		{"reuse", map[string]string{"GPUGATE_HEAD_SHA": strings.Repeat("1", 40), "GPUGATE_TESTED_REF": strings.Repeat("2", 40)}, []string{"reuse", "reason"}, nil},
		{"publish", map[string]string{"GPUGATE_HEAD_SHA": strings.Repeat("1", 40), "GPUGATE_TESTED_REF": strings.Repeat("2", 40), "GPUGATE_KIND": "paid", "GPUGATE_TESTS_PASSED": "true"}, []string{"check_id", "published"}, nil},
		// PR 5 carries the local-validation label: publish re-reads it and
		// publishes nothing, and a real provision buys nothing.
		{"publish", map[string]string{"GPUGATE_PR": "5", "GPUGATE_HEAD_SHA": strings.Repeat("1", 40), "GPUGATE_TESTED_REF": strings.Repeat("2", 40), "GPUGATE_KIND": "failed"}, []string{"published"}, map[string]string{"published": "false"}},
		{"provision", map[string]string{"GPUGATE_PR": "5", "GPUGATE_HEAD_SHA": strings.Repeat("1", 40), "GPUGATE_NVRTC_TIERS": pinned, "GITHUB_RUN_ID": "9"}, []string{"paid_path_skipped"}, map[string]string{"paid_path_skipped": "true"}},
		{"provision", map[string]string{"GPUGATE_SIMULATE": "true"}, []string{"pod_id", "runner_label", "gpu", "tier", "gpu_cost_per_hr", "provision_result"}, nil},
		// A debug dispatch keeps the bundled scenario's exited candidate.
		{"provision", map[string]string{"GPUGATE_SIMULATE": "true", "GPUGATE_KEEP_FAILED_PODS": "true"}, []string{"retention_record", "retention_file"}, map[string]string{"retention_record": "runpod-debug-retained-1-1-pod000001"}},
		{"watch", map[string]string{"GPUGATE_SIMULATE": "true"}, []string{"outcome", "deleted"}, nil},
		{"cleanup", map[string]string{"GPUGATE_SIMULATE": "true", "GPUGATE_CACHE_OBSERVATIONS": "archive=true,cuda-runtime-12.8="}, []string{"deleted", "cost", "cost_known"}, nil},
		{"cleanup", map[string]string{"GPUGATE_SIMULATE": "true", "GPUGATE_PROVISION_RESULT": `{"attempts":[{"n":1,"name":"gpugate-1-1-c1","candidate":{"gpu_type_id":"NVIDIA L4"},"pod_id":"p1","outcome":"exited","seconds":95,"estimated_cost":0.018}]}`}, []string{"deleted", "cost"}, nil},
		{"reap", map[string]string{"GPUGATE_SIMULATE": "true"}, nil, nil},
		{"partition-check", map[string]string{"GPUGATE_PARTITION_FILES": fixed, "GPUGATE_INVENTORY": "examples/partition/example/nextest-list.json"}, nil, nil},
		{"partition-select", map[string]string{"GPUGATE_PARTITION_FILES": fixed, "GPUGATE_CATEGORY": "two-device"}, []string{"filter", "not_run", "tests"},
			map[string]string{"filter": "(binary_id(=tenferro-cuda::capability) & (test(=two_device_registration)))", "not_run": "tenferro-cuda::capability two_device_registration (two-device)", "tests": "1"}},
		{"publish", map[string]string{"GPUGATE_HEAD_SHA": strings.Repeat("1", 40), "GPUGATE_TESTED_REF": strings.Repeat("2", 40), "GPUGATE_KIND": "paid", "GPUGATE_TESTS_PASSED": "true",
			"GPUGATE_NOT_RUN": "tenferro-cuda::capability two_device_registration (two-device)"}, []string{"published"}, nil},
		// This repository's workflows, under its own rules (the release
		// workflow publishes).
		{"cache-check", map[string]string{"GPUGATE_RULES": rules}, nil, nil},
		{"cache-check", map[string]string{"GPUGATE_CACHE_KEY": "true", "GPUGATE_TOOLCHAIN": "rustc 1.95.0 (59807616e 2026-04-14)"}, []string{"key"}, nil},
		{"cache-check", map[string]string{"GPUGATE_FIND_ARTIFACT": "cuda-archive-v1-abc"}, []string{"artifact_id", "artifact_run_id"}, map[string]string{"artifact_id": "8", "artifact_run_id": "80"}},
		{"local-relay", map[string]string{"GPUGATE_ACTOR": "maint", "GPUGATE_PR": "5", "GPUGATE_HEAD_SHA": strings.Repeat("1", 40)}, []string{"check_id"}, nil},
		{"recover", map[string]string{"GPUGATE_PR": "5", "GPUGATE_WORKFLOW": ".github/workflows/runpod-gpu-test.yml"}, []string{"ref"}, nil},
		{"cost-report", map[string]string{"GPUGATE_EVIDENCE_DIR": "examples/costreport/testdata/evidence"}, nil, nil},
		{"install", map[string]string{"GPUGATE_COMMANDS": "partition cachecheck"}, []string{"bin"}, nil},
		{"free-disk", map[string]string{"GPUGATE_FREE_PATHS": freeable + " /nonexistent/gpugate-toolchain"}, []string{"freed_kib"}, nil},
		{"cuda-tree", map[string]string{"GPUGATE_TREE": filepath.Join(trees, "miss"), "GPUGATE_CACHE_HIT": "false", "GPUGATE_INSTALL_SCRIPT": installTree, "GPUGATE_REQUIRE": runtimeReq},
			[]string{"tree_source"}, map[string]string{"tree_source": "installed"}},
	}
	// The classify steps read the repository as git sees it (the policy's
	// repository-relative path, the tracked files). In a copy of the tree
	// without its .git they are skipped, and their outputs with them.
	inGit := exec.Command("git", "-C", abs, "rev-parse", "--is-inside-work-tree").Run() == nil
	keys := map[string]string{} // the content key by toolchain input
	for _, s := range steps {
		for _, mode := range []string{"built from source", "installed from a release"} {
			t.Run(s.step+"/"+mode, func(t *testing.T) {
				if s.step == "classify" && !inGit {
					for _, w := range s.wants {
						declared[w] = true
						perStep[s.step][w] = true
					}
					t.Skip("the repository is not a git checkout here: classify needs git's view of it")
				}
				dir := t.TempDir()
				outFile := filepath.Join(dir, "output")
				path := stub + ":" + os.Getenv("PATH")
				if mode != "built from source" {
					path = noGo + ":" + os.Getenv("PATH")
				}
				env := []string{"PATH=" + path, "HOME=" + dir, "GITHUB_WORKSPACE=" + abs, "ACTION_PATH=" + abs,
					"GITHUB_OUTPUT=" + outFile, "GITHUB_STEP_SUMMARY=" + filepath.Join(dir, "summary"), "RUNNER_TEMP=" + dir,
					"GITHUB_REPOSITORY=o/r", "GITHUB_API_URL=" + gh.URL + "/", "GITHUB_TOKEN=ghs_action_test_token", "RUNPOD_API_KEY=" + apiKey,
					"GPUGATE_STEP=" + s.step}
				if mode != "built from source" {
					env = append(env, "GPUGATE_BIN="+released(t, s.step, s.env["GPUGATE_COMMANDS"]))
				}
				for k, v := range s.env {
					env = append(env, k+"="+v)
				}
				cmd := exec.Command("bash", filepath.Join(abs, "scripts/action.sh"))
				cmd.Env, cmd.Dir = env, dir
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("%v\n%s", err, out)
				}
				for _, secret := range []string{apiKey, "ghs_action_test_token"} {
					if strings.Contains(string(out), secret) {
						t.Errorf("step %s printed a secret", s.step)
					}
				}
				written, _ := os.ReadFile(outFile)
				for _, w := range s.wants {
					if !regexp.MustCompile(`(?m)^` + w + `(=|<<)`).Match(written) {
						t.Errorf("step %s did not write output %s:\n%s", s.step, w, written)
					}
					if _, ok := declared[w]; !ok {
						t.Errorf("step %s writes %s, which action.yml does not declare", s.step, w)
					}
					declared[w] = true
				}
				// Whatever the program writes, the step's own action declares.
				for _, m := range regexp.MustCompile(`(?m)^([a-z_]+)(?:=|<<)`).FindAllSubmatch(written, -1) {
					name := string(m[1])
					if _, ok := perStep[s.step][name]; !ok {
						t.Errorf("step %s writes %s, which %s/action.yml does not declare as %s", s.step, name, s.step, strings.ReplaceAll(name, "_", "-"))
					}
					perStep[s.step][name] = true
				}
				switch s.step {
				case "cache-check":
					// The toolchain input reaches the key.
					if key := regexp.MustCompile(`(?m)^key=(.+)$`).FindSubmatch(written); key != nil {
						keys[s.env["GPUGATE_TOOLCHAIN"]] = string(key[1])
						if len(keys) == 2 && keys[""] == keys[s.env["GPUGATE_TOOLCHAIN"]] {
							t.Errorf("the toolchain input does not change the key %s", keys[""])
						}
					}
				case "install":
					// Each command is built from the Action's checkout into the
					// directory the step puts on the job's PATH.
					bin := filepath.Join(dir, "gpugate-bin")
					for _, c := range []string{"partition", "cachecheck"} {
						if _, err := os.Stat(filepath.Join(bin, c)); err != nil {
							t.Errorf("install did not build %s: %v", c, err)
						}
					}
					if !strings.Contains(string(written), "bin="+bin+"\n") {
						t.Errorf("install's bin output:\n%s", written)
					}
				case "cleanup":
					// The observations reach the cost report.
					if rep, _ := os.ReadFile(filepath.Join(dir, "cost-report.json")); s.env["GPUGATE_CACHE_OBSERVATIONS"] != "" && !strings.Contains(string(rep), `"archive": true`) {
						t.Errorf("the cost report carries no cache observations:\n%s", rep)
					}
				case "free-disk":
					if _, err := os.Stat(freeable); !os.IsNotExist(err) {
						t.Errorf("free-disk left %s: %v", freeable, err)
					}
				}
				if s.step == "reap" {
					// The reaper's decisions are its recovery record: the
					// workflow uploads this file.
					if _, err := os.Stat(filepath.Join(dir, "reap-decisions.json")); err != nil {
						t.Errorf("the reap step wrote no decisions file: %v", err)
					}
				}
				for name, want := range s.is {
					if !regexp.MustCompile(`(?m)^` + name + `=` + regexp.QuoteMeta(want) + `$`).Match(written) {
						t.Errorf("step %s: want output %s=%s:\n%s", s.step, name, want, written)
					}
				}
			})
		}
	}
	for name, seen := range declared {
		if !seen && name != "from_id" { // from_id is written only when a gate is reused
			t.Errorf("declared output %s was written by no step", name)
		}
	}
	for step, outputs := range perStep {
		for name, seen := range outputs {
			if !seen && name != "from_id" && name != "from_url" { // written only when a gate is reused
				t.Errorf("%s/action.yml declares %s, which no run of the step wrote", step, strings.ReplaceAll(name, "_", "-"))
			}
		}
	}
	// A real provision builds the proof from the Action's checkout with
	// smoke.ProofBuildArgs, and refuses to buy pods while the NVRTC tiers
	// are unpinned (the bundled example).
	t.Run("provision builds the proof", func(t *testing.T) {
		dir := t.TempDir()
		cmd := exec.Command("bash", filepath.Join(abs, "scripts/action.sh"))
		cmd.Env = []string{"PATH=" + stub + ":" + os.Getenv("PATH"), "HOME=" + dir, "RUNNER_TEMP=" + dir, "GITHUB_WORKSPACE=" + abs, "ACTION_PATH=" + abs,
			"GITHUB_ACTIONS=true", "GITHUB_REPOSITORY=o/r", "GITHUB_RUN_ID=9", "RUNPOD_API_KEY=" + apiKey, "GITHUB_TOKEN=ghs_action_test_token", "GPUGATE_STEP=provision"}
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "pin its sha256") {
			t.Errorf("want a refusal of the unpinned tiers: %v\n%s", err, out)
		}
		recorded, _ := os.ReadFile(filepath.Join(dir, "go-build-args"))
		want := strings.Join(append(append([]string{}, smoke.ProofBuildArgs...), "-o", filepath.Join(dir, "gpugate-smoke"), "./examples/smoke"), "\n") + "\n"
		if string(recorded) != want {
			t.Errorf("go build args:\n%s\nwant (smoke.ProofBuildArgs):\n%s", recorded, want)
		}
		// The proof runs on the pods, whatever the runner's architecture.
		if platform, _ := os.ReadFile(filepath.Join(dir, "go-build-platform")); strings.TrimSpace(string(platform)) != smoke.ProofPlatform {
			t.Errorf("the proof is built for %q, want the pods' %s", platform, smoke.ProofPlatform)
		}
	})
	// A restored tree is used only after its check; a reader reinstalls a
	// rejected one, the publisher fails on it, and a tree that fails its
	// check after installing is never used.
	t.Run("cuda-tree trusts a tree only after its check", func(t *testing.T) {
		restored := func(name string, broken bool) string {
			dir := filepath.Join(trees, name)
			env := []string{"PATH=" + os.Getenv("PATH")}
			if broken {
				env = append(env, "BROKEN=1")
			}
			cmd := exec.Command(installTree, dir)
			cmd.Env = env
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%v %s", err, out)
			}
			return dir
		}
		for name, tc := range map[string]struct {
			env    map[string]string
			broken bool // the restored tree lacks cuFFT
			code   int
			source string
			says   string
		}{
			"a good restore":                  {map[string]string{"GPUGATE_CACHE_HIT": "true"}, false, 0, "restored", "restored from the cache; checking it"},
			"a reader rejects a bad restore":  {map[string]string{"GPUGATE_CACHE_HIT": "true"}, true, 0, "reinstalled", "::warning::gpugate: the restored"},
			"the publisher fails on it":       {map[string]string{"GPUGATE_CACHE_HIT": "true", "GPUGATE_PUBLISHER": "true"}, true, 1, "", "bump the manual version"},
			"an install that fails its check": {map[string]string{"GPUGATE_CACHE_HIT": "false", "BROKEN": "1"}, false, 1, "", "the newly installed"},
			// What the tree excludes: an installer that keeps it fails.
			"an install without what the tree excludes":    {map[string]string{"GPUGATE_CACHE_HIT": "false", "GPUGATE_EXCLUDE": "**/*.a bin/**"}, false, 0, "installed", "cache miss; installing"},
			"an install that keeps what the tree excludes": {map[string]string{"GPUGATE_CACHE_HIT": "false", "GPUGATE_EXCLUDE": "**/*.a bin/**", "STATIC": "1"}, false, 1, "", "lib/libcutensor_static.a matches the excluded **/*.a"},
			// No NVRTC in this tree: the toolkit cannot prove itself.
			"a toolkit that cannot compile": {map[string]string{"GPUGATE_CACHE_HIT": "false", "GPUGATE_REQUIRE": "", "GPUGATE_COMPILE_ARCH": "compute_90"}, false, 1, "", "failed its check"},
		} {
			t.Run(name, func(t *testing.T) {
				dir := filepath.Join(trees, strings.ReplaceAll(name, " ", "-"))
				if tc.env["GPUGATE_CACHE_HIT"] == "true" {
					restored(filepath.Base(dir), tc.broken)
				}
				home := t.TempDir()
				out := filepath.Join(home, "output")
				cmd := exec.Command("bash", filepath.Join(abs, "scripts/action.sh"))
				cmd.Env = []string{"PATH=" + stub + ":" + os.Getenv("PATH"), "HOME=" + home, "RUNNER_TEMP=" + home, "GITHUB_WORKSPACE=" + abs, "ACTION_PATH=" + abs,
					"GITHUB_OUTPUT=" + out, "GPUGATE_STEP=cuda-tree", "GPUGATE_TREE=" + dir, "GPUGATE_INSTALL_SCRIPT=" + installTree, "GPUGATE_REQUIRE=" + runtimeReq,
					"GITHUB_TOKEN=ghs_action_test_token", "RUNPOD_API_KEY=" + apiKey}
				for k, v := range tc.env {
					cmd.Env = append(cmd.Env, k+"="+v)
				}
				got, _ := cmd.CombinedOutput()
				written, _ := os.ReadFile(out)
				if cmd.ProcessState.ExitCode() != tc.code || !strings.Contains(string(got), tc.says) {
					t.Errorf("exit %d, want %d and %q:\n%s", cmd.ProcessState.ExitCode(), tc.code, tc.says, got)
				}
				if tc.source != "" && !strings.Contains(string(written), "tree_source="+tc.source+"\n") {
					t.Errorf("outputs %q, want tree_source=%s", written, tc.source)
				}
				// The repository's install script runs without the tokens.
				if env, err := os.ReadFile(filepath.Join(dir, "install-env")); err == nil && (strings.Contains(string(env), "ghs_action_test_token") || strings.Contains(string(env), apiKey)) {
					t.Error("the install script was given a token")
				}
			})
		}
	})
	for name, tc := range map[string]struct {
		env  []string
		want string
	}{
		"install of an unknown command":          {[]string{"GPUGATE_COMMANDS=partition rm"}, `::error::gpugate: step install: unknown command "rm"`},
		"install of a path":                      {[]string{"GPUGATE_COMMANDS=../examples/partition"}, `::error::gpugate: step install: unknown command "../examples/partition"`},
		"free-disk of a relative path":           {[]string{"GPUGATE_FREE_PATHS=usr/share/dotnet"}, `::error::gpugate: step free-disk: "usr/share/dotnet" is not an absolute path`},
		"free-disk of the root directory":        {[]string{"GPUGATE_FREE_PATHS=/"}, `::error::gpugate: step free-disk: "/" is not an absolute path`},
		"cuda-tree headers without compile-arch": {[]string{"GPUGATE_TREE=/opt/gpugate-ci/cuda-runtime-12.8", "GPUGATE_INSTALL_SCRIPT=x", "GPUGATE_REQUIRE=lib/x", "GPUGATE_HEADERS=cuda_fp16.h"}, `::error::gpugate: step cuda-tree: headers are compiled by the tree's NVRTC`},
		"cuda-tree without a check":              {[]string{"GPUGATE_TREE=/opt/gpugate-ci/cuda-runtime-12.8", "GPUGATE_INSTALL_SCRIPT=x"}, `::error::gpugate: step cuda-tree needs require or compile-arch`},
	} {
		t.Run(name, func(t *testing.T) {
			step := strings.TrimSuffix(strings.Fields(strings.TrimPrefix(tc.want, "::error::gpugate: step "))[0], ":")
			cmd := exec.Command("bash", filepath.Join(abs, "scripts/action.sh"))
			cmd.Env = []string{"PATH=" + stub + ":" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "RUNNER_TEMP=" + t.TempDir(), "ACTION_PATH=" + abs, "GPUGATE_STEP=" + step}
			cmd.Env = append(cmd.Env, tc.env...)
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), tc.want) {
				t.Errorf("%v %s", err, out)
			}
		})
	}
	// An empty lane: nothing is selected for the pod, so the step fails
	// before anything is bought, unless the workflow says it is expected.
	t.Run("partition-select of an empty lane", func(t *testing.T) {
		tsv := filepath.Join(t.TempDir(), "host-only.tsv")
		os.WriteFile(tsv, []byte("tenferro-cuda::capability\tcpu_only\thost\n"), 0o644)
		for _, tc := range []struct {
			require string
			fails   bool
			says    string
		}{{"", true, "the single-gpu lane selects no test"}, {"false", false, "none()"}} {
			home := t.TempDir()
			cmd := exec.Command("bash", filepath.Join(abs, "scripts/action.sh"))
			cmd.Env = []string{"PATH=" + stub + ":" + os.Getenv("PATH"), "HOME=" + home, "RUNNER_TEMP=" + home, "GITHUB_WORKSPACE=" + abs, "ACTION_PATH=" + abs,
				"GPUGATE_STEP=partition-select", "GPUGATE_PARTITION_FILES=" + tsv, "GPUGATE_CATEGORY=single-gpu", "GPUGATE_REQUIRE_TESTS=" + tc.require}
			out, err := cmd.CombinedOutput()
			if (err != nil) != tc.fails || !strings.Contains(string(out), tc.says) {
				t.Errorf("require-tests %q: %v\n%s", tc.require, err, out)
			}
		}
	})
	t.Run("unknown step", func(t *testing.T) {
		cmd := exec.Command("bash", filepath.Join(abs, "scripts/action.sh"))
		cmd.Env = []string{"PATH=" + stub + ":" + os.Getenv("PATH"), "GPUGATE_STEP=deploy"}
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), `::error::gpugate: unknown step "deploy"`) {
			t.Errorf("%v %s", err, out)
		}
	})
}

// TestTheProgramIsTheStepsProcess: the runner cancels a step by signalling
// the step's own process (SIGINT, then SIGTERM), and provision must then
// delete the pod it created. The Action's run line, as the runner runs it
// (bash -e {0}), must therefore become the program itself: exec all the
// way, no `go run` in between. The stand-in program reports its PID and
// the signal it is sent.
func TestTheProgramIsTheStepsProcess(t *testing.T) {
	a := loadAction(t)
	var run string
	for _, s := range a.Runs.Steps {
		if strings.Contains(s.Run, "scripts/action.sh") {
			run = s.Run
		}
	}
	if run == "" {
		t.Fatal("no step runs scripts/action.sh")
	}
	abs, _ := filepath.Abs(root)
	dir := t.TempDir()
	stub := t.TempDir()
	// go build -o OUT ./examples/X writes the stand-in program to OUT.
	os.WriteFile(filepath.Join(stub, "go"), []byte(`#!/usr/bin/env bash
[ "$1" = build ] || exit 99
out=; prev=
for a in "$@"; do [ "$prev" = -o ] && out=$a; prev=$a; done
mkdir -p "$(dirname "$out")"
printf '#!/usr/bin/env bash\ntrap "echo got-SIGINT; exit 0" INT\necho "pid=$$"\nread -r _\necho no-signal\n' > "$out"
chmod +x "$out"
`), 0o755)
	script := filepath.Join(dir, "step.sh")
	os.WriteFile(script, []byte(run+"\n"), 0o644)
	cmd := exec.Command("bash", "--noprofile", "--norc", "-eo", "pipefail", script)
	cmd.Env = []string{"PATH=" + stub + ":" + os.Getenv("PATH"), "HOME=" + dir, "ACTION_PATH=" + abs, "GITHUB_WORKSPACE=" + abs,
		"RUNNER_TEMP=" + dir, "GPUGATE_STEP=reap", "GITHUB_REPOSITORY=o/r"}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe() // held open: the program waits on it
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != fmt.Sprintf("pid=%d", cmd.Process.Pid) {
		cmd.Process.Kill()
		t.Fatalf("the program printed %q; the step's process is %d: something between them would keep the runner's signal from it", lines.Text(), cmd.Process.Pid)
	}
	cmd.Process.Signal(os.Interrupt)
	if !lines.Scan() || lines.Text() != "got-SIGINT" {
		t.Errorf("after SIGINT to the step's process the program printed %q", lines.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit: %v", err)
	}
}
