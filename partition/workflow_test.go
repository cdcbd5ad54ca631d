package partition

import (
	"regexp"
	"strings"
	"testing"

	"github.com/gpugate/gpugate/internal/workflowtest"
)

// The change-aware seed: the partition "checks the real nextest inventory
// for exhaustive, disjoint membership before selecting a lane"; hosted
// preparation "executes device-independent tests from the same ...
// archives used on RunPod ... This execution must succeed before
// provisioning"; "The paid node executes only the audited single-GPU
// partition"; and "The single-GPU workflow explicitly reports NOT RUN,
// never PASS"; "Nextest remains serial; hosted backend thread variables are
// explicitly one." The adoption workflows wire each.
func TestTheAdoptionWorkflowsRunTheAuditedLanesAndReportNotRun(t *testing.T) {
	gate, lifecycle := workflowtest.Read(t, "runpod-gpu-test.yml"), workflowtest.Read(t, "runpod-gpu-execute.yml")
	prep := gate.Jobs["cuda-archive"]
	check, host, gpu, hostRun := -1, "", "", -1
	for i, s := range prep.Steps {
		switch {
		case s.With["step"] == "partition-check":
			check = i
		case s.With["step"] == "partition-select" && s.With["category"] == "host":
			if check < 0 || check > i {
				t.Errorf("the host lane is selected before the inventory is checked")
			}
			host = s.ID
		case s.With["step"] == "partition-select" && s.With["category"] == "single-gpu":
			gpu = s.ID
		case host != "" && s.Env["FILTER"] == "${{ steps."+host+".outputs.filter }}" && strings.Contains(s.Run, `-E "$FILTER"`):
			hostRun = i
			// "Nextest remains serial; hosted backend thread variables are
			// explicitly one."
			if !strings.Contains(s.Run, "--test-threads 1") || s.Env["RAYON_NUM_THREADS"] != "1" || s.Env["OMP_NUM_THREADS"] != "1" {
				t.Errorf("the host lane runs %q with %v: want serial nextest and backend thread pools of one", s.Run, s.Env)
			}
			if !strings.Contains(s.Run, "--run-ignored all") {
				t.Errorf("the host lane runs %q: without --run-ignored all, an #[ignore]d test of the host category runs nowhere", s.Run)
			}
		}
	}
	if check < 0 || host == "" || hostRun < 0 || gpu == "" {
		t.Fatalf("cuda-archive: partition-check at %d, host lane %q run at %d, GPU lane %q", check, host, hostRun, gpu)
	}
	checkExtractedOnce(t, prep, hostRun)
	if prep.Outputs["gpu_filter"] != "${{ steps."+gpu+".outputs.filter }}" || prep.Outputs["not_run"] != "${{ steps."+gpu+".outputs.not_run }}" {
		t.Errorf("cuda-archive outputs %v", prep.Outputs)
	}
	if got := gate.Jobs["execute"].With["gpu_filter"]; got != "${{ needs.cuda-archive.outputs.gpu_filter }}" {
		t.Errorf("the lifecycle gets gpu_filter %q", got)
	}
	ran := false
	for _, s := range lifecycle.Jobs["gpu-tests"].Steps {
		if s.Name == "Run CUDA tests from archive" {
			// --no-tests=fail: a filter that matched nothing must not pass.
			// --run-ignored all: "Single-GPU CUDA tests are ignored in
			// ordinary runs", and "#[ignore] alone [is] not [a]
			// classification": without it the pod runs none of them.
			ran = s.Env["FILTER"] == "${{ inputs.gpu_filter }}" && strings.Contains(s.Run, `-E "$FILTER"`) && strings.Contains(s.Run, "--test-threads 1") &&
				strings.Contains(s.Run, "--no-tests=fail") && strings.Contains(s.Run, "--run-ignored all")
		}
	}
	if !ran {
		t.Error("the pod does not run only the single-GPU lane, serially, its ignored tests included, failing when it matches no test")
	}
	publish := gate.Jobs["publish-gate"]
	if !publish.NeedsJob("cuda-archive") {
		t.Errorf("publish-gate needs %v: the NOT RUN list comes from cuda-archive", publish.Needs)
	}
	for _, s := range publish.Steps {
		if s.With["step"] == "publish" && s.With["not-run"] != "${{ needs.cuda-archive.outputs.not_run }}" {
			t.Errorf("publish's not-run is %q", s.With["not-run"])
		}
	}
}

// A nextest profile's default-filter applies to cargo nextest list and
// run unless --ignore-default-filter is given, and a command-line filter
// is read within it: with one set, the listing would lack the tests it
// leaves out (which partition-check refuses) and a lane's -E would not run
// them though the partition put them there. Every nextest command of the
// adoption workflows ignores it: the partition decides what runs.
func TestTheAdoptionWorkflowsListAndRunEveryTestWhateverTheDefaultFilter(t *testing.T) {
	commands := 0
	for _, name := range []string{"runpod-gpu-test.yml", "runpod-gpu-execute.yml"} {
		for job, j := range workflowtest.Read(t, name).Jobs {
			for _, s := range j.Steps {
				if !regexp.MustCompile(`nextest (list|run)\b`).MatchString(s.Run) {
					continue
				}
				commands++
				if !strings.Contains(s.Run, "--ignore-default-filter") {
					t.Errorf("%s %s: %q lists or runs within the profile's default-filter", name, job, s.Run)
				}
			}
		}
	}
	if commands < 3 {
		t.Errorf("found %d nextest list or run commands, want the listing and both lanes", commands)
	}
}

// checkExtractedOnce enforces the change-aware seed's "The archive is
// extracted once and its build metadata reused without compilation": one
// step of the archive job opens the archive, extracting it, and the host
// lane (step hostRun) runs from that extraction's metadata.
func checkExtractedOnce(t *testing.T, prep workflowtest.Job, hostRun int) {
	t.Helper()
	var opens []string
	for _, s := range prep.Steps {
		if strings.Contains(s.Run, "nextest") && strings.Contains(s.Run, "--archive-file") {
			opens = append(opens, s.Run)
		}
	}
	m := regexp.MustCompile(`--extract-to "([^"]+)"`).FindStringSubmatch(strings.Join(opens, "\n"))
	if len(opens) != 1 || m == nil {
		t.Fatalf("the archive job opens the archive in %d nextest steps %q: want one, extracting it with --extract-to", len(opens), opens)
	}
	run := prep.Steps[hostRun]
	dir := strings.ReplaceAll(m[1], "$RUNNER_TEMP", "${{ runner.temp }}")
	var ref string
	for k, v := range run.Env {
		if v == dir {
			ref = "$" + k
		}
	}
	for _, flag := range []string{
		`--binaries-metadata "` + ref + `/target/nextest/binaries-metadata.json"`,
		`--cargo-metadata "` + ref + `/target/nextest/cargo-metadata.json"`,
		`--target-dir-remap "` + ref + `/target"`,
		"--workspace-remap .",
	} {
		if ref == "" || !strings.Contains(run.Run, flag) {
			t.Errorf("the host lane runs %q with %v: want it to reuse the extraction at %s (%s)", run.Run, run.Env, dir, flag)
		}
	}
}

// The change-aware CI seed: a retry "reuses the same immutable per-run
// archive ... retries never compile Rust", and the archive "is extracted
// once and its build metadata reused without compilation": on a reused
// artifact or a cache hit the build script is skipped, yet cargo-nextest
// still lists the archive, runs the host lane and travels to the pod. Both
// archive jobs install one pinned cargo-nextest, unconditionally, before
// anything uses it.
func TestCargoNextestIsInstalledOnEveryPathBeforeItsFirstUse(t *testing.T) {
	var versions []string
	for file, job := range map[string]string{"runpod-gpu-test.yml": "cuda-archive", "ci-cache-publish.yml": "cuda-archive"} {
		steps := workflowtest.Read(t, file).Jobs[job].Steps
		installed := -1
		for i, s := range steps {
			if strings.Contains(s.Run, "get.nexte.st/") {
				if s.If != "" {
					t.Errorf("%s: cargo-nextest is installed only if %q", file, s.If)
				}
				installed = i
				versions = append(versions, s.Env["NEXTEST_VERSION"])
				continue
			}
			uses := strings.Contains(s.Run, "nextest") || strings.Contains(s.Run, "build_gpu_archive")
			if uses && installed < 0 {
				t.Errorf("%s step %d (%q) uses cargo-nextest before any step installs it", file, i, s.Name)
			}
		}
		if installed < 0 {
			t.Errorf("%s %s never installs cargo-nextest", file, job)
		}
	}
	if len(versions) != 2 || versions[0] != versions[1] || strings.Count(versions[0], ".") != 2 {
		t.Errorf("cargo-nextest versions %q: want one exact version in both", versions)
	}
}
