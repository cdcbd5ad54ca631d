package partition

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

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
// is read within it: with one set, a lane's -E would not run tests the
// partition put in it, and the listing could skip whole binaries (which
// partition-check refuses). Every nextest list or run of the adoption
// workflows ignores it, before any "--" that hands the rest to the test
// binaries: the partition decides what runs.
func TestTheAdoptionWorkflowsListAndRunEveryTestWhateverTheDefaultFilter(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(workflowtest.Dir(), "*.yml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no adoption workflows: %v", err)
	}
	commands := 0
	for _, file := range files {
		name := filepath.Base(file)
		for job, j := range workflowtest.Read(t, name).Jobs {
			for _, s := range j.Steps {
				for _, args := range nextestCommands(s.Run) {
					commands++
					if !slices.Contains(args, "--ignore-default-filter") {
						t.Errorf("%s %s: nextest %s lists or runs within the profile's default-filter", name, job, strings.Join(args, " "))
					}
				}
			}
		}
	}
	if commands < 3 {
		t.Errorf("found %d nextest list or run commands, want the listing and both lanes", commands)
	}
}

// nextestCommands returns the arguments of each nextest list or run (or
// its alias r) in a step's script: after the nextest subcommand, up to a
// "--" or the end of the shell command.
func nextestCommands(script string) [][]string {
	var out [][]string
	words := strings.Fields(script)
	for i := 0; i < len(words); i++ {
		if words[i] != "nextest" {
			continue
		}
		j := i + 1 // past options before the subcommand, with their values
		for j < len(words) && j <= i+4 && !slices.Contains([]string{"list", "run", "r"}, words[j]) {
			j++
		}
		if j == len(words) || j > i+4 {
			continue
		}
		var args []string
		for _, w := range words[j:] {
			if slices.Contains([]string{"--", "|", "||", "&&", ";", ">", "2>"}, w) || strings.HasPrefix(w, "#") {
				break
			}
			args = append(args, w)
		}
		out = append(out, args)
	}
	return out
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

// nextestCommands finds nextest's list and run however a script spells
// them, and stops each at "--", after which nextest hands the rest to the
// test binaries.
func TestNextestCommands_FindsEveryFormOfListAndRun(t *testing.T) {
	for script, want := range map[string][][]string{
		"cargo nextest run -E x":                                         {{"run", "-E", "x"}},
		"./cargo-nextest nextest run --archive-file a.tar.zst":           {{"run", "--archive-file", "a.tar.zst"}},
		"cargo nextest --profile ci run -E x -- --ignore-default-filter": {{"run", "-E", "x"}},
		"cargo nextest r --no-fail-fast | tee out":                       {{"r", "--no-fail-fast"}},
		"cargo nextest list --message-format json > inv.json":            {{"list", "--message-format", "json"}},
		"cargo nextest --version && ls target/nextest/run":               nil,
		"cargo nextest archive --archive-file a.tar.zst":                 nil,
	} {
		if diff := cmp.Diff(want, nextestCommands(script)); diff != "" {
			t.Errorf("%q (-want +got):\n%s", script, diff)
		}
	}
}
