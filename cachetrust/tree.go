package cachetrust

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// ErrIncompleteTree is matched by CheckTree's error: a restored or freshly
// installed runtime tree that must not be used or published.
var ErrIncompleteTree = errors.New("cachetrust: incomplete runtime tree")

// TreeReport says what CheckTree looked at.
type TreeReport struct {
	Files    int            `json:"files"`
	Symlinks int            `json:"symlinks"`
	Required map[string]int `json:"required"` // pattern -> matching non-empty files
}

// CheckTree decides whether a runtime tree restored from a cache (or just
// installed) is complete, so that a hit message is never evidence (the
// cache-trust seed: "The installer requires a nonempty, resolvable
// libcutensor.so.2", "Hosted preparation rejects and rebuilds restored
// trees missing cuFFT", and "A tree is marked complete only after its
// library links resolve"):
//
//   - every symlink in the tree resolves to an existing file inside the
//     tree (soname links stay links to one physical copy; a dangling link,
//     or one that leaves the tree, is a partial or foreign restore);
//   - every required doublestar pattern (relative to root) matches at least
//     one file, and every match resolves to a non-empty regular file.
//
// Every problem is reported, joined, each matching ErrIncompleteTree.
func CheckTree(root string, required []string) (TreeReport, error) {
	rep := TreeReport{Required: map[string]int{}}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return rep, fmt.Errorf("%w: %s: %w", ErrIncompleteTree, root, err)
	}
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s", ErrIncompleteTree, fmt.Sprintf(format, args...)))
	}
	err = filepath.WalkDir(realRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(realRoot, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			rep.Symlinks++
			target, err := filepath.EvalSymlinks(p)
			switch {
			case err != nil:
				link, _ := os.Readlink(p)
				bad("%s -> %s does not resolve", filepath.ToSlash(rel), link)
			case !within(realRoot, target):
				bad("%s resolves to %s, outside the tree", filepath.ToSlash(rel), target)
			}
		case d.Type().IsRegular():
			rep.Files++
		}
		return nil
	})
	if err != nil {
		return rep, fmt.Errorf("%w: %s: %w", ErrIncompleteTree, root, err)
	}
	fsys := os.DirFS(realRoot)
	for _, pattern := range required {
		if !doublestar.ValidatePattern(pattern) {
			bad("required pattern %q is not a valid glob", pattern)
			continue
		}
		matches, err := doublestar.Glob(fsys, pattern)
		if err != nil {
			bad("required %s: %v", pattern, err)
			continue
		}
		for _, m := range matches {
			target, err := filepath.EvalSymlinks(filepath.Join(realRoot, filepath.FromSlash(m)))
			if err != nil || !within(realRoot, target) {
				continue // reported above as a link that does not resolve
			}
			info, err := os.Stat(target)
			switch {
			case err != nil:
				bad("required %s: %v", m, err)
			case info.IsDir():
				// A directory matching a library pattern is not a library.
			case !info.Mode().IsRegular() || info.Size() == 0:
				bad("required %s (%s) is empty or not a regular file", m, pattern)
			default:
				rep.Required[pattern]++
			}
		}
		if rep.Required[pattern] == 0 {
			bad("no non-empty file matches the required %s", pattern)
		}
	}
	return rep, errors.Join(errs...)
}

// within says whether path lies inside (or is) dir; both are resolved.
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}
