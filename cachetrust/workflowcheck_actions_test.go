package cachetrust

import (
	"slices"
	"strings"
	"testing"
)

// privilegedJob is a workflow_run workflow (PR code with the default
// branch's credentials) whose one job runs step (YAML, indented for a step
// list) with env at the job level.
func privilegedJob(step, env string) string {
	return "on: workflow_run\npermissions: {contents: read}\njobs:\n  build:\n    runs-on: ubuntu-24.04\n" + env + "    steps:\n" + step
}

func rulesOnly(fs []Finding, rule string) []Finding {
	return slices.DeleteFunc(fs, func(f Finding) bool { return f.Rule != rule })
}

// The cache catalog knows the ecosystem: each cache-writing action, with
// the inputs and defaults that make it write, is a privileged-cache-save
// inside a privileged job; the same action with its write turned off is
// not.
func TestCheckWorkflows_EveryCatalogedCacheWriterIsAFindingInAPrivilegedJob(t *testing.T) {
	tests := []struct {
		name, step, env string
		saves           bool
	}{
		{"actions/cache", "      - uses: actions/cache@v4\n        with: {path: x, key: k}\n", "", true},
		{"actions/cache lookup-only", "      - uses: actions/cache@v4\n        with: {path: x, key: k, lookup-only: true}\n", "", false},
		{"actions/cache/save", "      - uses: actions/cache/save@v4\n        with: {path: x, key: k}\n", "", true},
		{"actions/cache/restore", "      - uses: actions/cache/restore@v4\n        with: {path: x, key: k}\n", "", false},
		{"setup-go by default", "      - uses: actions/setup-go@v5\n", "", true},
		{"setup-go cache off", "      - uses: actions/setup-go@v5\n        with: {cache: false}\n", "", false},
		{"setup-node npm", "      - uses: actions/setup-node@v4\n        with: {cache: npm}\n", "", true},
		{"setup-node v5 default", "      - uses: actions/setup-node@v5\n", "", true},
		{"setup-node off", "      - uses: actions/setup-node@v5\n        with: {package-manager-cache: false}\n", "", false},
		{"setup-python pip", "      - uses: actions/setup-python@v5\n        with: {cache: pip}\n", "", true},
		{"setup-python default", "      - uses: actions/setup-python@v5\n", "", false},
		{"setup-java gradle", "      - uses: actions/setup-java@v4\n        with: {cache: gradle}\n", "", true},
		{"setup-dotnet cache", "      - uses: actions/setup-dotnet@v4\n        with: {cache: true}\n", "", true},
		{"rust-cache", "      - uses: Swatinem/rust-cache@v2\n", "", true},
		{"rust-cache save-if false", "      - uses: Swatinem/rust-cache@v2\n        with: {save-if: false}\n", "", false},
		{"rust-cache lookup-only", "      - uses: Swatinem/rust-cache@v2\n        with: {lookup-only: true}\n", "", false},
		{"setup-rust-toolchain", "      - uses: actions-rust-lang/setup-rust-toolchain@v1\n", "", true},
		{"setup-rust-toolchain cache off", "      - uses: actions-rust-lang/setup-rust-toolchain@v1\n        with: {cache: false}\n", "", false},
		{"sccache with the GHA backend", "      - uses: Mozilla-Actions/sccache-action@v0.0.9\n", "    env: {SCCACHE_GHA_ENABLED: \"true\"}\n", true},
		{"sccache, local disk only", "      - uses: Mozilla-Actions/sccache-action@v0.0.9\n", "", false},
		{"build-push-action cache-to gha", "      - uses: docker/build-push-action@v6\n        with: {cache-to: \"type=gha,mode=max\"}\n", "", true},
		{"build-push-action registry cache", "      - uses: docker/build-push-action@v6\n        with: {cache-to: \"type=registry,ref=x\"}\n", "", false},
		{"bake-action gha", "      - uses: docker/bake-action@v6\n        with: {set: \"*.cache-to=type=gha\"}\n", "", true},
		{"setup-uv enable-cache", "      - uses: astral-sh/setup-uv@v6\n        with: {enable-cache: true}\n", "", true},
		{"setup-uv off", "      - uses: astral-sh/setup-uv@v6\n        with: {enable-cache: false}\n", "", false},
		{"setup-gradle", "      - uses: gradle/actions/setup-gradle@v4\n", "", true},
		{"setup-gradle read-only", "      - uses: gradle/actions/setup-gradle@v4\n        with: {cache-read-only: true}\n", "", false},
		{"mise-action", "      - uses: jdx/mise-action@v2\n", "", true},
		{"magic-nix-cache", "      - uses: DeterminateSystems/magic-nix-cache-action@v9\n", "", true},
		{"setup-bun", "      - uses: oven-sh/setup-bun@v2\n", "", true},
		{"setup-bun no-cache", "      - uses: oven-sh/setup-bun@v2\n        with: {no-cache: true}\n", "", false},
		{"composer-install", "      - uses: ramsey/composer-install@v3\n", "", true},
		{"composer-install ignore-cache", "      - uses: ramsey/composer-install@v3\n        with: {ignore-cache: \"yes\"}\n", "", false},
		{"maturin sccache", "      - uses: PyO3/maturin-action@v1\n        with: {sccache: true}\n", "", true},
		{"maturin without sccache", "      - uses: PyO3/maturin-action@v1\n", "", false},
		{"an expression may turn it on", "      - uses: actions/setup-dotnet@v4\n        with: {cache: \"${{ inputs.cache }}\"}\n", "", true},
	}
	for _, tc := range tests {
		fs := rulesOnly(CheckWorkflows(map[string][]byte{".github/workflows/x.yml": []byte(privilegedJob(tc.step, tc.env))}, Rules{DefaultBranch: "main"}), RulePrivilegedCacheSave)
		if got := len(fs) == 1; got != tc.saves {
			t.Errorf("%s: privileged-cache-save %v, want %v: %v", tc.name, got, tc.saves, fs)
		}
	}
}

// Inside a privileged job, a third-party action the catalog does not know
// cannot be proven to write no cache: a warning with its rule ID, which
// no_cache_actions allowlists. GitHub's own actions are known.
func TestCheckWorkflows_AnUnknownActionInAPrivilegedJobIsUnproven(t *testing.T) {
	wf := privilegedJob("      - uses: actions/upload-artifact@v4\n        with: {name: a, path: x}\n      - uses: acme/build-helper@v1\n", "")
	files := map[string][]byte{".github/workflows/x.yml": []byte(wf)}
	fs := rulesOnly(CheckWorkflows(files, Rules{DefaultBranch: "main"}), RuleUnprovenCache)
	if len(fs) != 1 || !fs[0].Warning || fs[0].Line != 9 || !strings.Contains(fs[0].Message, "acme/build-helper") {
		t.Fatalf("findings %v, want one unproven-cache warning for acme/build-helper at line 9", fs)
	}
	if fs := rulesOnly(CheckWorkflows(files, Rules{DefaultBranch: "main", NoCacheActions: []string{"acme/build-helper"}}), RuleUnprovenCache); len(fs) != 0 {
		t.Errorf("allowlisted: %v", fs)
	}
	unprivileged := strings.Replace(wf, "on: workflow_run", "on: pull_request", 1)
	if fs := rulesOnly(CheckWorkflows(map[string][]byte{".github/workflows/x.yml": []byte(unprivileged)}, Rules{DefaultBranch: "main"}), RuleUnprovenCache); len(fs) != 0 {
		t.Errorf("an unprivileged job: %v", fs)
	}
}

// What the workflow runs is followed: a local composite action and a local
// reusable workflow are checked under their caller's trigger, so a cache
// save inside them is a privileged save when a privileged workflow runs
// them, reported in their own file and naming the caller.
func TestCheckWorkflows_LocalActionsAndReusableWorkflowsAreCheckedUnderTheirCaller(t *testing.T) {
	for _, actionFile := range []string{".github/actions/build/action.yml", ".github/actions/build/action.yaml"} {
		files := map[string][]byte{
			".github/workflows/x.yml": []byte(privilegedJob("      - uses: ./.github/actions/build\n", "")),
			actionFile:                []byte("name: build\nruns:\n  using: composite\n  steps:\n    - uses: actions/setup-go@v5\n"),
		}
		fs := rulesOnly(CheckWorkflows(files, Rules{DefaultBranch: "main"}), RulePrivilegedCacheSave)
		if len(fs) != 1 || fs[0].File != actionFile || fs[0].Line != 5 || !strings.Contains(fs[0].Message, ".github/workflows/x.yml") {
			t.Errorf("%s: %v, want one privileged save at %s:5 naming the caller", actionFile, fs, actionFile)
		}
	}
	callee := "on: workflow_call\npermissions: {contents: read}\njobs:\n  inner:\n    runs-on: ubuntu-24.04\n    steps:\n      - uses: Swatinem/rust-cache@v2\n"
	caller := "on: workflow_run\npermissions: {contents: read}\njobs:\n  outer:\n    uses: ./.github/workflows/callee.yml\n"
	files := map[string][]byte{".github/workflows/caller.yml": []byte(caller), ".github/workflows/callee.yml": []byte(callee)}
	fs := CheckWorkflows(files, Rules{DefaultBranch: "main"})
	saves := rulesOnly(slices.Clone(fs), RulePrivilegedCacheSave)
	if len(saves) != 1 || saves[0].File != ".github/workflows/callee.yml" || saves[0].Line != 7 || !strings.Contains(saves[0].Message, "caller.yml job outer") {
		t.Errorf("reusable workflow: %v, want one privileged save at callee.yml:7 naming caller.yml job outer", fs)
	}
	// A missing local action in a privileged job is unproven.
	missing := map[string][]byte{".github/workflows/x.yml": []byte(privilegedJob("      - uses: ./.github/actions/gone\n", ""))}
	if fs := rulesOnly(CheckWorkflows(missing, Rules{DefaultBranch: "main"}), RuleUnprovenCache); len(fs) != 1 {
		t.Errorf("a local action not among the files: %v", fs)
	}
}

// A restore that falls back by prefix (restore-keys) restores what
// another key built: a finding where the rules forbid it.
func TestCheckWorkflows_RestoreKeysAreAFindingWhereTheRulesForbidThem(t *testing.T) {
	wf := "on: pull_request\npermissions: {contents: read}\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    steps:\n      - uses: actions/cache/restore@v4\n        with:\n          path: x\n          key: k-${{ hashFiles('x') }}\n          restore-keys: k-\n"
	files := map[string][]byte{".github/workflows/x.yml": []byte(wf)}
	if fs := rulesOnly(CheckWorkflows(files, Rules{DefaultBranch: "main", NoRestoreKeys: []string{"*"}}), RuleRestoreKeys); len(fs) != 1 || fs[0].Line != 11 {
		t.Errorf("forbidden: %v, want one at line 11", fs)
	}
	if fs := rulesOnly(CheckWorkflows(files, Rules{DefaultBranch: "main"}), RuleRestoreKeys); len(fs) != 0 {
		t.Errorf("allowed: %v", fs)
	}
}

// Key integrity: a key pair compares what each side's key is computed
// from, not the two expressions: the same ${{ steps.key.outputs.key }} read
// from key steps with different specs or toolchains is a finding.
func TestCheckWorkflows_AKeyPairComparesWhatTheKeysAreComputedFrom(t *testing.T) {
	wf := func(spec string) string {
		return "on: push\npermissions: {contents: read}\njobs:\n  build:\n    runs-on: ubuntu-24.04\n    steps:\n" +
			"      - id: tc\n        run: echo \"rustc=$(rustc -V)\" >> \"$GITHUB_OUTPUT\"\n" +
			"      - id: key\n        uses: gpugate/gpugate@v1\n        with: {step: cache-check, cache-key: \"true\", key-spec: " + spec + ", toolchain: \"${{ steps.tc.outputs.rustc }}\"}\n" +
			"      - id: c\n        uses: actions/cache/restore@v4\n        with: {path: x, key: \"${{ steps.key.outputs.key }}\"}\n"
	}
	pair := []KeyPair{{Publisher: StepRef{File: ".github/workflows/pub.yml", Job: "build", Step: "c"}, Consumer: StepRef{File: ".github/workflows/con.yml", Job: "build", Step: "c"}}}
	same := map[string][]byte{".github/workflows/pub.yml": []byte(wf("a.yml")), ".github/workflows/con.yml": []byte(wf("a.yml"))}
	if fs := rulesOnly(CheckWorkflows(same, Rules{DefaultBranch: "main", KeyPairs: pair}), RuleKeyPair); len(fs) != 0 {
		t.Errorf("the same derivation: %v", fs)
	}
	other := map[string][]byte{".github/workflows/pub.yml": []byte(wf("a.yml")), ".github/workflows/con.yml": []byte(wf("b.yml"))}
	if fs := rulesOnly(CheckWorkflows(other, Rules{DefaultBranch: "main", KeyPairs: pair}), RuleKeyPair); len(fs) != 1 || fs[0].File != ".github/workflows/con.yml" {
		t.Errorf("another key spec behind the same expression: %v, want one finding in con.yml", fs)
	}
}

// An expression in an input that turns the cache (or its saving) off
// proves nothing: save-if: ${{ github.ref == 'refs/heads/main' }} saves
// in a workflow_run job, where the ref is the default branch.
func TestCheckWorkflows_AnExpressionInAnOffInputIsNoProofOfNoSave(t *testing.T) {
	for name, step := range map[string]string{
		"rust-cache save-if":   "      - uses: Swatinem/rust-cache@v2\n        with: {save-if: \"${{ github.ref == 'refs/heads/main' }}\"}\n",
		"gradle read-only":     "      - uses: gradle/actions/setup-gradle@v4\n        with: {cache-read-only: \"${{ github.ref != 'refs/heads/main' }}\"}\n",
		"actions/cache lookup": "      - uses: actions/cache@v4\n        with: {path: x, key: k, lookup-only: \"${{ github.event_name == 'pull_request' }}\"}\n",
	} {
		fs := CheckWorkflows(map[string][]byte{".github/workflows/x.yml": []byte(privilegedJob(step, ""))}, Rules{DefaultBranch: "main"})
		if len(rulesOnly(fs, RulePrivilegedCacheSave)) != 1 {
			t.Errorf("%s: %v", name, fs)
		}
	}
}

// sccache's switch is read where the compiler runs: set on any step of the
// job, or written to $GITHUB_ENV, it makes the job save to the cache.
func TestCheckWorkflows_SccacheEnabledWhereTheCompilerRunsIsReported(t *testing.T) {
	for name, steps := range map[string]string{
		"run-step env": "      - uses: Mozilla-Actions/sccache-action@v0.0.9\n      - run: cargo build\n        env: {SCCACHE_GHA_ENABLED: \"true\", RUSTC_WRAPPER: sccache}\n",
		"GITHUB_ENV":   "      - uses: Mozilla-Actions/sccache-action@v0.0.9\n      - run: echo SCCACHE_GHA_ENABLED=true >> \"$GITHUB_ENV\"\n      - run: cargo build\n",
	} {
		fs := CheckWorkflows(map[string][]byte{".github/workflows/x.yml": []byte(privilegedJob(steps, ""))}, Rules{DefaultBranch: "main"})
		if len(rulesOnly(fs, RulePrivilegedCacheSave)) != 1 {
			t.Errorf("%s: %v", name, fs)
		}
	}
}

// runs-on: ${{ matrix.os }} over GitHub-hosted images is hosted: judged by
// the matrix's own values, not taken for a self-hosted runner.
func TestCheckWorkflows_AMatrixOfHostedImagesIsNotSelfHosted(t *testing.T) {
	pub := "on: {push: {branches: [main]}}\npermissions: {contents: read}\njobs:\n  warm:\n    strategy:\n      matrix:\n        os: [ubuntu-24.04, ubuntu-24.04-arm]\n    runs-on: ${{ matrix.os }}\n    steps:\n      - uses: actions/setup-go@v5\n"
	if fs := CheckWorkflows(map[string][]byte{".github/workflows/pub.yml": []byte(pub)}, Rules{DefaultBranch: "main", Publishers: []string{".github/workflows/pub.yml"}}); len(fs) != 0 {
		t.Errorf("publisher on a hosted matrix: %v", fs)
	}
	ci := "on: push\npermissions: {contents: read}\njobs:\n  t:\n    strategy:\n      matrix:\n        os: [ubuntu-24.04, macos-15]\n        go: ['1.23', '1.24']\n    runs-on: ${{ matrix.os }}\n    steps:\n      - run: go test ./...\n        env: {CODECOV_TOKEN: '${{ secrets.CODECOV_TOKEN }}'}\n"
	if fs := CheckWorkflows(map[string][]byte{".github/workflows/ci.yml": []byte(ci)}, Rules{DefaultBranch: "main"}); len(rulesOnly(fs, RuleSelfHostedSecret)) != 0 {
		t.Errorf("secret on a hosted matrix: %v", fs)
	}
	self := strings.Replace(ci, "os: [ubuntu-24.04, macos-15]", "os: [ubuntu-24.04, gpu-box]", 1)
	if fs := CheckWorkflows(map[string][]byte{".github/workflows/ci.yml": []byte(self)}, Rules{DefaultBranch: "main"}); len(rulesOnly(fs, RuleSelfHostedSecret)) != 1 {
		t.Errorf("a matrix with a self-hosted label: %v", fs)
	}
}

// A reusable workflow of another repository, called from a privileged
// workflow, cannot be proven to save no cache.
func TestCheckWorkflows_ARemoteReusableWorkflowInAPrivilegedWorkflowIsUnproven(t *testing.T) {
	wf := "on: workflow_run\npermissions: {contents: read}\njobs:\n  call:\n    uses: acme/shared/.github/workflows/build.yml@v1\n"
	files := map[string][]byte{".github/workflows/x.yml": []byte(wf)}
	if fs := rulesOnly(CheckWorkflows(files, Rules{DefaultBranch: "main"}), RuleUnprovenCache); len(fs) != 1 || !fs[0].Warning {
		t.Errorf("%v", fs)
	}
	if fs := rulesOnly(CheckWorkflows(files, Rules{DefaultBranch: "main", NoCacheActions: []string{"acme/shared/.github/workflows/build.yml"}}), RuleUnprovenCache); len(fs) != 0 {
		t.Errorf("allowlisted: %v", fs)
	}
}

// restore-keys are found whatever the action's case, inside local actions
// too, and a misspelt no_restore_keys path is reported.
func TestCheckWorkflows_RestoreKeysAreFoundWhateverTheCaseAndInLocalActions(t *testing.T) {
	wf := "on: pull_request\npermissions: {contents: read}\njobs:\n  t:\n    runs-on: ubuntu-24.04\n    steps:\n      - uses: Actions/Cache/Restore@v4\n        with: {path: x, key: k, restore-keys: k-}\n      - uses: ./.github/actions/r\n"
	act := "runs:\n  using: composite\n  steps:\n    - uses: actions/cache/restore@v4\n      with: {path: x, key: k, restore-keys: k-}\n"
	fs := CheckWorkflows(map[string][]byte{".github/workflows/rk.yml": []byte(wf), ".github/actions/r/action.yml": []byte(act)}, Rules{DefaultBranch: "main", NoRestoreKeys: []string{".github/workflows/rk.yml"}})
	if n := len(rulesOnly(fs, RuleRestoreKeys)); n != 2 {
		t.Errorf("%d: %v", n, fs)
	}
	files := map[string][]byte{".github/workflows/runpod-gpu-test.yml": []byte("on: push\njobs: {}\n")}
	if fs := CheckRuleReferences(files, Rules{NoRestoreKeys: []string{".github/workflows/runpod-gpu-tst.yml", "*"}}); len(fs) != 1 {
		t.Errorf("a misspelt no_restore_keys path: %v", fs)
	}
}
