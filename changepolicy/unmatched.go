package changepolicy

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
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
func (p *Policy) Unmatched(files []string) []UnmatchedGlob {
	var out []UnmatchedGlob
	tracked := make(map[string]bool, len(files))
	for _, f := range files {
		tracked[f] = true
	}
	check := func(section string, globs []Glob) {
		for _, g := range globs {
			pattern := string(g)
			switch {
			case strings.HasPrefix(pattern, "!"):
				continue
			case !strings.ContainsAny(pattern, `*?[{\`): // a literal path matches only itself
				if tracked[pattern] {
					continue
				}
			case slices.ContainsFunc(files, func(f string) bool { return doublestar.MatchUnvalidated(pattern, f) }):
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
