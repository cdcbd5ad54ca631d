package changepolicy

import (
	"fmt"
	"testing"
)

// benchPolicy has n globs of the shapes real policies use: directory
// prefixes, exact files, extension globs, braces ("**/*.{md,rst,txt}",
// "src/{cuda,kernels}/**", nested and across directories), "**/NAME*"
// basename globs and a few exclusions.
func benchPolicy(tb testing.TB, n int) *Policy {
	tb.Helper()
	// The gpu lists refine ci paths: every device and hosted glob below is
	// under this one.
	p := &Policy{Lanes: map[string]Lane{}, CI: []Glob{"scripts/ci/*"}}
	for i := 0; len(p.Docs)+len(p.CI)+len(p.Code)+len(p.GPU.DeviceControl)+len(p.GPU.HostedOnly) < n; i++ {
		switch i % 10 {
		case 0:
			p.Docs = append(p.Docs, Glob(fmt.Sprintf("docs/section%d/**", i)))
		case 1:
			p.CI = append(p.CI, Glob(fmt.Sprintf("scripts/ci/{tool%d,helper%d}/**", i, i)))
		case 2:
			p.GPU.DeviceControl = append(p.GPU.DeviceControl, Glob(fmt.Sprintf("scripts/ci/device%d.{sh,py}", i)))
		case 3:
			p.GPU.HostedOnly = append(p.GPU.HostedOnly, Glob(fmt.Sprintf("scripts/ci/hosted%d_*.{py,sh,yml}", i)))
		case 4:
			p.Code = append(p.Code, Glob(fmt.Sprintf("{docs/section%d/code,src/{cuda,kernels}%d}/**", i-4, i)))
		case 5:
			p.Docs = append(p.Docs, Glob(fmt.Sprintf("**/*.{ext%d,md%d,rst%d,txt%d}", i, i, i, i)))
		case 6:
			p.CI = append(p.CI, Glob(fmt.Sprintf(".github/workflows/{wf%d,ci%d}-*.{yml,yaml}", i, i)))
		case 7:
			p.Docs = append(p.Docs, Glob(fmt.Sprintf("!docs/section%d/{private,drafts}/**", i-7)))
		case 8:
			p.Docs = append(p.Docs, Glob(fmt.Sprintf("**/NOTES%d*", i)))
		case 9:
			p.Docs = append(p.Docs, Glob(fmt.Sprintf("docs/section%d/**/*.{png,svg}", i-9)))
		}
	}
	p.Docs = append(p.Docs, "**/*.{md,rst,txt}", "**/{README,CHANGELOG}*")
	p.Lanes["macos"] = Lane{Triggers: []Glob{".github/workflows/{macos,macos-arm}.yml", "scripts/ci/macos_*.{sh,py}"}}
	p.Jobs = []JobSpec{{Name: "gate", RunsFor: []string{"gpu"}}, {Name: "mac", RunsFor: []string{"lane:macos"}}}
	if err := p.Compile(); err != nil {
		tb.Fatal(err)
	}
	return p
}

// benchChanges lists n changed paths, one of each kind in turn: docs,
// ci, code under docs, extension globs, workflows, code under a braced
// directory, "**/NOTES*" files, excluded docs, device scripts (every
// other one a lane's trigger instead) and hosted scripts.
func benchChanges(n int) []Change {
	cs := make([]Change, n)
	for i := range cs {
		s := (i / 10 % 20) * 10 // a section the policy names
		var path string
		switch i % 10 {
		case 0:
			path = fmt.Sprintf("docs/section%d/page%d.md", s, i)
		case 1:
			path = fmt.Sprintf("scripts/ci/tool%d/helper%d.py", s+1, i)
		case 2:
			path = fmt.Sprintf("docs/section%d/code/ex%d.rs", s, i)
		case 3:
			path = fmt.Sprintf("assets/img%d.ext%d", i, s+5)
		case 4:
			path = fmt.Sprintf(".github/workflows/wf%d-%d.yml", s+6, i)
		case 5:
			path = fmt.Sprintf("src/kernels%d/k%d.cu", s+4, i)
		case 6:
			path = fmt.Sprintf("lib/sub%d/NOTES%d-%d.txt", i%7, s+8, i)
		case 7:
			path = fmt.Sprintf("docs/section%d/private/fig%d.png", s, i)
		case 8:
			path = fmt.Sprintf("scripts/ci/device%d.sh", s+2)
			if i/10%2 == 1 {
				path = fmt.Sprintf("scripts/ci/macos_%d.sh", i) // a lane's trigger
			}
		case 9:
			path = fmt.Sprintf("scripts/ci/hosted%d_%d.yml", s+3, i)
		}
		cs[i] = Change{Path: path, Status: Modified}
	}
	return cs
}

// BenchmarkClassify measures a realistic pull request (1,000 paths, 200 globs),
// the 100x case the issue sets a target for (100,000 paths) and 1,000,000
// paths, to show the cost per path stays flat.
func BenchmarkClassify(b *testing.B) {
	for _, n := range []int{1_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("paths=%d/globs=200", n), func(b *testing.B) {
			p := benchPolicy(b, 200)
			cs := benchChanges(n)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Classify(p, cs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCompile measures the glob checks (each gpu glob against ci,
// each set for globs that never match) at 200 globs.
func BenchmarkCompile(b *testing.B) {
	p := benchPolicy(b, 200)
	for b.Loop() {
		if err := p.Compile(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLoad(b *testing.B) {
	for b.Loop() {
		if _, err := Load(ExamplePolicy); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnmatched measures the policy check over a repository of 2,000
// tracked files and the 100x case (200,000), with the 200-glob policy.
func BenchmarkUnmatched(b *testing.B) {
	for _, n := range []int{2_000, 200_000} {
		b.Run(fmt.Sprintf("files=%d/globs=200", n), func(b *testing.B) {
			p := benchPolicy(b, 200)
			files := make([]string, n)
			for i, c := range benchChanges(n) {
				files[i] = c.Path
			}
			b.ReportAllocs()
			for b.Loop() {
				p.Unmatched(files)
			}
		})
	}
}

// BenchmarkLoad_GlobstarCI measures the ci check with n "**/D/**" ci globs
// and n gpu globs, each inside one of them: 5, a large policy's 20, and
// the 100x case.
func BenchmarkLoad_GlobstarCI(b *testing.B) {
	for _, n := range []int{5, 20, 100} {
		b.Run(fmt.Sprintf("globs=%d", n), func(b *testing.B) {
			data := globstarCIPolicy(n)
			for b.Loop() {
				if _, err := Load(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
