package changepolicy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// The sets a path is matched against; lanes follow, one set each.
const (
	setCode = iota
	setDocs
	setCI
	setDevice
	setHosted
	firstLane
)

var setNames = [firstLane]string{"code", "docs", "ci", "gpu.device_control", "gpu.hosted_only"}

type compiledGlob struct {
	set     int
	order   int // position within its set: the first matching pattern is reported
	negate  bool
	raw     string // as written, "!" included
	pattern string // without "!"
	prefix  string // literal head every match starts with; "" filters nothing
	suffix  string // literal tail every match ends with; "" filters nothing
}

// index finds the candidate globs for a path without trying every glob:
// literal patterns by exact path, prefixed patterns by their literal
// directory, and only the rest (such as "**/*.md") on every path, behind a
// literal-suffix check.
type index struct {
	globs  []compiledGlob
	exact  map[string][]int32
	byDir  map[string][]int32
	global []int32
	lanes  []string // sorted; lane i is set firstLane+i
}

// setMatch is the outcome for one set: pos is the index of the first
// positive pattern (in policy order) that matched, or -1.
type setMatch struct {
	pos int32
	neg bool
}

func (m setMatch) member() bool { return m.pos >= 0 && !m.neg }

// Compile validates a Policy built by hand and prepares it for Classify.
// Load and LoadFile call it; call it again after changing a Policy's fields.
func (p *Policy) Compile() error {
	if err := p.validate(nil); err != nil {
		return err
	}
	idx := &index{exact: map[string][]int32{}, byDir: map[string][]int32{}}
	for name := range p.Lanes {
		idx.lanes = append(idx.lanes, name)
	}
	slices.Sort(idx.lanes)
	lists := [][]Glob{setCode: p.Code, setDocs: p.Docs, setCI: p.CI, setDevice: p.GPU.DeviceControl, setHosted: p.GPU.HostedOnly}
	for _, name := range idx.lanes {
		lists = append(lists, p.Lanes[name].Triggers)
	}
	for set, list := range lists {
		for order, g := range list {
			if err := validateGlob(string(g)); err != nil {
				return &PolicyError{Msg: fmt.Sprintf("%s[%d]: %v", idx.setName(set), order, err)}
			}
			idx.add(set, order, string(g))
		}
	}
	p.idx = idx
	return nil
}

func (idx *index) setName(set int) string {
	if set < firstLane {
		return setNames[set]
	}
	return "lanes." + idx.lanes[set-firstLane] + ".triggers"
}

func (idx *index) add(set, order int, raw string) {
	pattern, negate := strings.CutPrefix(raw, "!")
	g := compiledGlob{set: set, order: order, negate: negate, raw: raw, pattern: pattern}
	id := int32(len(idx.globs))
	switch {
	case !strings.ContainsAny(pattern, `*?[{\`):
		idx.exact[pattern] = append(idx.exact[pattern], id)
	default:
		g.prefix, g.suffix = literalEnds(pattern)
		if base, _ := doublestar.SplitPattern(pattern); base != "." {
			idx.byDir[base] = append(idx.byDir[base], id)
		} else {
			idx.global = append(idx.global, id)
		}
	}
	idx.globs = append(idx.globs, g)
}

// literalEnds returns the text before the pattern's first meta character,
// which every matching path starts with, and the text after its last meta
// character or slash, which every matching path ends with. Escapes disable
// both filters.
func literalEnds(pattern string) (prefix, suffix string) {
	if strings.Contains(pattern, `\`) {
		return "", ""
	}
	// "docs/**" matches "docs" itself, so a trailing slash is not required.
	prefix = strings.TrimSuffix(pattern[:strings.IndexAny(pattern, "*?[{")], "/")
	return prefix, pattern[strings.LastIndexAny(pattern, "*?]}/")+1:]
}

// match fills out (one entry per set) for path.
func (idx *index) match(path string, out []setMatch) {
	for i := range out {
		out[i] = setMatch{pos: -1}
	}
	try := func(ids []int32) {
		for _, id := range ids {
			g := &idx.globs[id]
			if !strings.HasPrefix(path, g.prefix) || !strings.HasSuffix(path, g.suffix) {
				continue
			}
			if !doublestar.MatchUnvalidated(g.pattern, path) {
				continue
			}
			m := &out[g.set]
			switch {
			case g.negate:
				m.neg = true
			case m.pos < 0 || idx.globs[m.pos].order > g.order:
				m.pos = id
			}
		}
	}
	try(idx.exact[path])
	for i := 0; i < len(path); i++ {
		if path[i] == '/' {
			try(idx.byDir[path[:i]])
		}
	}
	try(idx.byDir[path])
	try(idx.global)
}

func (idx *index) sets() int { return firstLane + len(idx.lanes) }
