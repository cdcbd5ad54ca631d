package changepolicy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpugate/gpugate/internal/workflowtest"
)

// The adoption CI workflow keeps the fail-safe direction when the
// classifier itself fails: GitHub skips a job whose dependency failed and
// reports a skipped required job as a success, so every required job runs
// unless the workflow was cancelled, and no-ops only on the classifier's
// successful word; otherwise it runs its profile.
func TestTheAdoptionCIWorkflowRunsEverythingWhenTheClassifierFails(t *testing.T) {
	wf := workflowtest.Read(t, "ci.yml")
	required := 0
	for id, job := range wf.Jobs {
		if !job.NeedsJob("changes") {
			continue
		}
		required++
		if !strings.Contains(job.If, "!cancelled()") && !strings.Contains(job.If, "always()") {
			t.Errorf("%s (%s): if %q: a failed classifier would skip it, which GitHub reports as success", id, job.Name, job.If)
		}
		noops := 0
		for _, s := range job.Steps {
			if !strings.Contains(s.If, "needs.changes.outputs") {
				continue
			}
			if strings.HasPrefix(s.Run, "echo \"No-op") {
				noops++
				if !strings.HasPrefix(s.If, "github.event_name == 'pull_request' && needs.changes.result == 'success' && ") {
					t.Errorf("%s: the no-op %q does not wait for the classifier's success on a pull request", id, s.If)
				}
			} else if !strings.HasPrefix(s.If, "github.event_name != 'pull_request' || needs.changes.result != 'success' || ") {
				t.Errorf("%s: the step under %q does not run when the classifier failed, or on a push", id, s.If)
			}
		}
		if noops != 1 {
			t.Errorf("%s: %d no-op steps, want one explicit success", id, noops)
		}
	}
	if required < 4 {
		t.Errorf("%d jobs need the classifier, want the four lanes", required)
	}
}

// Seed 000: "Pushes to main force the comprehensive Linux and macOS matrix;
// they do not add a second paid RunPod GPU run after the pull-request
// gate", and the macOS lane's "other CI-only and docs-only changes run an
// explicit successful no-op on ubuntu-24.04 instead of allocating a macOS
// runner".
func TestPushesToMainRunEveryLaneAndTheMacOSNoOpRunsOnLinux(t *testing.T) {
	wf := workflowtest.Read(t, "ci.yml")
	if len(wf.On.Push.Branches) != 1 || wf.On.Push.Branches[0] != "main" {
		t.Errorf("push branches %v: want main", wf.On.Push.Branches)
	}
	mac := wf.Jobs["macos-tests"].RunsOn.String()
	if !strings.Contains(mac, "'ubuntu-24.04' || 'macos-15'") || !strings.Contains(mac, "github.event_name == 'pull_request' && needs.changes.result == 'success'") {
		t.Errorf("macOS runs on %q: want Linux for its no-op, macOS otherwise (a push, a failed classifier, a macOS trigger)", mac)
	}
	gpu, err := os.ReadFile(filepath.Join(workflowtest.Dir(), "runpod-gpu-test.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(gpu), "github.event.workflow_run.event == 'pull_request'") {
		t.Error("the paid workflow must run for pull requests only: a push to main adds no paid GPU run")
	}
}

// The change-aware CI seed's macOS gate "runs macos-accelerate on
// macos-15, disabling default features and selecting Accelerate rather
// than faer. Only the dedicated Apple context, CPU/Metal FFT, and Apple
// shared Cholesky test targets are built ... Selecting targets rather than
// runtime test-name filters avoids compiling the full integration suites
// ... The profile requires Metal initialization to succeed
// (TENFERRO_REQUIRE_METAL=1); an unavailable device is not a passing
// hardware test." The lane's step, run as written with a stand-in cargo,
// builds only the named targets with the platform backend and requires
// the device; naming no target fails instead of testing nothing.
func TestTheMacOSLaneBuildsOnlyItsTestTargetsAndRequiresTheDevice(t *testing.T) {
	job := workflowtest.Read(t, "ci.yml").Jobs["macos-tests"]
	step := job.Step(t, "the Apple test targets", func(s workflowtest.Step) bool { return s.Name == "Run the Apple test targets" })
	if step.Env["REQUIRE_METAL"] != "1" {
		t.Errorf("REQUIRE_METAL is %q: an unavailable Metal device would pass", step.Env["REQUIRE_METAL"])
	}
	r := workflowtest.NewRunner(t)
	bin := t.TempDir()
	os.WriteFile(filepath.Join(bin, "cargo"), []byte("#!/bin/sh\necho \"cargo $* REQUIRE_METAL=$REQUIRE_METAL\"\n"), 0o755)
	r.Path = bin + ":" + r.Path
	res := r.Run(t, step, step.Env)
	want := "cargo test --locked --no-default-features --features accelerate --test apple_context --test fft --test apple_cholesky REQUIRE_METAL=1"
	if res.Code != 0 || strings.TrimSpace(res.Out) != want {
		t.Errorf("exit %d, ran %q, want %q", res.Code, strings.TrimSpace(res.Out), want)
	}
	if strings.Contains(res.Out, "--workspace") || strings.Contains(res.Out, " -- ") {
		t.Error("the lane builds the workspace or filters by name")
	}
	res = r.Run(t, step, map[string]string{"MACOS_FEATURES": "accelerate", "MACOS_TEST_TARGETS": " "})
	if res.Code == 0 || !strings.Contains(res.Out, "names no test target") {
		t.Errorf("no targets: exit %d\n%s", res.Code, res.Out)
	}
}

// The change-aware CI seed: "A CI-only diff requires the GPU gate only
// when it can change what the pod executes or whether it can execute: the
// archive and its payload, the test partitions, the pod
// request/provision/staging path, and the cache the pod consumes". Every
// repository script the paid workflows run to build or stage what the pod
// consumes is device control in the example policy: a pull request that
// changes only that script still buys its GPU run.
func TestEveryScriptThePaidWorkflowsStageForThePodRequiresTheGPUGate(t *testing.T) {
	p, err := Load(ExamplePolicy)
	if err != nil {
		t.Fatal(err)
	}
	script := regexp.MustCompile(`scripts/ci/[A-Za-z0-9_.-]+`)
	seen := map[string]bool{}
	for _, name := range []string{"runpod-gpu-test.yml", "runpod-gpu-execute.yml"} {
		data, err := os.ReadFile(filepath.Join(workflowtest.Dir(), name))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range script.FindAllString(string(data), -1) {
			if seen[path] {
				continue
			}
			seen[path] = true
			d, err := Classify(p, []Change{{Path: path, Status: Modified}})
			if err != nil || d.Class != CIOnly || !d.GPU {
				t.Errorf("%s (run by %s): class %s, GPU gate %v (%v); want a CI-only change that requires the GPU gate", path, name, d.Class, d.GPU, err)
			}
		}
	}
	if len(seen) < 3 {
		t.Errorf("found only %v in the paid workflows", seen)
	}
}

// A misspelt fail-open glob (Policy.Unmatched) must not reach main: the
// adoption CI's CI-configuration job checks the policy the classifier uses
// against the tracked files whenever a CI path changes.
func TestTheCIConfigurationJobChecksThePolicysGlobs(t *testing.T) {
	wf := workflowtest.Read(t, "ci.yml")
	var policy string
	for _, s := range wf.Jobs["changes"].Steps {
		if s.With["step"] == "classify" {
			policy = s.With["policy"]
		}
	}
	checked := false
	for _, s := range wf.Jobs["ci-config"].Steps {
		checked = checked || s.With["step"] == "classify" && s.With["check-globs"] == "true" && s.With["policy"] == policy
	}
	if policy == "" || !checked {
		t.Errorf("ci-config does not check the globs of the policy the classifier uses (%q)", policy)
	}
}
