package cachetrust

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/gpugate/gpugate/internal/pathutil"
)

// ErrIncompleteTree is matched by CheckTree's error: a restored or freshly
// installed runtime tree that must not be used or published.
var ErrIncompleteTree = errors.New("cachetrust: incomplete runtime tree")

// TreeRules says what a runtime tree must hold and what it must not.
type TreeRules struct {
	// Required doublestar patterns, relative to the tree's root: each
	// must match at least one file, and every match must resolve to a
	// non-empty regular file.
	Required []string `json:"required,omitempty"`
	// Excluded doublestar patterns nothing in the tree may match: what its
	// installer leaves out before the tree is cached, so that no restore
	// carries bytes the pod never uses. The default runtime trees exclude
	// static libraries, compiler binaries, driver stubs and cuTENSOR's
	// multi-GPU provider: **/*.a, bin/**, **/stubs/**, **/libcutensorMg*.
	Excluded []string `json:"excluded,omitempty"`
}

// TreeReport says what CheckTree looked at.
type TreeReport struct {
	Files    int            `json:"files"`
	Symlinks int            `json:"symlinks"`
	Required map[string]int `json:"required"` // pattern -> matching non-empty files
	// Copies lists shared libraries present more than once as regular
	// files with identical content (each group sorted): a soname link or
	// a lib/lib64 alias copied instead of kept a link. Not an error, but
	// every copy is cached and transferred again.
	Copies [][]string `json:"copies,omitempty"`
}

// CheckTree decides whether a runtime tree restored from a cache (or just
// installed) is complete, so that a hit message is never evidence: the
// installer requires a nonempty, resolvable libcutensor.so.2; hosted
// preparation rejects and rebuilds restored trees missing cuFFT; static
// archives and independent multi-GPU/MPI providers are excluded at
// installation, before cache publication; a tree is marked complete only
// after its library links resolve; and compiler binaries, static libraries
// and driver stubs are excluded:
//
//   - every symlink in the tree is relative and resolves to an existing
//     file inside the tree (soname links stay links to one physical copy;
//     a dangling link, or one that leaves the tree, is a partial or foreign
//     restore; an absolute one dangles once the tree is staged elsewhere);
//   - every rules.Required pattern matches at least one file, and every
//     match resolves to a non-empty regular file;
//   - nothing in the tree matches a rules.Excluded pattern;
//   - it holds at least one file, whatever is required.
//
// Every problem is reported, joined, each matching ErrIncompleteTree.
// Shared libraries stored twice are reported in TreeReport.Copies.
func CheckTree(root string, rules TreeRules) (TreeReport, error) {
	rep := TreeReport{Required: map[string]int{}}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return rep, fmt.Errorf("%w: %s: %w", ErrIncompleteTree, root, err)
	}
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s", ErrIncompleteTree, fmt.Sprintf(format, args...)))
	}
	var excluded []string
	for _, pattern := range rules.Excluded {
		if !doublestar.ValidatePattern(pattern) {
			bad("excluded pattern %q is not a valid glob", pattern)
			continue
		}
		excluded = append(excluded, pattern)
	}
	libs := map[int64][]string{} // size -> shared libraries (relative paths)
	err = filepath.WalkDir(realRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(realRoot, p)
		slashed := filepath.ToSlash(rel)
		if i := slices.IndexFunc(excluded, func(pattern string) bool { return rel != "." && doublestar.MatchUnvalidated(pattern, slashed) }); i >= 0 {
			bad("%s matches the excluded %s: the installer must leave it out before the tree is cached", slashed, excluded[i])
			if d.IsDir() {
				return fs.SkipDir // reported once, not file by file
			}
			return nil
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			rep.Symlinks++
			link, _ := os.Readlink(p)
			target, err := filepath.EvalSymlinks(p)
			switch {
			case err != nil:
				bad("%s -> %s does not resolve", slashed, link)
			case !pathutil.Within(realRoot, target):
				bad("%s resolves to %s, outside the tree", slashed, target)
			case filepath.IsAbs(link):
				bad("%s -> %s is an absolute link: the tree is restored and staged at other paths (the pod's), where it would dangle; make it relative", slashed, link)
			}
		case d.Type().IsRegular():
			rep.Files++
			if name := d.Name(); strings.HasSuffix(name, ".so") || strings.Contains(name, ".so.") {
				if info, err := d.Info(); err == nil && info.Size() > 0 {
					libs[info.Size()] = append(libs[info.Size()], slashed)
				}
			}
		}
		return nil
	})
	if err != nil {
		return rep, fmt.Errorf("%w: %s: %w", ErrIncompleteTree, root, err)
	}
	if rep.Files == 0 {
		// However few patterns are required, an empty tree is a failed
		// install or a restore into the wrong path, never a runtime.
		bad("%s holds no file: install it afresh (and check the restore's path)", root)
	}
	rep.Copies = copies(realRoot, libs)
	fsys := os.DirFS(realRoot)
	for _, pattern := range rules.Required {
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
			if err != nil || !pathutil.Within(realRoot, target) {
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

// copies groups the files of equal size whose contents are identical; only
// sizes shared by two or more files are read.
func copies(root string, bySize map[int64][]string) [][]string {
	var groups [][]string
	for _, paths := range bySize {
		if len(paths) < 2 {
			continue
		}
		byHash := map[[sha256.Size]byte][]string{}
		for _, p := range paths {
			f, err := os.Open(filepath.Join(root, filepath.FromSlash(p)))
			if err != nil {
				continue
			}
			h := sha256.New()
			_, err = io.Copy(h, f)
			f.Close()
			if err != nil {
				continue
			}
			sum := [sha256.Size]byte(h.Sum(nil))
			byHash[sum] = append(byHash[sum], p)
		}
		for _, g := range byHash {
			if len(g) > 1 {
				slices.Sort(g)
				groups = append(groups, g)
			}
		}
	}
	slices.SortFunc(groups, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	return groups
}
