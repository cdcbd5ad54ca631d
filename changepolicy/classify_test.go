package changepolicy

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func examplePolicy(t testing.TB) *Policy {
	t.Helper()
	p, err := Load(ExamplePolicy)
	if err != nil {
		t.Fatalf("Load(ExamplePolicy): %v", err)
	}
	p.Path = ".github/gpugate/policy.yml"
	return p
}

func classify(t *testing.T, p *Policy, changes ...Change) Decision {
	t.Helper()
	d, err := Classify(p, changes)
	if err != nil {
		t.Fatalf("Classify(%v): %v", changes, err)
	}
	return d
}

func mod(paths ...string) []Change {
	var cs []Change
	for _, p := range paths {
		cs = append(cs, Change{Path: p, Status: Modified})
	}
	return cs
}

// flags is the part of a Decision most rules are about.
type flags struct {
	Class         Class
	Docs, CI, GPU bool
	Lanes         map[string]bool
	Run           []string // jobs that run, in order
	NoOp          []string // jobs that are explicit no-ops, in order
}

func flagsOf(d Decision) flags {
	f := flags{Class: d.Class, Docs: d.Docs, CI: d.CI, GPU: d.GPU, Lanes: d.Lanes}
	for _, j := range d.Jobs {
		if j.Outcome == Run {
			f.Run = append(f.Run, j.Name)
		} else {
			f.NoOp = append(f.NoOp, j.Name)
		}
	}
	return f
}

var allJobs = []string{"Linux workspace tests", "Linux extension tests", "macOS workspace tests", "Documentation", "CI configuration", "CI GPU gate"}

var everything = flags{Class: Code, Docs: true, CI: true, GPU: true, Lanes: map[string]bool{"macos": true}, Run: allJobs}

func TestClassify_EmptyDiffIsCode(t *testing.T) {
	p := examplePolicy(t)
	for name, changes := range map[string][]Change{"nil": nil, "empty": {}} {
		t.Run(name, func(t *testing.T) {
			d := classify(t, p, changes...)
			if diff := cmp.Diff(everything, flagsOf(d)); diff != "" {
				t.Errorf("empty diff (-want +got):\n%s", diff)
			}
		})
	}
}

func TestClassify_UnknownPathIsCode(t *testing.T) {
	p := examplePolicy(t)
	d := classify(t, p, mod("docs/guide.md", "some/new/thing.bin")...)
	if diff := cmp.Diff(everything, flagsOf(d)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := d.Files[1]; got.Kind != KindCode || got.Rule != RuleUnknown {
		t.Errorf("unknown path recorded as %+v, want kind code, rule unknown", got)
	}
}

func TestClassify_AnyCodePathMakesWholeDiffCode(t *testing.T) {
	p := examplePolicy(t)
	tests := map[string][]string{
		"rust source with docs": {"README.md", "src/lib.rs"},
		"manifest with ci":      {"scripts/ci/runpod_cost.py", "Cargo.toml"},
		"build config alone":    {".cargo/config.toml"},
	}
	for name, paths := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(everything, flagsOf(classify(t, p, mod(paths...)...))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestClassify_DocsOnly(t *testing.T) {
	p := examplePolicy(t)
	d := classify(t, p, mod("README.md", "docs/design/overview.md", "crates/x/README.md", "docs/img/arch.svg")...)
	want := flags{Class: DocsOnly, Docs: true, Lanes: map[string]bool{"macos": false},
		Run:  []string{"Documentation"},
		NoOp: []string{"Linux workspace tests", "Linux extension tests", "macOS workspace tests", "CI configuration", "CI GPU gate"}}
	if diff := cmp.Diff(want, flagsOf(d)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	gate := d.Jobs[5]
	if gate.Outcome != NoOp || gate.Reason != "explicit success: GPU validation not required: docs-only change" {
		t.Errorf("GPU job = %+v, want an explicit successful no-op", gate)
	}
}

func TestClassify_CIOnlyRequiresGPUOnlyForDeviceControl(t *testing.T) {
	p := examplePolicy(t)
	ciNoGPU := flags{Class: CIOnly, CI: true, Lanes: map[string]bool{"macos": false},
		Run:  []string{"CI configuration"},
		NoOp: []string{"Linux workspace tests", "Linux extension tests", "macOS workspace tests", "Documentation", "CI GPU gate"}}
	ciGPU := flags{Class: CIOnly, CI: true, GPU: true, Lanes: map[string]bool{"macos": false},
		Run:  []string{"CI configuration", "CI GPU gate"},
		NoOp: []string{"Linux workspace tests", "Linux extension tests", "macOS workspace tests", "Documentation"}}
	docsCIGPU := flags{Class: CIOnly, Docs: true, CI: true, GPU: true, Lanes: map[string]bool{"macos": false},
		Run:  []string{"Documentation", "CI configuration", "CI GPU gate"},
		NoOp: []string{"Linux workspace tests", "Linux extension tests", "macOS workspace tests"}}
	docsCI := flags{Class: CIOnly, Docs: true, CI: true, Lanes: map[string]bool{"macos": false},
		Run:  []string{"Documentation", "CI configuration"},
		NoOp: []string{"Linux workspace tests", "Linux extension tests", "macOS workspace tests", "CI GPU gate"}}
	tests := map[string]struct {
		paths []string
		want  flags
	}{
		"plain workflow":          {[]string{".github/workflows/lint.yml"}, ciNoGPU},
		"hosted-only gate files":  {[]string{".github/workflows/CI_gpu.yml", "scripts/ci/runpod_cost.py", "scripts/ci/runpod_reap.py"}, ciNoGPU},
		"test partition":          {[]string{"scripts/ci/cuda_test_partition.tsv"}, ciGPU},
		"provisioner":             {[]string{"scripts/ci/runpod_provision.py", "scripts/ci/runpod_reap.py"}, ciGPU},
		"execute workflow":        {[]string{".github/workflows/runpod-gpu-execute.yml"}, ciGPU},
		"policy file itself":      {[]string{".github/gpugate/policy.yml"}, ciGPU},
		"device control and docs": {[]string{"scripts/ci/runpod_config.json", "docs/ci.md"}, docsCIGPU},
		"hosted only and docs":    {[]string{"scripts/ci/runpod_prices.json", "docs/ci.md"}, docsCI},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, flagsOf(classify(t, p, mod(tt.paths...)...))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestClassify_HostedOnlyNotRequiredReason(t *testing.T) {
	p := examplePolicy(t)
	d := classify(t, p, mod("scripts/ci/runpod_reap.py")...)
	gate := d.Jobs[5]
	want := Job{Name: "CI GPU gate", Outcome: NoOp, Reason: "explicit success: GPU validation not required: the CI-only change touches hosted-only paths of the paid lane and no device-control path"}
	if diff := cmp.Diff(want, gate); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestClassify_DocsPlusCIIsCIOnlyWithBothFlags(t *testing.T) {
	p := examplePolicy(t)
	d := classify(t, p, mod("docs/index.md", ".github/workflows/lint.yml")...)
	if d.Class != CIOnly || !d.Docs || !d.CI || d.GPU {
		t.Errorf("got class %s docs=%v ci=%v gpu=%v, want ci-only with docs and ci, no gpu", d.Class, d.Docs, d.CI, d.GPU)
	}
}

func TestClassify_CodeOverridesWin(t *testing.T) {
	p := examplePolicy(t)
	d := classify(t, p, mod("docs/tutorial-code/src/main.rs", "docs/tutorial-code/README.md")...)
	if diff := cmp.Diff(everything, flagsOf(d)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, f := range d.Files {
		if f.Rule != RuleCode || f.Pattern != "docs/tutorial-code/**" {
			t.Errorf("%s: rule %s pattern %q, want the code override", f.Path, f.Rule, f.Pattern)
		}
	}
	// A code override wins over ci globs too.
	q, err := Load([]byte("ci: ['scripts/**']\ncode: ['scripts/build.rs']\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := classify(t, q, mod("scripts/build.rs")...).Class; got != Code {
		t.Errorf("code override under ci: class %s, want code", got)
	}
}

func TestClassify_RenamesClassifyBothPathsAndDeletionsCount(t *testing.T) {
	p := examplePolicy(t)
	tests := map[string]struct {
		change Change
		want   Class
	}{
		"code renamed into docs": {Change{Path: "docs/old.rs.md", OldPath: "src/old.rs", Status: Renamed}, Code},
		"docs renamed into code": {Change{Path: "src/notes.rs", OldPath: "docs/notes.md", Status: Renamed}, Code},
		"code copied into docs":  {Change{Path: "docs/copy.md", OldPath: "src/lib.rs", Status: Copied}, Code},
		"docs renamed within":    {Change{Path: "docs/b.md", OldPath: "docs/a.md", Status: Renamed}, DocsOnly},
		"deleted source":         {Change{Path: "src/gone.rs", Status: Removed}, Code},
		"deleted device control": {Change{Path: "scripts/ci/cuda_test_partition.tsv", Status: Removed}, CIOnly},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			d := classify(t, p, tt.change)
			if d.Class != tt.want {
				t.Errorf("class %s, want %s", d.Class, tt.want)
			}
			wantFiles := 1
			if tt.change.OldPath != "" {
				wantFiles = 2
			}
			if len(d.Files) != wantFiles {
				t.Errorf("recorded %d files, want %d (both sides of a rename)", len(d.Files), wantFiles)
			}
		})
	}
	d := classify(t, p, Change{Path: "scripts/ci/cuda_test_partition.tsv", Status: Removed})
	if !d.GPU {
		t.Error("deleting a device-control file must require the GPU gate")
	}
}

func TestClassify_LaneRunsForCodeAndForCIOnlyTrigger(t *testing.T) {
	p := examplePolicy(t)
	tests := map[string]struct {
		paths []string
		want  bool
	}{
		"code":                   {[]string{"src/lib.rs"}, true},
		"ci-only trigger":        {[]string{".github/workflows/macos.yml"}, true},
		"ci-only shared profile": {[]string{"scripts/ci/macos_profile.sh"}, true},
		"ci-only other workflow": {[]string{".github/workflows/lint.yml"}, false},
		"docs-only":              {[]string{"README.md"}, false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			d := classify(t, p, mod(tt.paths...)...)
			if d.Lanes["macos"] != tt.want {
				t.Errorf("lane macos = %v, want %v", d.Lanes["macos"], tt.want)
			}
			job := d.Jobs[2]
			if got := job.Outcome == Run; got != tt.want {
				t.Errorf("macOS job %+v, want run=%v", job, tt.want)
			}
			if tt.want && job.Profile != "macos-accelerate" {
				t.Errorf("macOS job profile %q, want macos-accelerate", job.Profile)
			}
		})
	}
}

func TestClassify_RequiredJobNamesNeverDisappear(t *testing.T) {
	p := examplePolicy(t)
	for _, paths := range [][]string{nil, {"README.md"}, {".github/workflows/lint.yml"}, {"src/lib.rs"}} {
		d := classify(t, p, mod(paths...)...)
		var names []string
		for _, j := range d.Jobs {
			names = append(names, j.Name)
			if j.Reason == "" {
				t.Errorf("%v: job %q has no reason", paths, j.Name)
			}
			if (j.Outcome == Run) == (j.Profile == "") {
				t.Errorf("%v: job %+v: a running job carries its profile, a no-op none", paths, j)
			}
		}
		if diff := cmp.Diff(allJobs, names); diff != "" {
			t.Errorf("%v: job names (-want +got):\n%s", paths, diff)
		}
	}
}

func TestClassify_BadInputIsAnError(t *testing.T) {
	p := examplePolicy(t)
	tests := map[string]Change{
		"empty path":         {Path: ""},
		"absolute path":      {Path: "/etc/passwd"},
		"dot-dot":            {Path: "docs/../src/lib.rs"},
		"NUL byte":           {Path: "docs/a\x00.md"},
		"unclean":            {Path: "docs//a.md"},
		"bad old path":       {Path: "docs/a.md", OldPath: "../x", Status: Renamed},
		"rename without old": {Path: "docs/a.md", Status: Renamed},
		"unknown status":     {Path: "docs/a.md", Status: "exploded"},
	}
	for name, ch := range tests {
		t.Run(name, func(t *testing.T) {
			d, err := Classify(p, []Change{{Path: "README.md"}, ch})
			if !errors.Is(err, ErrInvalidChange) {
				t.Fatalf("err = %v, want ErrInvalidChange", err)
			}
			var ce *ChangeError
			if !errors.As(err, &ce) || ce.Index != 1 {
				t.Errorf("err = %#v, want a ChangeError for index 1", err)
			}
			if d.Class != "" {
				t.Errorf("a failed classification returned class %q; it must return none", d.Class)
			}
		})
	}
	if _, err := Classify(nil, nil); !errors.Is(err, ErrInvalidPolicy) {
		t.Errorf("nil policy: err = %v, want ErrInvalidPolicy", err)
	}
}

func TestClassify_RecordsRulePerFile(t *testing.T) {
	p := examplePolicy(t)
	d := classify(t, p,
		Change{Path: "README.md"},
		Change{Path: ".github/workflows/macos.yml", Status: Added},
		Change{Path: "scripts/ci/cuda_test_partition.tsv"},
		Change{Path: "scripts/ci/runpod_cost.py"},
		Change{Path: ".github/gpugate/policy.yml"},
		Change{Path: "src/lib.rs"},
	)
	want := []FileDecision{
		{Path: "README.md", Status: Modified, Kind: KindDocs, Rule: RuleDocs, Pattern: "**/*.md"},
		{Path: ".github/workflows/macos.yml", Status: Added, Kind: KindCI, Rule: RuleCI, Pattern: ".github/workflows/**", Lanes: []string{"macos"}},
		{Path: "scripts/ci/cuda_test_partition.tsv", Status: Modified, Kind: KindCI, Rule: RuleDeviceControl, Pattern: "scripts/ci/*_test_partition.tsv", DeviceControl: true},
		{Path: "scripts/ci/runpod_cost.py", Status: Modified, Kind: KindCI, Rule: RuleHostedOnly, Pattern: "scripts/ci/runpod_cost.py", HostedOnly: true},
		{Path: ".github/gpugate/policy.yml", Status: Modified, Kind: KindCI, Rule: RulePolicyFile, DeviceControl: true},
		{Path: "src/lib.rs", Status: Modified, Kind: KindCode, Rule: RuleUnknown},
	}
	if diff := cmp.Diff(want, d.Files); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestClassify_DeviceControlBeatsHostedOnly(t *testing.T) {
	p, err := Load([]byte("ci: ['ci/**']\ngpu:\n  device_control: ['ci/both.sh']\n  hosted_only: ['ci/*.sh']\n"))
	if err != nil {
		t.Fatal(err)
	}
	d := classify(t, p, mod("ci/both.sh")...)
	if !d.GPU || d.Files[0].Rule != RuleDeviceControl || d.Files[0].HostedOnly {
		t.Errorf("got gpu=%v file=%+v: a path in both lists is device control", d.GPU, d.Files[0])
	}
}

func TestClassify_GlobsMatchDotfilesAndHonourExclusions(t *testing.T) {
	p, err := Load([]byte(`
docs: ["**/*.md", "!internal/**"]
ci: [".github/**"]
`))
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]Class{
		".github/workflows/a.yml": CIOnly,
		".hidden/notes.md":        DocsOnly,
		"a/.b/c.md":               DocsOnly,
		"internal/secret.md":      Code, // excluded from docs: unknown, so code
	}
	for path, want := range tests {
		if got := classify(t, p, mod(path)...).Class; got != want {
			t.Errorf("%s: class %s, want %s", path, got, want)
		}
	}
}

func TestClassify_PolicyBuiltByHand(t *testing.T) {
	p := &Policy{Docs: []Glob{"docs/**"}, Jobs: []JobSpec{{Name: "docs", RunsFor: []string{"docs"}, Profile: "d"}}}
	if got := classify(t, p, mod("docs/a")...).Jobs[0].Outcome; got != Run {
		t.Errorf("hand-built policy: docs job %s, want run", got)
	}
	bad := &Policy{Docs: []Glob{"docs/[**"}}
	if _, err := Classify(bad, mod("docs/a")); !errors.Is(err, ErrInvalidPolicy) {
		t.Errorf("invalid hand-built glob: err = %v, want ErrInvalidPolicy", err)
	}
}
