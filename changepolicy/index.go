package changepolicy

import (
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
	set    int
	order  int // position within its set: the first matching pattern is reported
	negate bool
	raw    string // as written, "!" included
	g      *glob
}

// entry is one brace-free alternative of a glob, as doublestar matches it.
type entry struct {
	glob    int32
	pattern string // rendered for doublestar: escapes and classes canonical
	prefix  string // literal head every match starts with; "" filters nothing
	suffix  string // literal tail every match ends with; "" filters nothing
}

// index finds the candidate globs for a path without trying every glob:
// literal alternatives by exact path, prefixed ones by their literal
// directory, and only the rest (such as "**/*.md") on every path, behind a
// literal-suffix check. Keys and filters hold the text a path must have,
// escapes resolved, so they agree with the matcher.
type index struct {
	globs   []compiledGlob
	entries []entry
	exact   map[string][]int32 // entry ids by the path they match
	byDir   map[string][]int32
	global  []int32
	lanes   []string // sorted; lane i is set firstLane+i
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
	sets, err := p.checkGlobs(nil)
	if err != nil {
		return err
	}
	p.idx = build(sets)
	return nil
}

func newIndex() *index {
	return &index{exact: map[string][]int32{}, byDir: map[string][]int32{}}
}

// build indexes parsed globs, sets as parseGlobs returns them.
func build(sets []parsedSet) *index {
	idx := newIndex()
	for _, s := range sets {
		if s.set >= firstLane {
			idx.lanes = append(idx.lanes, s.lane)
		}
		for order, g := range s.globs {
			idx.add(s.set, order, g)
		}
	}
	return idx
}

func (idx *index) setName(set int) string {
	if set < firstLane {
		return setNames[set]
	}
	return "lanes." + idx.lanes[set-firstLane] + ".triggers"
}

func (idx *index) add(set, order int, g *glob) {
	gid := int32(len(idx.globs))
	idx.globs = append(idx.globs, compiledGlob{set: set, order: order, negate: g.negate, raw: g.raw, g: g})
	for i, e := range g.exps {
		id := int32(len(idx.entries))
		en := entry{glob: gid, pattern: g.pattern[i]}
		if lit, ok := literal(e); ok {
			idx.exact[lit] = append(idx.exact[lit], id)
			idx.entries = append(idx.entries, en)
			continue
		}
		var dir string
		en.prefix, en.suffix, dir = literalParts(e)
		if dir != "" {
			idx.byDir[dir] = append(idx.byDir[dir], id)
		} else {
			idx.global = append(idx.global, id)
		}
		idx.entries = append(idx.entries, en)
	}
}

// visit calls fn with every glob that matches path (a glob with several
// matching alternatives, once per alternative). It is the one matcher:
// Classify and Unmatched both use it.
func (idx *index) visit(path string, fn func(id int32)) {
	for _, id := range idx.exact[path] {
		fn(idx.entries[id].glob)
	}
	try := func(ids []int32) {
		for _, id := range ids {
			e := &idx.entries[id]
			if !strings.HasPrefix(path, e.prefix) || !strings.HasSuffix(path, e.suffix) {
				continue
			}
			if doublestar.MatchUnvalidated(e.pattern, path) {
				fn(e.glob)
			}
		}
	}
	for i := 0; i < len(path); i++ {
		if path[i] == '/' {
			try(idx.byDir[path[:i]])
		}
	}
	try(idx.byDir[path]) // "docs/**" matches "docs" itself
	try(idx.global)
}

// match fills out (one entry per set) for path.
func (idx *index) match(path string, out []setMatch) {
	for i := range out {
		out[i] = setMatch{pos: -1}
	}
	idx.visit(path, func(id int32) {
		g := &idx.globs[id]
		m := &out[g.set]
		switch {
		case g.negate:
			m.neg = true
		case m.pos < 0 || idx.globs[m.pos].order > g.order:
			m.pos = id
		}
	})
}

func (idx *index) sets() int { return firstLane + len(idx.lanes) }

// sortedLanes returns the policy's lane names in order.
func (p *Policy) sortedLanes() []string {
	var names []string
	for name := range p.Lanes {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
