package cachetrust

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
)

// KeySpec names the material inputs of a content-addressed cache or
// artifact key.
type KeySpec struct {
	Prefix     string   `yaml:"prefix"`     // e.g. cuda-archive
	Components []string `yaml:"components"` // explicit prefix components: binding and PTX toolkit versions
	Version    string   `yaml:"version"`    // the manual vN, bumped when build commands change
	Include    []string `yaml:"include"`    // doublestar globs of hashed inputs
	Exclude    []string `yaml:"exclude"`    // deliberate exclusions (workflow YAML)
	Toolchain  string   `yaml:"toolchain"`  // e.g. the output of rustc -V
	// ToolchainWaived says why a key may name no toolchain (a tree of
	// data files that no compiler reads). Without it, a key with no
	// toolchain is refused: the same sources built by another compiler
	// would reuse this key's artifact.
	ToolchainWaived string `yaml:"toolchain_waived"`
}

// ErrNoToolchain is matched by Key's error for a spec that names no
// toolchain and does not waive it.
var ErrNoToolchain = errors.New("cachetrust: the key names no toolchain")

// RustWorkspaceSpec is the default key for a Rust workspace's CUDA test
// archive. Set Toolchain (rustc -V) and Components before use.
func RustWorkspaceSpec() KeySpec {
	return KeySpec{
		Prefix:  "cuda-archive",
		Version: "v1",
		Include: []string{"Cargo.lock", "**/Cargo.toml", "**/src/**", "**/tests/**", "**/examples/**", "**/benches/**", "**/build.rs",
			"scripts/ci/**", ".cargo/**", "rust-toolchain*"},
		Exclude: []string{".github/workflows/**"},
	}
}

// Record is one hashed input.
type Record struct {
	Path   string `json:"path"`
	Mode   string `json:"mode"`   // 100644, 100755 (executable) or 120000 (symlink: its target text is hashed)
	Digest string `json:"digest"` // SHA-256 of the content, or of a symlink's target text
}

// ArchiveKey is a computed key and what went into it.
type ArchiveKey struct {
	Key     string   `json:"key"` // <prefix>[-<component>...]-<vN>-<hex>
	Digest  string   `json:"digest"`
	Spec    KeySpec  `json:"spec"`
	Records []Record `json:"records"`
	// Unmatched lists the include globs that cover no hashed file. A
	// repository may simply have none (no benches/); a misspelt glob
	// leaves the files it meant out of the key, so a change to them keeps
	// the key, and the artifact, unchanged. Review each.
	Unmatched []string `json:"unmatched_include,omitempty"`
}

// ErrSpec is matched by errors about a KeySpec.
var ErrSpec = errors.New("cachetrust: invalid key spec")

// ErrNotRegular is matched by Key's error for a covered path that is
// neither a regular file nor a symlink (a FIFO, a socket, a device): its
// content is not a file's, so no key can name it.
var ErrNotRegular = errors.New("cachetrust: a covered path is not a regular file or a symlink")

// ErrNotUTF8 is matched by Key's error for a covered path that is not
// UTF-8: a key's records are JSON, which cannot hold it (two such names
// would read back as the same record).
var ErrNotUTF8 = errors.New("cachetrust: a path in the tree is not UTF-8")

// ErrChanged is matched by Key's error for a file that was replaced
// while the key was computed (a file by a link, a FIFO or a directory, a
// link by a file): the key would name neither tree.
var ErrChanged = errors.New("cachetrust: the tree changed while its key was computed")

// ErrNoInputs is matched when a key would cover no file: every checkout
// (another commit, another repository, the wrong directory) would get that
// same key, and an archive built from other sources would be reused under
// it.
var ErrNoInputs = errors.New("cachetrust: the key covers no file")

// ExampleKeySpec is the default key spec file: the explicit components
// (cudarc binding set, PTX toolkit) and the manual version.
//
//go:embed example_key_spec.yml
var ExampleKeySpec []byte

// LoadKeySpec reads a key spec (YAML or JSON) over RustWorkspaceSpec's
// defaults: a key it leaves out keeps its default, and an empty file is the
// defaults. Decoding is strict, so a misspelt key (componets:) is an error
// rather than a key silently missing what it meant to pin, and a second
// '---' document is an error rather than a document silently ignored.
func LoadKeySpec(data []byte) (KeySpec, error) {
	spec := RustWorkspaceSpec()
	if err := decodeStrict(data, &spec); err != nil {
		return KeySpec{}, fmt.Errorf("%w: %w", ErrSpec, err)
	}
	if err := spec.validate(); err != nil {
		return KeySpec{}, err
	}
	return spec, nil
}

// KeySpecFile reads the key spec in the file at path (LoadKeySpec), or is
// RustWorkspaceSpec when path is empty. Its errors name the file.
func KeySpecFile(path string) (KeySpec, error) {
	if path == "" {
		return RustWorkspaceSpec(), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return KeySpec{}, fmt.Errorf("cachetrust: %w", err)
	}
	spec, err := LoadKeySpec(data)
	if err != nil {
		return KeySpec{}, fmt.Errorf("cachetrust: %s: %w", path, err)
	}
	return spec, nil
}

var (
	keyPart    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+]*$`)
	keyVersion = regexp.MustCompile(`^v[0-9]+$`)
)

func (s KeySpec) validate() error {
	if !keyPart.MatchString(strings.ReplaceAll(s.Prefix, "-", "_")) {
		return fmt.Errorf("%w: prefix %q: letters, digits, '.', '_', '+' and '-'", ErrSpec, s.Prefix)
	}
	for _, c := range s.Components {
		if !keyPart.MatchString(strings.ReplaceAll(c, "-", "_")) {
			return fmt.Errorf("%w: component %q: letters, digits, '.', '_', '+' and '-'", ErrSpec, c)
		}
	}
	if !keyVersion.MatchString(s.Version) {
		return fmt.Errorf("%w: version %q: want vN", ErrSpec, s.Version)
	}
	if len(s.Include) == 0 {
		return fmt.Errorf("%w: no include globs", ErrSpec)
	}
	for _, g := range append(slices.Clone(s.Include), s.Exclude...) {
		if !doublestar.ValidatePattern(g) {
			return fmt.Errorf("%w: glob %q", ErrSpec, g)
		}
	}
	return nil
}

// Covers reports whether path is an input of the key.
func (s KeySpec) Covers(path string) bool {
	in := slices.ContainsFunc(s.Include, func(g string) bool { return doublestar.MatchUnvalidated(g, path) })
	out := slices.ContainsFunc(s.Exclude, func(g string) bool { return doublestar.MatchUnvalidated(g, path) })
	return in && !out
}

// Key hashes the spec's inputs in fsys (rooted at the checkout). The digest
// is SHA-256 over the sorted (path, mode, content digest) records plus the
// toolchain and prefix components: identical on every machine and checkout
// path, whatever the file order or mtimes, and free of branch, ref and
// commit identity. Symlinks contribute their target text and are never
// followed. Files are hashed in parallel and streamed. A key over no file
// at all is refused (ErrNoInputs).
//
// Key cannot see, through fs.FS, a file swapped for a link or a FIFO
// after the walk listed it: over os.DirFS it would follow the link or
// wait on the FIFO. Key a local checkout with KeyDir, which does neither.
func Key(fsys fs.FS, spec KeySpec) (ArchiveKey, error) {
	if err := spec.validate(); err != nil {
		return ArchiveKey{}, err
	}
	paths, records, err := walkAndHash(fsys, spec)
	if err != nil {
		return ArchiveKey{}, err
	}
	return keyOf(spec, paths, records)
}

// KeyDir is Key(os.DirFS(dir), spec) for a checkout on local disk: for
// every tree Key keys, KeyDir gives the same key, and where the tree
// makes Key fail, KeyDir fails with the same kind of error. On Linux it is faster and safer: each directory
// is opened once and its files relative to it, never through a link, a
// file's mode comes from the descriptor already open, and a file swapped
// for a link, a FIFO or a directory while the key is computed is
// ErrChanged, never followed or waited on. It also keys what os.DirFS
// cannot walk: paths longer than the system's limit, and directories
// whose names are not UTF-8 (a covered path must still be UTF-8).
//
// KeyDir holds a descriptor for each directory level of the path it is
// in and for each batch of files queued to the workers (a few per core).
func KeyDir(dir string, spec KeySpec) (ArchiveKey, error) {
	if err := spec.validate(); err != nil {
		return ArchiveKey{}, err
	}
	if dir == "" {
		return ArchiveKey{}, fmt.Errorf("cachetrust: KeyDir needs a directory: pass \".\" for the working directory: %w", fs.ErrInvalid)
	}
	paths, records, err := walkAndHashDir(dir, spec)
	if err != nil {
		return ArchiveKey{}, err
	}
	return keyOf(spec, paths, records)
}

// keyOf is the key over the covered paths and their records.
func keyOf(spec KeySpec, paths []string, records []Record) (ArchiveKey, error) {
	if len(paths) == 0 {
		return ArchiveKey{}, fmt.Errorf("%w: no file under the root matches the include globs %q: compute it at the checkout's root, or fix the globs", ErrNoInputs, spec.Include)
	}
	if strings.TrimSpace(spec.Toolchain) == "" && strings.TrimSpace(spec.ToolchainWaived) == "" {
		return ArchiveKey{}, fmt.Errorf("%w: pass the compiler's version (cachecheck -key -toolchain \"$(rustc -V)\"), or set toolchain_waived in the key spec to the reason none applies", ErrNoToolchain)
	}
	var unmatched []string
	for _, g := range spec.Include {
		if !slices.ContainsFunc(paths, func(p string) bool { return doublestar.MatchUnvalidated(g, p) }) {
			unmatched = append(unmatched, g)
		}
	}
	slices.SortFunc(records, func(a, b Record) int { return strings.Compare(a.Path, b.Path) })
	h := sha256.New()
	fmt.Fprintf(h, "gpugate-cachetrust-key v1\ntoolchain %q\n", spec.Toolchain)
	for _, c := range spec.Components {
		fmt.Fprintf(h, "component %q\n", c)
	}
	for _, r := range records {
		fmt.Fprintf(h, "%s %s %q\n", r.Mode, r.Digest, r.Path)
	}
	digest := hex.EncodeToString(h.Sum(nil))
	name := strings.Join(append(append([]string{spec.Prefix}, spec.Components...), spec.Version, digest), "-")
	return ArchiveKey{Key: name, Digest: digest, Spec: spec, Records: records, Unmatched: unmatched}, nil
}

// walkAndHash walks fsys and hashes every file spec covers as the walk
// finds it: the walk feeds one hashing worker per CPU, so reading
// directories and hashing overlap. It returns the covered paths in walk
// order and their records (in no particular order).
func walkAndHash(fsys fs.FS, spec KeySpec) ([]string, []Record, error) {
	type job struct {
		path string
		mode fs.FileMode
	}
	var paths []string
	pool := &hashPool[job]{}
	pool.start(256, func(hr *hasher, j job, mine []Record) ([]Record, string, error) {
		if pool.skip(j.path) {
			return mine, "", nil
		}
		r, err := hr.hash(fsys, j.path, j.mode)
		if err != nil {
			return mine, j.path, err
		}
		return append(mine, r), "", nil
	})
	walkErr := fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if !utf8.ValidString(path) {
				// os.DirFS opens only UTF-8 paths.
				return fmt.Errorf("%w: %q cannot be walked through this file system: rename it, or key a local checkout with KeyDir (%w)", ErrNotUTF8, path, err)
			}
			return err
		}
		if path == "." || d.IsDir() {
			if d.IsDir() && path != "." && d.Name() == ".git" {
				return fs.SkipDir
			}
			return nil
		}
		if !spec.Covers(path) {
			return nil
		}
		if !utf8.ValidString(path) {
			return notUTF8(path)
		}
		mode := d.Type()
		if mode.IsRegular() {
			// Only the executable bits are read beyond the type: one
			// lstat, and only for regular files.
			info, err := d.Info()
			if err != nil {
				return err
			}
			mode = info.Mode()
		}
		paths = append(paths, path)
		pool.jobs <- job{path, mode}
		return nil
	})
	records, err := pool.wait()
	if walkErr != nil {
		return nil, nil, walkError(walkErr)
	}
	if err != nil {
		return nil, nil, err
	}
	return paths, records, nil
}

// walkError is the error of a walk that failed: the walk's, never a
// worker's, so that the same tree always gives the same error.
func walkError(err error) error {
	if errors.Is(err, ErrNotUTF8) || errors.Is(err, ErrChanged) {
		return err // already says where and what to do
	}
	return fmt.Errorf("cachetrust: walk: %w", err)
}

// notUTF8 is the error for a covered path that is not UTF-8.
func notUTF8(path string) error {
	return fmt.Errorf("%w: %q: a key's records are JSON, which holds only UTF-8 names; rename it, or exclude it in the key spec", ErrNotUTF8, path)
}

// hashPool is one hashing worker per CPU over the jobs a walk sends it:
// reading directories and hashing overlap. It gathers the workers'
// records and, of their errors, the one for the path that sorts first,
// so that the same tree always gives the same error.
type hashPool[J any] struct {
	jobs    chan J
	wg      sync.WaitGroup
	mu      sync.Mutex
	records []Record
	err     error
	errPath string
	failed  atomic.Bool
}

// start starts the workers. work hashes one job, appending to a worker's
// own records, and on failure returns the path that failed; it is given
// every job sent, after a failure too, so that it can let go of what the
// job holds.
func (p *hashPool[J]) start(buffer int, work func(hr *hasher, j J, mine []Record) ([]Record, string, error)) {
	p.jobs = make(chan J, buffer)
	for range runtime.GOMAXPROCS(0) {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			hr := newHasher()
			var mine []Record
			for j := range p.jobs {
				var (
					path string
					err  error
				)
				if mine, path, err = work(hr, j, mine); err != nil {
					p.fail(path, err)
				}
			}
			p.mu.Lock()
			p.records = append(p.records, mine...)
			p.mu.Unlock()
		}()
	}
}

// fail keeps path's err if no path before it has failed.
func (p *hashPool[J]) fail(path string, err error) {
	p.mu.Lock()
	if p.err == nil || path < p.errPath {
		p.err, p.errPath = err, path
	}
	p.mu.Unlock()
	p.failed.Store(true)
}

// skip reports whether path need not be hashed: a path before it has
// failed, so its error would not be the one reported.
func (p *hashPool[J]) skip(path string) bool {
	if !p.failed.Load() {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return path > p.errPath
}

// wait ends the jobs, waits for the workers and returns their records
// (in no particular order) and the first error.
func (p *hashPool[J]) wait() ([]Record, error) {
	close(p.jobs)
	p.wg.Wait()
	return p.records, p.err
}

// hasher hashes one file at a time with its own SHA-256 state and buffer.
type hasher struct {
	h   hash.Hash
	buf []byte
}

func newHasher() *hasher { return &hasher{h: sha256.New(), buf: make([]byte, 256<<10)} }

// onlyReader hides a file's WriteTo, which io.CopyBuffer would take
// instead of the buffer it is given (allocating a fresh one per file).
type onlyReader struct{ io.Reader }

func (hr *hasher) hash(fsys fs.FS, path string, mode fs.FileMode) (Record, error) {
	h := hr.h
	h.Reset()
	r := Record{Path: path, Mode: "100644"}
	switch {
	case mode&fs.ModeSymlink != 0:
		rl, ok := fsys.(fs.ReadLinkFS)
		if !ok {
			return Record{}, fmt.Errorf("cachetrust: %s is a symlink and the file system cannot read links", path)
		}
		target, err := rl.ReadLink(path)
		if err != nil {
			return Record{}, fmt.Errorf("cachetrust: read link %s: %w", path, err)
		}
		r.Mode = "120000"
		h.Write([]byte(target))
	case !mode.IsRegular():
		return Record{}, fmt.Errorf("%w: %s (mode %s): remove it from the tree or exclude it in the key spec", ErrNotRegular, path, mode)
	default:
		if mode&0o111 != 0 {
			r.Mode = "100755"
		}
		f, err := fsys.Open(path)
		if err != nil {
			return Record{}, fmt.Errorf("cachetrust: %w", err)
		}
		_, err = io.CopyBuffer(h, onlyReader{f}, hr.buf)
		f.Close()
		if err != nil {
			return Record{}, fmt.Errorf("cachetrust: read %s: %w", path, err)
		}
	}
	var sum [sha256.Size]byte
	r.Digest = hex.EncodeToString(h.Sum(sum[:0]))
	return r, nil
}

// Difference is one reason two keys differ.
type Difference struct {
	Path   string `json:"path"` // empty for a spec-level difference
	Change string `json:"change"`
}

// String is the difference as a line: "path: change", or the change alone
// for a spec-level one.
func (d Difference) String() string {
	if d.Path == "" {
		return d.Change
	}
	return d.Path + ": " + d.Change
}

// ReadArchiveKey reads a key as a file holds it in JSON (an earlier
// ArchiveKey, as cachecheck -key -json prints it), for Explain.
func ReadArchiveKey(path string) (ArchiveKey, error) {
	var k ArchiveKey
	data, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(data, &k)
	}
	if err != nil {
		return ArchiveKey{}, fmt.Errorf("cachetrust: read key %s: %w", path, err)
	}
	return k, nil
}

// Explain says exactly which inputs make two keys differ: added, removed
// and changed files (content or mode), and toolchain, component, prefix or
// version changes.
func Explain(old, new ArchiveKey) []Difference {
	var out []Difference
	spec := func(what, a, b string) {
		if a != b {
			out = append(out, Difference{Change: fmt.Sprintf("%s %q -> %q", what, a, b)})
		}
	}
	spec("prefix", old.Spec.Prefix, new.Spec.Prefix)
	spec("components", strings.Join(old.Spec.Components, ","), strings.Join(new.Spec.Components, ","))
	spec("version", old.Spec.Version, new.Spec.Version)
	spec("toolchain", old.Spec.Toolchain, new.Spec.Toolchain)
	i, j := 0, 0
	for i < len(old.Records) || j < len(new.Records) {
		switch {
		case j == len(new.Records) || (i < len(old.Records) && old.Records[i].Path < new.Records[j].Path):
			out = append(out, Difference{Path: old.Records[i].Path, Change: "removed"})
			i++
		case i == len(old.Records) || new.Records[j].Path < old.Records[i].Path:
			out = append(out, Difference{Path: new.Records[j].Path, Change: "added"})
			j++
		default:
			a, b := old.Records[i], new.Records[j]
			if a.Mode != b.Mode {
				out = append(out, Difference{Path: a.Path, Change: fmt.Sprintf("mode %s -> %s", a.Mode, b.Mode)})
			}
			if a.Digest != b.Digest {
				out = append(out, Difference{Path: a.Path, Change: "content changed"})
			}
			i, j = i+1, j+1
		}
	}
	return out
}
