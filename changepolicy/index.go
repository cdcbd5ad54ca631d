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
	shape          // how the entry is decided without doublestar, if it can be
}

// Shapes an entry is decided by. Braces are expanded at Load, so most
// alternatives are one of the shapes real policies use ("docs/**",
// "**/*.md", "**/README*", "docs/**/*.png", "scripts/ci/*.sh"), which
// string comparisons decide exactly; the rest go to doublestar.
const (
	shapeMatch = iota // doublestar.MatchUnvalidated on pattern
	shapeTree         // "D/**": D itself or any path under it
	shapeBase         // "[D/][**/]B": B literal, or literal*literal
)

type shape struct {
	kind       uint8
	deep       bool   // shapeBase: "**/" before B (any directories, none included)
	star       bool   // shapeBase: B has one '*'
	dir        string // shapeTree: D; shapeBase: D, "" for none
	bpre, bsuf string // shapeBase: B's text before and after its '*'; all of B without one
}

// shapeOf finds the shape of a normalized, brace-free expansion.
func shapeOf(e []token) shape {
	if n := len(e); n >= 3 && e[n-1].kind == tGlobstar && e[n-2].kind == tSlash {
		if d, ok := literal(e[:n-2]); ok {
			return shape{kind: shapeTree, dir: d}
		}
	}
	last := -1
	for i, t := range e {
		if t.kind == tSlash {
			last = i
		}
	}
	b := e[last+1:]
	var sh shape
	sh.kind = shapeBase
	var pre, suf strings.Builder
	for _, t := range b {
		switch {
		case t.kind == tLit && sh.star:
			suf.WriteRune(t.r)
		case t.kind == tLit:
			pre.WriteRune(t.r)
		case t.kind == tStar && !sh.star:
			sh.star = true
		default:
			return shape{}
		}
	}
	sh.bpre, sh.bsuf = pre.String(), suf.String()
	if last < 0 {
		return sh
	}
	head := e[:last]
	if n := len(head); n >= 1 && head[n-1].kind == tGlobstar {
		sh.deep = true
		head = head[:n-1]
		if n >= 2 {
			if head[n-2].kind != tSlash {
				return shape{}
			}
			head = head[:n-2]
		}
	}
	d, ok := literal(head)
	if !ok || (d == "" && !sh.deep) {
		return shape{}
	}
	sh.dir = d
	return sh
}

// match reports whether path matches the entry, as doublestar would; j is
// the index of path's last '/', or -1.
func (e *entry) match(path string, j int) bool {
	switch e.kind {
	case shapeTree:
		return strings.HasPrefix(path, e.dir) && (len(path) == len(e.dir) || path[len(e.dir)] == '/')
	case shapeBase:
		switch {
		case e.dir == "" && !e.deep && j >= 0:
			return false
		case e.dir != "" && e.deep && (j < len(e.dir) || path[len(e.dir)] != '/' || !strings.HasPrefix(path, e.dir)):
			return false
		case e.dir != "" && !e.deep && (j != len(e.dir) || !strings.HasPrefix(path, e.dir)):
			return false
		}
		base := path[j+1:]
		if !e.star {
			return base == e.bpre
		}
		return len(base) >= len(e.bpre)+len(e.bsuf) && strings.HasPrefix(base, e.bpre) && strings.HasSuffix(base, e.bsuf)
	}
	return strings.HasPrefix(path, e.prefix) && strings.HasSuffix(path, e.suffix) && doublestar.MatchUnvalidated(e.pattern, path)
}

// index finds the candidate globs for a path without trying every glob:
// literal alternatives by exact path, prefixed ones by their literal
// directory, basename globs of no directory ("**/*.md", "**/README*") by
// the path's tail or its basename's head, and only the rest on every path,
// behind a literal-suffix check. Keys and filters hold the text a path must
// have, escapes resolved, so they agree with the matcher.
type index struct {
	globs   []compiledGlob
	entries []entry
	exact   map[string][]int32 // entry ids by the path they match
	byDir   map[string][]int32
	// byTail holds shapeBase entries of no directory by the text every
	// path they match ends with; tails lists its keys' lengths.
	byTail map[string][]int32
	tails  []int
	// byFile holds shapeBase entries "D/B" with a '*' in B (and no "**")
	// by D, '/' and B's literal head; files lists its keys' lengths past
	// the path's last '/'.
	byFile map[string][]int32
	files  []int
	// byHead holds those whose B starts with a literal and ends with '*',
	// by that literal; heads lists its lengths.
	byHead map[string][]int32
	heads  []int
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
	sets, err := p.checkGlobs(nil)
	if err != nil {
		return err
	}
	p.idx = build(sets)
	return nil
}

func newIndex() *index {
	return &index{exact: map[string][]int32{}, byDir: map[string][]int32{}, byTail: map[string][]int32{}, byHead: map[string][]int32{}, byFile: map[string][]int32{}}
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
		en.shape = shapeOf(e)
		idx.entries = append(idx.entries, en)
		switch {
		case en.kind == shapeBase && en.dir != "" && !en.deep && en.star:
			if !slices.Contains(idx.files, len(en.bpre)) {
				idx.files = append(idx.files, len(en.bpre))
			}
			key := en.dir + "/" + en.bpre
			idx.byFile[key] = append(idx.byFile[key], id)
		case dir != "":
			idx.byDir[dir] = append(idx.byDir[dir], id)
		case en.kind == shapeBase && en.dir == "" && (!en.star || en.bsuf != ""):
			tail := en.bsuf
			if !en.star {
				tail = en.bpre
			}
			if _, ok := idx.byTail[tail]; !ok && !slices.Contains(idx.tails, len(tail)) {
				idx.tails = append(idx.tails, len(tail))
			}
			idx.byTail[tail] = append(idx.byTail[tail], id)
		case en.kind == shapeBase && en.dir == "" && en.bpre != "":
			if !slices.Contains(idx.heads, len(en.bpre)) {
				idx.heads = append(idx.heads, len(en.bpre))
			}
			idx.byHead[en.bpre] = append(idx.byHead[en.bpre], id)
		default:
			idx.global = append(idx.global, id)
		}
	}
}

// visit calls fn with every glob that matches path (a glob with several
// matching alternatives, once per alternative). It is the one matcher:
// Classify and Unmatched both use it.
func (idx *index) visit(path string, fn func(id int32)) {
	for _, id := range idx.exact[path] {
		fn(idx.entries[id].glob)
	}
	j := strings.LastIndexByte(path, '/')
	try := func(ids []int32) {
		for _, id := range ids {
			if e := &idx.entries[id]; e.match(path, j) {
				fn(e.glob)
			}
		}
	}
	if len(idx.byDir) > 0 {
		for i := 0; i < len(path); i++ {
			if path[i] == '/' {
				try(idx.byDir[path[:i]])
			}
		}
		try(idx.byDir[path]) // "docs/**" matches "docs" itself
	}
	for _, n := range idx.tails {
		if n <= len(path) {
			try(idx.byTail[path[len(path)-n:]])
		}
	}
	if j >= 0 {
		for _, n := range idx.files {
			if j+1+n <= len(path) {
				try(idx.byFile[path[:j+1+n]])
			}
		}
	}
	if len(idx.heads) > 0 {
		base := path[j+1:]
		for _, n := range idx.heads {
			if n <= len(base) {
				try(idx.byHead[base[:n]])
			}
		}
	}
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
