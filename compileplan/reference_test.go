package compileplan

// RestoreCheckpoint as it was before it cached directory handles (commit
// aef5374, when it was in package partition), kept as the reference the
// fuzz targets compare the new one with: same restored tree, an error for
// the same inputs.

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"time"
)

// refRestoreCheckpoint is RestoreCheckpoint as it was.
func refRestoreCheckpoint(r io.Reader, dir string) (CheckpointStats, error) {
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
		if err := refRestoreEntry(root, made, name, h, tr); err != nil {
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
			return st, fmt.Errorf("compileplan: restore %s: %w", d.name, err)
		}
	}
	return st, nil
}

func refRestoreEntry(root *os.Root, made map[string]bool, name string, h *tar.Header, body io.Reader) error {
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
