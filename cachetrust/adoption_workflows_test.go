package cachetrust

// The adoption workflows (examples/workflows) wire the content key,
// trusted reuse and the runtime tree checks as this package means them:
// each test reads the workflows as written.

import (
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gpugate/gpugate/internal/workflowtest"
)

// Seed: "Every cuda-archive run uploads the two nextest archives as a
// per-run artifact whose name is the content key. A GPU allocation retry
// ... resolves its own content key, then asks ... for an existing unexpired
// artifact with that exact name before building anything ... On success
// the archives are re-uploaded to the current run." The adoption workflow
// wires FindArtifact (cachecheck -find) between the key and the build, and
// the pod downloads the archive by that key.
func TestARetryReusesTheArtifactNamedByItsContentKeyBeforeBuilding(t *testing.T) {
	wf, lifecycle := workflowtest.Read(t, "runpod-gpu-test.yml"), workflowtest.Read(t, "runpod-gpu-execute.yml")
	job, ok := wf.Jobs["cuda-archive"]
	if !ok {
		t.Fatal("no cuda-archive job")
	}
	key, find, build, upload := -1, -1, -1, -1
	var keyID, findID string
	for i, s := range job.Steps {
		switch {
		case s.With["step"] == "cache-check" && s.With["cache-key"] == "true":
			key, keyID = i, s.ID
		case s.With["step"] == "cache-check" && s.With["find-artifact"] != "":
			find, findID = i, s.ID
			if want := "${{ steps." + keyID + ".outputs.key }}"; s.With["find-artifact"] != want {
				t.Errorf("find-artifact = %q, want the content key %q", s.With["find-artifact"], want)
			}
		case strings.Contains(s.Run, "build_gpu_archive.sh"):
			build = i
		case strings.HasPrefix(s.Uses, "actions/upload-artifact@") && strings.Contains(s.With["path"], "target/nextest/cuda-tests.tar.zst"):
			upload = i
			if want := "${{ steps." + keyID + ".outputs.key }}"; s.With["name"] != want || s.If != "" {
				t.Errorf("the archive is uploaded as %q (if %q), want always under the content key %q", s.With["name"], s.If, want)
			}
		}
	}
	if key < 0 || find < 0 || build < 0 || upload < 0 || !(key < find && find < build && build < upload) || keyID == "" || findID == "" {
		t.Fatalf("want key, find, build, upload in that order: %d %d %d %d", key, find, build, upload)
	}
	reused := ""
	for _, s := range job.Steps[find+1 : build] {
		if strings.HasPrefix(s.Uses, "actions/download-artifact@") && s.With["run-id"] == "${{ steps."+findID+".outputs.artifact_run_id }}" {
			reused = s.ID
		}
	}
	if reused == "" {
		t.Fatal("no step downloads the found artifact from its run")
	}
	if !strings.Contains(job.Steps[build].If, "steps."+reused+".outcome != 'success'") {
		t.Errorf("the build runs if %q: it must be skipped when the reused archive downloaded", job.Steps[build].If)
	}
	if out := job.Outputs["archive"]; out != "${{ steps."+keyID+".outputs.key }}" {
		t.Errorf("cuda-archive's archive output is %q, want the content key", out)
	}
	// The gate hands the key to the paid lifecycle, whose pod downloads
	// the archive by it.
	passed := false
	for _, j := range wf.Jobs {
		if j.Uses == "./.github/workflows/runpod-gpu-execute.yml" {
			passed = j.With["archive"] == "${{ needs.cuda-archive.outputs.archive }}"
		}
	}
	if !passed {
		t.Error("the gate does not pass cuda-archive's archive output to the paid lifecycle")
	}
	downloads := 0
	for name, j := range lifecycle.Jobs {
		for _, s := range j.Steps {
			if strings.HasPrefix(s.Uses, "actions/download-artifact@") && s.With["run-id"] == "" && !strings.HasPrefix(s.Artifact(), "cuda-runtime") {
				downloads++
				if a := s.Artifact(); a != "${{ inputs.archive }}-part-*" && a != "${{ inputs.archive }}-tools" {
					t.Errorf("job %s downloads %q, want the archive's parts or its tools under its content key", name, a)
				}
			}
		}
	}
	if downloads == 0 {
		t.Error("no job downloads the archive")
	}
}

// The cache-trust seed, "Observability and bounds": "The archive job logs
// its source (cache hit / reused artifact with run id / fresh build) plus
// archive sizes and free disk", and "The publisher logs whether a key was
// already published (no-op) or built." The templates' own report steps,
// run in each case.
func TestTheArchiveJobLogsItsSourceSizesAndFreeDiskAndThePublisherWhetherItBuilt(t *testing.T) {
	r := workflowtest.NewRunner(t, "stat", "df", "awk", "paste")
	os.MkdirAll(filepath.Join(r.Workspace, "target", "nextest"), 0o755)
	os.WriteFile(filepath.Join(r.Workspace, "target", "nextest", "cuda-tests.tar.zst"), make([]byte, 4096), 0o644)
	report := workflowtest.Read(t, "runpod-gpu-test.yml").Jobs["cuda-archive"].Step(t, "archive report",
		func(s workflowtest.Step) bool { return s.Name == "Report the archive's source, size and free disk" })
	const key = "cuda-archive-v1-abc"
	for name, tc := range map[string]struct {
		reused, hit, want string
	}{
		"reused":              {"success", "", "reused the artifact of run 80;"},
		"a cache hit":         {"skipped", "true", "cache hit;"},
		"a fresh build":       {"skipped", "false", "fresh build;"},
		"a failed reuse":      {"failure", "false", "fresh build (reusing run 80's artifact failed);"},
		"no trusted artifact": {"skipped", "", "fresh build;"},
	} {
		res := r.Run(t, report, map[string]string{"KEY": key, "REUSED": tc.reused, "REUSED_RUN": "80", "CACHE_HIT": tc.hit})
		want := "CUDA archive " + key + ": " + tc.want + " target/nextest/cuda-tests.tar.zst 4096 bytes; "
		if res.Code != 0 || !strings.Contains(res.Out, want) || !strings.Contains(res.Summary, want) || !strings.Contains(res.Out, " MiB free") {
			t.Errorf("%s: exit %d, log %q, summary %q; want %q and the free disk", name, res.Code, res.Out, res.Summary, want)
		}
	}
	publish := workflowtest.Read(t, "ci-cache-publish.yml").Jobs["cuda-archive"].Step(t, "publisher report",
		func(s workflowtest.Step) bool { return s.Name == "Report whether the key was already published" })
	for hit, want := range map[string]string{"true": "was already published: nothing built (no-op)", "false": "built; the cache saves it"} {
		if res := r.Run(t, publish, map[string]string{"KEY": key, "CACHE_HIT": hit}); res.Code != 0 || !strings.Contains(res.Summary, key+" "+want) {
			t.Errorf("cache-hit %s: exit %d, summary %q, want %q", hit, res.Code, res.Summary, want)
		}
	}
}

// The cache-trust seed: the toolkit cache "includes Ubuntu version,
// architecture, toolkit version, installer hash and a manual version. The
// same absolute ... path is used by publisher and reader. Only
// ci-cache-publish.yml saves it. Restore uses no prefix fallback; a miss
// installs normally. Both restored and newly installed trees must compile
// a small PTX kernel before use/publication"; the runtime tree needs "a
// nonempty, resolvable libcutensor.so.2", and "Hosted preparation rejects
// and rebuilds restored trees missing cuFFT; Pod configuration also
// requires it before running tests"; "Static archives and independent
// multi-GPU/MPI providers are excluded at installation, before cache
// publication." And the change-aware CI seed: hosted preparation "verifies
// the JIT headers with real NVRTC", and runtime trees exclude "Compiler
// binaries, static libraries and driver stubs".
func TestCUDATreesProveThemselvesBeforeUseOrPublication(t *testing.T) {
	published, gate := workflowtest.Read(t, "ci-cache-publish.yml"), workflowtest.Read(t, "runpod-gpu-test.yml")
	reader := gate.Jobs["cuda-archive"]
	build := -1
	for i, s := range reader.Steps {
		if strings.Contains(s.Run, "build_gpu_archive.sh") {
			build = i
		}
	}
	// The runtime trees: one per NVRTC tier the CUDA proof may choose.
	for name, j := range map[string]workflowtest.Job{"publisher": published.Jobs["cuda-runtime"], "reader": gate.Jobs["cuda-runtime"]} {
		if got := fmt.Sprint(j.Strategy.Matrix.Values["cuda"]); got != "[12.6 12.8]" {
			t.Errorf("%s: the runtime trees are prepared for %s, want both tiers [12.6 12.8]", name, got)
		}
	}
	var excludes []string
	for _, kind := range []string{"toolkit", "runtime"} {
		var paths []string
		for _, side := range []struct {
			name    string
			job     workflowtest.Job
			cache   string // the cache action: the publisher saves, readers only restore
			publish string
		}{
			{"publisher", published.Jobs["cuda-"+kind], "actions/cache@", "true"},
			{"reader", map[string]workflowtest.Job{"toolkit": reader, "runtime": gate.Jobs["cuda-runtime"]}[kind], "actions/cache/restore@", ""},
		} {
			at := -1
			for i, s := range side.job.Steps {
				if s.ID == kind+"-cache" {
					at = i
				}
			}
			if at < 0 || at+1 >= len(side.job.Steps) {
				t.Errorf("%s: no %s-cache step", side.name, kind)
				continue
			}
			cache, check := side.job.Steps[at], side.job.Steps[at+1]
			if _, fallback := cache.With["restore-keys"]; !strings.HasPrefix(cache.Uses, side.cache) || fallback {
				t.Errorf("%s %s: %s with restore-keys %v, want %s with no prefix fallback", side.name, kind, cache.Uses, fallback, side.cache)
			}
			path := cache.With["path"]
			paths = append(paths, path)
			if !strings.HasPrefix(path, "/") || !strings.Contains(cache.With["key"], "-v1") || !strings.Contains(cache.With["key"], "runner.arch") {
				t.Errorf("%s %s: path %q key %q: want a fixed absolute path and a key with the architecture and a manual version", side.name, kind, path, cache.With["key"])
			}
			if check.With["step"] != "cuda-tree" || check.With["tree"] != path || check.With["cache-hit"] != "${{ steps."+cache.ID+".outputs.cache-hit }}" || check.If != cache.If {
				t.Errorf("%s %s: the step after the restore is %v (if %q): want cuda-tree on %s with its cache-hit, under the same condition", side.name, kind, check.With, check.If, path)
			}
			if check.With["publisher"] != side.publish && !(side.publish == "" && check.With["publisher"] == "false") {
				t.Errorf("%s %s: publisher %q", side.name, kind, check.With["publisher"])
			}
			switch kind {
			case "toolkit":
				if check.With["compile-arch"] == "" {
					t.Errorf("%s: the toolkit is not proven by compiling a kernel", side.name)
				}
				if side.name == "reader" && !(at < build) {
					t.Error("the archive is built before the toolkit proved itself")
				}
			case "runtime":
				if !strings.Contains(check.With["require"], "lib/libcutensor.so.2") || !strings.Contains(check.With["require"], "libcufft") {
					t.Errorf("%s: the runtime tree requires %q, want libcutensor.so.2 and cuFFT", side.name, check.With["require"])
				}
				// What the seed leaves out of a runtime tree: static
				// libraries, compiler binaries, driver stubs and cuTENSOR's
				// multi-GPU provider; publisher and reader alike.
				excluded := strings.Fields(check.With["exclude"])
				for _, want := range []string{"**/*.a", "bin/**", "**/stubs/**", "**/libcutensorMg*"} {
					if !slices.Contains(excluded, want) {
						t.Errorf("%s: the runtime tree excludes %q, want %s among them", side.name, check.With["exclude"], want)
					}
				}
				excludes = append(excludes, check.With["exclude"])
				if check.With["compile-arch"] == "" || check.With["headers"] == "" {
					t.Errorf("%s: the runtime tree's JIT headers are not compiled with its own NVRTC", side.name)
				}
			}
		}
		if len(paths) == 2 && paths[0] != paths[1] {
			t.Errorf("%s: publisher and reader paths %q", kind, paths)
		}
	}
	if len(excludes) != 2 || excludes[0] != excludes[1] {
		t.Errorf("publisher and reader exclude %q from the runtime tree: want the same", excludes)
	}
	// The pod requires the proven runtime tree before any test runs.
	gpu := workflowtest.Read(t, "runpod-gpu-execute.yml").Jobs["gpu-tests"]
	downloaded, required := -1, -1
	for i, s := range gpu.Steps {
		switch {
		case strings.HasPrefix(s.Uses, "actions/download-artifact@") && s.Artifact() == "cuda-runtime-${{ steps.tier.outputs.tier }}-part-*" && downloaded < 0:
			downloaded = i
		case s.Name == "Require the runtime tree":
			required = i
		case s.Name == "Run CUDA tests from archive":
			if downloaded < 0 || required < downloaded || required > i {
				t.Errorf("the pod downloads the runtime tree at step %d and requires it at %d, before the tests at %d?", downloaded, required, i)
			}
		}
	}
	staged := false
	for _, s := range gate.Jobs["cuda-runtime"].Steps {
		staged = staged || strings.HasPrefix(s.Uses, "actions/upload-artifact@") && strings.HasPrefix(s.With["name"], "cuda-runtime-${{ matrix.cuda }}-part-")
	}
	if !staged {
		t.Error("the hosted side does not stage the runtime tree for the pod")
	}
}

// The pod's own check of the staged runtime tree, run as written.
func TestThePodRequiresANonEmptyRuntimeTreeInsideItself(t *testing.T) {
	r := workflowtest.NewRunner(t, "tar", "readlink")
	// RUNNER_TEMP reached through a symlink: the tree is still inside itself.
	link := filepath.Join(t.TempDir(), "temp")
	if err := os.Symlink(r.Temp, link); err != nil {
		t.Fatal(err)
	}
	r.Temp = link
	require := workflowtest.Read(t, "runpod-gpu-execute.yml").Jobs["gpu-tests"].Step(t, "runtime check",
		func(s workflowtest.Step) bool { return s.Name == "Require the runtime tree" })
	for name, tc := range map[string]struct {
		files map[string]string // name -> content, or "-> target" for a link
		code  int
	}{
		"complete":             {map[string]string{"libcutensor.so.2.1.0": "abi", "libcutensor.so.2": "-> libcutensor.so.2.1.0", "libcufft.so.11": "fft"}, 0},
		"no cuFFT":             {map[string]string{"libcutensor.so.2": "abi"}, 1},
		"an empty cuTENSOR":    {map[string]string{"libcutensor.so.2": "", "libcufft.so.11": "fft"}, 1},
		"a dangling link":      {map[string]string{"libcutensor.so.2": "-> libcutensor.so.2.1.0", "libcufft.so.11": "fft"}, 1},
		"a link out of a tree": {map[string]string{"libcutensor.so.2": "abi", "libcufft.so.11": "-> /etc/hostname"}, 1},
	} {
		t.Run(name, func(t *testing.T) {
			src := t.TempDir()
			lib := filepath.Join(src, "cuda-runtime-12.6", "lib")
			os.MkdirAll(lib, 0o755)
			for f, content := range tc.files {
				if target, ok := strings.CutPrefix(content, "-> "); ok {
					os.Symlink(target, filepath.Join(lib, f))
					continue
				}
				os.WriteFile(filepath.Join(lib, f), []byte(content), 0o644)
			}
			os.RemoveAll(filepath.Join(r.Temp, "cuda-runtime-12.6"))
			if out, err := exec.Command("tar", "-C", src, "-cf", filepath.Join(r.Temp, "cuda-runtime-12.6.tar"), "cuda-runtime-12.6").CombinedOutput(); err != nil {
				t.Fatalf("%v %s", err, out)
			}
			env := filepath.Join(t.TempDir(), "env")
			res := r.Run(t, require, map[string]string{"GITHUB_ENV": env, "TIER": "12.6"})
			written, _ := os.ReadFile(env)
			if res.Code != tc.code {
				t.Errorf("exit %d, want %d:\n%s", res.Code, tc.code, res.Out)
			}
			root, _ := filepath.EvalSymlinks(r.Temp)
			if set := strings.Contains(string(written), "LD_LIBRARY_PATH="+filepath.Join(root, "cuda-runtime-12.6", "lib")); set != (tc.code == 0) {
				t.Errorf("LD_LIBRARY_PATH set %v, GITHUB_ENV %q", set, written)
			}
		})
	}
}

// The change-aware CI seed: the pod "verifies their hosted SHA-256 sums
// before testing" ("Transfer through verification is recorded in the job
// summary"), "verifies checksums and required libraries", and
// "Cargo/nextest ... are staged; no Rust toolchain installation ... occurs
// on the accepted GPU". The
// hosted side records a sum next to each payload it uploads; the pod's
// check, run as written, refuses a payload that changed in transit.
func TestThePodVerifiesThePayloadsHostedChecksumsBeforeTesting(t *testing.T) {
	wf := workflowtest.Read(t, "runpod-gpu-test.yml")
	gate := wf.Jobs["cuda-archive"]
	for job, sum := range map[string][2]string{"cuda-archive": {">cuda-tests.sha256", "cuda-tests.sha256"}, "cuda-runtime": {`>"cuda-runtime-$CUDA.sha256"`, "cuda-runtime-${{ matrix.cuda }}.sha256"}} {
		recorded, sent := false, false
		for _, s := range wf.Jobs[job].Steps {
			recorded = recorded || strings.Contains(s.Run, "sha256sum") && strings.Contains(s.Run, sum[0])
			sent = sent || recorded && (s.Name == transportStep && strings.Contains(s.Env["PAYLOAD"], sum[1]) ||
				strings.HasPrefix(s.Uses, "actions/upload-artifact@") && strings.HasSuffix(s.With["name"], "-tools") && strings.Contains(s.With["path"], sum[1]))
		}
		if !sent {
			t.Errorf("%s does not record %s and send it to the pod with its payload", job, sum[1])
		}
	}
	gpu := workflowtest.Read(t, "runpod-gpu-execute.yml").Jobs["gpu-tests"]
	verify, tests := -1, -1
	for i, s := range gpu.Steps {
		switch s.Name {
		case "Verify the payload checksums":
			verify = i
		case "Run CUDA tests from archive":
			tests = i
		}
	}
	if verify < 0 || verify > tests {
		t.Fatalf("the pod verifies the checksums at step %d, the tests run at %d", verify, tests)
	}
	if !strings.HasPrefix(gpu.Steps[tests].Run, "./cargo-nextest nextest run --archive-file cuda-tests.tar.zst") {
		t.Errorf("the pod runs %q, want the staged cargo-nextest (no cargo on the pod)", gpu.Steps[tests].Run)
	}
	// cargo-nextest travels to the pod as the archive's tools, whichever
	// way the archive itself arrives, and stays in the whole upload a
	// later run reuses.
	staged, kept := false, false
	for _, s := range gate.Steps {
		if strings.HasPrefix(s.Uses, "actions/upload-artifact@") && strings.Contains(s.With["path"], "target/nextest/cargo-nextest") {
			staged = staged || s.With["name"] == "${{ steps.key.outputs.key }}-tools"
			kept = kept || strings.Contains(s.With["path"], "cuda-tests.tar.zst")
		}
	}
	fetched := slices.ContainsFunc(gpu.Steps, func(s workflowtest.Step) bool {
		return strings.HasPrefix(s.Uses, "actions/download-artifact@") && s.Artifact() == "${{ inputs.archive }}-tools"
	})
	if !staged || !kept || !fetched {
		t.Errorf("cargo-nextest: staged as the tools %v, kept with the archive %v, fetched by the pod %v", staged, kept, fetched)
	}
	r := workflowtest.NewRunner(t, "sha256sum")
	write := func(dir, name, content string) {
		os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644)
	}
	for name, tc := range map[string]struct {
		archive, nextest, runtime string // what arrived
		code                      int
	}{
		"intact":                   {"archive", "nextest", "runtime", 0},
		"a changed archive":        {"archive!", "nextest", "runtime", 1},
		"a changed cargo-nextest":  {"archive", "nextest!", "runtime", 1},
		"a changed runtime":        {"archive", "nextest", "runtime!", 1},
		"the tools did not arrive": {"archive", "", "runtime", 1},
	} {
		t.Run(name, func(t *testing.T) {
			// The sums the hosted side recorded (sha256sum's format) for
			// what it built, next to what arrived.
			for _, p := range []struct {
				dir, sum string
				files    [][3]string // name, built, arrived
			}{
				{r.Workspace, "cuda-tests.sha256", [][3]string{{"cuda-tests.tar.zst", "archive", tc.archive}, {"cargo-nextest", "nextest", tc.nextest}}},
				{r.Temp, "cuda-runtime-12.8.sha256", [][3]string{{"cuda-runtime-12.8.tar", "runtime", tc.runtime}}},
			} {
				var sums strings.Builder
				for _, f := range p.files {
					fmt.Fprintf(&sums, "%x  %s\n", sha256.Sum256([]byte(f[1])), f[0])
					write(p.dir, f[0], f[2])
				}
				write(p.dir, p.sum, sums.String())
			}
			if tc.nextest == "" { // the tools artifact: cargo-nextest and the sums
				os.Remove(filepath.Join(r.Workspace, "cargo-nextest"))
				os.Remove(filepath.Join(r.Workspace, "cuda-tests.sha256"))
			}
			res := r.Run(t, gpu.Steps[verify], map[string]string{"TIER": "12.8", "ARCHIVE": "k"})
			if res.Code != tc.code || tc.nextest == "" && !strings.Contains(res.Out, "::error::the archive's tools (cargo-nextest and the hosted sums, artifact k-tools) did not arrive") {
				t.Errorf("exit %d, want %d:\n%s", res.Code, tc.code, res.Out)
			}
			// The transfer's verification is recorded in the job summary.
			if recorded := strings.Contains(res.Summary, "Payload verified") && strings.Contains(res.Summary, "cuda-tests.tar.zst: "+strconv.Itoa(len(tc.archive))+" bytes"); recorded != (tc.code == 0) {
				t.Errorf("summary %q after exit %d", res.Summary, res.Code)
			}
			if info, err := os.Stat(filepath.Join(r.Workspace, "cargo-nextest")); tc.code == 0 && (err != nil || info.Mode()&0o100 == 0) {
				t.Errorf("the staged cargo-nextest is not executable after the check: %v %v", info, err)
			}
		})
	}
}

// transportStep is the hosted step that cuts a payload into the pod's parts.
const transportStep = "Split the payload into five parts for the pod"

// The change-aware CI seed: "the three compressed archives travel as five
// balanced, uncompressed Actions artifacts, enabling download-artifact's
// five concurrent artifact downloads ... The pod reconstructs the archive
// files and verifies their hosted SHA-256 sums before testing. Download
// retains a four-minute bound and one bounded retry; reconstruction has a
// one-minute bound. Transfer through verification is recorded in the job
// summary. A separate single artifact remains available for hosted
// cross-run reuse." And "immutable five-part artifacts for ... each SDK".
// Both hosted payloads (the archive, each runtime tree) are cut by one
// script into five parts, uploaded uncompressed under names the pod's one
// download matches; the pod's rebuild, run as written, restores the files
// with their modes, refuses a missing part, and a corrupted one fails the
// checksums.
func TestArchivesTravelAsFiveBalancedUncompressedArtifactsRebuiltBeforeVerification(t *testing.T) {
	gate := workflowtest.Read(t, "runpod-gpu-test.yml")
	gpu := workflowtest.Read(t, "runpod-gpu-execute.yml").Jobs["gpu-tests"]
	// hosted job -> its artifacts' name prefix, the pod's pattern, and the
	// pod directory the parts land in.
	payloads := map[string][3]string{
		"cuda-archive": {"${{ steps.key.outputs.key }}", "${{ inputs.archive }}-part-*", "${{ runner.temp }}/cuda-tests-parts"},
		"cuda-runtime": {"cuda-runtime-${{ matrix.cuda }}", "cuda-runtime-${{ steps.tier.outputs.tier }}-part-*", "${{ runner.temp }}/cuda-runtime-parts"},
	}
	var script string
	for job, want := range payloads {
		steps := gate.Jobs[job].Steps
		split := slices.IndexFunc(steps, func(s workflowtest.Step) bool { return s.Name == transportStep })
		if split < 0 {
			t.Fatalf("%s has no step %q", job, transportStep)
		}
		if script == "" {
			script = steps[split].Run
		} else if steps[split].Run != script {
			t.Errorf("%s cuts its payload with another script than the archive's: one transport format, one script", job)
		}
		if steps[split].Env["PARTS"] != want[2] {
			t.Errorf("%s writes its parts to %q, the pod downloads them to %q", job, steps[split].Env["PARTS"], want[2])
		}
		var parts []string
		for _, s := range steps[split+1:] {
			if !strings.HasPrefix(s.Uses, "actions/upload-artifact@") || !strings.HasPrefix(s.With["path"], want[2]+"/") {
				continue
			}
			n := strconv.Itoa(len(parts))
			parts = append(parts, s.With["name"])
			if s.With["name"] != want[0]+"-part-"+n || s.With["path"] != want[2]+"/part-"+n {
				t.Errorf("%s uploads %s as %q: want part %s as %s-part-%s", job, s.With["path"], s.With["name"], n, want[0], n)
			}
			if s.With["compression-level"] != "0" || s.With["if-no-files-found"] != "error" || s.If != "" {
				t.Errorf("%s part %s: compression-level %q, if-no-files-found %q, if %q: want uncompressed, always, and a missing part an error",
					job, n, s.With["compression-level"], s.With["if-no-files-found"], s.If)
			}
		}
		if len(parts) != 5 {
			t.Errorf("%s uploads %d parts, want five", job, len(parts))
		}
		downloads := 0
		for _, s := range gpu.Steps {
			if strings.HasPrefix(s.Uses, "actions/download-artifact@") && s.Artifact() == want[1] {
				downloads++
				if s.With["name"] != "" || s.With["merge-multiple"] != "true" || s.With["path"] != want[2] || s.TimeoutMinutes != 4 {
					t.Errorf("the pod downloads %s with %v (timeout %v min): want one pattern download of every part into %s, four minutes", want[1], s.With, s.TimeoutMinutes, want[2])
				}
			}
		}
		if downloads != 2 {
			t.Errorf("the pod downloads %s %d times, want once plus one retry", want[1], downloads)
		}
	}
	// Uploaded, the archive's parts leave the disk before listing extracts
	// the archive.
	archiveSteps := gate.Jobs["cuda-archive"].Steps
	lastPart := -1
	for i, s := range archiveSteps {
		if strings.HasPrefix(s.With["path"], payloads["cuda-archive"][2]+"/") {
			lastPart = i
		}
	}
	freed := slices.IndexFunc(archiveSteps, func(s workflowtest.Step) bool {
		return strings.Contains(s.Run, `rm -rf -- "$RUNNER_TEMP/cuda-tests-parts"`)
	})
	listed := slices.IndexFunc(archiveSteps, func(s workflowtest.Step) bool { return strings.Contains(s.Run, "--extract-to") })
	if !(lastPart < freed && freed < listed) {
		t.Errorf("the parts are uploaded by step %d, deleted at %d, the archive extracted at %d: want them deleted in between", lastPart, freed, listed)
	}
	// The whole archive stays available for a later run's reuse.
	whole := false
	for _, s := range gate.Jobs["cuda-archive"].Steps {
		whole = whole || strings.HasPrefix(s.Uses, "actions/upload-artifact@") && s.With["name"] == payloads["cuda-archive"][0] && s.With["retention-days"] == "7"
	}
	if !whole {
		t.Error("the archive is no longer uploaded whole under its content key for cross-run reuse")
	}
	// On the pod: clock, downloads, rebuild (one minute), verification.
	index := func(name string) int {
		return slices.IndexFunc(gpu.Steps, func(s workflowtest.Step) bool { return s.Name == name })
	}
	clock, rebuild, verify := index("Start the transfer clock"), index("Rebuild the payload from its parts"), index("Verify the payload checksums")
	firstDownload := slices.IndexFunc(gpu.Steps, func(s workflowtest.Step) bool { return strings.HasPrefix(s.Uses, "actions/download-artifact@") })
	if clock < 0 || !(clock < firstDownload && firstDownload < rebuild && rebuild < verify) {
		t.Fatalf("want the clock, the downloads, the rebuild and the verification in that order: %d %d %d %d", clock, firstDownload, rebuild, verify)
	}
	if gpu.Steps[rebuild].TimeoutMinutes != 1 {
		t.Errorf("the rebuild is bounded by %v minutes, want one", gpu.Steps[rebuild].TimeoutMinutes)
	}

	// Run as written: the hosted side cuts both payloads, the parts travel
	// to the pod, which rebuilds and verifies them.
	hosted := workflowtest.NewRunner(t, "tar", "split", "wc", "sha256sum", "paste")
	archiveDir := filepath.Join(hosted.Workspace, "target", "nextest")
	os.MkdirAll(archiveDir, 0o755)
	content := func(n int, seed byte) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = seed + byte(i*7%251)
		}
		return b
	}
	files := map[string][]byte{ // name -> content, in the directory its payload is cut from
		"cuda-tests.tar.zst":    content(150_001, 1),
		"cargo-nextest":         content(40_000, 2),
		"cuda-runtime-12.8.tar": content(90_000, 3),
	}
	write := func(dir, name string, mode os.FileMode) {
		os.WriteFile(filepath.Join(dir, name), files[name], mode)
	}
	write(archiveDir, "cuda-tests.tar.zst", 0o644)
	write(archiveDir, "cargo-nextest", 0o755)
	write(hosted.Temp, "cuda-runtime-12.8.tar", 0o644)
	sums := func(dir, sum string, names ...string) {
		var b strings.Builder
		for _, n := range names {
			fmt.Fprintf(&b, "%x  %s\n", sha256.Sum256(files[n]), n)
		}
		files[sum] = []byte(b.String())
		os.WriteFile(filepath.Join(dir, sum), files[sum], 0o644)
	}
	sums(archiveDir, "cuda-tests.sha256", "cuda-tests.tar.zst", "cargo-nextest")
	sums(hosted.Temp, "cuda-runtime-12.8.sha256", "cuda-runtime-12.8.tar")
	split := gate.Jobs["cuda-archive"].Step(t, transportStep, func(s workflowtest.Step) bool { return s.Name == transportStep })
	cut := func(dir, payload, parts string) []string {
		step := split
		step.WorkingDirectory, _ = filepath.Rel(hosted.Workspace, dir)
		if res := hosted.Run(t, step, map[string]string{"PAYLOAD": payload, "PARTS": parts}); res.Code != 0 {
			t.Fatalf("the split failed: %s", res.Out)
		}
		var names []string
		var sizes []int64
		for i := range 5 {
			name := filepath.Join(parts, "part-"+strconv.Itoa(i))
			info, err := os.Stat(name)
			if err != nil {
				t.Fatal(err)
			}
			names, sizes = append(names, name), append(sizes, info.Size())
		}
		if _, err := os.Stat(filepath.Join(parts, "part-5")); err == nil {
			t.Error("a sixth part")
		}
		if lo, hi := slices.Min(sizes), slices.Max(sizes); hi-lo > 4 || lo == 0 {
			t.Errorf("part sizes %v are not balanced", sizes)
		}
		return names
	}
	// Each payload as the template names it, the runtime's for one cell.
	archivePayload := split.Env["PAYLOAD"]
	runtimePayload := strings.ReplaceAll(gate.Jobs["cuda-runtime"].Step(t, transportStep, func(s workflowtest.Step) bool { return s.Name == transportStep }).Env["PAYLOAD"],
		"${{ matrix.cuda }}", "12.8")
	archiveParts := cut(archiveDir, archivePayload, filepath.Join(hosted.Temp, "cuda-tests-parts"))
	runtimeParts := cut(hosted.Temp, runtimePayload, filepath.Join(hosted.Temp, "cuda-runtime-parts"))
	// The archive's tools travel beside its parts, as one artifact whose
	// files land in the workspace without their modes (upload-artifact
	// keeps none).
	tools := gate.Jobs["cuda-archive"].Step(t, "the tools upload", func(s workflowtest.Step) bool {
		return strings.HasPrefix(s.Uses, "actions/upload-artifact@") && s.With["name"] == "${{ steps.key.outputs.key }}-tools"
	})
	toolFiles := strings.Fields(tools.With["path"])
	if got := strings.Fields(archivePayload + " " + strings.ReplaceAll(tools.With["path"], "target/nextest/", "")); !slices.Equal(slices.Sorted(slices.Values(got)), []string{"cargo-nextest", "cuda-tests.sha256", "cuda-tests.tar.zst"}) {
		t.Fatalf("the archive's parts (%s) and its tools (%s) are not the archive, cargo-nextest and their sums, once each", archivePayload, tools.With["path"])
	}

	for name, tc := range map[string]struct {
		damage      func(archive, runtime map[int][]byte)
		rebuildCode int
		verifyCode  int
		message     string
	}{
		"intact":                    {func(a, r map[int][]byte) {}, 0, 0, ""},
		"a part did not arrive":     {func(a, r map[int][]byte) { delete(r, 2) }, 1, -1, "part 2 of the payload"},
		"a part changed in transit": {func(a, r map[int][]byte) { a[1][len(a[1])/2] ^= 0xff }, 0, 1, "FAILED"},
	} {
		t.Run(name, func(t *testing.T) {
			pod := workflowtest.NewRunner(t)
			arrived := func(names []string) map[int][]byte {
				m := map[int][]byte{}
				for i, n := range names {
					m[i], _ = os.ReadFile(n)
				}
				return m
			}
			a, r := arrived(archiveParts), arrived(runtimeParts)
			tc.damage(a, r)
			for dir, parts := range map[string]map[int][]byte{"cuda-tests-parts": a, "cuda-runtime-parts": r} {
				os.MkdirAll(filepath.Join(pod.Temp, dir), 0o755)
				for i, data := range parts {
					os.WriteFile(filepath.Join(pod.Temp, dir, "part-"+strconv.Itoa(i)), data, 0o644)
				}
			}
			for _, f := range toolFiles {
				os.WriteFile(filepath.Join(pod.Workspace, filepath.Base(f)), files[filepath.Base(f)], 0o644)
			}
			res := pod.Run(t, gpu.Steps[rebuild], nil)
			if res.Code != tc.rebuildCode || tc.rebuildCode != 0 && !strings.Contains(res.Out, tc.message) {
				t.Fatalf("rebuild: exit %d, want %d and %q:\n%s", res.Code, tc.rebuildCode, tc.message, res.Out)
			}
			if tc.rebuildCode != 0 {
				if !strings.Contains(res.Out, "::error::") {
					t.Errorf("a missing part is not an annotation:\n%s", res.Out)
				}
				return
			}
			res = pod.Run(t, gpu.Steps[verify], map[string]string{"TIER": "12.8", "TRANSFER_STARTED": "0"})
			if res.Code != tc.verifyCode || !strings.Contains(res.Out, tc.message) {
				t.Fatalf("verify: exit %d, want %d and %q:\n%s", res.Code, tc.verifyCode, tc.message, res.Out)
			}
			if tc.verifyCode != 0 {
				return
			}
			if info, err := os.Stat(filepath.Join(pod.Workspace, "cargo-nextest")); err != nil || info.Mode()&0o100 == 0 {
				t.Errorf("cargo-nextest is not executable after the verification: %v %v", info, err)
			}
			for name, dir := range map[string]string{"cuda-tests.tar.zst": pod.Workspace, "cargo-nextest": pod.Workspace, "cuda-tests.sha256": pod.Workspace,
				"cuda-runtime-12.8.tar": pod.Temp, "cuda-runtime-12.8.sha256": pod.Temp} {
				if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !slices.Equal(got, files[name]) {
					t.Errorf("%s was not rebuilt as built: %v", name, err)
				}
			}
			if _, err := os.Stat(filepath.Join(pod.Temp, "cuda-tests-parts")); err == nil {
				t.Error("the parts are left on the pod's disk after the rebuild")
			}
			if !strings.Contains(res.Summary, "Transfer through verification: ") {
				t.Errorf("the summary does not record the transfer's time: %q", res.Summary)
			}
		})
	}
}

// The change-aware CI seed: "On a pod archive-cache miss, the three
// compressed archives travel as five balanced, uncompressed Actions
// artifacts ... the cache content key and restore-only ownership are
// unchanged." The provisioning seed: "zstd lands before archive cache
// restore, retaining compatibility with hosted cache writers", and "the
// cache restores abort a stalled segment after SEGMENT_DOWNLOAD_TIMEOUT_MINS=2
// and are non-blocking, because a test-archive miss falls back to its
// immutable artifact". The pod restores the publisher's entry read-only
// under its exact path and the gate's content key, after zstd; it uses the
// entry only when it is the archive the hosted job checked, and takes the
// parts otherwise. The decision step and the rebuild run as written.
func TestThePodRestoresTheArchiveCacheFirstAndTakesTheFivePartsOnlyOnAMiss(t *testing.T) {
	gpu := workflowtest.Read(t, "runpod-gpu-execute.yml").Jobs["gpu-tests"]
	publisher := workflowtest.Read(t, "ci-cache-publish.yml").Jobs["cuda-archive"].Step(t, "archive-cache", func(s workflowtest.Step) bool { return s.ID == "archive-cache" })
	at := func(what string, match func(workflowtest.Step) bool) int {
		i := slices.IndexFunc(gpu.Steps, match)
		if i < 0 {
			t.Fatalf("gpu-tests has no %s", what)
		}
		return i
	}
	byID := func(id string) func(workflowtest.Step) bool {
		return func(s workflowtest.Step) bool { return s.ID == id }
	}
	zstd := at("zstd install", func(s workflowtest.Step) bool {
		return strings.Contains(s.Run, "install") && strings.Contains(s.Run, "zstd")
	})
	restore, cached, parts := at("archive-cache restore", byID("archive-cache")), at("cached-archive decision", byID("cached")), at("parts download", byID("archive"))
	tools := at("tools download", func(s workflowtest.Step) bool { return s.Artifact() == "${{ inputs.archive }}-tools" })
	rebuild := at("rebuild", func(s workflowtest.Step) bool { return s.Name == "Rebuild the payload from its parts" })
	verify := at("verification", func(s workflowtest.Step) bool { return s.Name == "Verify the payload checksums" })
	if !(zstd < restore && restore < cached && tools < cached && cached < parts && parts < rebuild && rebuild < verify) {
		t.Errorf("want zstd, the restore and the tools before the decision, then the parts, the rebuild and the verification: %d %d %d %d %d %d %d",
			zstd, restore, tools, cached, parts, rebuild, verify)
	}
	if s := gpu.Steps[zstd]; !s.ContinueOnError || s.TimeoutMinutes <= 0 || !strings.Contains(s.Run, "--no-install-recommends") {
		t.Errorf("the zstd install (%+v) must be bounded, non-blocking, and install no recommended packages", s)
	}
	r := gpu.Steps[restore]
	switch {
	case !strings.HasPrefix(r.Uses, "actions/cache/restore@"):
		t.Errorf("the pod's cache step is %s: the pod never writes the cache", r.Uses)
	case !r.ContinueOnError || r.TimeoutMinutes <= 0 || r.Env["SEGMENT_DOWNLOAD_TIMEOUT_MINS"] != "2":
		t.Errorf("the restore (continue-on-error %v, %v min, SEGMENT_DOWNLOAD_TIMEOUT_MINS %q) must be bounded, non-blocking and abandon a stalled segment after two minutes",
			r.ContinueOnError, r.TimeoutMinutes, r.Env["SEGMENT_DOWNLOAD_TIMEOUT_MINS"])
	case r.With["key"] != "${{ inputs.archive }}" || r.With["restore-keys"] != "":
		t.Errorf("the restore's key is %q (restore-keys %q): want exactly the content key the gate hands over", r.With["key"], r.With["restore-keys"])
	case r.With["path"] != publisher.With["path"]:
		t.Errorf("the pod restores %q, the publisher saves %q: an entry's version covers its path", r.With["path"], publisher.With["path"])
	}
	if s := gpu.Steps[tools]; s.If != "" {
		t.Errorf("the tools download runs if %q: the pod needs them on every path", s.If)
	}
	for _, s := range gpu.Steps {
		if s.Artifact() == "${{ inputs.archive }}-part-*" && !strings.HasPrefix(s.If, "steps.cached.outputs.archive != 'true'") {
			t.Errorf("a parts download runs if %q: want only when the cache did not supply the archive", s.If)
		}
	}
	if got := gpu.Steps[rebuild].Env["ARCHIVE_FROM_CACHE"]; got != "${{ steps.cached.outputs.archive }}" {
		t.Errorf("the rebuild reads ARCHIVE_FROM_CACHE %q", got)
	}
	// The contract holds the pod's path to the publisher's.
	files := exampleWorkflows(t)
	const lifecycle = ".github/workflows/runpod-gpu-execute.yml"
	files[lifecycle] = []byte(strings.Replace(string(files[lifecycle]), "          path: target/nextest\n", "          path: ./target/nextest\n", 1))
	if fs := CheckWorkflows(files, rules(t)); !slices.Equal(ruleIDs(fs), []string{RuleKeyPair}) || fs[0].File != lifecycle {
		t.Errorf("a pod restoring another path: %v", fs)
	}

	// Run as written. The runtime tree's parts always arrive.
	hosted := workflowtest.NewRunner(t, "tar", "split", "wc", "sha256sum", "paste", "awk", "cut")
	runtime := []byte(strings.Repeat("runtime tree ", 4000))
	os.WriteFile(filepath.Join(hosted.Temp, "cuda-runtime-12.8.tar"), runtime, 0o644)
	os.WriteFile(filepath.Join(hosted.Temp, "cuda-runtime-12.8.sha256"), fmt.Appendf(nil, "%x  cuda-runtime-12.8.tar\n", sha256.Sum256(runtime)), 0o644)
	split := workflowtest.Read(t, "runpod-gpu-test.yml").Jobs["cuda-runtime"].Step(t, transportStep, func(s workflowtest.Step) bool { return s.Name == transportStep })
	split.WorkingDirectory, _ = filepath.Rel(hosted.Workspace, hosted.Temp)
	runtimeParts := filepath.Join(hosted.Temp, "cuda-runtime-parts")
	if res := hosted.Run(t, split, map[string]string{"PAYLOAD": "cuda-runtime-12.8.tar cuda-runtime-12.8.sha256", "PARTS": runtimeParts}); res.Code != 0 {
		t.Fatalf("the runtime split failed: %s", res.Out)
	}
	archive, nextest := []byte("the archive the hosted job checked"), []byte("cargo-nextest")
	sums := fmt.Sprintf("%x  cuda-tests.tar.zst\n%x  cargo-nextest\n", sha256.Sum256(archive), sha256.Sum256(nextest))
	for name, tc := range map[string]struct {
		hit      string // the restore's cache-hit output
		restored []byte // what it restored; nil: nothing
		sums     bool   // the tools arrived
		used     bool
		warning  bool
	}{
		"a hit on the checked archive":            {"true", archive, true, true, false},
		"a hit on another build of the same key":  {"true", []byte("a rebuild under the same key"), true, false, true},
		"a miss":                                  {"false", nil, true, false, false},
		"the restore failed or did not run":       {"", nil, true, false, false},
		"a hit but the sums did not arrive":       {"true", archive, false, false, false},
		"a hit reported with nothing on the disk": {"true", nil, true, false, false},
	} {
		t.Run(name, func(t *testing.T) {
			pod := workflowtest.NewRunner(t)
			if tc.restored != nil {
				os.MkdirAll(filepath.Join(pod.Workspace, "target", "nextest"), 0o755)
				os.WriteFile(filepath.Join(pod.Workspace, "target", "nextest", "cuda-tests.tar.zst"), tc.restored, 0o644)
			}
			if tc.sums {
				os.WriteFile(filepath.Join(pod.Workspace, "cuda-tests.sha256"), []byte(sums), 0o644)
			}
			os.WriteFile(filepath.Join(pod.Workspace, "cargo-nextest"), nextest, 0o644)
			res := pod.Run(t, gpu.Steps[cached], map[string]string{"CACHE_HIT": tc.hit})
			if res.Code != 0 || res.Output("archive") != strconv.FormatBool(tc.used) || strings.Contains(res.Out, "::warning::") != tc.warning {
				t.Fatalf("exit %d, archive=%q, want %v (warning %v):\n%s", res.Code, res.Output("archive"), tc.used, tc.warning, res.Out)
			}
			if _, err := os.Stat(filepath.Join(pod.Workspace, "target", "nextest")); err == nil {
				t.Error("the restored directory is left on the pod's disk")
			}
			_, err := os.Stat(filepath.Join(pod.Workspace, "cuda-tests.tar.zst"))
			if (err == nil) != tc.used {
				t.Errorf("the archive is in place %v, used %v", err == nil, tc.used)
			}
			source := "ARCHIVE_SOURCE=five-part artifacts"
			if tc.used {
				source = "ARCHIVE_SOURCE=pod cache hit"
			}
			if !strings.Contains(res.Env, source) {
				t.Errorf("GITHUB_ENV %q, want %q", res.Env, source)
			}
			// Then the rebuild: with the archive from the cache it needs only
			// the runtime's parts; without it, the archive's parts too.
			os.CopyFS(filepath.Join(pod.Temp, "cuda-runtime-parts"), os.DirFS(runtimeParts))
			res = pod.Run(t, gpu.Steps[rebuild], map[string]string{"ARCHIVE_FROM_CACHE": strconv.FormatBool(tc.used)})
			if !tc.used {
				if res.Code == 0 || !strings.Contains(res.Out, "cuda-tests-parts did not arrive") {
					t.Errorf("without the cache's archive and its parts the rebuild passed or blamed another part (exit %d):\n%s", res.Code, res.Out)
				}
				return
			}
			if res.Code != 0 {
				t.Fatalf("the rebuild failed with the archive from the cache:\n%s", res.Out)
			}
			res = pod.Run(t, gpu.Steps[verify], map[string]string{"TIER": "12.8", "ARCHIVE_SOURCE": "pod cache hit"})
			if res.Code != 0 || !strings.Contains(res.Summary, "the archive from pod cache hit") {
				t.Errorf("verification of a cached archive: exit %d, summary %q:\n%s", res.Code, res.Summary, res.Out)
			}
		})
	}
}

// The cache-trust seed, "Observability and bounds": "The hosted workspace
// matrix maps rust-cache to its external CARGO_TARGET_DIR and, on an exact
// hit, verifies restored faer and strided-rs dependency artifacts under the
// actual target path; a cache-hit message alone is not treated as
// evidence." The adoption CI's workspace lane tells rust-cache the target
// path cargo uses, and its check, run as written, counts a hit that
// restored no compiled dependency as a miss.
func TestACacheHitIsVerifiedByTheRestoredArtifactsNotItsMessage(t *testing.T) {
	job := workflowtest.Read(t, "ci.yml").Jobs["linux-tests"]
	target := job.Env["CARGO_TARGET_DIR"]
	cache := job.Step(t, "rust-cache", func(s workflowtest.Step) bool { return strings.HasPrefix(s.Uses, "Swatinem/rust-cache@") })
	ws, rel, ok := strings.Cut(cache.With["workspaces"], "->")
	if !ok || strings.TrimSpace(ws) != "." || target != "${{ github.workspace }}/"+strings.TrimSpace(rel) || !strings.HasPrefix(strings.TrimSpace(rel), "..") {
		t.Fatalf("rust-cache caches %q, cargo builds in %q: want the same target path, outside the checkout", cache.With["workspaces"], target)
	}
	verify, build := -1, -1
	for i, s := range job.Steps {
		switch {
		case s.If == "steps."+cache.ID+".outputs.cache-hit == 'true'" && s.Run != "":
			verify = i
		case strings.HasPrefix(s.Run, "cargo test"):
			build = i
		}
	}
	if cache.ID == "" || verify < 0 || build < verify {
		t.Fatalf("want a check of an exact hit before the build: check at %d, build at %d", verify, build)
	}
	check := job.Steps[verify]
	deps := strings.Fields(check.Env["DEPENDENCIES"])
	if len(deps) == 0 {
		t.Fatal("the check names no dependency")
	}
	r := workflowtest.NewRunner(t)
	for name, tc := range map[string]struct {
		restored []string // the dependencies whose artifacts the hit restored
		want     string
	}{
		"every dependency restored": {deps, "true"},
		"one missing":               {deps[:len(deps)-1], "false"},
		"an empty target directory": {nil, "false"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			lib := filepath.Join(dir, check.Env["PROFILE_DIR"], "deps")
			os.MkdirAll(lib, 0o755)
			for _, d := range tc.restored {
				os.WriteFile(filepath.Join(lib, "lib"+strings.ReplaceAll(d, "-", "_")+"-0123abcd.rlib"), []byte("rlib"), 0o644)
			}
			res := r.Run(t, check, map[string]string{"CARGO_TARGET_DIR": dir, "DEPENDENCIES": check.Env["DEPENDENCIES"], "PROFILE_DIR": check.Env["PROFILE_DIR"]})
			if res.Code != 0 || res.Output("restored") != tc.want {
				t.Fatalf("exit %d, restored %q, want %q:\n%s", res.Code, res.Output("restored"), tc.want, res.Out)
			}
			missed := deps[len(tc.restored):]
			if tc.want == "false" && (!strings.Contains(res.Out, "::warning::") || !strings.Contains(res.Summary, strings.Join(missed, " "))) {
				t.Errorf("a hit without %v is not reported as a miss naming them:\n%s\nsummary %q", missed, res.Out, res.Summary)
			}
			if tc.want == "true" && !strings.Contains(res.Summary, "verified") {
				t.Errorf("summary %q", res.Summary)
			}
		})
	}
}

// The cache-trust seed: "The consumer (runpod-gpu-test.yml) and publisher
// (ci-cache-publish.yml) compute the key with byte-identical expressions
// over an identical checkout layout", and the key's "manually bumped vN
// component cover[s] the archive build commands and toolkit selection". A
// key match must mean the same archive: the publisher builds with the same
// script (hashed into the key) and the same proven toolkit as the GPU
// workflow, after the toolkit job it depends on.
func TestThePublisherBuildsTheArchiveAsTheGPUWorkflowDoes(t *testing.T) {
	published := workflowtest.Read(t, "ci-cache-publish.yml").Jobs["cuda-archive"]
	consumed := workflowtest.Read(t, "runpod-gpu-test.yml").Jobs["cuda-archive"]
	type build struct {
		script, tree, arch, key string
	}
	read := func(name string, j workflowtest.Job) build {
		var b build
		restoreKey := map[string]string{} // step id -> key
		for _, s := range j.Steps {
			switch {
			case strings.HasPrefix(s.Uses, "actions/cache/restore@"):
				restoreKey[s.ID] = s.With["key"]
			case s.With["step"] == "cuda-tree":
				b.tree, b.arch = s.With["tree"], s.With["compile-arch"]
				id := strings.TrimSuffix(strings.TrimPrefix(s.With["cache-hit"], "${{ steps."), ".outputs.cache-hit }}")
				b.key = restoreKey[id]
			case strings.Contains(s.Run, "build_gpu_archive") || strings.Contains(s.Run, "nextest archive"):
				if b.tree == "" {
					t.Errorf("%s builds the archive before any toolkit proved itself", name)
				}
				b.script = s.Run
			}
		}
		return b
	}
	p, c := read("the publisher", published), read("the GPU workflow", consumed)
	if p != c || p.script == "" || p.key == "" {
		t.Errorf("the publisher builds with %+v, the GPU workflow with %+v: want the same script, toolkit and toolkit key", p, c)
	}
	if !published.NeedsJob("cuda-toolkit") {
		t.Error("the publisher's archive job does not wait for the toolkit it publishes")
	}
}

// The cache-trust seed: the archive key is derived from "the Rust toolchain
// version (rustc -V)", and "The consumer ... and publisher ... compute the
// key with byte-identical expressions". Both archive jobs read rustc -V in a
// step of their own and hash it into the key through the Action's
// toolchain input, the same way; the step, run as written, outputs the
// compiler's version string.
func TestTheKeyHashesTheRustToolchainTheSameWayOnBothSides(t *testing.T) {
	var seen []string
	for file, job := range map[string]string{"ci-cache-publish.yml": "cuda-archive", "runpod-gpu-test.yml": "cuda-archive"} {
		j := workflowtest.Read(t, file).Jobs[job]
		key := j.Step(t, "key", func(s workflowtest.Step) bool {
			return s.With["step"] == "cache-check" && s.With["cache-key"] == "true"
		})
		id := strings.TrimSuffix(strings.TrimPrefix(key.With["toolchain"], "${{ steps."), ".outputs.rustc }}")
		if id == "" || id == key.With["toolchain"] {
			t.Fatalf("%s: the key step's toolchain is %q: want a step's rustc output", file, key.With["toolchain"])
		}
		read := j.Step(t, "toolchain", func(s workflowtest.Step) bool { return s.ID == id })
		seen = append(seen, read.Run+"|"+key.With["toolchain"])
		r := workflowtest.NewRunner(t)
		bin := t.TempDir()
		os.WriteFile(filepath.Join(bin, "rustc"), []byte("#!/bin/sh\n[ \"$1\" = -V ] && echo 'rustc 1.95.0 (59807616e 2026-04-14)'\n"), 0o755)
		r.Path = bin + string(os.PathListSeparator) + r.Path
		if res := r.Run(t, read, nil); res.Code != 0 || res.Output("rustc") != "rustc 1.95.0 (59807616e 2026-04-14)" {
			t.Errorf("%s: the toolchain step wrote %q (exit %d):\n%s", file, res.Outputs, res.Code, res.Out)
		}
	}
	if len(seen) != 2 || seen[0] != seen[1] {
		t.Errorf("the publisher and the GPU workflow read the toolchain differently: %q", seen)
	}
}

// The cache-trust seed: the key holds "the cudarc binding and PTX toolkit
// versions (explicit key prefix)". Both archive jobs read the same key
// spec file, and the example's ptx- component names the toolkit the
// workflows build with (cuda-toolkit-<version>): workflow YAML is not
// hashed, so a toolkit moved in the workflow alone would keep the key.
func TestTheKeySpecNamesTheToolkitTheWorkflowsBuildWith(t *testing.T) {
	spec, err := LoadKeySpec(ExampleKeySpec)
	if err != nil {
		t.Fatal(err)
	}
	var ptx string
	for _, c := range spec.Components {
		if v, ok := strings.CutPrefix(c, "ptx-"); ok {
			ptx = v
		}
	}
	if ptx == "" {
		t.Fatalf("the example spec %v names no ptx- component", spec.Components)
	}
	var specs []string
	for _, file := range []string{"ci-cache-publish.yml", "runpod-gpu-test.yml"} {
		j := workflowtest.Read(t, file).Jobs["cuda-archive"]
		key := j.Step(t, "key", func(s workflowtest.Step) bool { return s.With["cache-key"] == "true" })
		specs = append(specs, key.With["key-spec"])
		tree := j.Step(t, "toolkit", func(s workflowtest.Step) bool { return s.With["step"] == "cuda-tree" }).With["tree"]
		if !strings.HasSuffix(tree, "/cuda-toolkit-"+ptx) {
			t.Errorf("%s builds with %s, but the key spec's PTX toolkit is %s", file, tree, ptx)
		}
	}
	if specs[0] == "" || specs[0] != specs[1] {
		t.Errorf("the publisher and the GPU workflow read key specs %q", specs)
	}
}
