package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestChecksThisRepository(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"-dir", "../.."}, func(string) string { return "" }, &out, &errOut); code != 0 {
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

func TestKeyAndEmbeds(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "src"), 0o755)
	os.WriteFile(filepath.Join(dir, "Cargo.toml"), []byte("[package]"), 0o644)
	os.WriteFile(filepath.Join(dir, "src/lib.rs"), []byte(`const G: &str = include_str!("../docs/guide.md");`), 0o644)
	var out, errOut bytes.Buffer
	if code := run([]string{"-dir", dir, "-key", "-toolchain", "rustc 1.95.0"}, func(string) string { return "" }, &out, &errOut); code != 0 || !strings.HasPrefix(out.String(), "key=cuda-archive-v1-") {
		t.Errorf("exit %d: %s%s", code, out.String(), errOut.String())
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
	if code := run([]string{"-dir", dir, "-key", "-explain", filepath.Join(dir, "missing.json")}, func(string) string { return "" }, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "-explain") {
		t.Errorf("missing file: exit %d: %s", code, errOut.String())
	}
}
