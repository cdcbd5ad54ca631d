package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpugate/gpugate/cachetrust"
)

// This repository passes its own cache-trust rules (.github/cache-rules.yml:
// the bundled ones, plus the release workflow's one write).
func TestChecksThisRepository(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"-dir", "../..", "-rules", "../../.github/cache-rules.yml"}, func(string) string { return "" }, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "0 finding(s)") {
		t.Errorf("%s", out.String())
	}
}

func TestFindingsFail(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, ".github/workflows"), 0o755)
	os.WriteFile(filepath.Join(dir, ".github/workflows/gpu.yml"), []byte("on: workflow_run\npermissions: {contents: read}\njobs:\n  a:\n    steps:\n      - uses: actions/cache@v4\n"), 0o644)
	var out, errOut bytes.Buffer
	env := map[string]string{"GITHUB_ACTIONS": "true"}
	if code := run([]string{"-dir", dir}, func(k string) string { return env[k] }, &out, &errOut); code != 1 {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(out.String(), "::error file=.github/workflows/gpu.yml,line=6,col=15,title=privileged-cache-save::") {
		t.Errorf("%s", out.String())
	}
}

// TestNothingToCheckFails: a directory without workflows (the wrong -dir,
// or a checkout step left out) is an error, not "0 finding(s)", and so is a
// key over no file.
func TestNothingToCheckFails(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"-dir", t.TempDir()}, func(string) string { return "" }, &out, &errOut); code != 1 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	if !strings.Contains(errOut.String(), "has no .github/workflows/*.yml and no action.yml: run it at the repository root or pass -dir") {
		t.Errorf("%s", errOut.String())
	}
	// A key over nothing would be every checkout's key.
	out.Reset()
	errOut.Reset()
	if code := run([]string{"-key", "-dir", t.TempDir()}, func(string) string { return "" }, &out, &errOut); code != 1 || strings.Contains(out.String(), "key=") {
		t.Fatalf("-key: exit %d: %s", code, out.String())
	}
	if !strings.Contains(errOut.String(), "the key covers no file") {
		t.Errorf("%s", errOut.String())
	}
}

// TestOwnRulesMustNameTheRepositorysWorkflows: with -rules, a rule naming a
// workflow the repository does not have fails; the bundled rules name the
// seed's files and are not held to it.
func TestOwnRulesMustNameTheRepositorysWorkflows(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, ".github/workflows"), 0o755)
	os.WriteFile(filepath.Join(dir, ".github/workflows/ci.yml"), []byte("on: pull_request\npermissions: {contents: read}\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    steps:\n      - run: make\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "rules.yml"), []byte("isolated_writers: [.github/workflows/ci.yml]\nrerun_uploads: [.github/workflows/gpu-test.yml]\n"), 0o644)
	var out, errOut bytes.Buffer
	if code := run([]string{"-dir", dir, "-rules", filepath.Join(dir, "rules.yml")}, func(string) string { return "" }, &out, &errOut); code != 1 {
		t.Fatalf("exit %d: %s%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), ".github/workflows/gpu-test.yml:0:0: unknown-workflow: the rules name this workflow (rerun_uploads)") {
		t.Errorf("%s", out.String())
	}
	out.Reset()
	if code := run([]string{"-dir", dir}, func(string) string { return "" }, &out, &errOut); code != 0 {
		t.Fatalf("bundled rules: exit %d: %s", code, out.String())
	}
}

func TestKeyAndEmbeds(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "src"), 0o755)
	os.WriteFile(filepath.Join(dir, "Cargo.toml"), []byte("[package]"), 0o644)
	os.WriteFile(filepath.Join(dir, "src/lib.rs"), []byte(`const G: &str = include_str!("../docs/guide.md");`), 0o644)
	var out, errOut bytes.Buffer
	if code := run([]string{"-dir", dir, "-key", "-toolchain", "rustc 1.95.0"}, func(string) string { return "" }, &out, &errOut); code != 0 || !strings.HasPrefix(out.String(), "key=cuda-archive-v1-") {
		t.Errorf("exit %d: %s%s", code, out.String(), errOut.String())
	}
	// This workspace has no scripts/ci: the key still works, and says which
	// include globs covered nothing, in case one is misspelt.
	if !strings.Contains(errOut.String(), `include glob "scripts/ci/**" covers no file of the key`) || strings.Contains(errOut.String(), `"**/src/**" covers`) {
		t.Errorf("notes: %s", errOut.String())
	}
	out.Reset()
	errOut.Reset()
	if code := run([]string{"-dir", dir, "-key", "-toolchain", "rustc 1.95.0"}, func(k string) string { return map[string]string{"GITHUB_ACTIONS": "true"}[k] }, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), `::notice::cachecheck: include glob "scripts/ci/**" covers no file`) {
		t.Errorf("in Actions: exit %d: %s", code, out.String())
	}
	out.Reset()
	if code := run([]string{"-dir", dir, "-embeds"}, func(string) string { return "" }, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "docs/guide.md") {
		t.Errorf("exit %d: %s", code, errOut.String())
	}
}

// A cache miss is explained: the earlier key's JSON against today's names
// the file that changed and the toolchain.
func TestKeyExplainNamesWhatChanged(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "src"), 0o755)
	os.WriteFile(filepath.Join(dir, "Cargo.toml"), []byte("[package]"), 0o644)
	os.WriteFile(filepath.Join(dir, "src/lib.rs"), []byte("fn a() {}"), 0o644)
	var out, errOut bytes.Buffer
	if code := run([]string{"-dir", dir, "-key", "-json", "-toolchain", "rustc 1.95.0"}, func(string) string { return "" }, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	old := filepath.Join(t.TempDir(), "old-key.json")
	os.WriteFile(old, out.Bytes(), 0o644)
	out.Reset()
	if code := run([]string{"-dir", dir, "-key", "-toolchain", "rustc 1.95.0", "-explain", old}, func(string) string { return "" }, &out, &errOut); code != 0 || !strings.Contains(errOut.String(), "unchanged") {
		t.Errorf("same tree: exit %d: %s", code, errOut.String())
	}
	os.WriteFile(filepath.Join(dir, "src/lib.rs"), []byte("fn b() {}"), 0o644)
	errOut.Reset()
	if code := run([]string{"-dir", dir, "-key", "-toolchain", "rustc 1.96.0", "-explain", old}, func(string) string { return "" }, &out, &errOut); code != 0 ||
		!strings.Contains(errOut.String(), "src/lib.rs") || !strings.Contains(errOut.String(), "rustc 1.96.0") {
		t.Errorf("changed: exit %d: %s", code, errOut.String())
	}
	errOut.Reset()
	if code := run([]string{"-dir", dir, "-key", "-toolchain", "rustc 1.96.0", "-explain", filepath.Join(dir, "missing.json")}, func(string) string { return "" }, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "-explain") {
		t.Errorf("missing file: exit %d: %s", code, errOut.String())
	}
}

// -find reuses an earlier trusted run's archive by its exact content key:
// the repository's own ID and default branch decide trust, so a fork's
// artifact under the same name is refused, and any failure is a miss that
// exits 0 with empty outputs (the workflow then builds afresh).
func TestFind_ReusesOnlyATrustedRunsArtifact(t *testing.T) {
	const key = "cuda-archive-v1-abc"
	forkOnly := false
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v3/repos/o/r", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"id":42,"default_branch":"trunk"}`)
	})
	mux.HandleFunc("GET /api/v3/repos/o/r/actions/artifacts", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("name") != key {
			t.Errorf("query %s", r.URL.RawQuery)
		}
		fmt.Fprint(w, `{"total_count":2,"artifacts":[
 {"id":7,"name":"`+key+`","created_at":"2026-11-29T11:00:00Z","expires_at":"2099-01-01T00:00:00Z","workflow_run":{"id":70}},
 {"id":5,"name":"`+key+`","created_at":"2026-11-29T10:00:00Z","expires_at":"2099-01-01T00:00:00Z","workflow_run":{"id":50}}]}`)
	})
	mux.HandleFunc("GET /api/v3/repos/o/r/actions/runs/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") == "70" || forkOnly { // a fork PR's build under the same name
			fmt.Fprint(w, `{"id":70,"path":".github/workflows/runpod-gpu-test.yml","event":"pull_request","head_branch":"trunk","head_repository":{"id":77}}`)
			return
		}
		fmt.Fprint(w, `{"id":50,"path":"o/r/.github/workflows/ci-cache-publish.yml@refs/heads/trunk","event":"schedule","head_branch":"trunk","head_repository":{"id":42}}`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	find := func(t *testing.T, env map[string]string) (int, string, string) {
		t.Helper()
		dir := t.TempDir()
		env["GITHUB_ACTIONS"], env["GITHUB_OUTPUT"], env["GITHUB_STEP_SUMMARY"] = "true", filepath.Join(dir, "out"), filepath.Join(dir, "summary")
		var out, errOut bytes.Buffer
		code := run([]string{"-find", key}, func(k string) string { return env[k] }, &out, &errOut)
		written, _ := os.ReadFile(env["GITHUB_OUTPUT"])
		return code, out.String() + errOut.String(), string(written)
	}
	env := func() map[string]string {
		return map[string]string{"GITHUB_REPOSITORY": "o/r", "GITHUB_TOKEN": "ghs_find_test", "GITHUB_API_URL": srv.URL + "/"}
	}

	code, out, outputs := find(t, env())
	if code != 0 || !strings.HasPrefix(out, "hit: artifact 5 from run 50") {
		t.Errorf("exit %d: %s", code, out)
	}
	if !strings.Contains(outputs, "artifact_id=5\n") || !strings.Contains(outputs, "artifact_run_id=50\n") {
		t.Errorf("outputs:\n%s", outputs)
	}

	forkOnly = true
	code, out, outputs = find(t, env())
	if code != 0 || !strings.HasPrefix(out, "miss: ") || !strings.Contains(out, "(repository)") {
		t.Errorf("a fork's artifact must be a miss: exit %d: %s", code, out)
	}
	if !strings.Contains(outputs, "artifact_id=\n") || !strings.Contains(outputs, "artifact_run_id=\n") {
		t.Errorf("a miss writes empty outputs:\n%s", outputs)
	}

	broken := env()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	broken["GITHUB_API_URL"] = closed.URL + "/"
	if code, out, _ := find(t, broken); code != 0 || !strings.HasPrefix(out, "miss: reading repository o/r failed") {
		t.Errorf("an unreachable API is a miss: exit %d: %s", code, out)
	}

	noToken := env()
	delete(noToken, "GITHUB_TOKEN")
	if code, out, _ := find(t, noToken); code != 1 || !strings.Contains(out, "GITHUB_TOKEN") {
		t.Errorf("without a token it cannot look: exit %d: %s", code, out)
	}
}

// -tree rejects a restored runtime tree whose libraries do not resolve, so
// the workflow installs afresh instead of trusting the hit.
func TestTreeRejectsAnIncompleteRestore(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "lib"), 0o755)
	os.WriteFile(filepath.Join(root, "lib", "libcutensor.so.2.1.0"), []byte("\x7fELF"), 0o644)
	os.Symlink("libcutensor.so.2.1.0", filepath.Join(root, "lib", "libcutensor.so.2"))
	env := map[string]string{"GITHUB_ACTIONS": "true"}
	var out, errOut bytes.Buffer
	args := []string{"-tree", root, "-require", "lib/libcutensor.so.2", "-require", "lib64/libcufft.so*"}
	if code := run(args, func(k string) string { return env[k] }, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "no non-empty file matches the required lib64/libcufft.so*") || !strings.Contains(out.String(), "::error::cachecheck: ") {
		t.Errorf("exit %d:\n%s%s", code, out.String(), errOut.String())
	}
	out.Reset()
	errOut.Reset()
	if code := run(args[:4], func(k string) string { return env[k] }, &out, &errOut); code != 0 || !strings.Contains(out.String(), "is complete: 1 file(s), 1 symlink(s)") {
		t.Errorf("exit %d:\n%s%s", code, out.String(), errOut.String())
	}
}

// -tree -exclude refuses a runtime tree carrying what its installer must
// leave out, and a library stored twice is a warning in Actions (the tree
// still passes); -json prints the report.
func TestTreeRefusesExcludedContentAndWarnsOfCopies(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "lib"), 0o755)
	os.WriteFile(filepath.Join(root, "lib", "libcutensor.so.2.1.0"), []byte("\x7fELF"), 0o644)
	os.WriteFile(filepath.Join(root, "lib", "libcutensor.so.2"), []byte("\x7fELF"), 0o644) // a copy, not a link
	env := map[string]string{"GITHUB_ACTIONS": "true"}
	getenv := func(k string) string { return env[k] }
	args := []string{"-tree", root, "-require", "lib/libcutensor.so.2", "-exclude", "**/*.a", "-exclude", "**/libcutensorMg*"}
	var out, errOut bytes.Buffer
	if code := run(args, getenv, &out, &errOut); code != 0 || !strings.Contains(out.String(), "::warning::cachecheck: "+root+" stores one library 2 times (lib/libcutensor.so.2, lib/libcutensor.so.2.1.0)") {
		t.Errorf("exit %d:\n%s%s", code, out.String(), errOut.String())
	}
	os.WriteFile(filepath.Join(root, "lib", "libcutensor_static.a"), []byte("!<arch>"), 0o644)
	out.Reset()
	errOut.Reset()
	if code := run(append(args, "-json"), getenv, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "lib/libcutensor_static.a matches the excluded **/*.a") {
		t.Errorf("exit %d:\n%s%s", code, out.String(), errOut.String())
	}
	var rep cachetrust.TreeReport
	// The report sits between the warning and the error annotation.
	doc := out.String()[strings.Index(out.String(), "{"):]
	if err := json.NewDecoder(strings.NewReader(doc)).Decode(&rep); err != nil || len(rep.Copies) != 1 {
		t.Errorf("the JSON report: %+v, %v\n%s", rep, err, out.String())
	}
}

// A local action outside .github is read and checked too.
func TestCachecheck_ALocalActionOutsideDotGithubIsChecked(t *testing.T) {
	dir := t.TempDir()
	write := func(p, s string) {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
		os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644)
	}
	write(".github/workflows/ci.yml", "on: push\npermissions: {contents: read}\njobs:\n  b:\n    runs-on: ubuntu-24.04\n    timeout-minutes: 5\n    steps:\n      - uses: ./ci/setup\n")
	write("ci/setup/action.yml", "runs:\n  using: composite\n  steps:\n    - uses: actions/cache@v4\n      with: {path: x, key: k}\n")
	write("rules.yml", "default_branch: main\n")
	var out, errOut bytes.Buffer
	if code := run([]string{"-dir", dir, "-rules", filepath.Join(dir, "rules.yml")}, func(string) string { return "" }, &out, &errOut); code != 1 || !strings.Contains(out.String(), "ci/setup/action.yml") {
		t.Errorf("exit %d\n%s%s", code, out.String(), errOut.String())
	}
}

// -json prints an empty result as [], never null.
func TestCachecheck_AnEmptyResultIsAnEmptyList(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, ".github", "workflows"), 0o755)
	os.WriteFile(filepath.Join(dir, ".github", "workflows", "ci.yml"), []byte("on: push\npermissions: {contents: read}\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    steps:\n      - run: true\n"), 0o644)
	var out, errOut bytes.Buffer
	if code := run([]string{"-dir", dir, "-json"}, func(string) string { return "" }, &out, &errOut); code != 0 || strings.TrimSpace(out.String()) != "[]" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
}
