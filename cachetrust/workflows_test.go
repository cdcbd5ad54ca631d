package cachetrust

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

func rules(t *testing.T) Rules {
	t.Helper()
	r, err := LoadRules(ExampleRules)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func ruleIDs(fs []Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Rule)
	}
	return out
}

// check runs one workflow file (as path) alone.
func check(t *testing.T, path, yml string) []Finding {
	t.Helper()
	r := rules(t)
	r.KeyPairs = nil
	return CheckWorkflows(map[string][]byte{path: []byte(yml)}, r)
}

const privilegedHeader = `on:
  workflow_run: {workflows: [ci], types: [in_progress]}
permissions: {contents: read}
jobs:
  build:
    runs-on: ubuntu-24.04
    steps:
`

func TestCheckWorkflows_PrivilegedCacheSave(t *testing.T) {
	bad := map[string]string{
		"actions/cache saves":         "      - uses: actions/cache@v4\n        with: {path: x, key: k}\n",
		"actions/cache/save":          "      - uses: actions/cache/save@v4\n        with: {path: x, key: k}\n",
		"setup-go default caching":    "      - uses: actions/setup-go@v5\n",
		"setup-node with cache":       "      - uses: actions/setup-node@v4\n        with: {cache: npm, package-manager-cache: false}\n",
		"setup-node default pm cache": "      - uses: actions/setup-node@v5\n",
		"setup-python with cache":     "      - uses: actions/setup-python@v5\n        with: {cache: pip}\n",
		"rust-cache saves":            "      - uses: Swatinem/rust-cache@v2\n",
		"rust-cache save-if true":     "      - uses: Swatinem/rust-cache@v2\n        with: {save-if: true}\n",
	}
	for name, step := range bad {
		t.Run("bad/"+name, func(t *testing.T) {
			fs := check(t, ".github/workflows/gpu.yml", privilegedHeader+step)
			if !slices.Equal(ruleIDs(fs), []string{RulePrivilegedCacheSave}) || fs[0].Line != 8 || fs[0].Column != 15 {
				t.Errorf("%v", fs)
			}
		})
	}
	good := map[string]string{
		"cache/restore":          "      - uses: actions/cache/restore@v4\n        with: {path: x, key: k}\n",
		"setup-go cache false":   "      - uses: actions/setup-go@v5\n        with: {cache: false}\n",
		"setup-node no cache":    "      - uses: actions/setup-node@v4\n        with: {package-manager-cache: false}\n",
		"setup-python no cache":  "      - uses: actions/setup-python@v5\n",
		"rust-cache save-if off": "      - uses: Swatinem/rust-cache@v2\n        with: {save-if: false}\n",
		"rust-cache expression":  "      - uses: Swatinem/rust-cache@v2\n        with: {save-if: '${{ false }}'}\n",
	}
	for name, step := range good {
		t.Run("good/"+name, func(t *testing.T) {
			if fs := check(t, ".github/workflows/gpu.yml", privilegedHeader+step); len(fs) != 0 {
				t.Errorf("%v", fs)
			}
		})
	}
	// A dispatch with a PR input builds PR code with main's credentials too.
	dispatch := "on:\n  workflow_dispatch:\n    inputs:\n      pr_number: {required: true}\npermissions: {contents: read}\njobs:\n  b:\n    steps:\n      - uses: actions/cache@v4\n"
	if fs := check(t, ".github/workflows/gpu.yml", dispatch); !slices.Equal(ruleIDs(fs), []string{RulePrivilegedCacheSave}) {
		t.Errorf("dispatch with PR input: %v", fs)
	}
}

func TestCheckWorkflows_OnlyThePublisherSavesAndOnlyFromTheDefaultBranch(t *testing.T) {
	save := "    steps:\n      - uses: actions/cache@v4\n        with: {path: x, key: k}\n"
	if fs := check(t, ".github/workflows/nightly.yml", "on: {schedule: [{cron: '0 0 * * *'}]}\npermissions: {contents: read}\njobs:\n  b:\n"+save); !slices.Equal(ruleIDs(fs), []string{RuleNonPublisherSave}) {
		t.Errorf("non-publisher: %v", fs)
	}
	if fs := check(t, ".github/workflows/ci.yml", "on: pull_request\npermissions: {contents: read}\njobs:\n  b:\n"+save); len(fs) != 0 {
		t.Errorf("isolated PR writer: %v", fs)
	}
	pub := ".github/workflows/ci-cache-publish.yml"
	tests := map[string]struct {
		yml  string
		want []string
	}{
		"push to main only":       {"on: {push: {branches: [main]}}\npermissions: {contents: read}\njobs:\n  b:\n" + save, nil},
		"dispatch needs a guard":  {"on: {workflow_dispatch: {}}\npermissions: {contents: read}\njobs:\n  b:\n" + save, []string{RulePublisherBranch}},
		"dispatch with job guard": {"on: {workflow_dispatch: {}}\npermissions: {contents: read}\njobs:\n  b:\n    if: github.ref == 'refs/heads/main'\n" + save, nil},
		"push to any branch":      {"on: {push: {}}\npermissions: {contents: read}\njobs:\n  b:\n    if: github.ref == 'refs/heads/main'\n" + save, []string{RulePublisherBranch}},
		"pull_request trigger":    {"on: {pull_request: {}, push: {branches: [main]}}\npermissions: {contents: read}\njobs:\n  b:\n    if: github.ref == 'refs/heads/main'\n" + save, []string{RulePublisherBranch}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if fs := check(t, pub, tt.yml); !slices.Equal(ruleIDs(fs), tt.want) {
				t.Errorf("%v, want %v", fs, tt.want)
			}
		})
	}
}

func TestCheckWorkflows_PermissionsReadOnlyExceptTheAllowlist(t *testing.T) {
	steps := "    steps: [{run: 'true'}]\n"
	tests := map[string]struct {
		path, yml string
		want      []string
	}{
		"read only":             {".github/workflows/x.yml", "on: push\npermissions: {contents: read}\njobs:\n  a:\n" + steps, nil},
		"write-all":             {".github/workflows/x.yml", "on: push\npermissions: write-all\njobs:\n  a:\n" + steps, []string{RuleWritePermission}},
		"job write":             {".github/workflows/x.yml", "on: push\npermissions: {contents: read}\njobs:\n  a:\n    permissions: {contents: write}\n" + steps, []string{RuleWritePermission}},
		"allowlisted job write": {".github/workflows/runpod-gpu-execute.yml", "on: workflow_call\npermissions: {contents: read}\njobs:\n  watch:\n    permissions: {actions: write}\n" + steps, nil},
		"grant is per job":      {".github/workflows/runpod-gpu-test.yml", "on: workflow_run\npermissions: {contents: read}\njobs:\n  other:\n    permissions: {actions: write}\n" + steps, []string{RuleWritePermission}},
		"no permissions":        {".github/workflows/x.yml", "on: push\njobs:\n  a:\n" + steps, []string{RuleNoPermissions}},
		"every job declares":    {".github/workflows/x.yml", "on: push\njobs:\n  a:\n    permissions: {}\n" + steps, nil},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if fs := check(t, tt.path, tt.yml); !slices.Equal(ruleIDs(fs), tt.want) {
				t.Errorf("%v, want %v", fs, tt.want)
			}
		})
	}
}

func TestCheckWorkflows_NoPullRequestTargetUnlessAllowlisted(t *testing.T) {
	yml := "on: pull_request_target\npermissions: {contents: read}\njobs:\n  a:\n    steps: [{run: 'true'}]\n"
	if fs := check(t, ".github/workflows/x.yml", yml); !slices.Equal(ruleIDs(fs), []string{RulePullRequestTarget}) {
		t.Errorf("%v", fs)
	}
	r := rules(t)
	r.PullRequestTarget = []string{".github/workflows/x.yml"}
	if fs := CheckWorkflows(map[string][]byte{".github/workflows/x.yml": []byte(yml)}, Rules{PullRequestTarget: r.PullRequestTarget}); len(fs) != 0 {
		t.Errorf("allowlisted: %v", fs)
	}
}

func TestCheckWorkflows_CheckoutDoesNotPersistCredentialsWithProviderSecrets(t *testing.T) {
	job := func(with string) string {
		return "on: workflow_run\npermissions: {contents: read}\njobs:\n  start:\n    steps:\n      - uses: actions/checkout@v4\n" + with +
			"      - run: provision\n        env: {RUNPOD_API_KEY: '${{ secrets.RUNPOD_API_KEY }}'}\n"
	}
	if fs := check(t, ".github/workflows/x.yml", job("")); !slices.Equal(ruleIDs(fs), []string{RulePersistCredentials}) {
		t.Errorf("default persists: %v", fs)
	}
	if fs := check(t, ".github/workflows/x.yml", job("        with: {persist-credentials: false}\n")); len(fs) != 0 {
		t.Errorf("%v", fs)
	}
	noSecret := "on: push\npermissions: {contents: read}\njobs:\n  a:\n    steps:\n      - uses: actions/checkout@v4\n"
	if fs := check(t, ".github/workflows/x.yml", noSecret); len(fs) != 0 {
		t.Errorf("no provider secret: %v", fs)
	}
	appKey := strings.Replace(job(""), "RUNPOD_API_KEY", "GPU_GATE_APP_PRIVATE_KEY", -1)
	if fs := check(t, ".github/workflows/x.yml", appKey); !slices.Equal(ruleIDs(fs), []string{RulePersistCredentials}) {
		t.Errorf("every listed provider secret counts: %v", fs)
	}
	longer := strings.Replace(job(""), "secrets.RUNPOD_API_KEY", "secrets.RUNPOD_API_KEY_READONLY", 1)
	if fs := check(t, ".github/workflows/x.yml", longer); len(fs) != 0 {
		t.Errorf("a secret whose name only starts with a provider secret's: %v", fs)
	}
}

func TestCheckWorkflows_KeyPairsAreByteIdentical(t *testing.T) {
	r := rules(t)
	files := exampleWorkflows(t)
	if fs := CheckWorkflows(files, r); len(fs) != 0 {
		t.Fatalf("example workflows: %v", fs)
	}
	files[".github/workflows/runpod-gpu-test.yml"] = []byte(strings.Replace(string(files[".github/workflows/runpod-gpu-test.yml"]),
		"key: ${{ steps.key.outputs.key }}", "key: ${{ steps.key.outputs.key }}-x", 1))
	fs := CheckWorkflows(files, r)
	if !slices.Equal(ruleIDs(fs), []string{RuleKeyPair}) || fs[0].Line == 0 {
		t.Errorf("%v", fs)
	}
	delete(files, ".github/workflows/ci-cache-publish.yml")
	if fs := CheckWorkflows(files, r); !slices.Contains(ruleIDs(fs), RuleKeyPair) {
		t.Errorf("missing publisher: %v", fs)
	}
}

// The local-validation label is read by several steps in several
// workflows; the example rules hold them to one value. A paid authorize
// that spelt it differently would run the paid path for a locally
// validated pull request, and its publish would write over the local gate.
func TestCheckWorkflows_TheLocalLabelIsTheSameInEveryStepThatReadsIt(t *testing.T) {
	r := rules(t)
	files := exampleWorkflows(t)
	files[".github/workflows/runpod-gpu-test.yml"] = []byte(strings.Replace(string(files[".github/workflows/runpod-gpu-test.yml"]),
		"          step: authorize\n", "          step: authorize\n          local-label: gpu-validated-local\n", 1))
	fs := CheckWorkflows(files, r)
	if !slices.Equal(ruleIDs(fs), []string{RuleConsistentInput}) || fs[0].File != ".github/workflows/runpod-gpu-test.yml" || fs[0].Line == 0 ||
		!strings.Contains(fs[0].Message, `local-label is "gpu-validated-local" here but the action's default`) {
		t.Errorf("%v", fs)
	}
	// Steps the input does not apply to are not counted.
	files = exampleWorkflows(t)
	files[".github/workflows/ci.yml"] = []byte(strings.Replace(string(files[".github/workflows/ci.yml"]),
		"          step: cache-check\n", "          step: cache-check\n          local-label: unrelated\n", 1))
	if fs := CheckWorkflows(files, r); len(fs) != 0 {
		t.Errorf("an input on a step it does not apply to: %v", fs)
	}
	for _, bad := range []string{
		"consistent_inputs: [{uses: gpugate/gpugate@v1, input: x}]",
		"consistent_inputs: [{uses: gpugate/gpugate}]",
		"consistent_inputs: [{uses: gpugate/gpugate, input: x, where: step}]",
	} {
		if _, err := LoadRules([]byte(bad)); err == nil {
			t.Errorf("rules %s were accepted", bad)
		}
	}
}

func TestCheckWorkflows_CompositeActionNeverSavesACache(t *testing.T) {
	bad := "runs:\n  using: composite\n  steps:\n    - uses: actions/setup-go@v5\n"
	if fs := check(t, "action.yml", bad); !slices.Equal(ruleIDs(fs), []string{RuleActionSavesCache}) {
		t.Errorf("%v", fs)
	}
}

func TestCheckWorkflows_ThisRepositorysActionAndExampleWorkflows(t *testing.T) {
	files := exampleWorkflows(t)
	action, err := os.ReadFile("../action.yml")
	if err != nil {
		t.Fatal(err)
	}
	files["action.yml"] = action
	if fs := CheckWorkflows(files, rules(t)); len(fs) != 0 {
		for _, f := range fs {
			t.Error(f)
		}
	}
}

func TestCheckWorkflows_ParseErrorsAreFindings(t *testing.T) {
	if fs := check(t, "x.yml", "on: [\n"); !slices.Equal(ruleIDs(fs), []string{RuleParse}) {
		t.Errorf("%v", fs)
	}
	if _, err := LoadRules([]byte("publisherz: []")); err == nil {
		t.Error("unknown rules key must fail")
	}
}

// exampleWorkflows maps the repository's example workflows to the paths
// they take in an adopting repository.
func exampleWorkflows(t *testing.T) map[string][]byte {
	t.Helper()
	paths, _ := filepath.Glob("../examples/workflows/*.yml")
	if len(paths) == 0 {
		t.Fatal("no example workflows")
	}
	files := map[string][]byte{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[".github/workflows/"+filepath.Base(p)] = data
	}
	return files
}

func FuzzCheckWorkflows(f *testing.F) {
	f.Add([]byte(privilegedHeader + "      - uses: actions/cache@v4\n"))
	f.Add([]byte("on: [push, pull_request_target]\njobs: {a: {permissions: write-all}}"))
	f.Add([]byte("runs: {steps: [{uses: actions/setup-go@v5}]}"))
	r, _ := LoadRules(ExampleRules)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, fd := range CheckWorkflows(map[string][]byte{".github/workflows/runpod-gpu-test.yml": data}, r) {
			if fd.Rule == "" || fd.File == "" {
				t.Fatalf("malformed finding %+v", fd)
			}
		}
	})
}

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
		case strings.HasPrefix(s.Uses, "actions/upload-artifact@") && strings.Contains(s.With["path"], "cuda-tests"):
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
			if strings.HasPrefix(s.Uses, "actions/download-artifact@") && s.With["run-id"] == "" && !strings.HasPrefix(s.With["name"], "cuda-runtime") {
				downloads++
				if s.With["name"] != "${{ inputs.archive }}" {
					t.Errorf("job %s downloads %q, want the archive under its content key", name, s.With["name"])
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
// requires it before running tests." And the change-aware CI seed: hosted
// preparation "verifies the JIT headers with real NVRTC".
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
				if check.With["compile-arch"] == "" || check.With["headers"] == "" {
					t.Errorf("%s: the runtime tree's JIT headers are not compiled with its own NVRTC", side.name)
				}
			}
		}
		if len(paths) == 2 && paths[0] != paths[1] {
			t.Errorf("%s: publisher and reader paths %q", kind, paths)
		}
	}
	// The pod requires the proven runtime tree before any test runs.
	gpu := workflowtest.Read(t, "runpod-gpu-execute.yml").Jobs["gpu-tests"]
	downloaded, required := -1, -1
	for i, s := range gpu.Steps {
		switch {
		case strings.HasPrefix(s.Uses, "actions/download-artifact@") && s.With["name"] == "cuda-runtime-${{ steps.tier.outputs.tier }}" && downloaded < 0:
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
		staged = staged || strings.HasPrefix(s.Uses, "actions/upload-artifact@") && s.With["name"] == "cuda-runtime-${{ matrix.cuda }}"
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
		recorded, uploaded := false, false
		for _, s := range wf.Jobs[job].Steps {
			recorded = recorded || strings.Contains(s.Run, "sha256sum") && strings.Contains(s.Run, sum[0])
			uploaded = uploaded || recorded && strings.HasPrefix(s.Uses, "actions/upload-artifact@") && strings.Contains(s.With["path"], sum[1])
		}
		if !uploaded {
			t.Errorf("%s does not record and upload %s with its payload", job, sum[1])
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
	staged := false
	for _, s := range gate.Steps {
		staged = staged || strings.HasPrefix(s.Uses, "actions/upload-artifact@") && strings.Contains(s.With["path"], "target/nextest/cargo-nextest") && strings.Contains(s.With["path"], "cuda-tests.tar.zst")
	}
	if !staged {
		t.Error("cargo-nextest does not travel with the archive")
	}
	r := workflowtest.NewRunner(t, "sha256sum")
	write := func(dir, name, content string) {
		os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644)
	}
	for name, tc := range map[string]struct {
		archive, nextest, runtime string // what arrived
		code                      int
	}{
		"intact":                  {"archive", "nextest", "runtime", 0},
		"a changed archive":       {"archive!", "nextest", "runtime", 1},
		"a changed cargo-nextest": {"archive", "nextest!", "runtime", 1},
		"a changed runtime":       {"archive", "nextest", "runtime!", 1},
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
			res := r.Run(t, gpu.Steps[verify], map[string]string{"TIER": "12.8"})
			if res.Code != tc.code {
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
