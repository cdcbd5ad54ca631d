package changepolicy

import (
	"errors"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/bmatcuk/doublestar/v4"
)

func FuzzLoad(f *testing.F) {
	f.Add(ExamplePolicy)
	f.Add([]byte("docs: ['**/*.md', '!x/**']\nlanes: {m: {triggers: ['a']}}\njobs: [{name: j, runs_for: [lane:m]}]\n"))
	f.Add([]byte("docs: ['[']"))
	// The refusals: unsupported syntax, sets that never match, gpu globs
	// outside ci; and the escapes and classes they must not refuse.
	for _, g := range []string{
		"src/@(a|b).rs", "!(**/*.tsx|**/*.less)", "[[:alpha:]]*", "v{1..3}/**", "./docs/**", "docs/",
		"(a|b)", "a|b", "[ab]+", `\d`, `[\]]`, "a[/]b", `"*".md`, `a\/b`, "!!a", "{a}", "a/**/**", "a*/**",
		"src/../x", "a//b", "{,a}", "{a,{b,c}}/*", `scripts/gpu\ tools/**`, "a[!b]c", "app/[id]/*.md",
	} {
		f.Add([]byte("docs: ['" + g + "']\n"))
	}
	f.Add([]byte("docs: ['!**/*.md']\n"))
	f.Add([]byte("docs: ['docs/**', '!doc/**']\n"))
	f.Add([]byte("ci: ['scripts/ci/**']\ngpu:\n  hosted_only: ['**/cost*']\n"))
	f.Add([]byte("ci: ['.github/**', '!.github/ISSUE_TEMPLATE/**']\ngpu:\n  device_control: ['.github/**/*.yml', '!.github/ISSUE_TEMPLATE/**']\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Load(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidPolicy) {
				t.Fatalf("Load error %v does not match ErrInvalidPolicy", err)
			}
			var ge *GlobError
			if errors.As(err, &ge) && (ge.Err == nil || !errors.Is(err, ge.Err) || ge.Construct == "") {
				t.Fatalf("glob refusal %v names no sentinel or construct", err)
			}
			return
		}
		// A loaded policy always classifies: an empty diff is code.
		d, err := Classify(p, nil)
		if err != nil || d.Class != Code || len(d.Jobs) != len(p.Jobs) {
			t.Fatalf("Classify(nil) = %v, %v", d.Class, err)
		}
	})
}

func FuzzClassify(f *testing.F) {
	p, err := Load(ExamplePolicy)
	if err != nil {
		f.Fatal(err)
	}
	f.Add("README.md", "", "modified")
	f.Add("docs/new.md", "src/lib.rs", "renamed")
	f.Add("scripts/ci/cuda_test_partition.tsv", "", "removed")
	f.Add("../etc", "", "")
	f.Fuzz(func(t *testing.T, path, old, status string) {
		d, err := Classify(p, []Change{{Path: path, OldPath: old, Status: Status(status)}})
		if err != nil {
			if !errors.Is(err, ErrInvalidChange) {
				t.Fatalf("error %v does not match ErrInvalidChange", err)
			}
			return
		}
		if len(d.Jobs) != len(p.Jobs) {
			t.Fatalf("%d jobs, want %d", len(d.Jobs), len(p.Jobs))
		}
		// Fail safe: a path under src/ (or a path no rule knows) is never cheap.
		for _, fd := range d.Files {
			if (fd.Rule == RuleUnknown || strings.HasPrefix(fd.Path, "src/")) && d.Class != Code {
				t.Fatalf("%s (%s) classified %s", fd.Path, fd.Rule, d.Class)
			}
		}
		if d.Class == Code && !(d.GPU && d.Docs && d.CI) {
			t.Fatalf("a code change must run every lane: %+v", d)
		}
	})
}

func FuzzParseNameStatus(f *testing.F) {
	f.Add([]byte("M\x00a.go\x00R087\x00old.md\x00new.md\x00"))
	f.Add([]byte("A\tdocs/a.md\nC100\tsrc/a.rs\tsrc/b.rs\n"))
	f.Add([]byte("M\t\"a\\tb\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		changes, err := ParseNameStatus(data)
		if err != nil {
			if !errors.Is(err, ErrNameStatus) {
				t.Fatalf("error %v does not match ErrNameStatus", err)
			}
			return
		}
		for _, c := range changes {
			if c.Path == "" || ((c.Status == Renamed || c.Status == Copied) && c.OldPath == "") {
				t.Fatalf("%+v: every change has a path, and a rename or copy its old path", c)
			}
		}
	})
}

// FuzzIndexAgreesWithDoublestar checks that the matcher means what the
// static checks assume and what the glob says: for a glob Load accepts,
// the index (prefix/suffix filters and literal directories included) agrees
// with doublestar.Match over the glob's alternatives, and both agree with
// the automaton the checks use (glob.re). Where the glob has none of the
// constructs the package documentation lists as read differently (a
// character class, which never matches '/'; braces, expanded before
// matching; a run of stars; "*/**"), all of them agree with doublestar on
// the glob as written too.
func FuzzIndexAgreesWithDoublestar(f *testing.F) {
	for _, s := range [][2]string{
		{"docs/**", "docs"}, {"docs/**", "docs/a/b.md"}, {"**/*.md", "README.md"},
		{"a/**/b", "a/b"}, {"{a,b}/*.go", "b/x.go"}, {"x/[ab]c", "x/bc"},
		{"scripts/ci/*_partition.tsv", "scripts/ci/cuda_partition.tsv"}, {`a\*b`, "a*b"},
		{".github/**", ".github/workflows/x.yml"}, {"Cargo.toml", "Cargo.toml"},
		{`scripts/gpu\ tools/**`, "scripts/gpu tools/x.sh"}, {"a[!b]c", "a/c"}, {"a[^b]c", "a/c"},
		{"a*/**", "a"}, {"a*{b,}", "a"}, {"{a/,}**/x", "x"}, {"a/**/**", "a"}, {"**/**", "x"},
		{"x{,/y}/**", "x/y"}, {"[+-0]", "/"}, {`a\{b`, "a{b"}, {"a***", "a"},
		{"{a,{b,c}}/*", "c/x"}, {"app/[id]/*.md", "app/[id]/x.md"}, {"[ab]", "[ab]"}, {"a{,*.{x,y}}.z", "a.y.z"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, path string) {
		if strings.HasPrefix(pattern, "!") || checkPath(path) != "" {
			return
		}
		g, prob := parseGlob(pattern)
		if prob != nil {
			if !errors.Is(prob.in("docs", 0, 0, pattern), ErrInvalidPolicy) {
				t.Fatalf("refusal of %q does not match ErrInvalidPolicy", pattern)
			}
			return
		}
		want := false
		for _, alt := range g.pattern {
			m, err := doublestar.Match(alt, path)
			if err != nil {
				t.Fatalf("%q: alternative %q is not a valid doublestar pattern: %v", pattern, alt, err)
			}
			want = want || m
		}
		idx := newIndex()
		idx.add(setDocs, 0, g)
		out := make([]setMatch, firstLane)
		idx.match(path, out)
		if got := out[setDocs].member(); got != want {
			t.Fatalf("index says %q matches %q: %v; doublestar over %q says %v", pattern, path, got, g.pattern, want)
		}
		re := regexp.MustCompile(`^(?s:` + g.re + `)$`)
		if got := re.MatchString(path); got != want {
			t.Fatalf("automaton %q says %q matches %q: %v; doublestar over %q says %v", g.re, pattern, path, got, g.pattern, want)
		}
		if raw, err := doublestar.Match(pattern, path); err == nil && raw && !want && !strings.Contains(pattern, "[!") && !strings.Contains(pattern, "[^") {
			t.Fatalf("doublestar: %q matches %q, this matcher does not", pattern, path)
		}
		if !strings.ContainsAny(pattern, `[{\`) && !strings.Contains(pattern, "***") {
			if raw, err := doublestar.Match(pattern, path); err == nil && raw != want {
				t.Fatalf("doublestar says %q matches %q: %v; this matcher says %v", pattern, path, raw, want)
			}
		}
	})
}

// A larger diff never runs less: for random change sets drawn from every
// rule of the example policy (renames across rules included), the whole
// set's decision runs every lane, flag and job that any one of its changes
// runs alone, and is code whenever any one of them is.
func TestClassify_MoreChangesNeverRunLess(t *testing.T) {
	p, err := Load(ExamplePolicy)
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{
		"README.md", "docs/guide/intro.md", "LICENSE-MIT", ".github/ISSUE_TEMPLATE/bug.md",
		".github/workflows/lint.yml", "scripts/ci/helper.py", ".github/actionlint.yaml",
		"docs/tutorial-code/src/main.rs", "src/lib.rs", "Cargo.toml", "unknown/thing",
		"scripts/ci/cuda_test_partition.tsv", ".github/workflows/runpod-gpu-test.yml",
		".github/workflows/CI_gpu.yml", "scripts/ci/runpod_cost.py",
		".github/workflows/macos.yml", "scripts/ci/macos_profile.sh", "scripts/ci/change_policy.py",
	}
	statuses := []Status{Added, Removed, Modified, Renamed, Copied}
	runs := func(d Decision) map[string]bool {
		on := map[string]bool{"docs": d.Docs, "ci": d.CI, "gpu": d.GPU, "code": d.Class == Code}
		for l, v := range d.Lanes {
			on["lane:"+l] = v
		}
		for _, j := range d.Jobs {
			on["job:"+j.Name] = j.Outcome == Run
		}
		return on
	}
	for seed := range 2000 {
		rng := rand.New(rand.NewPCG(uint64(seed), 11))
		var changes []Change
		for range 1 + rng.IntN(4) {
			c := Change{Path: paths[rng.IntN(len(paths))], Status: statuses[rng.IntN(len(statuses))]}
			if c.Status == Renamed || c.Status == Copied {
				c.OldPath = paths[rng.IntN(len(paths))]
			}
			changes = append(changes, c)
		}
		all, err := Classify(p, changes)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		whole := runs(all)
		for _, c := range changes {
			one, err := Classify(p, []Change{c})
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			for k, v := range runs(one) {
				if v && !whole[k] {
					t.Fatalf("seed %d: %+v alone runs %s, the whole diff %+v does not (%s)", seed, c, k, changes, all.Reason)
				}
			}
		}
	}
}
