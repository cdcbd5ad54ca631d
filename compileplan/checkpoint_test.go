package compileplan

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpugate/gpugate/internal/testsys"
)

// entry is one path of a tree as a checkpoint must keep it.
type entry struct {
	Mode   fs.FileMode
	MTime  time.Time
	Data   string // file contents or symlink target
	IsLink bool
}

// snapshot reads a tree: every path's mode, mtime (to the nanosecond; none
// for symlinks) and contents.
func snapshot(t *testing.T, root string) map[string]entry {
	t.Helper()
	out := map[string]entry{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		e := entry{Mode: info.Mode()}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			e.IsLink = true
			e.Data, err = os.Readlink(p)
		case info.Mode().IsRegular():
			var b []byte
			b, err = os.ReadFile(p)
			e.Data, e.MTime = string(b), info.ModTime()
		default:
			e.MTime = info.ModTime()
		}
		out[filepath.ToSlash(rel)] = e
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// buildTree is a small build directory: sources, a ninja log, an
// executable, an empty directory and a symlink, with sub-second mtimes
// that differ per file (what ninja's restat compares).
func buildTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	base := time.Date(2026, 8, 14, 9, 30, 0, 0, time.UTC)
	files := []struct {
		name string
		mode fs.FileMode
		ns   int
	}{
		{"source/csrc/kernel.cu", 0o644, 123456789},
		{"source/csrc/kernel.h", 0o644, 987654321},
		{"source/build/.ninja_log", 0o644, 1},
		{"source/build/obj/kernel.o", 0o644, 500000001},
		{"source/build/tools/ptxas-wrapper", 0o755, 999999999},
	}
	for i, f := range files {
		p := filepath.Join(root, f.name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(fmt.Sprintf("contents %d of %s\n", i, f.name)), f.mode); err != nil {
			t.Fatal(err)
		}
		mt := base.Add(time.Duration(i)*time.Second + time.Duration(f.ns))
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(root, "source/build/empty"), 0o750)
	if err := os.Symlink("obj/kernel.o", filepath.Join(root, "source/build/latest.o")); err != nil {
		t.Fatal(err)
	}
	// Directories last: creating their children changed their times.
	for i, d := range []string{"source/build/empty", "source/build/obj", "source/build/tools", "source/build", "source/csrc", "source"} {
		mt := base.Add(time.Hour + time.Duration(i)*time.Millisecond + 7)
		if err := os.Chtimes(filepath.Join(root, d), mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// The compile-sharding ADR: "on expiry the ENTIRE source/ tree (sources +
// build state) is tarred as an artifact -- PAX format to preserve
// nanosecond mtimes, because ninja's restat check breaks on re-cloned
// sources". A restored tree is the tree: every mtime to the nanosecond,
// every mode, file and symlink.
func TestCheckpoint_PAXPreservesNanosecondMtimes(t *testing.T) {
	src := buildTree(t)
	var buf bytes.Buffer
	st, err := WriteCheckpoint(&buf, src)
	if err != nil {
		t.Fatal(err)
	}
	if st.Files != 5 || st.Dirs != 6 || st.Symlinks != 1 {
		t.Errorf("stats %+v", st)
	}
	// Every entry is PAX, with the sub-second mtime in its records.
	tr := tar.NewReader(bytes.NewReader(buf.Bytes()))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeSymlink && (h.Format != tar.FormatPAX || h.PAXRecords["mtime"] == "") {
			t.Errorf("%s: format %v, records %v: want PAX with an mtime record", h.Name, h.Format, h.PAXRecords)
		}
		if h.Uname != "" || h.Uid != 0 || !h.AccessTime.IsZero() {
			t.Errorf("%s carries owner or access time: %+v", h.Name, h)
		}
	}
	dst := t.TempDir()
	rst, err := RestoreCheckpoint(bytes.NewReader(buf.Bytes()), dst)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(st, rst); diff != "" {
		t.Errorf("restore stats (-written +restored):\n%s", diff)
	}
	if diff := cmp.Diff(snapshot(t, src), snapshot(t, dst)); diff != "" {
		t.Errorf("restored tree (-checkpointed +restored):\n%s", diff)
	}
}

// The same tree gives the same bytes, so an unchanged checkpoint is
// recognisable by its checksum.
func TestCheckpoint_SameTreeSameBytes(t *testing.T) {
	src := buildTree(t)
	var a, b bytes.Buffer
	if _, err := WriteCheckpoint(&a, src); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteCheckpoint(&b, src); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("two checkpoints of one tree differ")
	}
}

// Restoring over a fresh checkout replaces what is there, and never writes
// through a symlink the checkout (or an earlier entry) put in a file's
// place.
func TestRestoreCheckpoint_OverwritesAndNeverWritesThroughASymlink(t *testing.T) {
	src := buildTree(t)
	var buf bytes.Buffer
	if _, err := WriteCheckpoint(&buf, src); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	outside := filepath.Join(t.TempDir(), "outside")
	os.WriteFile(outside, []byte("keep"), 0o644)
	os.MkdirAll(filepath.Join(dst, "source/csrc"), 0o755)
	os.WriteFile(filepath.Join(dst, "source/csrc/kernel.h"), []byte("a stale, longer checkout of the header"), 0o644)
	os.Symlink(outside, filepath.Join(dst, "source/csrc/kernel.cu"))
	if _, err := RestoreCheckpoint(bytes.NewReader(buf.Bytes()), dst); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(outside); string(b) != "keep" {
		t.Errorf("the restore wrote through a symlink: %q", b)
	}
	if diff := cmp.Diff(snapshot(t, src), snapshot(t, dst)); diff != "" {
		t.Errorf("restored tree (-checkpointed +restored):\n%s", diff)
	}
}

// A checkpoint is an artifact: outside input. Nothing in it may land
// outside the restore directory.
func TestRestoreCheckpoint_RefusesEntriesThatEscape(t *testing.T) {
	type ent struct {
		name, link string
		typ        byte
	}
	tests := map[string][]ent{
		"parent directory":       {{name: "../escaped", typ: tar.TypeReg}},
		"nested parent":          {{name: "a/../../escaped", typ: tar.TypeReg}},
		"absolute name":          {{name: "/tmp/escaped", typ: tar.TypeReg}},
		"through its symlink":    {{name: "out", link: "OUTSIDE", typ: tar.TypeSymlink}, {name: "out/escaped", typ: tar.TypeReg}},
		"symlink then directory": {{name: "out", link: "OUTSIDE", typ: tar.TypeSymlink}, {name: "out/sub/", typ: tar.TypeDir}},
		"hard link":              {{name: "f", typ: tar.TypeReg}, {name: "g", link: "f", typ: tar.TypeLink}},
		"device":                 {{name: "dev", typ: tar.TypeChar}},
		"empty name":             {{name: "", typ: tar.TypeReg}},
	}
	for name, ents := range tests {
		t.Run(name, func(t *testing.T) {
			outside := t.TempDir()
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			for _, e := range ents {
				link := e.link
				if link == "OUTSIDE" {
					link = outside
				}
				body := []byte("x")
				h := &tar.Header{Name: e.name, Linkname: link, Typeflag: e.typ, Mode: 0o644, Format: tar.FormatPAX}
				if e.typ == tar.TypeReg {
					h.Size = int64(len(body))
				}
				if err := tw.WriteHeader(h); err != nil {
					t.Fatal(err)
				}
				if e.typ == tar.TypeReg {
					tw.Write(body)
				}
			}
			tw.Close()
			dst := filepath.Join(t.TempDir(), "restore")
			os.Mkdir(dst, 0o755)
			_, err := RestoreCheckpoint(&buf, dst)
			if !errors.Is(err, ErrCheckpoint) {
				t.Errorf("err = %v, want ErrCheckpoint", err)
			}
			if left, _ := os.ReadDir(outside); len(left) != 0 {
				t.Errorf("written outside the restore directory: %v", left)
			}
			if _, err := os.Lstat(filepath.Join(filepath.Dir(dst), "escaped")); err == nil {
				t.Error("escaped next to the restore directory")
			}
		})
	}
	if _, err := RestoreCheckpoint(bytes.NewReader([]byte("not a tar stream at all, just text")), t.TempDir()); !errors.Is(err, ErrCheckpoint) {
		t.Errorf("garbage: err = %v, want ErrCheckpoint", err)
	}
	for name, data := range map[string][]byte{"empty": nil, "only the end marker": make([]byte, 1024)} {
		if _, err := RestoreCheckpoint(bytes.NewReader(data), t.TempDir()); !errors.Is(err, ErrCheckpoint) {
			t.Errorf("%s: err = %v, want ErrCheckpoint (nothing to resume from)", name, err)
		}
	}
	if _, err := WriteCheckpoint(io.Discard, t.TempDir()); !errors.Is(err, ErrCheckpoint) {
		t.Errorf("an empty tree: err = %v, want ErrCheckpoint", err)
	}
	if _, err := RestoreCheckpoint(bytes.NewReader(nil), filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing restore directory must be an error")
	}
}

// rawHeader is one ustar header block, built by hand: archive/tar's writer
// refuses to write the sparse records a hostile checkpoint could carry.
func rawHeader(name string, typ byte, size int) []byte {
	b := make([]byte, 512)
	copy(b[0:], name)
	copy(b[100:], "0000644\x00")
	copy(b[108:], "0000000\x00")
	copy(b[116:], "0000000\x00")
	copy(b[124:], fmt.Sprintf("%011o\x00", size))
	copy(b[136:], fmt.Sprintf("%011o\x00", 1))
	b[156] = typ
	copy(b[257:], "ustar\x0000")
	copy(b[148:], "        ")
	sum := 0
	for _, c := range b {
		sum += int(c)
	}
	copy(b[148:], fmt.Sprintf("%06o\x00 ", sum))
	return b
}

func paxRecord(k, v string) string {
	n := len(k) + len(v) + 3
	for len(fmt.Sprintf("%d %s=%s\n", n, k, v)) != n {
		n++
	}
	return fmt.Sprintf("%d %s=%s\n", n, k, v)
}

// A sparse entry expands to whatever size it declares: a 2 KB artifact
// declaring a terabyte would fill the disk. WriteCheckpoint never writes
// one, so RestoreCheckpoint refuses it before writing anything.
func TestRestoreCheckpoint_RefusesSparseFiles(t *testing.T) {
	recs := paxRecord("GNU.sparse.major", "0") + paxRecord("GNU.sparse.minor", "1") + paxRecord("GNU.sparse.size", "1099511627776") +
		paxRecord("GNU.sparse.numblocks", "1") + paxRecord("GNU.sparse.map", "0,0")
	var data []byte
	data = append(data, rawHeader("PaxHeaders/big", tar.TypeXHeader, len(recs))...)
	data = append(data, []byte(recs)...)
	data = append(data, make([]byte, 512-len(recs)%512)...)
	data = append(data, rawHeader("big", tar.TypeReg, 0)...)
	data = append(data, make([]byte, 1024)...)
	// The stream is what the test means: archive/tar expands it to 1 TiB.
	h, err := tar.NewReader(bytes.NewReader(data)).Next()
	if err != nil || h.Size != 1<<40 {
		t.Fatalf("the crafted entry reads as %+v, %v; want a 1 TiB sparse file", h, err)
	}
	dst := t.TempDir()
	if _, err := RestoreCheckpoint(bytes.NewReader(data), dst); !errors.Is(err, ErrCheckpoint) || !strings.Contains(err.Error(), "sparse") {
		t.Errorf("err = %v, want ErrCheckpoint naming the sparse entry", err)
	}
	if left, _ := os.ReadDir(dst); len(left) != 0 {
		t.Errorf("restored %v", left)
	}
}

func TestWriteCheckpoint_RefusesWhatATreeDoesNotCarry(t *testing.T) {
	src := t.TempDir()
	if err := testsys.Mkfifo(filepath.Join(src, "pipe")); err != nil {
		t.Skipf("no named pipes here: %v", err)
	}
	if _, err := WriteCheckpoint(io.Discard, src); !errors.Is(err, ErrCheckpoint) || !bytes.Contains([]byte(err.Error()), []byte("pipe")) {
		t.Errorf("err = %v, want ErrCheckpoint naming the pipe", err)
	}
}

func FuzzRestoreCheckpoint(f *testing.F) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755, Format: tar.FormatPAX, ModTime: time.Unix(1, 5)})
	tw.WriteHeader(&tar.Header{Name: "d/f", Typeflag: tar.TypeReg, Mode: 0o644, Size: 2, Format: tar.FormatPAX, ModTime: time.Unix(2, 7)})
	tw.Write([]byte("hi"))
	tw.WriteHeader(&tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "d/f", Format: tar.FormatPAX})
	tw.Close()
	f.Add(buf.Bytes())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		parent := t.TempDir()
		dst := filepath.Join(parent, "restore")
		if err := os.Mkdir(dst, 0o755); err != nil {
			t.Fatal(err)
		}
		_, err := RestoreCheckpoint(bytes.NewReader(data), dst)
		if err != nil && !errors.Is(err, ErrCheckpoint) && !errors.Is(err, fs.ErrExist) && !errors.Is(err, fs.ErrNotExist) {
			t.Logf("other error: %v", err)
		}
		if left, _ := os.ReadDir(parent); len(left) != 1 {
			t.Fatalf("written next to the restore directory: %v", left)
		}
	})
}

// benchTree writes n files of 4 KiB in directories of 100.
func benchTree(b *testing.B, n int) string {
	b.Helper()
	root := b.TempDir()
	data := bytes.Repeat([]byte("x"), 4<<10)
	for i := range n {
		p := filepath.Join(root, fmt.Sprintf("d%04d", i/100), fmt.Sprintf("f%d.o", i))
		if i%100 == 0 {
			os.MkdirAll(filepath.Dir(p), 0o755)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return root
}

// A source-plus-build tree of 1,000 objects, and 100x that.
func BenchmarkCheckpoint(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		root := benchTree(b, n)
		var buf bytes.Buffer
		if _, err := WriteCheckpoint(&buf, root); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("write/files=%d", n), func(b *testing.B) {
			b.SetBytes(int64(n) << 12)
			for b.Loop() {
				if _, err := WriteCheckpoint(io.Discard, root); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("restore/files=%d", n), func(b *testing.B) {
			b.SetBytes(int64(n) << 12)
			parent := b.TempDir()
			for b.Loop() {
				dst, err := os.MkdirTemp(parent, "restore")
				if err != nil {
					b.Fatal(err)
				}
				if _, err := RestoreCheckpoint(bytes.NewReader(buf.Bytes()), dst); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				os.RemoveAll(dst) // keep the disk as it was for the next iteration
				b.StartTimer()
			}
		})
	}
}
