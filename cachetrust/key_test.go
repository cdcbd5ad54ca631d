package cachetrust

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpugate/gpugate/internal/strictyaml"
)

func spec() KeySpec {
	s := RustWorkspaceSpec()
	s.Toolchain = "rustc 1.95.0 (59807616e 2026-04-14)"
	s.Components = []string{"cudarc-0.16", "ptx-12.8"}
	return s
}

// tree writes a small workspace under dir.
func tree(t testing.TB, dir string) {
	t.Helper()
	files := map[string]string{
		"Cargo.toml": "[workspace]\n", "Cargo.lock": "# lock\n",
		"crates/a/Cargo.toml": "[package]\n", "crates/a/src/lib.rs": "pub fn a() {}\n", "crates/a/build.rs": "fn main() {}\n",
		"crates/a/tests/t.rs": "#[test] fn t() {}\n", "scripts/ci/run.sh": "#!/bin/sh\n", "rust-toolchain.toml": "[toolchain]\n",
		".github/workflows/ci.yml": "on: push\n", "README.md": "# readme\n", "docs/guide.md": "guide\n",
	}
	for p, body := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, "scripts/ci/run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// key is KeyDir's key for dir, checked against Key over os.DirFS: every
// test of a key over a directory holds for both.
func key(t testing.TB, dir string, s KeySpec) ArchiveKey {
	t.Helper()
	k, err := KeyDir(dir, s)
	if err != nil {
		t.Fatal(err)
	}
	viaFS, err := Key(os.DirFS(dir), s)
	if err != nil {
		t.Fatalf("Key over os.DirFS failed where KeyDir did not: %v", err)
	}
	if diff := cmp.Diff(viaFS, k); diff != "" {
		t.Fatalf("KeyDir and Key over os.DirFS differ (-Key +KeyDir):\n%s", diff)
	}
	return k
}

func TestKey_StableAcrossCheckoutPathFileOrderAndMtimes(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	tree(t, a)
	tree(t, b)
	old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	os.Chtimes(filepath.Join(b, "Cargo.lock"), old, old)
	ka, kb := key(t, a, spec()), key(t, b, spec())
	if ka.Key != kb.Key {
		t.Errorf("keys differ across checkouts: %s vs %s\n%v", ka.Key, kb.Key, Explain(ka, kb))
	}
	// File order: the same records from an in-memory FS listed differently.
	m := fstest.MapFS{"b/src/x.rs": {Data: []byte("x")}, "a/src/y.rs": {Data: []byte("y")}, "Cargo.lock": {Data: []byte("l")}}
	k1, _ := Key(m, spec())
	m2 := fstest.MapFS{"Cargo.lock": {Data: []byte("l")}, "a/src/y.rs": {Data: []byte("y")}, "b/src/x.rs": {Data: []byte("x")}}
	k2, _ := Key(m2, spec())
	if k1.Key != k2.Key {
		t.Error("file order changed the key")
	}
	want := "cuda-archive-cudarc-0.16-ptx-12.8-v1-" + ka.Digest
	if ka.Key != want {
		t.Errorf("key %s, want %s", ka.Key, want)
	}
}

func TestKey_ChangesWithAnyIncludedByteOrExecutableBit(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir)
	base := key(t, dir, spec())
	tests := map[string]struct {
		change func()
		undo   func()
		want   []Difference
	}{
		"source byte": {
			func() { os.WriteFile(filepath.Join(dir, "crates/a/src/lib.rs"), []byte("pub fn a() {}\n\n"), 0o644) },
			func() { os.WriteFile(filepath.Join(dir, "crates/a/src/lib.rs"), []byte("pub fn a() {}\n"), 0o644) },
			[]Difference{{Path: "crates/a/src/lib.rs", Change: "content changed"}},
		},
		"executable bit": {
			func() { os.Chmod(filepath.Join(dir, "scripts/ci/run.sh"), 0o644) },
			func() { os.Chmod(filepath.Join(dir, "scripts/ci/run.sh"), 0o755) },
			[]Difference{{Path: "scripts/ci/run.sh", Change: "mode 100755 -> 100644"}},
		},
		"new install script": {
			func() { os.WriteFile(filepath.Join(dir, "scripts/ci/install.sh"), []byte("curl evil"), 0o644) },
			func() { os.Remove(filepath.Join(dir, "scripts/ci/install.sh")) },
			[]Difference{{Path: "scripts/ci/install.sh", Change: "added"}},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			tt.change()
			defer tt.undo()
			got := key(t, dir, spec())
			if got.Key == base.Key {
				t.Fatal("the key did not change")
			}
			if diff := cmp.Diff(tt.want, Explain(base, got)); diff != "" {
				t.Errorf("Explain (-want +got):\n%s", diff)
			}
		})
	}
	// Excluded and uncovered files never change it.
	os.WriteFile(filepath.Join(dir, ".github/workflows/ci.yml"), []byte("on: pull_request\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "README.md"), []byte("# changed\n"), 0o644)
	if got := key(t, dir, spec()); got.Key != base.Key {
		t.Errorf("workflow YAML or prose changed the key: %v", Explain(base, got))
	}
	// The toolchain and components are part of it.
	s := spec()
	s.Toolchain = "rustc 1.96.0"
	if got := key(t, dir, s); got.Key == base.Key || Explain(base, got)[0].Change != `toolchain "rustc 1.95.0 (59807616e 2026-04-14)" -> "rustc 1.96.0"` {
		t.Errorf("toolchain change: %v", Explain(base, got))
	}
}

func TestKey_SymlinkContributesItsTargetAndIsNeverFollowed(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir)
	outside := filepath.Join(t.TempDir(), "secret.rs")
	os.WriteFile(outside, []byte("outside"), 0o644)
	if err := os.Symlink(outside, filepath.Join(dir, "crates/a/src/link.rs")); err != nil {
		t.Skip("no symlinks here:", err)
	}
	k := key(t, dir, spec())
	i := slices.IndexFunc(k.Records, func(r Record) bool { return r.Path == "crates/a/src/link.rs" })
	if i < 0 || k.Records[i].Mode != "120000" {
		t.Fatalf("records %v", k.Records)
	}
	os.WriteFile(outside, []byte("changed outside"), 0o644)
	if again := key(t, dir, spec()); again.Key != k.Key {
		t.Error("the key followed the symlink out of the tree")
	}
}

func TestKey_BadSpec(t *testing.T) {
	for name, s := range map[string]KeySpec{
		"no version": {Prefix: "p", Include: []string{"**"}},
		"bad glob":   {Prefix: "p", Version: "v1", Include: []string{"[["}},
		"no include": {Prefix: "p", Version: "v1"},
		"bad prefix": {Prefix: "a b", Version: "v1", Include: []string{"**"}},
	} {
		if _, err := Key(fstest.MapFS{}, s); !errors.Is(err, ErrSpec) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

// TestKey_NoInputIsRefused: a key over no file would be the same for every
// checkout (the wrong directory, another commit), so a consumer would reuse
// an archive built from other sources. Only excluded or unmatched files is
// the same as none.
func TestKey_NoInputIsRefused(t *testing.T) {
	s := spec()
	for name, fsys := range map[string]fstest.MapFS{
		"empty":          {},
		"no match":       {"README.md": {Data: []byte("x")}},
		"all excluded":   {".github/workflows/src/x.rs": {Data: []byte("x")}},
		"only .git here": {".git/src/x.rs": {Data: []byte("x")}},
	} {
		_, err := Key(fsys, s)
		if !errors.Is(err, ErrNoInputs) || !strings.Contains(err.Error(), "compute it at the checkout's root") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	if _, err := Key(fstest.MapFS{"src/lib.rs": {Data: []byte("x")}}, s); err != nil {
		t.Errorf("one input is enough: %v", err)
	}
}

// The cache-trust seed: the key covers "the cudarc binding and PTX toolkit
// versions (explicit key prefix)" and "a manually bumped vN component". The
// example spec file sets both over the Rust workspace defaults; the file is
// strict, so a misspelt key cannot leave them out silently.
func TestLoadKeySpec_ExplicitComponentsAndVersionOverTheDefaults(t *testing.T) {
	s, err := LoadKeySpec(ExampleKeySpec)
	if err != nil {
		t.Fatal(err)
	}
	want := RustWorkspaceSpec()
	want.Components, want.Version = []string{"cudarc-cuda-12080", "ptx-12.8"}, "v1"
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("the example spec (-want +got):\n%s", diff)
	}
	dir := t.TempDir()
	tree(t, dir)
	s.Toolchain = "rustc 1.95.0"
	if k := key(t, dir, s); !strings.HasPrefix(k.Key, "cuda-archive-cudarc-cuda-12080-ptx-12.8-v1-") {
		t.Errorf("key %s", k.Key)
	}
	if s, err := LoadKeySpec(nil); err != nil || !slices.Equal(s.Include, RustWorkspaceSpec().Include) {
		t.Errorf("an empty file keeps the defaults: %+v, %v", s, err)
	}
	for name, data := range map[string]string{
		"a misspelt key":        "componets: [ptx-12.8]\n",
		"a component with a /":  "components: [ptx/12.8]\n",
		"a version that is not": "version: 2\n",
		"no include left":       "include: []\n",
		"not YAML":              "components: [\n",
	} {
		if _, err := LoadKeySpec([]byte(data)); !errors.Is(err, ErrSpec) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// A key spec file holds one document: a second '---' document is refused,
// never silently ignored, whatever it pins.
func TestLoadKeySpec_ASecondDocumentIsRefused(t *testing.T) {
	data := append(append([]byte{}, ExampleKeySpec...), "\n---\nversion: v9\n"...)
	_, err := LoadKeySpec(data)
	if !errors.Is(err, ErrSpec) || !errors.Is(err, strictyaml.ErrSecondDocument) {
		t.Errorf("err = %v, want ErrSpec for a second document", err)
	}
}

func FuzzLoadKeySpec(f *testing.F) {
	f.Add(ExampleKeySpec)
	f.Add([]byte("components: [a]\nversion: v2\ninclude: ['**/*.rs']\n"))
	f.Add([]byte("{\"prefix\": \"x\", \"toolchain\": \"rustc 1\"}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := LoadKeySpec(data)
		if err != nil {
			if !errors.Is(err, ErrSpec) {
				t.Fatalf("an error that is not ErrSpec: %v", err)
			}
			return
		}
		if err := s.validate(); err != nil {
			t.Fatalf("a loaded spec does not validate: %v", err)
		}
	})
}

// BenchmarkKey hashes synthetic trees: realistic (500 files, 10 MiB) and
// 100x (50,000 files, 976 MiB). Compare with sha256sum over the same files:
//
//	go test ./cachetrust -run '^$' -bench '^BenchmarkKey/' -benchtime 3x
func BenchmarkKey(b *testing.B) {
	benchKey(b, func(dir string, s KeySpec) error { _, err := Key(os.DirFS(dir), s); return err }, true)
}

// BenchmarkKeyDir is BenchmarkKey through KeyDir, on the same trees. Set
// the cores with GOMAXPROCS, one value per run (-cpu 1,2 reports the
// second value's figures wrong under b.Loop):
//
//	GOMAXPROCS=1 go test ./cachetrust -run '^$' -bench 'Key(Dir)?/' -benchtime 3x
func BenchmarkKeyDir(b *testing.B) {
	benchKey(b, func(dir string, s KeySpec) error { _, err := KeyDir(dir, s); return err }, false)
}

// benchKey times key over the realistic and the 100x tree and, with peer,
// sha256sum over the same files.
func benchKey(b *testing.B, key func(dir string, s KeySpec) error, peer bool) {
	for _, tc := range []struct{ files, size int }{{500, 20 << 10}, {50_000, 20 << 10}} {
		b.Run(fmt.Sprintf("files=%d/bytes=%dMiB", tc.files, tc.files*tc.size>>20), func(b *testing.B) {
			dir, _ := benchTree(b, tc.files, tc.size)
			s := spec()
			b.SetBytes(int64(tc.files * tc.size))
			b.ResetTimer()
			cpu := cpuSeconds()
			for b.Loop() {
				if err := key(dir, s); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			reportCPU(b, cpu, tc.files*tc.size)
			if sum, err := exec.LookPath("sha256sum"); peer && err == nil {
				start := time.Now()
				cmd := exec.Command("sh", "-c", "find . -type f -print0 | xargs -0 -P 2 -n 500 "+sum+" > /dev/null")
				cmd.Dir = dir
				if cmd.Run() == nil {
					b.ReportMetric(float64(tc.files*tc.size)/time.Since(start).Seconds()/1e6, "sha256sum-MB/s")
				}
			}
		})
	}
}

// Seed 002 hashes "scripts/ci/**" so that "a PR that only edits an install
// script" cannot "poison an artifact under an unchanged name". A misspelt
// include glob silently drops those files from the key; Key names every
// include glob that covers no hashed file, so the spec can be reviewed.
func TestKey_NamesIncludeGlobsThatCoverNothing(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir)
	s := spec()
	s.Include = append(s.Include, "script/ci/**", ".github/workflows/**") // a typo; and a glob whose files are all excluded
	k := key(t, dir, s)
	want := []string{"**/examples/**", "**/benches/**", ".cargo/**", "script/ci/**", ".github/workflows/**"}
	if diff := cmp.Diff(want, k.Unmatched); diff != "" {
		t.Errorf("unmatched include globs (-want +got):\n%s", diff)
	}
}

// The key of a fixed tree never changes: a faster hasher must produce the
// same key for the same files (modes, symlinks and nested paths included).
func TestKey_TheSameTreeKeepsItsKey(t *testing.T) {
	dir := t.TempDir()
	for i := range 300 {
		p := filepath.Join(dir, fmt.Sprintf("crate%d/src/m%d.rs", i%7, i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		data := bytes.Repeat([]byte{byte(i), byte(i >> 8), '\n'}, 1+i*97)
		mode := os.FileMode(0o644)
		if i%11 == 0 {
			mode = 0o755
		}
		if err := os.WriteFile(p, data, mode); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "Cargo.toml"), []byte("[workspace]\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "Cargo.lock"), []byte("version = 4\n"), 0o644)
	if err := os.Symlink("crate1/src/m1.rs", filepath.Join(dir, "crate0/src/link.rs")); err != nil {
		t.Fatal(err)
	}
	k := key(t, dir, spec())
	const golden = "7c7e8c3bb5813cfef87f19ef5b6665f752226b6ede2cae6f125b332f882801f5"
	if k.Digest != golden {
		t.Errorf("digest %s, want %s: the same tree must keep its key", k.Digest, golden)
	}
}

// A key spec without a toolchain is refused unless explicitly waived: the
// same sources built by another compiler would reuse this key's archive.
func TestKey_AKeyWithoutAToolchainIsRefusedUnlessWaived(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir)
	s := spec()
	s.Toolchain = ""
	if _, err := Key(os.DirFS(dir), s); !errors.Is(err, ErrNoToolchain) {
		t.Fatalf("err = %v, want ErrNoToolchain", err)
	}
	s.ToolchainWaived = "the tree is data no compiler reads"
	if _, err := Key(os.DirFS(dir), s); err != nil {
		t.Errorf("waived: %v", err)
	}
	w, err := LoadKeySpec([]byte("toolchain_waived: data only\n"))
	if err != nil || w.ToolchainWaived != "data only" {
		t.Errorf("the waiver is read from the spec file: %+v, %v", w, err)
	}
}

// benchTree writes files of size bytes each, as a workspace of 100 crates,
// and returns its directory and the files' paths.
func benchTree(b *testing.B, files, size int) (string, []string) {
	b.Helper()
	dir := b.TempDir()
	b.Cleanup(func() {
		// Removed and written back before the next benchmark starts, for
		// the same reason as below.
		os.RemoveAll(dir)
		syncTree(b, filepath.Dir(dir))
	})
	buf := make([]byte, size)
	paths := make([]string, files)
	for i := range files {
		p := filepath.Join(dir, fmt.Sprintf("crate%d/src/m%d.rs", i%100, i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		buf[0], buf[1] = byte(i), byte(i>>8)
		if err := os.WriteFile(p, buf, 0o644); err != nil {
			b.Fatal(err)
		}
		paths[i] = p
	}
	// Written back now, not by the kernel while the benchmark runs: the
	// writeback's CPU would be counted against the hashing.
	syncTree(b, dir)
	return dir, paths
}

// BenchmarkSHA256Floor is Key's floor: Go's SHA-256 over a buffer in
// memory, one core, no file system. Key's MB/s at GOMAXPROCS=1 against
// this is the share of a core its per-file work leaves to hashing.
func BenchmarkSHA256Floor(b *testing.B) {
	buf := make([]byte, 64<<20)
	for i := range buf { // touched now, not on the first timed pass
		buf[i] = byte(i * 7919)
	}
	h := sha256.New()
	b.SetBytes(int64(len(buf)))
	cpu := cpuSeconds()
	for b.Loop() {
		h.Reset()
		h.Write(buf)
	}
	reportCPU(b, cpu, len(buf))
}

// reportCPU reports MB per CPU-second of this process since start, bytes
// per iteration: the measure that holds on contended cores, where wall
// time also counts waiting. It reports nothing where CPU time is unknown.
func reportCPU(b *testing.B, start float64, bytes int) {
	if start == 0 {
		return
	}
	if spent := cpuSeconds() - start; spent > 0 {
		b.ReportMetric(float64(bytes)*float64(b.N)/spent/1e6, "cpu-MB/s")
	}
}

func TestKeySpecFile_TheFileOverTheDefaultsOrTheDefaultsAlone(t *testing.T) {
	if spec, err := KeySpecFile(""); err != nil || !cmp.Equal(spec, RustWorkspaceSpec()) {
		t.Errorf("no file: %+v, %v; want RustWorkspaceSpec", spec, err)
	}
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "key.yml"), filepath.Join(dir, "bad.yml")
	os.WriteFile(good, []byte("version: v7\n"), 0o644)
	os.WriteFile(bad, []byte("componets: [cuda]\n"), 0o644)
	if spec, err := KeySpecFile(good); err != nil || spec.Version != "v7" || spec.Prefix != RustWorkspaceSpec().Prefix {
		t.Errorf("%+v, %v", spec, err)
	}
	if _, err := KeySpecFile(bad); !errors.Is(err, ErrSpec) {
		t.Errorf("a misspelt key: %v, want ErrSpec", err)
	}
	if _, err := KeySpecFile(filepath.Join(dir, "missing.yml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}

// An earlier key read back from its JSON explains a miss line by line.
func TestReadArchiveKey_AnEarlierKeyExplainsTheMiss(t *testing.T) {
	spec := RustWorkspaceSpec()
	spec.Toolchain = "rustc 1.95.0"
	fsys := fstest.MapFS{"Cargo.toml": {Data: []byte("[package]")}, "src/lib.rs": {Data: []byte("fn a() {}")}}
	old, err := Key(fsys, spec)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(old)
	file := filepath.Join(t.TempDir(), "old-key.json")
	os.WriteFile(file, data, 0o644)
	back, err := ReadArchiveKey(file)
	if err != nil || back.Key != old.Key {
		t.Fatalf("%+v, %v", back, err)
	}
	fsys["src/lib.rs"] = &fstest.MapFile{Data: []byte("fn b() {}")}
	spec.Toolchain = "rustc 1.96.0"
	k, _ := Key(fsys, spec)
	var lines []string
	for _, d := range Explain(back, k) {
		lines = append(lines, d.String())
	}
	if want := []string{`toolchain "rustc 1.95.0" -> "rustc 1.96.0"`, "src/lib.rs: content changed"}; !cmp.Equal(want, lines) {
		t.Errorf("%q, want %q", lines, want)
	}
	os.WriteFile(file, []byte(`{"key": 3}`), 0o644)
	var syntax *json.UnmarshalTypeError
	if _, err := ReadArchiveKey(file); !errors.As(err, &syntax) {
		t.Errorf("not a key: %v", err)
	}
}
