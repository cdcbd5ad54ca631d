package cachetrust

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// repo writes files (path: contents) under a new directory.
func repo(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, text := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A workflow's local actions are read wherever they live, and the ones
// they use in turn; nothing else in the repository is.
func TestReadWorkflows_FollowsLocalActionsWhereverTheyLive(t *testing.T) {
	dir := repo(t, map[string]string{
		".github/workflows/ci.yml":          "on: push\njobs:\n  b:\n    steps:\n      - uses: ./ci/setup\n      - uses: \"./.github/workflows/called.yml\"\n",
		".github/workflows/called.yaml":     "on: workflow_call\n",
		".github/actions/lint/action.yaml":  "runs: {using: composite, steps: []}\n",
		"ci/setup/action.yml":               "runs:\n  using: composite\n  steps:\n    - uses: ./ci/deeper\n",
		"ci/deeper/action.yaml":             "runs: {using: composite, steps: []}\n",
		"ci/unused/action.yml":              "runs: {using: composite, steps: []}\n",
		"action.yml":                        "runs: {using: composite, steps: []}\n",
		".github/workflows/notes/README.md": "not a workflow",
	})
	files, err := ReadWorkflows(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := slices.Sorted(maps.Keys(files))
	want := []string{".github/actions/lint/action.yaml", ".github/workflows/called.yaml", ".github/workflows/ci.yml", "action.yml", "ci/deeper/action.yaml", "ci/setup/action.yml"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := ReadWorkflows(t.TempDir()); !errors.Is(err, ErrNothingToCheck) {
		t.Errorf("an empty directory: %v, want ErrNothingToCheck", err)
	}
}

// The bundled rules check any repository (their key pairs name the
// bundled workflows, so they are left out); a repository's own rules must
// also name only workflows it has.
func TestCheckRepo_BundledRulesOrTheRepositorysOwn(t *testing.T) {
	dir := repo(t, map[string]string{
		".github/workflows/ci.yml": "on: pull_request\npermissions: {contents: read}\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    steps:\n      - run: make\n",
		"rules.yml":                "default_branch: main\nrerun_uploads: [.github/workflows/gpu-test.yml]\n",
		"bad-rules.yml":            "no_such_rule: true\n",
	})
	if n, fs, err := CheckRepo(dir, ""); n != 1 || len(fs) != 0 || err != nil {
		t.Errorf("bundled rules: %d file(s), %v, %v", n, fs, err)
	}
	n, fs, err := CheckRepo(dir, filepath.Join(dir, "rules.yml"))
	if n != 1 || err != nil || !slices.Equal(ruleIDs(fs), []string{RuleUnknownWorkflow}) {
		t.Errorf("own rules: %d file(s), %v, %v; want one %s", n, fs, err, RuleUnknownWorkflow)
	}
	if _, _, err := CheckRepo(dir, filepath.Join(dir, "bad-rules.yml")); !errors.Is(err, ErrRules) {
		t.Errorf("bad rules: %v, want ErrRules", err)
	}
	if _, _, err := CheckRepo(dir, filepath.Join(dir, "missing.yml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing rules: %v", err)
	}
	if _, _, err := CheckRepo(t.TempDir(), ""); !errors.Is(err, ErrNothingToCheck) {
		t.Errorf("nothing to check: %v, want ErrNothingToCheck", err)
	}
}

func TestFinding_AnnotationIsAnErrorOrAWarningOnItsLine(t *testing.T) {
	f := Finding{File: ".github/workflows/gpu.yml", Line: 6, Column: 15, Rule: RulePrivilegedCacheSave, Message: "saves a cache"}
	if got, want := f.Annotation(), "::error file=.github/workflows/gpu.yml,line=6,col=15,title=privileged-cache-save::saves a cache"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	f.Warning, f.Rule = true, RuleUnprovenCache
	if got, want := f.Annotation(), "::warning file=.github/workflows/gpu.yml,line=6,col=15,title="+RuleUnprovenCache+"::saves a cache"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}
