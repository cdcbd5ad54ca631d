package cachetrust

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpugate/gpugate/internal/strictyaml"
)

func rules(t testing.TB) Rules {
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

// Seed: "A failed paid gate is still retried by any later delivery for the
// same ref. Re-run a failed gate with gh run rerun <run id> --failed." In a
// workflow the rules name as re-run, an upload must name its attempt or
// overwrite: an artifact name is unique in a run across its attempts.
func TestCheckWorkflows_AnUploadMustSurviveARerun(t *testing.T) {
	head := "on: workflow_dispatch\npermissions: {contents: read}\njobs:\n  b:\n    steps:\n"
	tests := map[string]struct {
		path, step string
		want       []string
	}{
		"the same name again":   {".github/workflows/runpod-gpu-test.yml", "      - uses: actions/upload-artifact@v4\n        with: {name: archive, path: x}\n", []string{RuleRerunUpload}},
		"the default name":      {".github/workflows/runpod-gpu-test.yml", "      - uses: actions/upload-artifact@v4\n        with: {path: x}\n", []string{RuleRerunUpload}},
		"an expression is not":  {".github/workflows/runpod-gpu-test.yml", "      - uses: actions/upload-artifact@v4\n        with: {name: a, path: x, overwrite: '${{ inputs.o }}'}\n", []string{RuleRerunUpload}},
		"overwrite":             {".github/workflows/runpod-gpu-test.yml", "      - uses: actions/upload-artifact@v4\n        with: {name: archive, path: x, overwrite: true}\n", nil},
		"the attempt's name":    {".github/workflows/runpod-gpu-test.yml", "      - uses: actions/upload-artifact@v4\n        with: {name: 'cost-${{ github.run_attempt }}', path: x}\n", nil},
		"a workflow not listed": {".github/workflows/release.yml", "      - uses: actions/upload-artifact@v4\n        with: {name: archive, path: x}\n", nil},
		"a download":            {".github/workflows/runpod-gpu-test.yml", "      - uses: actions/download-artifact@v4\n        with: {name: archive}\n", nil},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			fs := check(t, tt.path, head+tt.step)
			if !slices.Equal(ruleIDs(fs), tt.want) {
				t.Fatalf("%v, want %v", fs, tt.want)
			}
			if len(fs) == 1 && (fs[0].Line != 6 || !strings.Contains(fs[0].Message, "overwrite: true")) {
				t.Errorf("%+v", fs[0])
			}
		})
	}
}

// The same seed rule over the adoption workflows: every workflow that
// uploads an artifact is one the example rules hold to rerun-upload, and
// none of its uploads would fail a re-run.
func TestTheAdoptionWorkflowsSurviveARerun(t *testing.T) {
	r := rules(t)
	files := exampleWorkflows(t)
	uploads := 0
	for path, data := range files {
		if n := strings.Count(string(data), "uses: actions/upload-artifact@"); n > 0 {
			uploads += n
			if !slices.Contains(r.RerunUploads, path) {
				t.Errorf("%s uploads artifacts but the example rules' rerun_uploads does not list it", path)
			}
		}
	}
	if uploads == 0 {
		t.Fatal("no uploads found")
	}
	for _, f := range CheckWorkflows(files, r) {
		if f.Rule == RuleRerunUpload {
			t.Errorf("%v", f)
		}
	}
}

// The change-aware CI seed: "Repository-owned Linux jobs explicitly use
// ubuntu-24.04 ... Avoid the moving ubuntu-latest alias so the build and
// execution baseline changes deliberately", and its cache namespaces name
// the distribution. With pinned_runners, a -latest alias anywhere a job's
// runner comes from is a finding; self-hosted labels are not.
func TestCheckWorkflows_JobsNameTheirRunnerImagesVersion(t *testing.T) {
	head := "on: push\npermissions: {contents: read}\njobs:\n  a:\n"
	steps := "    steps: [{run: 'true'}]\n"
	for name, tc := range map[string]struct {
		job  string
		want int // findings
		line int // of the first
	}{
		"an alias":                    {"    runs-on: ubuntu-latest\n", 1, 5},
		"a version":                   {"    runs-on: ubuntu-24.04\n", 0, 0},
		"an alias in an expression":   {"    runs-on: ${{ github.event_name == 'push' && 'macos-latest' || 'ubuntu-24.04' }}\n", 1, 5},
		"a larger runner's alias":     {"    runs-on: [windows-latest-8-cores]\n", 1, 5},
		"self-hosted labels":          {"    runs-on: [self-hosted, Linux, my-ubuntu-latest-pool]\n", 0, 0},
		"a runner group":              {"    runs-on: {group: gpu, labels: [ubuntu-latest]}\n", 1, 5},
		"through the matrix":          {"    runs-on: ${{ matrix.os }}\n    strategy: {matrix: {os: [ubuntu-24.04, windows-latest]}}\n", 1, 6},
		"a matrix the runner ignores": {"    runs-on: ubuntu-24.04\n    strategy: {matrix: {image: [ubuntu-latest]}}\n", 0, 0},
	} {
		t.Run(name, func(t *testing.T) {
			yml := head + tc.job + steps
			r := Rules{PinnedRunners: true}
			fs := CheckWorkflows(map[string][]byte{".github/workflows/x.yml": []byte(yml)}, r)
			if len(fs) != tc.want || tc.want > 0 && (fs[0].Rule != RuleMovingRunner || fs[0].Line != tc.line || !strings.Contains(fs[0].Message, "name the version")) {
				t.Fatalf("%v, want %d %s finding(s) at line %d", fs, tc.want, RuleMovingRunner, tc.line)
			}
			if fs := CheckWorkflows(map[string][]byte{".github/workflows/x.yml": []byte(yml)}, Rules{}); len(fs) != 0 {
				t.Errorf("without pinned_runners: %v", fs)
			}
		})
	}
	if !rules(t).PinnedRunners {
		t.Error("the example rules do not pin runners")
	}
}

// The Spark seed: "Do not register a persistent runner or change a normal
// PR job to runs-on: waffuru-spark", "The workflow lives on the default
// branch and is invoked only after the controller grants a reservation",
// and "Do not leave a persistent Spark runner online: GitHub could assign
// work while the host is being returned to development or Deckard". With
// fleet_runners, only the listed workflows may target the fleet's label,
// and only workflow_dispatch may start them.
func TestCheckWorkflows_OnlyTheControllerDispatchedWorkflowTargetsTheFleet(t *testing.T) {
	r := Rules{FleetRunners: FleetRunners{Labels: []string{"waffuru-spark"}, Workflows: []string{".github/workflows/spark-test.yml"}}}
	job := func(on, runsOn string) string {
		return "on: " + on + "\npermissions: {contents: read}\njobs:\n  t:\n    runs-on: " + runsOn + "\n    steps: [{run: 'true'}]\n"
	}
	const fleet = ".github/workflows/spark-test.yml"
	const other = ".github/workflows/ci.yml"
	expr := `${{ inputs.topology == 'pair' && fromJSON('["self-hosted","waffuru-spark","spark-pair"]') || fromJSON('["self-hosted","waffuru-spark","spark-single"]') }}`
	for name, tc := range map[string]struct {
		file, yml string
		want      int
	}{
		"the dispatched fleet workflow":      {fleet, job("workflow_dispatch", expr), 0},
		"a PR job on the fleet's label":      {other, job("pull_request", "[self-hosted, waffuru-spark]"), 1},
		"a PR job through an expression":     {other, job("pull_request", expr), 1},
		"a PR job through its matrix":        {other, "on: pull_request\npermissions: {contents: read}\njobs:\n  t:\n    runs-on: ${{ matrix.r }}\n    strategy: {matrix: {r: [ubuntu-24.04, waffuru-spark]}}\n    steps: [{run: 'true'}]\n", 1},
		"the fleet workflow on pull_request": {fleet, job("[workflow_dispatch, pull_request]", expr), 1},
		"the fleet workflow on a schedule":   {fleet, job("{workflow_dispatch: {}, schedule: [{cron: '0 0 * * *'}]}", "[self-hosted, waffuru-spark]"), 1},
		"a label that only contains it":      {other, job("pull_request", "[self-hosted, waffuru-spark-old]"), 0},
		"hosted runners":                     {other, job("pull_request", "ubuntu-24.04"), 0},
	} {
		t.Run(name, func(t *testing.T) {
			fs := CheckWorkflows(map[string][]byte{tc.file: []byte(tc.yml)}, r)
			if len(fs) != tc.want || tc.want > 0 && (fs[0].Rule != RuleFleetRunner || fs[0].Line == 0) {
				t.Errorf("%v, want %d %s finding(s)", fs, tc.want, RuleFleetRunner)
			}
			if fs := CheckWorkflows(map[string][]byte{tc.file: []byte(tc.yml)}, Rules{}); len(fs) != 0 {
				t.Errorf("without fleet_runners: %v", fs)
			}
		})
	}
	if ex := rules(t).FleetRunners; !slices.Equal(ex.Labels, []string{"waffuru-spark"}) || !slices.Equal(ex.Workflows, []string{fleet}) {
		t.Errorf("example rules: %+v", ex)
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

// The workflow contract keeps provider secrets off the pod: a job that may
// run on a self-hosted runner (the provisioned pod's label is an
// expression) references no provider secret, and no other secret outside
// self_hosted_secrets; GitHub-hosted jobs may hold them.
func TestCheckWorkflows_ProviderSecretsStayOffSelfHostedRunners(t *testing.T) {
	wf := func(runsOn, ref string) string {
		return "on: workflow_dispatch\npermissions: {contents: read}\njobs:\n  gpu:\n    runs-on: " + runsOn +
			"\n    steps:\n      - run: cargo nextest run\n        env: {X: '${{ " + ref + " }}'}\n"
	}
	tests := map[string]struct {
		runsOn, ref string
		allow       []string
		want        int // findings of the rule, at line 8
	}{
		"the provider key on the pod":                {"${{ needs.provision.outputs.runner_label }}", "secrets.RUNPOD_API_KEY", nil, 1},
		"the provider key on self-hosted":            {"[self-hosted, gpu]", "secrets.RUNPOD_API_KEY", nil, 1},
		"a provider key even when allowlisted":       {"[self-hosted]", "secrets.GPU_GATE_APP_PRIVATE_KEY", []string{"GPU_GATE_APP_PRIVATE_KEY"}, 1},
		"another secret outside the allowlist":       {"[self-hosted]", "secrets.HF_TOKEN", nil, 1},
		"another secret in the allowlist":            {"[self-hosted]", "secrets.HF_TOKEN", []string{"HF_TOKEN"}, 0},
		"every secret at once":                       {"[self-hosted]", "toJSON(secrets)", nil, 1},
		"the workflow token":                         {"[self-hosted]", "secrets.GITHUB_TOKEN", nil, 0},
		"the provider key on a GitHub-hosted runner": {"ubuntu-24.04", "secrets.RUNPOD_API_KEY", nil, 0},
		"a custom label is not provably hosted":      {"gpu-box", "secrets.RUNPOD_API_KEY", nil, 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := rules(t)
			r.KeyPairs, r.SelfHostedSecrets, r.PinnedRunners = nil, tc.allow, false
			fs := CheckWorkflows(map[string][]byte{".github/workflows/x.yml": []byte(wf(tc.runsOn, tc.ref))}, r)
			got := 0
			for _, f := range fs {
				if f.Rule == RuleSelfHostedSecret {
					got++
					if f.Line != 8 {
						t.Errorf("finding at line %d, want the env line 8: %v", f.Line, f)
					}
				}
			}
			if got != tc.want {
				t.Errorf("%d %s findings, want %d: %v", got, RuleSelfHostedSecret, tc.want, fs)
			}
		})
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
		"write_grants: [{workflow: .github/workflows/x.yml, job: a}]",
		"write_grants: [{scope: actions}]",
		"fleet_runners: {workflows: [.github/workflows/spark-test.yml]}",
		"fleet_runners: {labels: ['']}",
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

// TestCheckRuleReferences_ARuleNamingAMissingWorkflowChecksNothing: the
// example rules name every adoption workflow; with one renamed, each rule
// that named it is reported, once per file, and CheckWorkflows alone (which
// an adopter may run on a subset) is unchanged.
func TestCheckRuleReferences_ARuleNamingAMissingWorkflowChecksNothing(t *testing.T) {
	rules := rules(t)
	files := exampleWorkflows(t)
	if fs := CheckRuleReferences(files, rules); len(fs) != 0 {
		t.Fatalf("the example rules against their own workflows: %v", fs)
	}
	files[".github/workflows/reap.yml"] = files[".github/workflows/runpod-reap.yml"]
	delete(files, ".github/workflows/runpod-reap.yml")
	got := CheckRuleReferences(files, rules)
	want := []Finding{{File: ".github/workflows/runpod-reap.yml", Rule: RuleUnknownWorkflow}}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(Finding{}, "Message")); diff != "" {
		t.Fatalf("(-want +got)\n%s", diff)
	}
	if !strings.Contains(got[0].Message, "(write_grants[2], rerun_uploads)") {
		t.Errorf("the finding must name each rule that named the file: %s", got[0].Message)
	}
	for _, f := range CheckWorkflows(files, rules) {
		if f.Rule == RuleUnknownWorkflow {
			t.Errorf("CheckWorkflows reports references itself: %v", f)
		}
	}
	rules = Rules{Publishers: []string{"a.yml"}, IsolatedWriters: []string{"a.yml"}, PullRequestTarget: []string{"b.yml"}, FleetRunners: FleetRunners{Labels: []string{"l"}, Workflows: []string{"c.yml"}}}
	if got := ruleIDs(CheckRuleReferences(nil, rules)); len(got) != 3 {
		t.Errorf("publishers, isolated writers, pull_request_target and fleet workflows are references: %v", got)
	}
}

// exampleWorkflows maps the repository's example workflows to the paths
// they take in an adopting repository.
func exampleWorkflows(t testing.TB) map[string][]byte {
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

// A rules file holds one document: a second '---' document is refused,
// never silently ignored, whatever it grants.
func TestLoadRules_ASecondDocumentIsRefused(t *testing.T) {
	data := append(append([]byte{}, ExampleRules...), "\n---\nrerun_uploads: [x]\n"...)
	_, err := LoadRules(data)
	if !errors.Is(err, ErrRules) || !errors.Is(err, strictyaml.ErrSecondDocument) {
		t.Errorf("err = %v, want ErrRules for a second document", err)
	}
}

// FuzzLoadRules feeds the loader arbitrary rules files (an adopter's YAML):
// it never panics, every refusal is an ErrRules, and rules it accepts
// check the adoption workflows into well-formed findings.
func FuzzLoadRules(f *testing.F) {
	f.Add(ExampleRules)
	f.Add([]byte("key_pairs: [{publisher: {file: a, job: b, step: c, input: path}, consumer: {file: a, job: b, step: d}}]"))
	f.Add([]byte("write_grants: [{workflow: x, scope: actions}]\nrerun_uploads: [x]\n"))
	f.Add([]byte("consistent_inputs: [{uses: o/a, input: i, where: step, values: [s]}]"))
	files := exampleWorkflows(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := LoadRules(data)
		if err != nil {
			if !errors.Is(err, ErrRules) {
				t.Fatalf("an error that is not ErrRules: %v", err)
			}
			return
		}
		if r.DefaultBranch == "" {
			t.Fatal("accepted rules without a default branch")
		}
		for _, fd := range CheckWorkflows(files, r) {
			if fd.Rule == "" || fd.File == "" || fd.Message == "" {
				t.Fatalf("malformed finding %+v", fd)
			}
		}
	})
}

func FuzzCheckWorkflows(f *testing.F) {
	f.Add([]byte(privilegedHeader + "      - uses: actions/cache@v4\n"))
	f.Add([]byte("on: [push, pull_request_target]\njobs: {a: {permissions: write-all}}"))
	f.Add([]byte("runs: {steps: [{uses: actions/setup-go@v5}]}"))
	zizmor, _ := filepath.Glob("testdata/zizmor-cache-poisoning/*.yml")
	for _, p := range zizmor {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	r, _ := LoadRules(ExampleRules)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, fd := range CheckWorkflows(map[string][]byte{".github/workflows/runpod-gpu-test.yml": data}, r) {
			if fd.Rule == "" || fd.File == "" {
				t.Fatalf("malformed finding %+v", fd)
			}
		}
	})
}

// FuzzCheckWorkflows_FollowsLocalUses feeds one document as a workflow, the
// local action it may use and the reusable workflow it may call (itself
// included): following them terminates and yields well-formed findings.
func FuzzCheckWorkflows_FollowsLocalUses(f *testing.F) {
	f.Add([]byte("on: workflow_run\njobs:\n  a:\n    uses: ./.github/workflows/x.yml\n  b:\n    runs-on: self-hosted\n    steps:\n      - uses: ./.github/actions/a\n"))
	f.Add([]byte("runs:\n  using: composite\n  steps:\n    - uses: ./.github/actions/a\n    - uses: Swatinem/rust-cache@v2\n"))
	f.Add([]byte("on: workflow_call\njobs:\n  a:\n    uses: ./.github/workflows/x.yml\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		files := map[string][]byte{".github/workflows/x.yml": data, ".github/actions/a/action.yml": data}
		for _, fd := range CheckWorkflows(files, Rules{DefaultBranch: "main"}) {
			if fd.Rule == "" || fd.File == "" {
				t.Fatalf("malformed finding %+v", fd)
			}
		}
	})
}

// BenchmarkCheckWorkflows checks the adoption workflows (the realistic
// repository: every workflow an adopter copies) against the example rules,
// and a repository 100 times that size: the same workflows under 100 names
// each.
//
//	go test ./cachetrust -run '^$' -bench CheckWorkflows -benchtime 5x
func BenchmarkCheckWorkflows(b *testing.B) {
	r := rules(b)
	base := exampleWorkflows(b)
	for _, copies := range []int{1, 100} {
		files := map[string][]byte{}
		for path, data := range base {
			files[path] = data
			for i := 1; i < copies; i++ {
				files[strings.TrimSuffix(path, ".yml")+"-"+strconv.Itoa(i)+".yml"] = data
			}
		}
		b.Run(fmt.Sprintf("files=%d", len(files)), func(b *testing.B) {
			for b.Loop() {
				if fs := CheckWorkflows(files, r); copies == 1 && len(fs) != 0 {
					b.Fatal(fs)
				}
			}
		})
	}
}

// The self-hosted secret rule sees every way a secret reaches the job: the
// workflow's env, all secrets by an object filter, a label that only
// looks like a hosted image, a provider secret in another case.
func TestCheckWorkflows_ProviderSecretsStayOffSelfHostedRunnersWhateverTheSpelling(t *testing.T) {
	tests := map[string]struct {
		wf    string
		allow []string
	}{
		"workflow-level env":                       {wf: "on: workflow_dispatch\npermissions: {contents: read}\nenv:\n  KEY: ${{ secrets.RUNPOD_API_KEY }}\njobs:\n  gpu:\n    runs-on: [self-hosted, gpu]\n    steps:\n      - run: cargo nextest run\n"},
		"object filter secrets.*":                  {wf: "on: workflow_dispatch\npermissions: {contents: read}\njobs:\n  gpu:\n    runs-on: [self-hosted]\n    steps:\n      - run: echo \"$ALL\"\n        env: {ALL: '${{ toJSON(secrets.*) }}'}\n"},
		"a self-hosted label shaped like an image": {wf: "on: workflow_dispatch\npermissions: {contents: read}\njobs:\n  gpu:\n    runs-on: ubuntu-24.04-gpu\n    steps:\n      - run: x\n        env: {K: '${{ secrets.RUNPOD_API_KEY }}'}\n"},
		"a provider secret in another case":        {allow: []string{"runpod_api_key"}, wf: "on: workflow_dispatch\npermissions: {contents: read}\njobs:\n  gpu:\n    runs-on: [self-hosted]\n    steps:\n      - run: x\n        env: {K: '${{ secrets.runpod_api_key }}'}\n"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := rules(t)
			r.KeyPairs, r.SelfHostedSecrets, r.PinnedRunners = nil, tc.allow, false
			if fs := rulesOnly(CheckWorkflows(map[string][]byte{".github/workflows/x.yml": []byte(tc.wf)}, r), RuleSelfHostedSecret); len(fs) == 0 {
				t.Error("no finding")
			}
		})
	}
}
