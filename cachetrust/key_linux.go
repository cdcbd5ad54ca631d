//go:build linux

package cachetrust

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// A file costs the kernel more here than hashing 20 KiB does, so the walk
// below spends as few system calls per file as it can: a directory is
// opened once, relative to its parent, and listed once; each file is
// opened relative to that directory (no path lookup from the root), its
// mode and size come from fstat on the open descriptor (no lstat of the
// path), and a read that returns the whole file as fstat sized it ends
// the file without the read that would return 0. Workers hash files in
// batches while the walk goes on.

// openDir is a directory held open while its files are hashed. The walk
// holds one reference while it lists and descends it, each batch of its
// files another; the last to let go closes it.
type openDir struct {
	f    *os.File // owns fd; held so that no finalizer closes fd early
	fd   int
	refs atomic.Int32
}

func (d *openDir) release() {
	if d.refs.Add(-1) == 0 {
		d.f.Close()
	}
}

// dirBatch is up to batchFiles covered files of one directory.
type dirBatch struct {
	dir   *openDir
	rel   string   // the directory's path under the root with a slash, "" for the root
	paths []string // the files' paths under the root: rel and a name
	types []fs.FileMode
}

const batchFiles = 64

// noFollow opens a file the walk found as it found it: never through a
// symlink put in its place, never waiting on a FIFO. dirFlags opens a
// directory so.
const (
	noFollow = unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_NOCTTY
	dirFlags = unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_DIRECTORY
)

func walkAndHashDir(root string, spec KeySpec) ([]string, []Record, error) {
	rootFD, err := openat(unix.AT_FDCWD, root, dirFlags&^unix.O_NOFOLLOW)
	if err != nil {
		return nil, nil, fmt.Errorf("cachetrust: walk: %w", openError("open", root, err))
	}
	pool := &hashPool[dirBatch]{}
	// A few batches per core keep the workers fed; each holds its
	// directory open.
	pool.start(4*runtime.GOMAXPROCS(0), func(hr *hasher, b dirBatch, mine []Record) ([]Record, string, error) {
		defer b.dir.release()
		for i, path := range b.paths {
			name := path[len(b.rel):]
			if pool.skip(path) {
				break
			}
			r, err := hr.hashAt(b.dir.fd, name, path, b.types[i])
			if err != nil {
				return mine, path, err
			}
			mine = append(mine, r)
		}
		return mine, "", nil
	})
	w := dirWalker{spec: spec, batches: pool.jobs}
	walkErr := w.walk(newOpenDir(rootFD, root), root, ".", "")
	records, err := pool.wait()
	if walkErr != nil {
		return nil, nil, walkError(walkErr)
	}
	if err != nil {
		return nil, nil, err
	}
	return w.paths, records, nil
}

// openError is the error for a failed open or listing of path (under the
// root), with what to do where the process ran out of descriptors.
func openError(op, path string, err error) error {
	pe := &fs.PathError{Op: op, Path: path, Err: err}
	if errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) {
		return fmt.Errorf("%w: KeyDir holds a descriptor per directory level and per batch queued to its workers; raise the limit (ulimit -n) or key with Key", pe)
	}
	return pe
}

func newOpenDir(fd int, path string) *openDir {
	d := &openDir{f: os.NewFile(uintptr(fd), path), fd: fd}
	d.refs.Store(1)
	return d
}

type dirWalker struct {
	spec    KeySpec
	batches chan<- dirBatch
	paths   []string // the covered paths, in walk order
}

// walk lists dir (at full; name under the root, "." for the root; rel is
// name with a slash, "" for the root), hands its covered files to the
// workers and descends its directories but .git, in fs.WalkDir's order
// over os.DirFS, so that a listing's first error is Key's. It lets go of
// dir's reference when done. It walks on after a worker fails, so that a
// listing's error is always the one reported.
func (w *dirWalker) walk(dir *openDir, full, name, rel string) error {
	defer dir.release()
	// ReadDir reads the types getdents gives, and stats an entry only
	// where the file system gives none.
	entries, err := dir.f.ReadDir(-1)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return openError("readdir", name, err)
	}
	slices.SortFunc(entries, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	var b dirBatch
	send := func() {
		if len(b.paths) == 0 {
			return
		}
		dir.refs.Add(1)
		b.dir, b.rel = dir, rel
		w.batches <- b
		b = dirBatch{}
	}
	defer send()
	searched := false
	for _, e := range entries {
		entry, typ := e.Name(), e.Type()
		path := rel + entry
		if typ.IsDir() {
			if entry == ".git" {
				continue
			}
			send() // the files before it, before what is under it
			fd, err := openat(dir.fd, entry, dirFlags)
			if err == unix.ELOOP || err == unix.ENOTDIR {
				return changed(path, "a directory", err)
			}
			if err != nil {
				return openError("open", path, err)
			}
			// The full path names the directory for ReadDir, which stats
			// through it where getdents gives no type.
			if err := w.walk(newOpenDir(fd, full+"/"+entry), full+"/"+entry, path, path+"/"); err != nil {
				return err
			}
			continue
		}
		if !w.spec.Covers(path) {
			continue
		}
		if !utf8.ValidString(path) {
			return notUTF8(path)
		}
		if typ.IsRegular() && !searched {
			// Key stats each covered file as it lists it; in a directory
			// it may list but not search, that fails the walk there.
			if err := unix.Faccessat(dir.fd, ".", unix.X_OK, unix.AT_EACCESS); err == unix.EACCES {
				return openError("lstat", path, err)
			}
			searched = true
		}
		w.paths = append(w.paths, path)
		b.paths = append(b.paths, path)
		b.types = append(b.types, typ)
		if len(b.paths) == batchFiles {
			send()
		}
	}
	return nil
}

// hashAt is hash for the file name in the directory dirfd, found by the
// walk with type typ.
func (hr *hasher) hashAt(dirfd int, name, path string, typ fs.FileMode) (Record, error) {
	h := hr.h
	h.Reset()
	r := Record{Path: path, Mode: "100644"}
	switch {
	case typ&fs.ModeSymlink != 0:
		target, err := readlinkat(dirfd, name, hr.buf)
		if err == unix.EINVAL {
			return Record{}, changed(path, "a link", err)
		}
		if err != nil {
			return Record{}, fmt.Errorf("cachetrust: read link %s: %w", path, err)
		}
		r.Mode = "120000"
		h.Write(target)
	case !typ.IsRegular():
		return Record{}, fmt.Errorf("%w: %s (mode %s): remove it from the tree or exclude it in the key spec", ErrNotRegular, path, typ)
	default:
		fd, err := openRegular(dirfd, name)
		if err == unix.ELOOP || err == unix.ENXIO || err == errNotRegularNow {
			// A link, a socket, or (seen under a lease) anything else.
			return Record{}, changed(path, "a file", err)
		}
		if err != nil {
			return Record{}, fmt.Errorf("cachetrust: %w", openError("open", path, err))
		}
		err = hr.hashFD(fd, path, &r)
		unix.Close(fd)
		if err != nil {
			return Record{}, err
		}
	}
	var sum [sha256.Size]byte
	r.Digest = hex.EncodeToString(h.Sum(sum[:0]))
	return r, nil
}

// hashFD hashes the open regular file fd into hr.h and sets r's mode.
func (hr *hasher) hashFD(fd int, path string, r *Record) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("cachetrust: %w", &fs.PathError{Op: "fstat", Path: path, Err: err})
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		// A FIFO, a device or a directory since the walk listed it.
		return changed(path, "a file", errNotRegularNow)
	}
	if st.Mode&0o111 != 0 {
		r.Mode = "100755"
	}
	var total int64
	for {
		n, err := unix.Read(fd, hr.buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("cachetrust: read %s: %w", path, err)
		}
		if n == 0 {
			return nil
		}
		hr.h.Write(hr.buf[:n])
		total += int64(n)
		if n < len(hr.buf) && total == st.Size {
			// A short read that ends the file where fstat did: the
			// read after it would return 0.
			return nil
		}
	}
}

// changed is the error for path, listed as was, found otherwise.
func changed(path, was string, err error) error {
	return fmt.Errorf("%w: %s was %s when the tree was listed and is not now: key a tree nothing writes to (%w)", ErrChanged, path, was, err)
}

var errNotRegularNow = errors.New("not a regular file now")

// openRegular opens the regular file name in dirfd for reading, never
// through a link and never waiting on a FIFO put in its place. A file
// under a lease another program holds (Samba's oplocks, an NFS server's
// delegations) refuses such an open until the lease is broken; it is then
// opened again through procfs's name for a descriptor that holds its
// inode and nothing else, which waits for the lease as a plain open
// would, and what that opens must be the held inode.
func openRegular(dirfd int, name string) (int, error) {
	fd, err := openat(dirfd, name, noFollow)
	if err != unix.EAGAIN {
		return fd, err
	}
	held, err := openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC)
	if err != nil {
		return -1, err
	}
	defer unix.Close(held)
	var want unix.Stat_t
	if err := unix.Fstat(held, &want); err != nil {
		return -1, err
	}
	if want.Mode&unix.S_IFMT != unix.S_IFREG {
		return -1, errNotRegularNow
	}
	var proc unix.Statfs_t
	if err := unix.Statfs(procFD, &proc); err != nil || proc.Type != unix.PROC_SUPER_MAGIC {
		return -1, errLeaseNoProc
	}
	fd, err = openat(unix.AT_FDCWD, procFD+"/"+strconv.Itoa(held), unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOCTTY)
	if err != nil {
		return -1, err
	}
	var got unix.Stat_t
	if err := unix.Fstat(fd, &got); err != nil || got.Dev != want.Dev || got.Ino != want.Ino {
		unix.Close(fd)
		return -1, errNotRegularNow
	}
	return fd, nil
}

// procFD is procfs's directory of this process's descriptors.
var procFD = "/proc/self/fd"

// errLeaseNoProc is the error for a file under a lease where procfs is
// not mounted at /proc: it cannot be waited for without risking a FIFO.
var errLeaseNoProc = errors.New("another program holds a lease on it (Samba, NFS) and, with no procfs at /proc, it cannot be waited for safely: mount /proc, or key the tree when nothing holds it")

func openat(dirfd int, name string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// readlinkat reads the link's target into buf, which is larger than any
// target Linux stores (PATH_MAX).
func readlinkat(dirfd int, name string, buf []byte) ([]byte, error) {
	for {
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == len(buf) {
			return nil, unix.ENAMETOOLONG
		}
		return buf[:n], nil
	}
}
