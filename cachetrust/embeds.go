package cachetrust

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Embed is a file compiled into a binary.
type Embed struct {
	Source string `json:"source"` // file:line of the include
	Path   string `json:"path"`   // the embedded file, relative to the checkout
	Macro  string `json:"macro"`  // include_str, include_bytes or go:embed
}

var (
	// include_str!("…") / include_bytes!("…"), and the
	// concat!(env!("CARGO_MANIFEST_DIR"), "…") form.
	rustInclude = regexp.MustCompile(`\b(include_str|include_bytes)!\s*\(\s*(?:"((?:[^"\\]|\\.)*)"|concat!\s*\(\s*env!\s*\(\s*"CARGO_MANIFEST_DIR"\s*\)\s*,\s*"((?:[^"\\]|\\.)*)"\s*,?\s*\))`)
	goEmbed     = regexp.MustCompile(`^//go:embed\s+(.+)$`)
)

// Embeds finds the files compiled into binaries: Rust include_str! and
// include_bytes! (relative to the source file, or to the crate root with
// concat!(env!("CARGO_MANIFEST_DIR"), …)) and Go //go:embed patterns
// (relative to the package directory, globs and directories expanded).
// Paths that leave the tree are reported as they resolve, so CheckEmbeds
// refuses them.
func Embeds(fsys fs.FS) ([]Embed, error) {
	var out []Embed
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != "." && (d.Name() == ".git" || d.Name() == "target" || d.Name() == "vendor") {
				return fs.SkipDir
			}
			return nil
		}
		switch path.Ext(p) {
		case ".rs":
			src, err := fs.ReadFile(fsys, p)
			if err != nil {
				return err
			}
			out = append(out, ScanRust(p, crateRoot(fsys, p), src)...)
		case ".go":
			src, err := fs.ReadFile(fsys, p)
			if err != nil {
				return err
			}
			es, err := scanGo(fsys, p, src)
			if err != nil {
				return err
			}
			out = append(out, es...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cachetrust: scan embeds: %w", err)
	}
	return out, nil
}

// crateRoot is the nearest directory at or above the file's that holds a
// Cargo.toml ("." when none does).
func crateRoot(fsys fs.FS, file string) string {
	for dir := path.Dir(file); ; dir = path.Dir(dir) {
		if _, err := fs.Stat(fsys, path.Join(dir, "Cargo.toml")); err == nil {
			return dir
		}
		if dir == "." || dir == "/" {
			return "."
		}
	}
}

// ScanRust finds include_str!/include_bytes! in one Rust source file at
// file (relative to the checkout) whose crate root is crate.
func ScanRust(file, crate string, src []byte) []Embed {
	var out []Embed
	for _, m := range rustInclude.FindAllSubmatchIndex(src, -1) {
		macro := string(src[m[2]:m[3]])
		line := 1 + bytes.Count(src[:m[0]], []byte("\n"))
		var rel, base string
		if m[4] >= 0 {
			rel, base = string(src[m[4]:m[5]]), path.Dir(file)
		} else {
			rel, base = string(src[m[6]:m[7]]), crate
		}
		if u, err := strconv.Unquote(`"` + rel + `"`); err == nil {
			rel = u
		}
		out = append(out, Embed{Source: fmt.Sprintf("%s:%d", file, line), Path: path.Join(base, rel), Macro: macro})
	}
	return out
}

// scanGo resolves //go:embed patterns of one Go file against fsys.
func scanGo(fsys fs.FS, file string, src []byte) ([]Embed, error) {
	var out []Embed
	dir := path.Dir(file)
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		m := goEmbed.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		for _, pat := range EmbedPatterns(m[1]) {
			pat, all := strings.CutPrefix(pat, "all:")
			matches, err := fs.Glob(fsys, path.Join(dir, pat))
			if err != nil || len(matches) == 0 {
				// Unresolvable: report the pattern itself so the check
				// names it.
				out = append(out, Embed{Source: fmt.Sprintf("%s:%d", file, n), Path: path.Join(dir, pat), Macro: "go:embed"})
				continue
			}
			for _, match := range matches {
				files, err := expand(fsys, match, all)
				if err != nil {
					return nil, err
				}
				for _, f := range files {
					out = append(out, Embed{Source: fmt.Sprintf("%s:%d", file, n), Path: f, Macro: "go:embed"})
				}
			}
		}
	}
	return out, nil
}

// EmbedPatterns splits a //go:embed argument list: space-separated, with
// Go-quoted patterns for names that contain spaces.
func EmbedPatterns(args string) []string {
	var out []string
	for args = strings.TrimSpace(args); args != ""; args = strings.TrimSpace(args) {
		if args[0] == '"' || args[0] == '`' {
			if q, err := strconv.QuotedPrefix(args); err == nil {
				if u, err := strconv.Unquote(q); err == nil {
					out = append(out, u)
				}
				args = args[len(q):]
				continue
			}
		}
		f, rest, _ := strings.Cut(args, " ")
		out = append(out, f)
		args = rest
	}
	return out
}

// expand lists the files a matched path embeds. A directory embeds its
// files recursively except, as the go command does without the all:
// prefix, those under names beginning with '.' or '_'.
func expand(fsys fs.FS, p string, all bool) ([]string, error) {
	info, err := fs.Stat(fsys, p)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{p}, nil
	}
	var files []string
	err = fs.WalkDir(fsys, p, func(q string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if q != p && !all && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_")) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !d.IsDir() {
			files = append(files, q)
		}
		return nil
	})
	return files, err
}

// EmbedError lists embedded files the key does not cover.
type EmbedError struct{ Missing []Embed }

// Error lists each embedded file that is missing from the key's inputs.
func (e *EmbedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cachetrust: %d embedded file(s) are not inputs of the key; add them to the key spec's include globs:", len(e.Missing))
	for _, m := range e.Missing {
		fmt.Fprintf(&b, "\n  %s (%s at %s)", m.Path, m.Macro, m.Source)
	}
	return b.String()
}

// CheckEmbeds fails naming every embedded file the key does not cover: a
// change to such a file would change the binary without changing the key.
func CheckEmbeds(spec KeySpec, embeds []Embed) error {
	var missing []Embed
	for _, e := range embeds {
		if strings.HasPrefix(e.Path, "../") || e.Path == ".." || !spec.Covers(e.Path) {
			missing = append(missing, e)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	slices.SortFunc(missing, func(a, b Embed) int { return strings.Compare(a.Path, b.Path) })
	return &EmbedError{Missing: missing}
}
