package changepolicy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gpugate/gpugate/internal/strictyaml"
)

// ErrInvalidPolicy is matched (with errors.Is) by every error Load and LoadFile
// return for a policy that cannot be used: YAML syntax, unknown keys, invalid
// or refused globs (which match ErrInvalidGlob, ErrUnsupportedGlob,
// ErrNeverMatches or ErrRefinesOutsideCI too), undefined lanes or duplicate
// job names.
var ErrInvalidPolicy = errors.New("changepolicy: invalid policy")

// PolicyError describes one problem in a policy file. Line is 1-based and 0
// when the problem has no single line (the message then carries the YAML
// decoder's own "line N:" prefixes).
type PolicyError struct {
	File string // the policy file's path, when loaded with LoadFile
	Line int
	Msg  string
	Err  error // the detail, when there is one: a *GlobError for a refused glob
}

// Error says what is wrong with the policy, and where: its file and line
// when known.
func (e *PolicyError) Error() string {
	var b strings.Builder
	b.WriteString("changepolicy: invalid policy")
	if e.File != "" {
		b.WriteString(" " + e.File)
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, " line %d", e.Line)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// Is reports whether target is ErrInvalidPolicy.
func (e *PolicyError) Is(target error) bool { return target == ErrInvalidPolicy }

// Unwrap returns the detail (a *GlobError, which wraps its sentinel), or nil.
func (e *PolicyError) Unwrap() error { return e.Err }

// Glob is one doublestar v4 pattern over slash-separated repository paths.
// A leading "!" makes it an exclusion: a path belongs to a set when it matches
// a positive pattern of the set and no exclusion. Dotfiles match like any
// other name. Load refuses the syntax other matchers read differently (see
// the package documentation).
type Glob string

// UnmarshalYAML takes a string; Load checks the pattern itself, with its
// section and line.
func (g *Glob) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &PolicyError{Line: n.Line, Msg: "a glob must be a string"}
	}
	*g = Glob(n.Value)
	return nil
}

// GPU holds the two lists that split CI paths by what the paid GPU lane can
// observe.
type GPU struct {
	// DeviceControl lists CI paths whose change can alter what the paid pod
	// executes or whether it can execute (archive and payload, test
	// partitions, pod request/provision/staging, the cache the pod consumes).
	// A change to any of them requires the GPU gate.
	DeviceControl []Glob `yaml:"device_control"`
	// HostedOnly lists the paid lane's host-side half (required-gate
	// contract, gate-reuse lookup, price table, cost report, reaper). The
	// device suite can never observe them, so they do not require the gate.
	HostedOnly []Glob `yaml:"hosted_only"`
}

// Lane is a named extra lane (for example "macos"). It runs for every code
// change, and for other changes only when one of its triggers changed.
type Lane struct {
	Triggers []Glob `yaml:"triggers"`
}

// JobSpec is one required job. RunsFor lists selectors; the job runs when any
// of them is selected and is an explicit successful no-op otherwise:
//
//	code      the change is classified code
//	docs      the documentation lane runs
//	ci        CI-helper tests and workflow lint run
//	gpu       the paid GPU gate is required
//	lane:NAME the named lane runs
//	always    every change
type JobSpec struct {
	Name    string   `yaml:"name"`
	RunsFor []string `yaml:"runs_for"`
	Profile string   `yaml:"profile"`
}

// Policy is a loaded change policy. Build one with Load or LoadFile; a Policy
// built by hand is validated by Compile (or on every Classify call until
// Compile succeeds).
type Policy struct {
	Docs  []Glob          `yaml:"docs"`
	CI    []Glob          `yaml:"ci"`
	Code  []Glob          `yaml:"code"`
	GPU   GPU             `yaml:"gpu"`
	Lanes map[string]Lane `yaml:"lanes"`
	Jobs  []JobSpec       `yaml:"jobs"`

	// Path is the policy file's own repository-relative path. A change to it
	// is always device control, whatever the globs say, because a diff there
	// can turn the paid lane off. LoadFile sets it.
	Path string `yaml:"-"`

	idx *index
}

// Load parses a policy from YAML (JSON is accepted too). Decoding is strict:
// unknown keys, duplicate keys, invalid globs, undefined lanes and unknown
// job selectors are errors that name their line.
func Load(data []byte) (*Policy, error) {
	var p Policy
	var second *strictyaml.DocumentError
	if err := strictyaml.Decode(data, &p); errors.Is(err, strictyaml.ErrEmpty) {
		// Nothing but whitespace and comments: one rule, one message.
		return nil, &PolicyError{Msg: "the policy is empty: list at least the docs and ci globs"}
	} else if errors.As(err, &second) {
		return nil, &PolicyError{Line: second.Line, Msg: "a policy file holds one YAML document; remove the extra '---' document"}
	} else if err != nil {
		return nil, yamlError(err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, yamlError(err)
	}
	if err := p.validate(&root); err != nil {
		return nil, err
	}
	sets, err := p.checkGlobs(&root)
	if err != nil {
		return nil, err
	}
	p.idx = build(sets)
	return &p, nil
}

func yamlError(err error) error {
	var pe *PolicyError
	if errors.As(err, &pe) {
		return pe
	}
	return &PolicyError{Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
}

// LoadFile reads and parses the policy at path and records the file's own
// repository-relative path (found by walking up to the directory holding
// .git), so that a change to the policy itself is device control.
func LoadFile(path string) (*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("changepolicy: read policy: %w", err)
	}
	p, err := Load(data)
	if err != nil {
		var pe *PolicyError
		if errors.As(err, &pe) {
			pe.File = path
		}
		return nil, err
	}
	rel, err := repoRelative(path)
	if err != nil {
		return nil, err
	}
	p.Path = rel
	return p, nil
}

// repoRelative returns path relative to the enclosing git work tree. Without
// one, a relative path is taken as repository-relative (the working
// directory is the repository root).
func repoRelative(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("changepolicy: locate policy %s: %w", path, err)
	}
	for dir := filepath.Dir(abs); ; dir = filepath.Dir(dir) {
		if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
			rel, err := filepath.Rel(dir, abs)
			if err != nil {
				return "", fmt.Errorf("changepolicy: locate policy %s: %w", path, err)
			}
			return filepath.ToSlash(rel), nil
		}
		if filepath.Dir(dir) == dir {
			break
		}
	}
	if filepath.IsAbs(path) {
		return "", &PolicyError{File: path, Msg: "the policy is outside any git work tree, so its repository-relative path is unknown: load it with Load and set Policy.Path"}
	}
	return filepath.ToSlash(filepath.Clean(path)), nil
}

var laneName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// validate checks what the YAML decoder cannot: lane names, job names and
// selectors. root is the parsed document, used only to report lines.
func (p *Policy) validate(root *yaml.Node) error {
	for name := range p.Lanes {
		if !laneName.MatchString(name) {
			return &PolicyError{Line: lineOf(root, "lanes", name), Msg: fmt.Sprintf("lane name %q: use letters, digits, '.', '_' and '-'", name)}
		}
	}
	seen := map[string]bool{}
	for i, j := range p.Jobs {
		if strings.TrimSpace(j.Name) == "" {
			return &PolicyError{Line: lineOf(root, "jobs", i), Msg: fmt.Sprintf("job %d has no name: required job names are what branch protection sees", i+1)}
		}
		if seen[j.Name] {
			return &PolicyError{Line: lineOf(root, "jobs", i, "name"), Msg: fmt.Sprintf("job %q is listed twice: job names must be unique", j.Name)}
		}
		seen[j.Name] = true
		if len(j.RunsFor) == 0 {
			return &PolicyError{Line: lineOf(root, "jobs", i), Msg: fmt.Sprintf("job %q has no runs_for: name the selectors it runs for (code, docs, ci, gpu, lane:NAME, always)", j.Name)}
		}
		for k, s := range j.RunsFor {
			if err := p.checkSelector(s); err != nil {
				return &PolicyError{Line: lineOf(root, "jobs", i, "runs_for", k), Msg: fmt.Sprintf("job %q: %v", j.Name, err)}
			}
		}
	}
	return nil
}

// Selectors a job's runs_for may name, besides "lane:NAME".
const (
	SelectCode   = "code"
	SelectDocs   = "docs"
	SelectCI     = "ci"
	SelectGPU    = "gpu"
	SelectAlways = "always"
	lanePrefix   = "lane:"
)

func (p *Policy) checkSelector(s string) error {
	switch s {
	case SelectCode, SelectDocs, SelectCI, SelectGPU, SelectAlways:
		return nil
	}
	if name, ok := strings.CutPrefix(s, lanePrefix); ok {
		if _, defined := p.Lanes[name]; !defined {
			return fmt.Errorf("selector %q names a lane that the lanes section does not define", s)
		}
		return nil
	}
	return fmt.Errorf("unknown selector %q: use code, docs, ci, gpu, always or lane:NAME", s)
}

// lineOf walks a document along mapping keys (string) and sequence indexes
// (int) and returns the line of the node reached, or of the deepest node
// found on the way.
func lineOf(root *yaml.Node, path ...any) int {
	if root == nil {
		return 0
	}
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	for depth, step := range path {
		next := (*yaml.Node)(nil)
		switch s := step.(type) {
		case string:
			if n.Kind == yaml.MappingNode {
				for i := 0; i+1 < len(n.Content); i += 2 {
					if n.Content[i].Value == s {
						next = n.Content[i+1]
						if depth == len(path)-1 {
							next = n.Content[i] // the key names the problem
						}
						break
					}
				}
			}
		case int:
			if n.Kind == yaml.SequenceNode && s < len(n.Content) {
				next = n.Content[s]
			}
		}
		if next == nil {
			break
		}
		n = next
	}
	return n.Line
}
