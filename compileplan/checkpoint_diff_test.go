package compileplan

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// restoreCase is a checkpoint entry for the restore comparisons.
type restoreCase struct {
	name, link string
	typ        byte
	mode       int64
	body       string
}

func makeTar(t testing.TB, ents []restoreCase) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i, e := range ents {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: e.mode, Format: tar.FormatPAX,
			ModTime: time.Date(2026, 8, 14, 9, 30, i, 123456789+i, time.UTC)}
		if e.typ == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(e.body))
	}
	tw.Close()
	return buf.Bytes()
}

// restoreCorners are checkpoints that take each path of a restore: files
// over files, symlinks and directories already there, symlinks replaced
// under directories the restore had opened, in-tree and escaping links.
var restoreCorners = map[string][]restoreCase{
	"plain": {{name: "d/", typ: tar.TypeDir, mode: 0o750}, {name: "d/f", typ: tar.TypeReg, mode: 0o644, body: "f"}, {name: "d/x", typ: tar.TypeReg, mode: 0o755, body: "x"}, {name: "top", typ: tar.TypeReg, mode: 0o600, body: "t"}},
	"over what is there": {{name: "f", typ: tar.TypeReg, mode: 0o644, body: "new, shorter"}, {name: "l", typ: tar.TypeReg, mode: 0o644, body: "not through l"},
		{name: "pre/g", typ: tar.TypeReg, mode: 0o640, body: "g"}, {name: "out", typ: tar.TypeReg, mode: 0o644, body: "not outside"}},
	"a file where a directory is":  {{name: "pre", typ: tar.TypeReg, mode: 0o644, body: "x"}},
	"a file under a file":          {{name: "f/x", typ: tar.TypeReg, mode: 0o644, body: "x"}},
	"through a link that escapes":  {{name: "out/x", typ: tar.TypeReg, mode: 0o644, body: "x"}},
	"through a link in the tree":   {{name: "b/", typ: tar.TypeDir, mode: 0o755}, {name: "a", link: "b", typ: tar.TypeSymlink}, {name: "a/x", typ: tar.TypeReg, mode: 0o644, body: "x"}},
	"relinked under an open dir":   {{name: "b/", typ: tar.TypeDir, mode: 0o755}, {name: "c/", typ: tar.TypeDir, mode: 0o755}, {name: "a", link: "b", typ: tar.TypeSymlink}, {name: "a/x", typ: tar.TypeReg, mode: 0o644, body: "x"}, {name: "a", link: "c", typ: tar.TypeSymlink}, {name: "a/y", typ: tar.TypeReg, mode: 0o644, body: "y"}},
	"a dir replaced by a link":     {{name: "e/", typ: tar.TypeDir, mode: 0o755}, {name: "e", link: "pre", typ: tar.TypeSymlink}, {name: "e/z", typ: tar.TypeReg, mode: 0o644, body: "z"}},
	"a link replaced by a file":    {{name: "b/", typ: tar.TypeDir, mode: 0o755}, {name: "a", link: "b", typ: tar.TypeSymlink}, {name: "a/x", typ: tar.TypeReg, mode: 0o644, body: "x"}, {name: "a", typ: tar.TypeReg, mode: 0o644, body: "a"}, {name: "a/y", typ: tar.TypeReg, mode: 0o644, body: "y"}},
	"a dangling link in the way":   {{name: "dang", link: "nowhere", typ: tar.TypeSymlink}, {name: "dang", typ: tar.TypeReg, mode: 0o644, body: "d"}},
	"the same file twice":          {{name: "f2", typ: tar.TypeReg, mode: 0o644, body: "one"}, {name: "f2", typ: tar.TypeReg, mode: 0o600, body: "two"}},
	"many directories, back again": {{name: "p/a/x", typ: tar.TypeReg, mode: 0o644}, {name: "p/b/x", typ: tar.TypeReg, mode: 0o644}, {name: "p/c/x", typ: tar.TypeReg, mode: 0o644}, {name: "p/d/x", typ: tar.TypeReg, mode: 0o644}, {name: "p/e/x", typ: tar.TypeReg, mode: 0o644}, {name: "p/f/x", typ: tar.TypeReg, mode: 0o644}, {name: "p/g/x", typ: tar.TypeReg, mode: 0o644}, {name: "p/h/x", typ: tar.TypeReg, mode: 0o644}, {name: "p/i/x", typ: tar.TypeReg, mode: 0o644}, {name: "p/a/y", typ: tar.TypeReg, mode: 0o644}, {name: "p/y", typ: tar.TypeReg, mode: 0o644}},
	"a directory where a file is":  {{name: "f/", typ: tar.TypeDir, mode: 0o755}},
	"files larger than read ahead": {{name: "big/a", typ: tar.TypeReg, mode: 0o644, body: strings.Repeat("a", restoreInline+1)}, {name: "big/b", typ: tar.TypeReg, mode: 0o644, body: "b"},
		{name: "big/c", typ: tar.TypeReg, mode: 0o600, body: strings.Repeat("c", 3*restoreInline)}, {name: "big/d", typ: tar.TypeReg, mode: 0o644, body: strings.Repeat("d", restoreInline)}},
}

// restoreBoth restores data with RestoreCheckpoint and with the reference
// into two copies of one destination (a file, a symlink to it, a
// directory, and a symlink out of the tree), and checks that both fail or
// both restore the same tree, and that neither wrote outside it.
func restoreBoth(t *testing.T, data []byte) {
	t.Helper()
	restore := map[string]func([]byte, string) (CheckpointStats, error){
		"new": func(b []byte, d string) (CheckpointStats, error) { return RestoreCheckpoint(bytes.NewReader(b), d) },
		"ref": func(b []byte, d string) (CheckpointStats, error) { return refRestoreCheckpoint(bytes.NewReader(b), d) },
	}
	start := time.Now().Add(-time.Minute) // the trees' own times are older
	trees := map[string]map[string]entry{}
	errs := map[string]error{}
	stats := map[string]CheckpointStats{}
	for name, f := range restore {
		parent := t.TempDir()
		dst, outside := filepath.Join(parent, "restore"), filepath.Join(parent, "outside")
		for _, d := range []string{dst, outside, filepath.Join(dst, "pre")} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		mt := time.Date(2020, 1, 2, 3, 4, 5, 6, time.UTC)
		for _, p := range []string{"f", "pre/g"} {
			if err := os.WriteFile(filepath.Join(dst, p), []byte("there before, and longer"), 0o644); err != nil {
				t.Fatal(err)
			}
			os.Chtimes(filepath.Join(dst, p), mt, mt)
		}
		os.Symlink("f", filepath.Join(dst, "l"))
		os.Symlink("../outside", filepath.Join(dst, "out"))
		stats[name], errs[name] = f(data, dst)
		trees[name] = snapshot(t, dst)
		if left, _ := os.ReadDir(outside); len(left) != 0 {
			t.Fatalf("%s wrote outside the tree: %v", name, left)
		}
		if left, _ := os.ReadDir(parent); len(left) != 2 {
			t.Fatalf("%s wrote next to the tree: %v", name, left)
		}
	}
	if (errs["new"] == nil) != (errs["ref"] == nil) {
		t.Fatalf("err %v, before %v", errs["new"], errs["ref"])
	}
	if errs["new"] != nil && !errors.Is(errs["new"], ErrCheckpoint) && errors.Is(errs["ref"], ErrCheckpoint) {
		t.Fatalf("err %v is not ErrCheckpoint; before: %v", errs["new"], errs["ref"])
	}
	// What a failed restore leaves is the same too: the entries before the
	// one that failed, and what it wrote of that one (whose time is when
	// it was written).
	if errs["new"] != nil {
		for _, tree := range trees {
			for p, e := range tree {
				if e.MTime.After(start) {
					e.MTime = time.Time{}
					tree[p] = e
				}
			}
		}
	}
	// Directories the restore made without an entry for them have the
	// time they were made.
	listed := map[string]bool{}
	for tr := tar.NewReader(bytes.NewReader(data)); ; {
		h, err := tr.Next()
		if err != nil {
			break
		}
		if h.Typeflag == tar.TypeDir {
			listed[strings.TrimSuffix(h.Name, "/")] = true
		}
	}
	for _, tree := range trees {
		for p, e := range tree {
			if e.Mode.IsDir() && !listed[p] {
				e.MTime = time.Time{}
				tree[p] = e
			}
		}
	}
	if diff := cmp.Diff(trees["ref"], trees["new"]); diff != "" {
		t.Fatalf("restored tree (-before +now):\n%s", diff)
	}
	if diff := cmp.Diff(stats["ref"], stats["new"]); diff != "" {
		t.Fatalf("stats (-before +now):\n%s", diff)
	}
}

func TestRestoreCheckpoint_RestoresWhatItRestoredBefore(t *testing.T) {
	for name, ents := range restoreCorners {
		t.Run(name, func(t *testing.T) { restoreBoth(t, makeTar(t, ents)) })
	}
	src := buildTree(t)
	var buf bytes.Buffer
	if _, err := WriteCheckpoint(&buf, src); err != nil {
		t.Fatal(err)
	}
	restoreBoth(t, buf.Bytes())
	// More files than a batch holds, and cut short in each place.
	var many []restoreCase
	for i := range restoreBatchItems*2 + 3 {
		many = append(many, restoreCase{name: fmt.Sprintf("m/%d", i), typ: tar.TypeReg, mode: 0o644, body: strings.Repeat("m", i%700)})
	}
	data := makeTar(t, many)
	restoreBoth(t, data)
	for _, n := range []int{len(data) / 3, len(data) / 2, len(data) - 1500} {
		restoreBoth(t, data[:n])
	}
	big := makeTar(t, restoreCorners["files larger than read ahead"])
	restoreBoth(t, big[:len(big)/2])
}

func FuzzRestoreCheckpoint_SameTreeAsBefore(f *testing.F) {
	for _, ents := range restoreCorners {
		f.Add(makeTar(f, ents))
	}
	f.Fuzz(restoreBoth)
}
