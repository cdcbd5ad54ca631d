//go:build linux

package cachetrust

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

func syncTree(b *testing.B, dir string) {
	b.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Syncfs(fd); err != nil {
		b.Fatal(err)
	}
}

// cpuSeconds is the CPU time this process has spent, user and system.
func cpuSeconds() float64 {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// BenchmarkReadFloor is the kernel's floor under KeyDir: each file of
// BenchmarkKey's 100x tree opened relative to its directory (held open),
// read in one call and closed, in order, on one goroutine; nothing
// hashed, nothing walked, no fstat. No reader of every file's bytes can
// spend fewer system calls per file. Key at one core can reach at most
// 1/(1/floor + 1/read) of the SHA-256 floor's MB/s:
//
//	GOMAXPROCS=1 go test ./cachetrust -run '^$' -bench 'ReadFloor|SHA256Floor' -benchtime 3x
func BenchmarkReadFloor(b *testing.B) {
	const files, size = 50_000, 20 << 10
	_, paths := benchTree(b, files, size)
	dirs := map[string]int{}
	for _, p := range paths {
		if _, ok := dirs[filepath.Dir(p)]; !ok {
			fd, err := unix.Open(filepath.Dir(p), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer unix.Close(fd)
			dirs[filepath.Dir(p)] = fd
		}
	}
	type file struct {
		dir  int
		name string
	}
	list := make([]file, len(paths))
	for i, p := range paths {
		list[i] = file{dirs[filepath.Dir(p)], filepath.Base(p)}
	}
	buf := make([]byte, 256<<10)
	b.SetBytes(files * size)
	b.ResetTimer()
	cpu := cpuSeconds()
	for b.Loop() {
		for _, f := range list {
			fd, err := unix.Openat(f.dir, f.name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				b.Fatal(err)
			}
			if n, err := unix.Read(fd, buf); n != size || err != nil {
				b.Fatalf("read %d bytes of %s, %v", n, f.name, err)
			}
			unix.Close(fd)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*files), "ns/file")
	reportCPU(b, cpu, files*size)
}

// randomTree writes a tree with what real checkouts hold and the walks
// could disagree on: nested and empty directories, .git directories at
// any depth, a regular file named .git, executable bits, files around the
// hasher's buffer size, symlinks to files, to directories, dangling and
// absolute, and names with spaces and newlines.
func randomTree(t *testing.T, rng *rand.Rand, dir string) {
	t.Helper()
	names := []string{"src", "crates", "a", "b c", "scripts", "ci", ".git", "benches", "x\ny", "Cargo.toml", "m.rs", "lib.rs", "build.rs", "run.sh", ".git"}
	sizes := []int{0, 1, 100, 20 << 10, 256<<10 - 1, 256 << 10, 256<<10 + 1, 600 << 10}
	var dirs = []string{dir}
	for range 10 + rng.IntN(40) {
		parent := dirs[rng.IntN(len(dirs))]
		p := filepath.Join(parent, names[rng.IntN(len(names))])
		if _, err := os.Lstat(p); err == nil {
			continue
		}
		switch k := rng.IntN(10); {
		case k < 3:
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
			dirs = append(dirs, p)
		case k < 8:
			data := make([]byte, sizes[rng.IntN(len(sizes))])
			for i := range data {
				data[i] = byte(rng.Uint32())
			}
			mode := []os.FileMode{0o644, 0o755, 0o600, 0o744, 0o641}[rng.IntN(5)]
			if err := os.WriteFile(p, data, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, mode); err != nil {
				t.Fatal(err)
			}
		default:
			target := []string{"m.rs", "../src", "/etc/passwd", "nowhere", strings.Repeat("d/", 1000) + "f"}[rng.IntN(5)]
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// The same tree keeps its key whichever way it is walked: KeyDir's key is
// Key's over os.DirFS for any tree, any include and exclude globs, with
// the same error where either fails.
func TestKeyDir_GivesKeysKeyForAnyTree(t *testing.T) {
	globs := []string{"**", "**/*.rs", "src/**", "**/Cargo.toml", "scripts/ci/**", "**/.git", "**/b c/**", "crates/*/src/*.rs", "**/run.sh"}
	for seed := range uint64(60) {
		rng := rand.New(rand.NewPCG(seed, 7))
		dir := t.TempDir()
		randomTree(t, rng, dir)
		s := spec()
		s.Include = []string{globs[rng.IntN(len(globs))], globs[rng.IntN(len(globs))]}
		s.Exclude = nil
		if rng.IntN(2) == 0 {
			s.Exclude = []string{globs[rng.IntN(len(globs))]}
		}
		want, wantErr := Key(os.DirFS(dir), s)
		got, gotErr := KeyDir(dir, s)
		if (wantErr == nil) != (gotErr == nil) || errors.Is(wantErr, ErrNoInputs) != errors.Is(gotErr, ErrNoInputs) {
			t.Fatalf("seed %d: Key's error %v, KeyDir's %v", seed, wantErr, gotErr)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("seed %d: (-Key +KeyDir):\n%s", seed, diff)
		}
	}
}

// A covered FIFO, socket or device has no file content to key: both walks
// refuse it, and neither waits on a FIFO no one writes.
func TestKeyDir_ACoveredFIFOIsRefusedNotWaitedOn(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir)
	if err := unix.Mkfifo(filepath.Join(dir, "crates/a/src/pipe.rs"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := KeyDir(dir, spec()); !errors.Is(err, ErrNotRegular) {
		t.Errorf("KeyDir: %v, want ErrNotRegular", err)
	}
	if _, err := Key(os.DirFS(dir), spec()); !errors.Is(err, ErrNotRegular) {
		t.Errorf("Key: %v, want ErrNotRegular", err)
	}
}

// What the walk listed as a regular file is opened as one or not at all:
// swapped for a FIFO after the listing, it is refused without waiting for
// a writer; swapped for a symlink, the link is not followed.
func TestKeyDir_AFileSwappedAfterTheListingIsNeverFollowedOrWaitedOn(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(outside, []byte("secret"), 0o644)
	if err := unix.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	hr := newHasher()
	// The type is the one the walk saw before the swap: a regular file.
	if _, err := hr.hashAt(fd, "fifo", "fifo", 0); !errors.Is(err, ErrNotRegular) {
		t.Errorf("FIFO in a file's place: %v, want ErrNotRegular", err)
	}
	if r, err := hr.hashAt(fd, "link", "link", 0); !errors.Is(err, unix.ELOOP) {
		t.Errorf("symlink in a file's place: %+v, %v; want ELOOP, the link unfollowed", r, err)
	}
}

// Git stores names as bytes, so a checkout may hold a name that is not
// UTF-8. os.DirFS refuses such a name (fs.ValidPath), so Key over it fails
// with "invalid argument"; KeyDir keys the file like any other.
func TestKeyDir_KeysANameThatIsNotUTF8(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir)
	odd := filepath.Join(dir, "crates/a/src/\xff.rs")
	os.WriteFile(odd, []byte("one"), 0o644)
	before := keyDirOnly(t, dir)
	if !slices.ContainsFunc(before.Records, func(r Record) bool { return r.Path == "crates/a/src/\xff.rs" }) {
		t.Fatalf("records %v lack the file", before.Records)
	}
	os.WriteFile(odd, []byte("two"), 0o644)
	if after := keyDirOnly(t, dir); after.Key == before.Key {
		t.Error("a change to the file kept the key")
	}
}

func keyDirOnly(t *testing.T, dir string) ArchiveKey {
	t.Helper()
	k, err := KeyDir(dir, spec())
	if err != nil {
		t.Fatal(err)
	}
	return k
}
