//go:build linux

package cachetrust

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"sync/atomic"

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
	rel   string // the directory's path under the root, "" for the root
	names []string
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
		return nil, nil, fmt.Errorf("cachetrust: walk: %w", &fs.PathError{Op: "open", Path: root, Err: err})
	}
	pool := &hashPool[dirBatch]{}
	pool.start(64, func(hr *hasher, b dirBatch, mine []Record) ([]Record, error) {
		defer b.dir.release()
		for i, name := range b.names {
			if pool.stopped() {
				break
			}
			r, err := hr.hashAt(b.dir.fd, name, b.rel+name, b.types[i])
			if err != nil {
				return mine, err
			}
			mine = append(mine, r)
		}
		return mine, nil
	})
	w := dirWalker{spec: spec, batches: pool.jobs, stopped: pool.stopped}
	walkErr := w.walk(newOpenDir(rootFD, root), root, "")
	records, err := pool.wait()
	if walkErr != nil {
		return nil, nil, fmt.Errorf("cachetrust: walk: %w", walkErr)
	}
	if err != nil {
		return nil, nil, err
	}
	return w.paths, records, nil
}

func newOpenDir(fd int, path string) *openDir {
	d := &openDir{f: os.NewFile(uintptr(fd), path), fd: fd}
	d.refs.Store(1)
	return d
}

type dirWalker struct {
	spec    KeySpec
	batches chan<- dirBatch
	stopped func() bool // whether a worker has failed
	paths   []string    // the covered paths, in walk order
}

// walk lists dir (at full, rel under the root), hands its covered files to
// the workers and descends its directories but .git, as fs.WalkDir over
// os.DirFS would. It lets go of dir's reference when done.
func (w *dirWalker) walk(dir *openDir, full, rel string) error {
	defer dir.release()
	// ReadDir reads the types getdents gives, and lstats (through full)
	// only where the file system gives none.
	entries, err := dir.f.ReadDir(-1)
	if err != nil {
		return err
	}
	var b dirBatch
	send := func() {
		if len(b.names) == 0 {
			return
		}
		dir.refs.Add(1)
		b.dir, b.rel = dir, rel
		w.batches <- b
		b = dirBatch{}
	}
	var subdirs []string
	for _, e := range entries {
		name, typ := e.Name(), e.Type()
		if typ.IsDir() {
			if name != ".git" {
				subdirs = append(subdirs, name)
			}
			continue
		}
		path := rel + name
		if !w.spec.Covers(path) {
			continue
		}
		w.paths = append(w.paths, path)
		b.names = append(b.names, name)
		b.types = append(b.types, typ)
		if len(b.names) == batchFiles {
			send()
		}
	}
	send()
	for _, name := range subdirs {
		if w.stopped() {
			return nil // the workers' error is the one to report
		}
		fd, err := openat(dir.fd, name, dirFlags)
		if err != nil {
			return &fs.PathError{Op: "open", Path: rel + name, Err: err}
		}
		if err := w.walk(newOpenDir(fd, full+"/"+name), full+"/"+name, rel+name+"/"); err != nil {
			return err
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
		if err != nil {
			return Record{}, fmt.Errorf("cachetrust: read link %s: %w", path, err)
		}
		r.Mode = "120000"
		h.Write(target)
	case !typ.IsRegular():
		return Record{}, fmt.Errorf("%w: %s (mode %s): remove it from the tree or exclude it in the key spec", ErrNotRegular, path, typ)
	default:
		fd, err := openat(dirfd, name, noFollow)
		if err != nil {
			return Record{}, fmt.Errorf("cachetrust: %w", &fs.PathError{Op: "open", Path: path, Err: err})
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
		// Replaced by something else since the walk listed it.
		return fmt.Errorf("%w: %s changed type while the key was computed", ErrNotRegular, path)
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
