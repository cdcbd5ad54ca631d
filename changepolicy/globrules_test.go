package changepolicy

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// loadErr loads yaml, which must be refused, and returns the GlobError.
func loadErr(t *testing.T, yaml string) *GlobError {
	t.Helper()
	_, err := Load([]byte(yaml))
	if !errors.Is(err, ErrInvalidPolicy) {
		t.Fatalf("Load(%q) = %v, want ErrInvalidPolicy", yaml, err)
	}
	var ge *GlobError
	if !errors.As(err, &ge) {
		t.Fatalf("Load(%q) = %v (%T), want a *GlobError", yaml, err, err)
	}
	var pe *PolicyError
	if !errors.As(err, &pe) || pe.Line != ge.Line {
		t.Fatalf("Load(%q) = %v: want a *PolicyError on the glob's line %d", yaml, err, ge.Line)
	}
	return ge
}

// gpu.device_control and gpu.hosted_only only refine CI paths: a path that
// no ci glob holds is classified as if they did not name it. Load refuses
// such a policy (below); Classify does not rely on that: built by hand and
// indexed past the check, the lists still reach no path outside ci.
func TestClassify_HostedOnlyOutsideCIStaysCode(t *testing.T) {
	p := &Policy{
		Docs: []Glob{"docs/**"},
		CI:   []Glob{"scripts/ci/**"},
		GPU:  GPU{HostedOnly: []Glob{"**/cost*"}, DeviceControl: []Glob{"**/pod*"}},
		Jobs: []JobSpec{{Name: "gate", RunsFor: []string{SelectGPU}}, {Name: "tests", RunsFor: []string{SelectCode}}},
	}
	if _, err := Classify(p, mod("src/cost.rs")); !errors.Is(err, ErrRefinesOutsideCI) {
		t.Fatalf("Classify with a hosted_only glob outside ci: err = %v, want ErrRefinesOutsideCI", err)
	}
	sets, err := p.parseSets(nil)
	if err != nil {
		t.Fatal(err)
	}
	p.idx = build(sets) // as if the check were missing

	d := classify(t, p, mod("src/cost.rs")...)
	if d.Class != Code || !d.GPU || d.Files[0].HostedOnly || d.Files[0].Rule != RuleUnknown {
		t.Errorf("src/cost.rs: class %s, gpu %v, file %+v; want code with the GPU gate, not hosted-only", d.Class, d.GPU, d.Files[0])
	}
	for _, j := range d.Jobs {
		if j.Outcome != Run {
			t.Errorf("src/cost.rs: job %s is %s, want run", j.Name, j.Outcome)
		}
	}
	if f := classify(t, p, mod("docs/cost.md")...).Files[0]; f.Kind != KindDocs || f.HostedOnly {
		t.Errorf("docs/cost.md: %+v, want docs and not hosted-only", f)
	}
	if f := classify(t, p, mod("src/pod.rs")...).Files[0]; f.Kind != KindCode || f.DeviceControl {
		t.Errorf("src/pod.rs: %+v, want code and not device control", f)
	}
	// Inside ci they still refine.
	if f := classify(t, p, mod("scripts/ci/cost.py")...).Files[0]; !f.HostedOnly || f.Rule != RuleHostedOnly {
		t.Errorf("scripts/ci/cost.py: %+v, want hosted-only", f)
	}
	if d := classify(t, p, mod("scripts/ci/pod.sh")...); !d.GPU || d.Class != CIOnly {
		t.Errorf("scripts/ci/pod.sh: class %s gpu %v, want ci-only with the GPU gate", d.Class, d.GPU)
	}
}

// Load reports a device_control or hosted_only glob that can match a path
// outside ci, with its section, line and such a path; a ci exclusion counts
// as outside, and the list's own exclusions are taken off first.
func TestLoad_HostedOnlyGlobOutsideCIIsReported(t *testing.T) {
	tests := map[string]struct {
		yaml string
		want GlobError
	}{
		"hosted_only beyond ci": {
			"ci: ['scripts/ci/**']\ngpu:\n  hosted_only:\n    - 'scripts/ci/runpod_cost.py'\n    - '**/cost*'\n",
			GlobError{Section: "gpu.hosted_only", Index: 1, Line: 5, Glob: "**/cost*", Err: ErrRefinesOutsideCI, Construct: "outside-ci", Example: "cost"},
		},
		"device_control beyond ci": {
			"ci: ['.github/workflows/**']\ngpu:\n  device_control: ['.github/**/runpod-*.yml']\n",
			GlobError{Section: "gpu.device_control", Index: 0, Line: 3, Glob: ".github/**/runpod-*.yml", Err: ErrRefinesOutsideCI, Construct: "outside-ci", Example: ".github/runpod-.yml"},
		},
		"a ci exclusion removes it": {
			"ci: ['.github/**', '!.github/ISSUE_TEMPLATE/**']\ngpu:\n  device_control: ['.github/*/*.yml']\n",
			GlobError{Section: "gpu.device_control", Index: 0, Line: 3, Glob: ".github/*/*.yml", Err: ErrRefinesOutsideCI, Construct: "outside-ci", Example: ".github/ISSUE_TEMPLATE/.yml"},
		},
		"no ci at all": {
			"docs: ['**/*.md']\ngpu:\n  device_control: ['action.yml']\n",
			GlobError{Section: "gpu.device_control", Index: 0, Line: 3, Glob: "action.yml", Err: ErrRefinesOutsideCI, Construct: "outside-ci", Example: "action.yml"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			ge := loadErr(t, tt.yaml)
			if !errors.Is(ge, ErrRefinesOutsideCI) {
				t.Errorf("err = %v, want ErrRefinesOutsideCI", ge)
			}
			if diff := cmp.Diff(tt.want, *ge, cmpopts.IgnoreFields(GlobError{}, "Reason", "Rewrite"), cmpopts.EquateErrors()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	for _, ok := range []string{
		string(ExamplePolicy),
		"ci: ['scripts/**']\ngpu:\n  hosted_only: ['scripts/ci/*cost*']\n",
		"ci: ['.github/**', '!.github/ISSUE_TEMPLATE/**']\ngpu:\n  device_control: ['.github/**/*.yml', '!.github/ISSUE_TEMPLATE/**']\n",
		"ci: ['{a,b}/**']\ngpu:\n  device_control: ['a/x', 'b/**/*.sh']\n",
	} {
		if _, err := Load([]byte(ok)); err != nil {
			t.Errorf("Load(%q): %v; every path its gpu globs match is in ci", ok, err)
		}
	}
}

// A pattern the matcher does not support, or that picomatch (so
// paths-filter) reads differently, is refused at Load with its line and a
// suggested rewrite: never matched differently.
func TestLoad_UnsupportedGlobIsRefusedWithLineAndRewrite(t *testing.T) {
	tests := []struct {
		glob, construct, rewrite string
	}{
		{"src/@(a|b).rs", "extglob", `"src/{a,b}.rs"`},
		{"src/?(a|b).rs", "extglob", `"src/{a,b,}.rs"`},
		{"!(**/*.tsx|**/*.less)", "extglob", `["**", "!**/*.tsx", "!**/*.less"]`},
		{"src/+(a|b).rs", "extglob", ""},
		{"src/*(a|b).rs", "extglob", ""},
		{"docs/[[:alpha:]]*.md", "posix-class", `"docs/[a-zA-Z]*.md"`},
		{"v{1..3}/**", "brace-range", `"v{1,2,3}/**"`},
		{"./docs/**", "leading-dot-slash", `"docs/**"`},
		{"docs/", "trailing-slash", `"docs/**"`},
		{"src/(a|b).rs", "regex-group", `"src/{a,b}.rs"`},
		{"docs/foo(1).md", "regex-group", `"docs/foo\\(1\\).md" for the parentheses`},
		{"a|b", "regex-alternation", `"a\\|b" for a literal '|', or {a,b} for alternatives`},
		{"[ab]+.md", "regex-quantifier", `"[ab]\\+.md" for a literal '+'`},
		{`\d.md`, "regex-escape", `"d.md"`},
		{`[\]a]`, "backslash-in-class", ""},
		{"a[/]b", "slash-in-class", ""},
		{`"*".md`, "quotes", `"\\*.md"`},
		{`a\/b`, "escaped-slash", `"a/b"`},
		{"!!a", "double-negation", `"a"`},
		{"docs/{a}.md", "brace-without-comma", `"docs/\\{a\\}.md" for the braces, or leave them out`},
		{"a/**/**/b", "repeated-globstar", `"a/**/b"`},
		{"packages/*/**", "star-before-globstar", `"packages/*/**/*" for the paths under such a directory`},
	}
	for _, tt := range tests {
		t.Run(tt.glob, func(t *testing.T) {
			ge := loadErr(t, "docs:\n  - README.md\n  - '"+tt.glob+"'\n")
			if !errors.Is(ge, ErrUnsupportedGlob) {
				t.Errorf("err = %v, want ErrUnsupportedGlob", ge)
			}
			got := GlobError{Section: ge.Section, Index: ge.Index, Line: ge.Line, Glob: ge.Glob, Construct: ge.Construct, Rewrite: ge.Rewrite}
			want := GlobError{Section: "docs", Index: 1, Line: 3, Glob: Glob(tt.glob), Construct: tt.construct, Rewrite: tt.rewrite}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// A set that can never match is refused: only exclusions (in paths-filter
// "!**/*.md" alone means everything but Markdown; here it matched nothing),
// a glob whose every path is excluded, an exclusion that removes nothing,
// and a glob no path a diff lists can match.
func TestLoad_NeverMatchingSetIsRefused(t *testing.T) {
	tests := map[string]struct {
		yaml      string
		line      int
		construct string
	}{
		"only exclusions":   {"ci: ['.github/**']\ndocs:\n  - '!**/*.md'\n", 3, "only-exclusions"},
		"all excluded":      {"docs:\n  - 'docs/*.md'\n  - '!docs/**'\n", 2, "all-excluded"},
		"excludes nothing":  {"docs:\n  - 'docs/**'\n  - '!doc/old/**'\n", 3, "excludes-nothing"},
		"dot segment":       {"code:\n  - 'src/../lib/**'\n", 2, "dot-segment"},
		"empty segment":     {"code:\n  - 'src//lib.rs'\n", 2, "empty-segment"},
		"device list alone": {"ci: ['ci/**']\ngpu:\n  device_control: ['!ci/x']\n", 3, "only-exclusions"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			ge := loadErr(t, tt.yaml)
			if !errors.Is(ge, ErrNeverMatches) || ge.Line != tt.line || ge.Construct != tt.construct {
				t.Errorf("err = %v (line %d, %s), want ErrNeverMatches on line %d (%s)", ge, ge.Line, ge.Construct, tt.line, tt.construct)
			}
		})
	}
	if ge := loadErr(t, "docs: ['!**/*.md']\n"); ge.Rewrite != `["**", "!**/*.md"] for everything but those` {
		t.Errorf("rewrite %s, want the paths-filter meaning spelt out", ge.Rewrite)
	}
}

// The literal-directory index resolves backslash escapes as the matcher
// does: a policy with `scripts/gpu\ tools/**` matches "scripts/gpu tools/x.sh",
// and an escaped literal matches its text.
func TestClassify_EscapedGlobMatchesAsTheMatcherDoes(t *testing.T) {
	p, err := Load([]byte(`
ci: ['scripts/gpu\ tools/**', 'scripts/a\*b.sh', 'scripts/\{x\}/*.sh']
gpu:
  device_control: ['scripts/gpu\ tools/**']
`))
	if err != nil {
		t.Fatal(err)
	}
	for path, gpu := range map[string]bool{"scripts/gpu tools/x.sh": true, "scripts/gpu tools": true, "scripts/a*b.sh": false, "scripts/{x}/y.sh": false} {
		d := classify(t, p, mod(path)...)
		if d.Class != CIOnly || d.GPU != gpu {
			t.Errorf("%s: class %s gpu %v, want ci-only, gpu %v", path, d.Class, d.GPU, gpu)
		}
	}
	if d := classify(t, p, mod("scripts/gpu\\ tools/x.sh")...); d.Class != Code {
		t.Errorf("a path holding the backslash itself: class %s, want code", d.Class)
	}
}

// -check-globs (Unmatched) uses the classifier's matcher: a glob it passes
// brings a file into its section when classified, and one it names does
// not. An escaped glob passes because it matches; a negated class does not
// match '/' in either; a glob whose only file its section excludes is named.
func TestUnmatched_UsesTheClassifiersMatcher(t *testing.T) {
	p, err := Load([]byte(`
ci: ['scripts/**']
code: ['tools[!x]build.rs', 'gen/\{v1\}/*.rs']
gpu:
  device_control: ['scripts/gpu\ tools/**', 'scripts/ci/*.sh', '!scripts/ci/old.sh']
`))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"scripts/gpu tools/run.sh", "tools/build.rs", "gen/{v1}/a.rs", "scripts/ci/old.sh"}
	want := []UnmatchedGlob{
		{"code", "tools[!x]build.rs"},
		{"gpu.device_control", "scripts/ci/*.sh"},
	}
	if diff := cmp.Diff(want, p.Unmatched(files)); diff != "" {
		t.Errorf("unmatched (-want +got):\n%s", diff)
	}
	// What Unmatched passed, Classify applies; what it named, Classify does not.
	byPath := map[string]FileDecision{}
	for _, f := range classify(t, p, mod(files...)...).Files {
		byPath[f.Path] = f
	}
	if f := byPath["scripts/gpu tools/run.sh"]; !f.DeviceControl {
		t.Errorf("scripts/gpu tools/run.sh: %+v, want device control", f)
	}
	if f := byPath["gen/{v1}/a.rs"]; f.Rule != RuleCode {
		t.Errorf("gen/{v1}/a.rs: %+v, want the code override", f)
	}
	if f := byPath["tools/build.rs"]; f.Rule == RuleCode {
		t.Errorf("tools/build.rs: %+v: tools[!x]build.rs must not match across '/'", f)
	}
	if f := byPath["scripts/ci/old.sh"]; f.DeviceControl {
		t.Errorf("scripts/ci/old.sh: %+v, excluded from device control", f)
	}
}

// A negated character class ([!a], [^a]) never matches '/'.
func TestClassify_NegatedClassNeverMatchesSlash(t *testing.T) {
	p, err := Load([]byte("ci: ['ci[!x]tool.sh', 'ci[^x]run.sh']\n"))
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]Class{"ci/tool.sh": Code, "ci/run.sh": Code, "ci-tool.sh": CIOnly, "ci_run.sh": CIOnly, "cixtool.sh": Code} {
		if got := classify(t, p, mod(path)...).Class; got != want {
			t.Errorf("%s: class %s, want %s", path, got, want)
		}
	}
}

// As in picomatch, a class whose text holds no regex character also matches
// that text, and a path equal to the glob's text matches it: a Next.js
// route directory "app/[id]" is matched by the glob that names it.
func TestClassify_BracketGlobAlsoMatchesItsText(t *testing.T) {
	p, err := Load([]byte("docs: ['app/[id]/*.md', 'notes/[a-c].txt']\n"))
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]Class{
		"app/[id]/page.md": DocsOnly, "app/i/page.md": DocsOnly, "app/x/page.md": Code,
		"notes/b.txt": DocsOnly, "notes/[a-c].txt": DocsOnly, "notes/-.txt": Code,
	} {
		if got := classify(t, p, mod(path)...).Class; got != want {
			t.Errorf("%s: class %s, want %s", path, got, want)
		}
	}
}

// The ci check is exact in both directions: for random ci and gpu globs,
// a policy Load accepts never has a gpu glob match a path outside ci (the
// index consulted directly, past Classify's own guard), and a policy it
// refuses names a path that the gpu glob matches and ci does not.
func TestLoad_GPUGlobOutsideCICheckIsExact(t *testing.T) {
	parts := []string{"a", "b", "/", "*", "**", "?", "[ab]", "{a,b/}", "x"}
	paths := []string{"a", "b", "x", "ab", "a/b", "a/x", "b/a", "x/a/b", "a/b/x", "ab/x", "b/b", "a/a/a"}
	rng := rand.New(rand.NewPCG(3, 5))
	glob := func() string {
		var b strings.Builder
		for range 1 + rng.IntN(4) {
			b.WriteString(parts[rng.IntN(len(parts))])
		}
		return b.String()
	}
	accepted, refused := 0, 0
	for range 3000 {
		p := &Policy{CI: []Glob{Glob(glob()), Glob(glob())}, GPU: GPU{DeviceControl: []Glob{Glob(glob())}}}
		if rng.IntN(3) == 0 {
			p.CI = append(p.CI, Glob("!"+glob()))
		}
		sets, err := p.parseSets(nil)
		if err != nil {
			continue
		}
		idx := build(sets)
		out := make([]setMatch, idx.sets())
		err = p.Compile()
		var ge *GlobError
		switch {
		case err == nil:
			accepted++
			for _, path := range paths {
				idx.match(path, out)
				if out[setDevice].member() && !out[setCI].member() {
					t.Fatalf("ci %q, device_control %q: Load accepted, but %q is device control and not ci", p.CI, p.GPU.DeviceControl, path)
				}
			}
		case errors.As(err, &ge) && errors.Is(err, ErrRefinesOutsideCI):
			refused++
			idx.match(ge.Example, out)
			if checkPath(ge.Example) != "" || !out[setDevice].member() || out[setCI].member() {
				t.Fatalf("ci %q, device_control %q: refused with example %q, which is not a device path outside ci", p.CI, p.GPU.DeviceControl, ge.Example)
			}
		}
	}
	if accepted < 50 || refused < 50 {
		t.Fatalf("%d accepted, %d refused: the random policies do not exercise both sides", accepted, refused)
	}
}

// globstarCIPolicy has n ci globs of the "**/D/**" shape and n gpu globs,
// each inside one of them.
func globstarCIPolicy(n int) []byte {
	var b strings.Builder
	b.WriteString("docs: [\"**/*.md\"]\nci:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - \"**/ci%d/**/*.{sh,py,yml}\"\n", i)
	}
	b.WriteString("gpu:\n  device_control:\n")
	for i := range n {
		fmt.Fprintf(&b, "    - \"**/ci%d/**/run*.sh\"\n", i)
	}
	b.WriteString("jobs:\n  - {name: t, runs_for: [code]}\n")
	return []byte(b.String())
}

// The ci check stays exact and is not exponential in the ci globs: a gpu
// glob one ci glob holds is checked against that glob, not against the
// union of all of them, so twenty "**/D/**" ci globs load (they were
// refused as too complex), and a gpu glob that only the union holds, or
// that reaches outside it, is still decided.
func TestLoad_ManyGlobstarCIGlobsLoad(t *testing.T) {
	if _, err := Load(globstarCIPolicy(20)); err != nil {
		t.Errorf("20 ci globs: %v", err)
	}
	// Only the union holds the gpu glob.
	if _, err := Load([]byte("ci: ['**/ci/**/r*', '**/ci/**/[!r]*']\ngpu:\n  device_control: ['**/ci/**/*']\n")); err != nil {
		t.Errorf("a gpu glob the union of the ci globs holds: %v", err)
	}
	ge := loadErr(t, "ci: ['**/ci0/**/*.sh', '**/ci1/**/*.sh', '**/ci2/**/*.py']\ngpu:\n  device_control: ['**/ci2/**/run*.sh']\n")
	if !errors.Is(ge, ErrRefinesOutsideCI) || ge.Example != "ci2/run.sh" {
		t.Errorf("a gpu glob outside every ci glob: %v (example %q), want ErrRefinesOutsideCI with ci2/run.sh", ge, ge.Example)
	}
}

// A suggested rewrite is one Load accepts: every glob it quotes parses
// without a problem, or no rewrite is offered. A trailing '/' after "**"
// or a '*' gets a rewrite that is not refused for star-before-globstar or
// repeated-globstar, a run of "**/" collapses to one, and an odd number of
// '!' stays an exclusion (picomatch negates once per '!').
func TestLoad_ASuggestedRewriteLoads(t *testing.T) {
	tests := []struct{ glob, rewrite string }{
		{"docs/**/", `"docs/**"`},
		{"b*/", `"b*/**/*"`},
		{"*/*/", `"*/*/**/*"`},
		{"**/**/**", `"**"`},
		{"a/**/**/**/b", `"a/**/b"`},
		{"**/**/", `"**"`},
		{"!!!docs/**", `"!docs/**"`},
		{"!!docs/**", `"docs/**"`},
		{"././docs/**", `"docs/**"`},
		{"./.github/**", `".github/**"`},
	}
	for _, tt := range tests {
		t.Run(tt.glob, func(t *testing.T) {
			ge := loadErr(t, "docs:\n  - README.md\n  - '"+tt.glob+"'\n")
			if ge.Rewrite != tt.rewrite {
				t.Errorf("rewrite %s, want %s", ge.Rewrite, tt.rewrite)
			}
			checkRewriteParses(t, tt.glob, ge.Rewrite)
		})
	}

	f, err := os.Open("testdata/picomatch-cases.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	seen := map[string]bool{}
	refused, offered := 0, 0
	for sc.Scan() {
		var c corpusCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		for _, raw := range c.patterns(t) {
			if seen[raw] {
				continue
			}
			seen[raw] = true
			_, p := parseGlob(raw)
			if p == nil {
				continue
			}
			refused++
			if p.rewrite != "" {
				offered++
				checkRewriteParses(t, raw, p.rewrite)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if refused < 100 || offered < 50 {
		t.Fatalf("%d refused patterns, %d with a rewrite: the corpus does not exercise the rewrites", refused, offered)
	}
}

func checkRewriteParses(t *testing.T, raw, rewrite string) {
	t.Helper()
	if rewrite == "" {
		return
	}
	globs := rewriteGlobs(rewrite)
	if len(globs) == 0 {
		t.Errorf("%q: rewrite %s quotes no glob", raw, rewrite)
	}
	for _, g := range globs {
		if _, p := parseGlob(g); p != nil {
			t.Errorf("%q: rewrite %s suggests %q, which is refused in turn (%s: %s; rewrite %s)", raw, rewrite, g, p.construct, p.reason, p.rewrite)
		}
	}
}
