package compileplan

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// ErrCheckpoint is matched by every checkpoint refusal: an entry that would
// land outside the restore directory, a kind of file a source tree does not
// need, or a tar stream that is not one.
var ErrCheckpoint = errors.New("compileplan: bad checkpoint")

// CheckpointStats counts what a checkpoint holds.
type CheckpointStats struct {
	Files    int       `json:"files"`
	Dirs     int       `json:"dirs"`
	Symlinks int       `json:"symlinks"`
	Bytes    int64     `json:"bytes"`  // regular files' contents
	Newest   time.Time `json:"newest"` // the latest modification time
}

func (s *CheckpointStats) add(h *tar.Header) {
	switch h.Typeflag {
	case tar.TypeDir:
		s.Dirs++
	case tar.TypeSymlink:
		s.Symlinks++
	default:
		s.Files++
		s.Bytes += h.Size
	}
	if h.ModTime.After(s.Newest) {
		s.Newest = h.ModTime
	}
}

// WriteCheckpoint writes the whole tree at root (sources and build state)
// to w as a PAX tar, for the next link of a sequential checkpoint chain
// (the compile-sharding ADR: "the ENTIRE source/ tree ... is tarred ...
// PAX format to preserve nanosecond mtimes, because ninja's restat check
// breaks on re-cloned sources"). The GNU and ustar formats keep whole
// seconds, so a restored tree would look older or newer than its build
// log and ninja would rebuild; PAX keeps every modification time to the
// nanosecond. Entries are in lexical order with no owners or access
// times, so the same tree gives the same bytes. Regular files, directories
// and symlinks are kept; anything else (sockets, devices) is an error.
func WriteCheckpoint(w io.Writer, root string) (CheckpointStats, error) {
	var st CheckpointStats
	tw := tar.NewWriter(w)
	buf := make([]byte, copyBufSize)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		case !info.Mode().IsRegular() && !info.IsDir():
			return fmt.Errorf("%w: %s is a %s, which a checkpoint does not carry", ErrCheckpoint, p, info.Mode().Type())
		}
		h, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if info.IsDir() {
			h.Name += "/"
		}
		h.Format = tar.FormatPAX
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		h.AccessTime, h.ChangeTime = time.Time{}, time.Time{}
		h.PAXRecords = nil
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		st.add(h)
		if !info.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		// onlyReader hides os.File's WriteTo, which would copy through a
		// fresh 32 KiB buffer for every file.
		if _, err := io.CopyBuffer(tw, onlyReader{f}, buf); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		return nil
	})
	if err == nil && st == (CheckpointStats{}) {
		err = fmt.Errorf("%w: the tree is empty: nothing to resume from", ErrCheckpoint)
	}
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		return st, fmt.Errorf("compileplan: checkpoint of %s: %w", root, err)
	}
	return st, nil
}

// RestoreCheckpoint extracts a checkpoint written by WriteCheckpoint into
// dir, which must exist, overwriting what is there, and gives every file
// and directory the modification time it had, to the nanosecond (a
// directory's last, since filling it changes it). The checkpoint comes
// from an artifact, so it is outside input: an entry whose name or path
// would leave dir (an absolute name, "..", or through a symlink the
// checkpoint itself placed) is refused with ErrCheckpoint, as is any entry
// that is not a regular file, directory or symlink.
func RestoreCheckpoint(r io.Reader, dir string) (CheckpointStats, error) {
	var st CheckpointStats
	root, err := os.OpenRoot(dir)
	if err != nil {
		return st, fmt.Errorf("compileplan: restore into %s: %w", dir, err)
	}
	defer root.Close()
	type stamp struct {
		name  string
		mode  fs.FileMode
		mtime time.Time
	}
	var dirs []stamp
	rs := &restorer{root: root, made: map[string]bool{}, buf: make([]byte, copyBufSize)}
	defer rs.close()
	// One goroutine reads the checkpoint ahead (archive/tar's parsing is a
	// third of a restore's time), this one restores its entries in order.
	tr := tar.NewReader(r)
	rd := newRestoreReader(tr, dir)
	go rd.run()
	var failed error
	var br bytes.Reader
	for b := range rd.batches {
		for i := range b.items {
			it := &b.items[i]
			if failed == nil {
				failed = func() error {
					if it.err != nil {
						return it.err
					}
					h := it.h
					var body io.Reader = tr
					if !it.stream {
						br.Reset(it.body)
						body = &br
						if it.readErr != nil {
							body = io.MultiReader(&br, errReader{it.readErr})
						}
					}
					if err := rs.entry(it.name, h, body); err != nil {
						return fmt.Errorf("%w: entry %q: %v", ErrCheckpoint, h.Name, err)
					}
					st.add(h)
					if h.Typeflag == tar.TypeDir {
						dirs = append(dirs, stamp{it.name, fs.FileMode(h.Mode).Perm(), h.ModTime})
					}
					return nil
				}()
				if failed != nil {
					rd.failed.Store(true)
				}
			}
			if it.stream {
				rd.streamed <- struct{}{}
			}
		}
		rd.free <- b
	}
	if failed != nil {
		return st, failed
	}
	// Deepest first, so setting a parent's mode and time comes after its
	// children are in place.
	slices.SortStableFunc(dirs, func(a, b stamp) int { return strings.Count(b.name, "/") - strings.Count(a.name, "/") })
	for _, d := range dirs {
		if err := errors.Join(root.Chmod(d.name, d.mode), root.Chtimes(d.name, d.mtime, d.mtime)); err != nil {
			return st, fmt.Errorf("compileplan: restore %s: %w", d.name, err)
		}
	}
	return st, nil
}

// restoreReader reads a checkpoint's entries ahead of their restore, in
// batches: the headers, checked, and the regular files' contents, up to
// restoreInline bytes each, in the batch's buffer. A larger file is read
// by the restore itself, straight from the tar reader, while restoreReader
// waits (streamed). A batch's last item may be the error that ends the
// checkpoint, which the restore reports when it gets there: after every
// entry before it, as when reading and restoring took turns.
type restoreReader struct {
	tr       *tar.Reader
	dir      string
	batches  chan *restoreBatch // to the restore, in order
	free     chan *restoreBatch // back, to be filled again
	streamed chan struct{}      // the restore has read a streamed file
	failed   atomic.Bool        // the restore failed: stop reading
}

type restoreBatch struct {
	items []restoreItem
	buf   []byte
}

type restoreItem struct {
	h       *tar.Header
	name    string // h.Name, checked, without a trailing slash
	body    []byte // a regular file's contents, unless streamed
	readErr error  // what cut body short
	stream  bool   // the restore reads the contents from the tar reader
	err     error  // not an entry: the checkpoint's error
}

const (
	restoreBatchBytes = 4 << 20
	restoreBatchItems = 512
	restoreInline     = 1 << 20
	restoreBatches    = 3
)

func newRestoreReader(tr *tar.Reader, dir string) *restoreReader {
	rd := &restoreReader{tr: tr, dir: dir, batches: make(chan *restoreBatch, restoreBatches), free: make(chan *restoreBatch, restoreBatches), streamed: make(chan struct{})}
	for range restoreBatches {
		rd.free <- &restoreBatch{items: make([]restoreItem, 0, restoreBatchItems)}
	}
	return rd
}

func (rd *restoreReader) run() {
	defer close(rd.batches)
	b := <-rd.free
	bufSize := 64 << 10 // doubled, up to restoreBatchBytes, each time a buffer fills
	send := func() {
		rd.batches <- b
		b = <-rd.free
		b.items, b.buf = b.items[:0], b.buf[:0]
		if cap(b.buf) < bufSize {
			b.buf = make([]byte, 0, bufSize)
		}
	}
	for n := 0; ; n++ {
		it := rd.next(n)
		if it.err == nil && it.h == nil { // the end
			break
		}
		if it.h != nil && it.h.Typeflag == tar.TypeReg && !it.stream {
			if size := int(it.h.Size); cap(b.buf)-len(b.buf) < size {
				bufSize = min(max(2*bufSize, size), restoreBatchBytes)
				send()
			}
			at := len(b.buf)
			b.buf = b.buf[:at+int(it.h.Size)]
			k, err := io.ReadFull(rd.tr, b.buf[at:])
			it.body, it.readErr = b.buf[at:at+k], err
		}
		b.items = append(b.items, it)
		switch {
		case it.stream:
			send()
			<-rd.streamed
		case it.err != nil || it.readErr != nil:
			rd.batches <- b
			return
		case len(b.items) == cap(b.items):
			send()
		}
		if rd.failed.Load() {
			break
		}
	}
	if len(b.items) > 0 {
		rd.batches <- b
	}
}

// next reads the nth entry's header and checks it: an item with neither
// header nor error is the end.
func (rd *restoreReader) next(n int) restoreItem {
	h, err := rd.tr.Next()
	if err == io.EOF && n == 0 {
		return restoreItem{err: fmt.Errorf("%w: it holds no entries: an empty or truncated artifact", ErrCheckpoint)}
	}
	if err == io.EOF {
		return restoreItem{}
	}
	if err != nil {
		return restoreItem{err: fmt.Errorf("%w: not a checkpoint tar: %v", ErrCheckpoint, err)}
	}
	if sparse(h) {
		// A sparse entry expands to its declared size on disk: a few
		// bytes of artifact could fill the runner's disk.
		return restoreItem{err: fmt.Errorf("%w: entry %q is a sparse file, which WriteCheckpoint never writes", ErrCheckpoint, h.Name)}
	}
	name := strings.TrimSuffix(h.Name, "/")
	if name == "" || path.IsAbs(name) || !fs.ValidPath(name) {
		return restoreItem{err: fmt.Errorf("%w: entry %q would land outside %s", ErrCheckpoint, h.Name, rd.dir)}
	}
	return restoreItem{h: h, name: name, stream: h.Typeflag == tar.TypeReg && (h.Size > restoreInline || h.Size < 0)}
}

// errReader fails with err.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// copyBufSize is the buffer WriteCheckpoint and RestoreCheckpoint copy
// file contents through, one per call.
const copyBufSize = 256 << 10

// onlyReader and onlyWriter are a reader and a writer and nothing else:
// io.CopyBuffer then uses the buffer it is given, where an os.File would
// copy through a fresh one of its own.
type (
	onlyReader struct{ io.Reader }
	onlyWriter struct{ io.Writer }
)

// restorer restores the entries of one checkpoint. Every path is resolved
// inside root (os.Root: no "..", no symlink that leads out of it). Regular
// files, almost all of a checkpoint, are created where the platform allows
// (dirCache, Linux) relative to their directory's handle, opened through
// root once for all the files in it, with one system call each to create,
// write, set the mode and the times, and close. Such a file is created new
// (O_CREAT|O_EXCL|O_NOFOLLOW: never over anything, never through a symlink
// in its place); when something is already there, it is replaced through
// root as before. Every entry that removes what is at a path first drops
// the handles kept for it and below it.
type restorer struct {
	root *os.Root
	made map[string]bool // directories this restore has made
	buf  []byte
	dirs dirCache
}

func (rs *restorer) close() { rs.dirs.close() }

// replaced is called before anything at name is removed: a directory
// handle kept for name or below it would be stale.
func (rs *restorer) replaced(name string) { rs.dirs.forget(name) }

func (rs *restorer) entry(name string, h *tar.Header, body io.Reader) error {
	root := rs.root
	parent := path.Dir(name)
	if parent != "." && !rs.made[parent] {
		if err := root.MkdirAll(parent, 0o755); err != nil {
			return err
		}
		rs.made[parent] = true
	}
	mode := fs.FileMode(h.Mode).Perm()
	switch h.Typeflag {
	case tar.TypeDir:
		if err := root.MkdirAll(name, 0o755); err != nil {
			return err
		}
		rs.made[name] = true
		return root.Chmod(name, mode|0o700) // keep it writable while filling it
	case tar.TypeSymlink:
		rs.replaced(name)
		if err := root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return root.Symlink(h.Linkname, name)
	case tar.TypeReg:
		if done, err := rs.createFile(parent, path.Base(name), mode, h.ModTime, body); done || err != nil {
			return err
		}
		// Something is there: an existing symlink in its place is
		// replaced, never written through.
		if fi, err := root.Lstat(name); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			rs.replaced(name)
			if err := root.Remove(name); err != nil {
				return err
			}
		}
		f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		_, err = io.CopyBuffer(onlyWriter{f}, onlyReader{body}, rs.buf)
		if err == nil {
			err = f.Chmod(mode)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = root.Chtimes(name, h.ModTime, h.ModTime)
		}
		return err
	}
	return fmt.Errorf("type %q is not a regular file, directory or symlink", h.Typeflag)
}

// sparse says whether a header is one of the GNU sparse formats (the old
// GNU type, or the GNU.sparse.* PAX records), which archive/tar expands.
func sparse(h *tar.Header) bool {
	if h.Typeflag == tar.TypeGNUSparse {
		return true
	}
	for k := range h.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}
