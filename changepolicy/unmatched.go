package changepolicy

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// UnmatchedGlob is a policy glob that matches no file of the repository.
type UnmatchedGlob struct {
	Section string // "code", "gpu.device_control", "gpu.hosted_only" or "lanes.NAME.triggers"
	Glob    Glob
}

// String names the section and the glob.
func (u UnmatchedGlob) String() string { return fmt.Sprintf("%s: %q", u.Section, string(u.Glob)) }

// Unmatched lists the policy's globs that match none of files (the
// repository's paths, such as TrackedFiles returns), for the sections
// where a misspelt glob fails open rather than safe: a code override that
// matches nothing lets executable code pass as documentation; a
// device-control glob that matches nothing lets a change to what the paid
// pod runs skip the GPU gate; a lane trigger that matches nothing skips
// that lane for its own workflow. hosted_only is listed too, so the split
// of the paid lane stays reviewable. Exclusions ("!…") and the broad docs
// and ci lists, whose misses fall back to code, are not checked.
//
// A glob counts as matching only a file that it brings into its section:
// the file matches it, through the same matcher Classify uses, and no
// exclusion of the section removes the file.
func (p *Policy) Unmatched(files []string) []UnmatchedGlob {
	idx := p.idx
	if idx == nil {
		if err := p.Compile(); err != nil {
			// An invalid policy has no meaningful globs: report them all.
			idx = nil
		} else {
			idx = p.idx
		}
	}
	used := map[string]bool{} // section + "\x00" + glob, for the globs that bring a file in
	if idx != nil {
		brings := make([]bool, len(idx.globs))
		excluded := make([]bool, idx.sets())
		var hit []int32
		for _, f := range files {
			if checkPath(f) != "" {
				continue
			}
			hit = hit[:0]
			idx.visit(f, func(id int32) { hit = append(hit, id) })
			clear(excluded)
			for _, id := range hit {
				if g := &idx.globs[id]; g.negate {
					excluded[g.set] = true
				}
			}
			for _, id := range hit {
				if g := &idx.globs[id]; !g.negate && !excluded[g.set] {
					brings[id] = true
				}
			}
		}
		for id, ok := range brings {
			if ok {
				g := &idx.globs[id]
				used[idx.setName(g.set)+"\x00"+g.raw] = true
			}
		}
	}
	var out []UnmatchedGlob
	check := func(section string, globs []Glob) {
		for _, g := range globs {
			if strings.HasPrefix(string(g), "!") || used[section+"\x00"+string(g)] {
				continue
			}
			out = append(out, UnmatchedGlob{Section: section, Glob: g})
		}
	}
	check("code", p.Code)
	check("gpu.device_control", p.GPU.DeviceControl)
	check("gpu.hosted_only", p.GPU.HostedOnly)
	for _, name := range slices.Sorted(maps.Keys(p.Lanes)) {
		check("lanes."+name+".triggers", p.Lanes[name].Triggers)
	}
	return out
}

// TrackedFiles lists the files git tracks in the work tree at dir
// (git ls-files), as repository-relative slash-separated paths.
func TrackedFiles(ctx context.Context, dir string) ([]string, error) {
	out, err := git(ctx, dir, "ls-files", "-z")
	if err != nil {
		return nil, fmt.Errorf("changepolicy: list the tracked files: %w", err)
	}
	var files []string
	for _, f := range bytes.Split(out, []byte{0}) {
		if len(f) > 0 {
			files = append(files, string(f))
		}
	}
	return files, nil
}
