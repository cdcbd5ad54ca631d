//go:build linux

package cachetrust

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
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
// spend fewer system calls per file. open+close-cpu-ns/file is the CPU
// time of one more pass with no read. Key at one core can reach at most
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
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*files), "ns/file")
	reportCPU(b, cpu, files*size)
	// The same pass without the read: what opening alone costs, a part of
	// every file's price that no way of reading its bytes avoids. CPU
	// time, as cpu-MB/s: the measure that holds on contended cores.
	start := cpuSeconds()
	for _, f := range list {
		fd, err := unix.Openat(f.dir, f.name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			b.Fatal(err)
		}
		unix.Close(fd)
	}
	if start > 0 {
		b.ReportMetric((cpuSeconds()-start)*1e9/files, "open+close-cpu-ns/file")
	}
}

// randomTree writes a tree with what real checkouts hold and the walks
// could disagree on: nested and empty directories, .git directories at
// any depth, a regular file named .git, executable bits, files around the
// hasher's buffer size, symlinks to files, to directories, dangling and
// absolute, and names with spaces and newlines.
func randomTree(t *testing.T, rng *rand.Rand, dir string) []string {
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
	// What makes a walk fail: a FIFO, a covered name that is not UTF-8.
	if rng.IntN(4) == 0 {
		unix.Mkfifo(filepath.Join(dirs[rng.IntN(len(dirs))], "pipe.rs"), 0o644)
	}
	if rng.IntN(4) == 0 {
		os.WriteFile(filepath.Join(dirs[rng.IntN(len(dirs))], "\xff.rs"), nil, 0o644)
	}
	return dirs
}

// The same tree keeps its key whichever way it is walked: KeyDir's key is
// Key's over os.DirFS for any tree, any include and exclude globs, with
// the same kind of error where either fails.
func TestKeyDir_GivesKeysKeyForAnyTree(t *testing.T) {
	compareOnRandomTrees(t, 60, func(*rand.Rand, []string) {})
}

// As a user, whom modes stop, the same holds with directories that cannot
// be listed, cannot be searched, or neither: the first error in the walk
// is the same kind for both.
func TestKeyDir_GivesKeysErrorForAnyTreeAsAUser(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	compareOnRandomTrees(t, 200, func(rng *rand.Rand, dirs []string) {
		for _, d := range dirs[1:] {
			if rng.IntN(5) == 0 {
				os.Chmod(d, []os.FileMode{0, 0o644, 0o311, 0o555}[rng.IntN(4)])
			}
		}
		t.Cleanup(func() {
			for _, d := range dirs {
				os.Chmod(d, 0o755)
			}
		})
	})
}

func compareOnRandomTrees(t *testing.T, seeds uint64, spoil func(*rand.Rand, []string)) {
	t.Helper()
	globs := []string{"**", "**/*.rs", "src/**", "**/Cargo.toml", "scripts/ci/**", "**/.git", "**/b c/**", "crates/*/src/*.rs", "**/run.sh"}
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(seed, 7))
		dir := t.TempDir()
		spoil(rng, randomTree(t, rng, dir))
		s := spec()
		s.Include = []string{globs[rng.IntN(len(globs))], globs[rng.IntN(len(globs))]}
		s.Exclude = nil
		if rng.IntN(2) == 0 {
			s.Exclude = []string{globs[rng.IntN(len(globs))]}
		}
		want, wantErr := Key(os.DirFS(dir), s)
		got, gotErr := KeyDir(dir, s)
		if !sameKind(wantErr, gotErr) {
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

// sameKind reports whether two errors are both nil or match the same of
// the sentinels a caller tells apart.
func sameKind(a, b error) bool {
	if (a == nil) != (b == nil) {
		return false
	}
	for _, kind := range []error{ErrNoInputs, ErrNotRegular, ErrNotUTF8, ErrChanged, fs.ErrNotExist, fs.ErrPermission, fs.ErrInvalid} {
		if errors.Is(a, kind) != errors.Is(b, kind) {
			return false
		}
	}
	return true
}

// What the walk listed is opened as that or not at all: a file swapped
// for a FIFO, a socket or a directory after the listing is ErrChanged,
// refused without waiting for a writer; swapped for a symlink, the link
// is not followed; a link swapped for a file is not read as a link.
func TestKeyDir_AFileSwappedAfterTheListingIsNeverFollowedOrWaitedOn(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(outside, []byte("secret"), 0o644)
	os.WriteFile(filepath.Join(dir, "file"), []byte("file"), 0o644)
	os.Mkdir(filepath.Join(dir, "dir"), 0o755)
	if err := unix.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	sock, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, "sock"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	hr := newHasher()
	// The type is the one the walk saw before the swap.
	for _, name := range []string{"fifo", "link", "sock", "dir"} {
		if r, err := hr.hashAt(fd, name, name, 0); !errors.Is(err, ErrChanged) {
			t.Errorf("%s in a file's place: %+v, %v; want ErrChanged, nothing read", name, r, err)
		}
	}
	if r, err := hr.hashAt(fd, "file", "file", fs.ModeSymlink); !errors.Is(err, ErrChanged) {
		t.Errorf("a file in a link's place: %+v, %v; want ErrChanged", r, err)
	}
}

// A record's path is JSON, which holds only UTF-8: two names that differ
// only in bytes that are not UTF-8 would read back as one record. Both
// walks refuse a covered path that is not UTF-8 with ErrNotUTF8, whether
// the file's name or a directory's above it is the odd one.
func TestKey_ACoveredPathThatIsNotUTF8IsRefused(t *testing.T) {
	for _, odd := range []string{"crates/a/src/\xff.rs", "crates/a/src/\xfe/m.rs"} {
		dir := t.TempDir()
		tree(t, dir)
		p := filepath.Join(dir, odd)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte("one"), 0o644)
		if _, err := KeyDir(dir, spec()); !errors.Is(err, ErrNotUTF8) {
			t.Errorf("KeyDir with %q: %v, want ErrNotUTF8", odd, err)
		}
		if _, err := Key(os.DirFS(dir), spec()); !errors.Is(err, ErrNotUTF8) {
			t.Errorf("Key with %q: %v, want ErrNotUTF8", odd, err)
		}
	}
}

// Git stores names as bytes. A name that is not UTF-8 and that no glob
// covers is no input of the key: KeyDir keys the tree as if it were not
// there. os.DirFS cannot walk into such a directory at all, so Key says
// so (ErrNotUTF8) and names KeyDir.
func TestKeyDir_KeysATreeWhoseUncoveredNamesAreNotUTF8(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir)
	want := keyDirOnly(t, dir)
	os.MkdirAll(filepath.Join(dir, "docs/\xff"), 0o755)
	os.WriteFile(filepath.Join(dir, "docs/\xff/guide.md"), []byte("guide"), 0o644)
	os.WriteFile(filepath.Join(dir, "docs/\xfe.md"), []byte("guide"), 0o644)
	if got := keyDirOnly(t, dir); got.Key != want.Key {
		t.Errorf("uncovered names changed the key: %s, want %s", got.Key, want.Key)
	}
	if _, err := Key(os.DirFS(dir), spec()); !errors.Is(err, ErrNotUTF8) {
		t.Errorf("Key: %v, want ErrNotUTF8", err)
	}
}

// The same tree gives the same error, however the workers are scheduled:
// a listing's error always wins over a hashing error, because the walk
// goes on after a worker fails, as fs.WalkDir does for Key.
func TestKeyDir_TheSameTreeGivesTheSameError(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir)
	os.Remove(filepath.Join(dir, "Cargo.lock"))
	if err := unix.Mkfifo(filepath.Join(dir, "Cargo.lock"), 0o644); err != nil { // a hashing error, found first
		t.Fatal(err)
	}
	deep := filepath.Join(dir, "crates/z/src")
	os.MkdirAll(deep, 0o755)
	os.WriteFile(filepath.Join(deep, "\xff.rs"), []byte("x"), 0o644) // a listing's error, found last
	for range 50 {
		_, want := Key(os.DirFS(dir), spec())
		_, got := KeyDir(dir, spec())
		if !errors.Is(want, ErrNotUTF8) || !errors.Is(got, ErrNotUTF8) {
			t.Fatalf("Key: %v; KeyDir: %v; want ErrNotUTF8 from both", want, got)
		}
	}
}

// Of several files that fail to hash, the error reported is that of the
// path that sorts first, whichever worker got there first.
func TestHashPool_ReportsThePathThatSortsFirst(t *testing.T) {
	errs := map[string]error{}
	for _, p := range []string{"z", "m", "b", "a/x", "c"} {
		errs[p] = errors.New(p)
	}
	for range 20 {
		pool := &hashPool[string]{}
		pool.start(8, func(_ *hasher, p string, mine []Record) ([]Record, string, error) {
			return mine, p, errs[p]
		})
		for _, p := range []string{"z", "m", "b", "a/x", "c"} {
			pool.jobs <- p
		}
		if _, err := pool.wait(); !errors.Is(err, errs["a/x"]) {
			t.Fatalf("error %v, want a/x's", err)
		}
	}
}

// KeyDir's open descriptors grow with the tree's depth and the cores, not
// with its number of directories: a wide tree is keyed under a limit far
// below its directory count, even where the walk lists directories much
// faster than the workers hash their files.
func TestKeyDir_DescriptorsStayBoundedByDepthAndCoresNotDirectories(t *testing.T) {
	dir := t.TempDir()
	data := make([]byte, 128<<10) // slow to hash next to listing a directory
	for i := range 300 {
		p := filepath.Join(dir, fmt.Sprintf("crates/c%03d/src/m.rs", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		data[0] = byte(i)
		os.WriteFile(p, data, 0o644)
	}
	os.WriteFile(filepath.Join(dir, "Cargo.lock"), nil, 0o644)
	want, err := Key(os.DirFS(dir), spec())
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd to count descriptors: %v", err)
	}
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	// Depth 4, the batches queued and in hand, a file per worker.
	limit := unix.Rlimit{Cur: uint64(len(entries) + 8 + 6*runtime.GOMAXPROCS(0)), Max: old.Max}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &limit); err != nil {
		t.Fatal(err)
	}
	got, err := KeyDir(dir, spec())
	unix.Setrlimit(unix.RLIMIT_NOFILE, &old)
	if err != nil {
		t.Fatalf("300 directories under a limit of %d descriptors: %v", limit.Cur, err)
	}
	if got.Key != want.Key {
		t.Errorf("key %s, want Key's %s", got.Key, want.Key)
	}
}

// lease takes a write lease on path, as Samba or an NFS server would: an
// open by anyone else waits until the holder lets go. broken receives when
// the kernel asks it to; release lets go. It skips where the file system
// takes no leases.
func lease(t *testing.T, path string) (broken <-chan os.Signal, release func()) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, unix.SIGIO)
	t.Cleanup(func() { signal.Stop(ch) })
	if _, err := unix.FcntlInt(f.Fd(), unix.F_SETLEASE, unix.F_WRLCK); err != nil {
		t.Skipf("this file system takes no leases: %v", err)
	}
	return ch, func() {
		if _, err := unix.FcntlInt(f.Fd(), unix.F_SETLEASE, unix.F_UNLCK); err != nil {
			t.Fatal(err)
		}
	}
}

// A file under a lease another program holds (a Samba oplock, an NFS
// delegation) is waited for, as a plain open waits, not refused because
// the open that guards against FIFOs does not block.
func TestKeyDir_AFileUnderALeaseIsWaitedForNotRefused(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir)
	want := keyDirOnly(t, dir)
	broken, release := lease(t, filepath.Join(dir, "Cargo.lock"))
	type result struct {
		k   ArchiveKey
		err error
	}
	done := make(chan result, 1)
	go func() {
		k, err := KeyDir(dir, spec())
		done <- result{k, err}
	}()
	var r result
	select {
	case r = <-done: // not waited for
	case <-broken: // the kernel asks the holder to let go
		release()
		r = <-done
	}
	if r.err != nil || r.k.Key != want.Key {
		t.Errorf("KeyDir under a lease: %v (key %s, want %s)", r.err, r.k.Key, want.Key)
	}
}

// A leased file is waited for only through procfs, whose name for a
// descriptor opens that descriptor's inode. Where /proc is something else
// (a directory of links to other files, FIFOs) the wait is refused rather
// than read through it or blocked on it.
func TestKeyDir_ALeasedFileIsNeverReadThroughAProcThatIsNotProcfs(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir)
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("secret"), 0o644)
	fake := t.TempDir()
	for i := range 1024 {
		os.Symlink(secret, filepath.Join(fake, fmt.Sprint(i)))
	}
	defer func(old string) { procFD = old }(procFD)
	procFD = fake
	_, release := lease(t, filepath.Join(dir, "Cargo.lock"))
	defer release()
	k, err := KeyDir(dir, spec())
	if !errors.Is(err, errLeaseNoProc) {
		t.Errorf("KeyDir through a fake /proc: %v (key %s), want the wait refused", err, k.Key)
	}
}

// What the reopen of a leased file opens must be the inode the walk held:
// anything else (here another process's descriptor of another file under
// the same number) is ErrChanged, never hashed.
func TestKeyDir_ALeasedFileIsReadOnlyAsTheInodeItHeld(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir)
	secret, err := os.Open(os.Args[0]) // any other file
	if err != nil {
		t.Fatal(err)
	}
	defer secret.Close()
	other := exec.Command("cat") // holds the other file under every low number
	for range 1000 {
		other.ExtraFiles = append(other.ExtraFiles, secret)
	}
	stdin, err := other.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Start(); err != nil {
		t.Skipf("no process to hold the other file: %v", err)
	}
	defer func() { stdin.Close(); other.Wait() }()
	defer func(old string) { procFD = old }(procFD)
	procFD = fmt.Sprintf("/proc/%d/fd", other.Process.Pid)
	_, release := lease(t, filepath.Join(dir, "Cargo.lock"))
	defer release()
	if k, err := KeyDir(dir, spec()); !errors.Is(err, ErrChanged) {
		t.Errorf("KeyDir reopening through another process's descriptor: %v (key %s), want ErrChanged", err, k.Key)
	}
}

// openat resolves each name relative to its directory, so a path longer
// than the system's limit (PATH_MAX) is keyed like any other.
func TestKeyDir_KeysPathsLongerThanTheSystemLimit(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir)
	rel := "crates/a/src"
	for range 20 {
		rel += "/" + strings.Repeat("d", 250)
	}
	fd, err := unix.Open(filepath.Join(dir, "crates/a/src"), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		unix.Mkdirat(fd, strings.Repeat("d", 250), 0o755)
		next, err := unix.Openat(fd, strings.Repeat("d", 250), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	file, err := unix.Openat(fd, "m.rs", unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
	unix.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	unix.Write(file, []byte("deep"))
	unix.Close(file)
	k := keyDirOnly(t, dir)
	sum := sha256.Sum256([]byte("deep"))
	if !slices.Contains(k.Records, Record{Path: rel + "/m.rs", Mode: "100644", Digest: hex.EncodeToString(sum[:])}) {
		t.Errorf("the deep file is not among the records")
	}
}

// An empty directory name is refused, not taken for the working directory
// or for a missing one.
func TestKeyDir_AnEmptyDirectoryNameIsRefused(t *testing.T) {
	if _, err := KeyDir("", spec()); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("KeyDir(\"\"): %v, want fs.ErrInvalid", err)
	}
}

// Listable but not searchable, a directory fails Key's walk at the first
// covered file it stats there, before any later listing and whatever a
// worker found: KeyDir fails there too, with the same kind.
func TestKeyDir_ADirectoryListedButNotSearchedFailsTheWalkAsForKey(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	dir := t.TempDir()
	tree(t, dir)
	os.Remove(filepath.Join(dir, "Cargo.lock"))
	unix.Mkfifo(filepath.Join(dir, "Cargo.lock"), 0o644)      // a worker's error, earlier
	os.WriteFile(filepath.Join(dir, "zz\xff.rs"), nil, 0o644) // a listing's error, later
	src := filepath.Join(dir, "crates/a/src")
	os.Chmod(src, 0o644)
	defer os.Chmod(src, 0o755)
	for range 20 {
		_, want := Key(os.DirFS(dir), spec())
		_, got := KeyDir(dir, spec())
		if !errors.Is(want, fs.ErrPermission) || !errors.Is(got, fs.ErrPermission) {
			t.Fatalf("Key: %v; KeyDir: %v; want ErrPermission from both", want, got)
		}
	}
}

// The walk's first error is fs.WalkDir's first: a directory is listed
// when its name comes, before the files whose names sort after it.
func TestKeyDir_TheFirstErrorIsTheFirstInNameOrder(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	dir := t.TempDir()
	tree(t, dir)
	os.MkdirAll(filepath.Join(dir, "src/a"), 0o755)
	os.WriteFile(filepath.Join(dir, "src/a/m.rs"), nil, 0o644)
	os.WriteFile(filepath.Join(dir, "src/b\xff.rs"), nil, 0o644) // after a/
	os.Chmod(filepath.Join(dir, "src/a"), 0)
	defer os.Chmod(filepath.Join(dir, "src/a"), 0o755)
	_, want := Key(os.DirFS(dir), spec())
	_, got := KeyDir(dir, spec())
	if !errors.Is(want, fs.ErrPermission) || !errors.Is(got, fs.ErrPermission) {
		t.Errorf("Key: %v; KeyDir: %v; want ErrPermission from both", want, got)
	}
}

// unprivileged reports whether the calling test is to run here: as root,
// whom no mode stops, it runs the test again in a child as uid 65534
// (from a copy of this binary that user can run) and reports false.
func unprivileged(t *testing.T) bool {
	t.Helper()
	if os.Geteuid() != 0 {
		return true
	}
	bin, err := os.MkdirTemp("", "keydir-user")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(bin)
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(bin, "cachetrust.test")
	if err := os.WriteFile(exe, self, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(bin, 0o755)
	cmd := exec.Command(exe, "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Dir = bin
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("as uid 65534: %v\n%s", err, out)
	}
	return false
}

func keyDirOnly(t *testing.T, dir string) ArchiveKey {
	t.Helper()
	k, err := KeyDir(dir, spec())
	if err != nil {
		t.Fatal(err)
	}
	return k
}
