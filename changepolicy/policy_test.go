package changepolicy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoad_StrictErrorsNameTheLine(t *testing.T) {
	tests := map[string]struct {
		yaml string
		line int // 0: the YAML decoder's own message carries the line
	}{
		"empty":             {"", 0},
		"unknown top key":   {"docs: ['a']\ndocz: ['b']\n", 0},
		"unknown gpu key":   {"gpu:\n  device: ['a']\n", 0},
		"unclosed bracket":  {"docs:\n  - 'docs/[a'\n", 2},
		"unclosed brace":    {"ci:\n  - 'a'\n  - '{b,c'\n", 3},
		"absolute glob":     {"docs: ['/docs/**']\n", 1},
		"empty glob":        {"docs: ['']\n", 1},
		"bare bang":         {"docs: ['!']\n", 1},
		"glob not a string": {"docs:\n  - {a: b}\n", 2},
		"undefined lane":    {"jobs:\n  - name: mac\n    runs_for: [lane:macos]\n", 3},
		"unknown selector":  {"jobs:\n  - {name: x, runs_for: [gpus]}\n", 2},
		"duplicate job":     {"jobs:\n  - {name: x, runs_for: [code]}\n  - {name: x, runs_for: [docs]}\n", 3},
		"nameless job":      {"jobs:\n  - {runs_for: [code]}\n", 2},
		"job without runs":  {"jobs:\n  - {name: x}\n", 2},
		"bad lane name":     {"lanes:\n  'mac os': {triggers: ['a']}\n", 2},
		"two documents":     {"docs: ['a']\n---\nci: ['b']\n", 2},
		"duplicate key":     {"docs: ['a']\ndocs: ['b']\n", 0},
		"syntax":            {"docs: [\n", 0},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Load([]byte(tt.yaml))
			if !errors.Is(err, ErrInvalidPolicy) {
				t.Fatalf("err = %v, want ErrInvalidPolicy", err)
			}
			var pe *PolicyError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %T, want *PolicyError", err)
			}
			if pe.Line != tt.line {
				t.Errorf("line = %d, want %d (%v)", pe.Line, tt.line, err)
			}
		})
	}
}

func TestLoad_ExamplePolicy(t *testing.T) {
	p, err := Load(ExamplePolicy)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Jobs) != 6 || len(p.GPU.DeviceControl) == 0 || len(p.GPU.HostedOnly) == 0 || len(p.Lanes["macos"].Triggers) == 0 {
		t.Errorf("example policy lost sections: %+v", p)
	}
}

func TestLoad_AcceptsJSON(t *testing.T) {
	p, err := Load([]byte(`{"docs": ["docs/**"], "jobs": [{"name": "d", "runs_for": ["docs"], "profile": "p"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := classify(t, p, mod("docs/x")...).Class; got != DocsOnly {
		t.Errorf("class %s, want docs-only", got)
	}
}

func TestLoadFile_PolicyFileIsAlwaysDeviceControl(t *testing.T) {
	repo := t.TempDir()
	if err := os.Mkdir(filepath.Join(repo, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(repo, "config")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The policy's own globs call it documentation; that must not matter.
	file := filepath.Join(dir, "policy.yml")
	if err := os.WriteFile(file, []byte("docs: ['config/**']\njobs:\n  - {name: gate, runs_for: [gpu]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := LoadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if p.Path != "config/policy.yml" {
		t.Fatalf("Path = %q, want config/policy.yml", p.Path)
	}
	d := classify(t, p, mod("config/policy.yml")...)
	if d.Class != CIOnly || !d.GPU || d.Jobs[0].Outcome != Run || d.Files[0].Rule != RulePolicyFile {
		t.Errorf("policy change: class %s gpu %v job %+v file %+v; want ci-only, GPU required", d.Class, d.GPU, d.Jobs[0], d.Files[0])
	}
	if d := classify(t, p, mod("config/other.md")...); d.GPU {
		t.Error("another file under config/ must stay docs-only")
	}
}

func TestLoadFile_Errors(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadFile(filepath.Join(dir, "missing.yml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: err = %v, want os.ErrNotExist", err)
	}
	bad := filepath.Join(dir, "bad.yml")
	if err := os.WriteFile(bad, []byte("docs: ['[']\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadFile(bad)
	var pe *PolicyError
	if !errors.As(err, &pe) || pe.File != bad || pe.Line != 1 {
		t.Errorf("bad glob: err = %v, want a PolicyError naming %s line 1", err, bad)
	}
	// What a maintainer reads names the file and the line.
	if msg := fmt.Sprint(err); !strings.HasPrefix(msg, "changepolicy: invalid policy "+bad+" line 1: ") {
		t.Errorf("message %q does not start with the file and line", msg)
	}
	// Outside any git work tree an absolute path has no repository-relative
	// form, so the policy cannot recognise its own changes: refused.
	good := filepath.Join(dir, "policy.yml")
	os.WriteFile(good, []byte("docs: ['**/*.md']\n"), 0o644)
	for d := dir; filepath.Dir(d) != d; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			t.Skip("the temporary directory is inside a git work tree") // last: nothing else is skipped
		}
	}
	if _, err := LoadFile(good); !errors.As(err, &pe) || !strings.Contains(pe.Msg, "outside any git work tree") {
		t.Errorf("absolute path outside a work tree: %v", err)
	}
}

// A policy of nothing but whitespace and comments is the empty policy,
// refused with the one message that says what to list.
func TestLoad_ACommentsOnlyPolicyIsTheEmptyPolicy(t *testing.T) {
	blank, err1 := Load([]byte(" \n"))
	comments, err2 := Load([]byte("# docs: ['docs/**']\n  # later\n"))
	var pe1, pe2 *PolicyError
	if blank != nil || comments != nil || !errors.As(err1, &pe1) || !errors.As(err2, &pe2) || pe1.Msg != pe2.Msg {
		t.Errorf("blank: %v; comments only: %v; want the same refusal", err1, err2)
	}
}
