package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// -json writes only JSON to stdout, in GitHub Actions too, where the
// commands are used most: there a failure's ::error:: (or a ::warning::)
// annotation is printed on stdout beside the document, so
// `... -json | jq` or fromJSON(steps.x.outputs...) breaks exactly when
// something went wrong. (The runner reads workflow commands from stderr
// as well.) The every-command table runs without GITHUB_ACTIONS and so
// never sees it.
func TestJSON_InActionsStdoutIsStillOnlyJSON(t *testing.T) {
	commands(t)
	actions := []string{"GITHUB_ACTIONS=true"}
	for _, args := range [][]string{
		{"classify", "-json", "-changes", filepath.Join(t.TempDir(), "missing.txt")},
		{"partition", "check", "-example", "-json"},
		{"cachecheck", "-json", "-dir", root()},
		{"costreport", "summarize", "-json", "-dir", filepath.Join(t.TempDir(), "none")},
		{"gate", "reuse", "-json", "-repo", "o/r", "-head", "h", "-tested-ref", "r"},
	} {
		code, stdout, _ := command(t, actions, args[0], args[1:]...)
		if strings.TrimSpace(stdout) != "" && !json.Valid([]byte(stdout)) {
			t.Errorf("%q (exit %d) in Actions: stdout is not only JSON: %q", args, code, stdout)
		}
	}
}

// classify refuses instead of silently using the bundled example: a real
// change (-base, -pr, -changes) or -check-globs with no -policy is
// classified, or checked, under the bundled example policy, a Rust
// workspace's, whose jobs ("Linux extension tests", "macOS workspace
// tests") and globs are not the user's. Only -example may use it.
func TestClassify_ARealChangeIsNeverClassifiedUnderTheBundledExamplePolicy(t *testing.T) {
	commands(t)
	changes := filepath.Join(t.TempDir(), "changes.txt")
	os.WriteFile(changes, []byte("M\tdocs/guide.md\n"), 0o644)
	for _, args := range [][]string{
		{"-base", "HEAD~1", "-dir", root()},
		{"-changes", changes},
		{"-check-globs", "-dir", root()},
	} {
		code, stdout, stderr := command(t, nil, "classify", args...)
		if code != 2 || stdout != "" || !oneLine(stderr) || !strings.Contains(stderr, "-policy") {
			t.Errorf("classify %q: exit %d, stdout %q, stderr %q; want 2 and one line asking for -policy", args, code, cutTo(stdout, 120), stderr)
		}
	}
}

// Subcommand flags work after the subcommand: partition's file-taking
// subcommands stop parsing flags at the first file, so `partition select
// p.tsv -category host` opens a file named "-category" and exits 1 (a
// work failure) instead of taking the flag or refusing the command line
// with 2 ("flags go before the files", as sparkctl says).
func TestPartition_AFlagAfterTheFilesIsTakenOrRefusedNeverOpened(t *testing.T) {
	commands(t)
	tsv := filepath.Join(t.TempDir(), "p.tsv")
	os.WriteFile(tsv, []byte("bin\ta_test\tsingle-gpu\tnote\n"), 0o644)
	for _, args := range [][]string{
		{"select", tsv, "-category", "host"},
		{"check", tsv, "-format", "go"},
	} {
		code, _, stderr := command(t, nil, "partition", args...)
		if code == 1 && strings.Contains(stderr, "open -") {
			t.Errorf("partition %q: exit %d, %q: a flag was opened as a file", args, code, strings.TrimSpace(stderr))
		}
	}
}

// Errors speak to a command-line user: outside GitHub Actions, a missing
// token is not explained with a workflow's `env: GITHUB_TOKEN: ${{
// github.token }}`, and classify -base outside a git checkout does not
// claim the merge base is missing from the local history (and advise a
// fetch).
func TestClassify_ErrorsSpeakToACommandLineUser(t *testing.T) {
	commands(t)
	policy := filepath.Join(root(), "changepolicy", "example_policy.yml")
	if _, _, stderr := command(t, nil, "classify", "-policy", policy, "-pr", "1", "-repo", "o/r"); strings.Contains(stderr, "${{") {
		t.Errorf("classify -pr without a token, at a terminal: %q", strings.TrimSpace(stderr))
	}
	if _, _, stderr := command(t, nil, "classify", "-policy", policy, "-base", "HEAD~1"); strings.Contains(stderr, "merge base not in local history") {
		t.Errorf("classify -base in a directory that is no git checkout: %q", strings.TrimSpace(stderr))
	}
}

func cutTo(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
