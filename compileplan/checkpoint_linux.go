//go:build linux

package compileplan

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// dirCache keeps open the directories files were last created in, so that
// each is opened (through the root, checked) once, not once per file: a
// checkpoint lists a directory's files one after another.
type dirCache struct {
	open []cachedDir // most recently used first
}

type cachedDir struct {
	name string // "." for the root
	f    *os.File
	fd   int
}

const dirCacheSize = 8

// fd is the descriptor of the directory name, opened through root.
func (c *dirCache) fd(root *os.Root, name string) (int, error) {
	for i, d := range c.open {
		if d.name == name {
			copy(c.open[1:i+1], c.open[:i])
			c.open[0] = d
			return d.fd, nil
		}
	}
	f, err := root.Open(name)
	if err != nil {
		return -1, err
	}
	if len(c.open) == dirCacheSize {
		c.open[len(c.open)-1].f.Close()
		c.open = c.open[:len(c.open)-1]
	}
	d := cachedDir{name: name, f: f, fd: int(f.Fd())}
	c.open = append([]cachedDir{d}, c.open...)
	return d.fd, nil
}

// forget closes the handles for name and the directories below it.
func (c *dirCache) forget(name string) {
	kept := c.open[:0]
	for _, d := range c.open {
		if d.name == name || strings.HasPrefix(d.name, name+"/") {
			d.f.Close()
			continue
		}
		kept = append(kept, d)
	}
	c.open = kept
}

func (c *dirCache) close() {
	for _, d := range c.open {
		d.f.Close()
	}
	c.open = nil
}

// createFile creates the regular file base in the directory parent, which
// must not exist yet, writes body to it and gives it mode and mtime (its
// access time too, as Chtimes did). done is false, with nothing read from
// body, when something is already there: the caller then replaces it.
func (rs *restorer) createFile(parent, base string, mode fs.FileMode, mtime time.Time, body io.Reader) (done bool, err error) {
	dirfd, err := rs.dirs.fd(rs.root, parent)
	if err != nil {
		return false, err
	}
	var fd int
	for {
		// O_EXCL: never through a symlink in its place, or over a file.
		fd, err = syscall.Openat(dirfd, base, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
		if err != syscall.EINTR {
			break
		}
	}
	if err == syscall.EEXIST {
		return false, nil
	}
	if err != nil {
		return false, &fs.PathError{Op: "openat", Path: base, Err: err}
	}
	err = writeAll(fd, body, rs.buf)
	if err == nil {
		if e := ignoringEINTR(func() error { return syscall.Fchmod(fd, uint32(mode)) }); e != nil {
			err = &fs.PathError{Op: "fchmod", Path: base, Err: e}
		}
	}
	if err == nil {
		// As os.Chtimes: a zero time leaves the file's times as they are.
		t := syscall.Timespec{Sec: utimeOmit, Nsec: utimeOmit}
		if !mtime.IsZero() {
			t = syscall.NsecToTimespec(mtime.UnixNano())
		}
		ts := [2]syscall.Timespec{t, t}
		if e := ignoringEINTR(func() error { return futimens(fd, &ts) }); e != nil {
			err = &fs.PathError{Op: "utimensat", Path: base, Err: e}
		}
	}
	if cerr := syscall.Close(fd); err == nil && cerr != nil {
		err = &fs.PathError{Op: "close", Path: base, Err: cerr}
	}
	return true, err
}

// writeAll copies body to fd through buf.
func writeAll(fd int, body io.Reader, buf []byte) error {
	for {
		n, rerr := body.Read(buf)
		for p := buf[:n]; len(p) > 0; {
			w, err := syscall.Write(fd, p)
			if err == syscall.EINTR {
				continue
			}
			if err != nil {
				return &fs.PathError{Op: "write", Err: err}
			}
			p = p[w:]
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// utimeOmit is Linux's UTIME_OMIT: leave this time as it is.
const utimeOmit = (1 << 30) - 2

// futimens sets the access and modification times of fd (utimensat with
// no path), to the nanosecond.
func futimens(fd int, ts *[2]syscall.Timespec) error {
	_, _, errno := syscall.Syscall6(syscall.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(ts)), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

func ignoringEINTR(f func() error) error {
	for {
		if err := f(); !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
