package partition

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// ErrCheckpoint is matched by every checkpoint refusal: an entry that would
// land outside the restore directory, a kind of file a source tree does not
// need, or a tar stream that is not one.
var ErrCheckpoint = errors.New("partition: bad checkpoint")

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
		if _, err := io.Copy(tw, f); err != nil {
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
		return st, fmt.Errorf("partition: checkpoint of %s: %w", root, err)
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
		return st, fmt.Errorf("partition: restore into %s: %w", dir, err)
	}
	defer root.Close()
	type stamp struct {
		name  string
		mode  fs.FileMode
		mtime time.Time
	}
	var dirs []stamp
	made := map[string]bool{} // directories this restore has made
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF && st == (CheckpointStats{}) {
			return st, fmt.Errorf("%w: it holds no entries: an empty or truncated artifact", ErrCheckpoint)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return st, fmt.Errorf("%w: not a checkpoint tar: %v", ErrCheckpoint, err)
		}
		if sparse(h) {
			// A sparse entry expands to its declared size on disk: a few
			// bytes of artifact could fill the runner's disk.
			return st, fmt.Errorf("%w: entry %q is a sparse file, which WriteCheckpoint never writes", ErrCheckpoint, h.Name)
		}
		name := strings.TrimSuffix(h.Name, "/")
		if name == "" || path.IsAbs(name) || !fs.ValidPath(name) {
			return st, fmt.Errorf("%w: entry %q would land outside %s", ErrCheckpoint, h.Name, dir)
		}
		if err := restoreEntry(root, made, name, h, tr); err != nil {
			return st, fmt.Errorf("%w: entry %q: %v", ErrCheckpoint, h.Name, err)
		}
		st.add(h)
		if h.Typeflag == tar.TypeDir {
			dirs = append(dirs, stamp{name, fs.FileMode(h.Mode).Perm(), h.ModTime})
		}
	}
	// Deepest first, so setting a parent's mode and time comes after its
	// children are in place.
	slices.SortStableFunc(dirs, func(a, b stamp) int { return strings.Count(b.name, "/") - strings.Count(a.name, "/") })
	for _, d := range dirs {
		if err := errors.Join(root.Chmod(d.name, d.mode), root.Chtimes(d.name, d.mtime, d.mtime)); err != nil {
			return st, fmt.Errorf("partition: restore %s: %w", d.name, err)
		}
	}
	return st, nil
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

func restoreEntry(root *os.Root, made map[string]bool, name string, h *tar.Header, body io.Reader) error {
	if parent := path.Dir(name); parent != "." && !made[parent] {
		if err := root.MkdirAll(parent, 0o755); err != nil {
			return err
		}
		made[parent] = true
	}
	mode := fs.FileMode(h.Mode).Perm()
	switch h.Typeflag {
	case tar.TypeDir:
		if err := root.MkdirAll(name, 0o755); err != nil {
			return err
		}
		made[name] = true
		return root.Chmod(name, mode|0o700) // keep it writable while filling it
	case tar.TypeSymlink:
		if err := root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return root.Symlink(h.Linkname, name)
	case tar.TypeReg:
		// An existing symlink in its place is replaced, never written through.
		if fi, err := root.Lstat(name); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			if err := root.Remove(name); err != nil {
				return err
			}
		}
		f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, body)
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
