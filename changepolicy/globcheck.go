package changepolicy

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// parsedSet is one section's globs, parsed, in policy order.
type parsedSet struct {
	set   int
	lane  string // for a lane's triggers
	name  string // the section, as errors name it
	globs []*glob
	lines []int
}

// checkGlobs parses every glob of the policy and refuses the globs and sets
// that would not do what they say (root, when known, gives their lines):
//
//   - syntax this matcher does not support, or reads differently from
//     picomatch and bash (ErrUnsupportedGlob, with a rewrite);
//   - a glob or set that can never match a path a diff lists, an exclusion
//     that removes nothing, and a set of exclusions only (ErrNeverMatches);
//   - a gpu.device_control or gpu.hosted_only glob that matches a path the
//     ci set does not hold, after its own section's exclusions
//     (ErrRefinesOutsideCI).
//
// The questions are exact: each is asked of the globs' languages as
// automata, over the clean repository paths a diff can list.
func (p *Policy) checkGlobs(root *yaml.Node) ([]parsedSet, error) {
	sets, err := p.parseSets(root)
	if err != nil {
		return nil, err
	}
	for i := range sets {
		if err := sets[i].checkMatches(); err != nil {
			return nil, err
		}
	}
	ci := sets[setCI]
	for _, s := range []parsedSet{sets[setDevice], sets[setHosted]} {
		if err := s.checkWithin(ci); err != nil {
			return nil, err
		}
	}
	return sets, nil
}

// parseSets parses every glob of the policy, section by section, in the
// order of the set constants.
func (p *Policy) parseSets(root *yaml.Node) ([]parsedSet, error) {
	lanes := p.sortedLanes()
	type src struct {
		name  string
		set   int
		lane  string
		globs []Glob
		path  []any
	}
	srcs := []src{
		{"code", setCode, "", p.Code, []any{"code"}},
		{"docs", setDocs, "", p.Docs, []any{"docs"}},
		{"ci", setCI, "", p.CI, []any{"ci"}},
		{"gpu.device_control", setDevice, "", p.GPU.DeviceControl, []any{"gpu", "device_control"}},
		{"gpu.hosted_only", setHosted, "", p.GPU.HostedOnly, []any{"gpu", "hosted_only"}},
	}
	for i, name := range lanes {
		srcs = append(srcs, src{"lanes." + name + ".triggers", firstLane + i, name, p.Lanes[name].Triggers, []any{"lanes", name, "triggers"}})
	}
	sets := make([]parsedSet, 0, len(srcs))
	for _, s := range srcs {
		ps := parsedSet{set: s.set, lane: s.lane, name: s.name}
		for i, raw := range s.globs {
			line := 0
			if root != nil {
				line = lineOf(root, append(s.path[:len(s.path):len(s.path)], i)...)
			}
			g, prob := parseGlob(string(raw))
			if prob != nil {
				return nil, globError(prob.in(s.name, i, line, string(raw)))
			}
			ps.globs = append(ps.globs, g)
			ps.lines = append(ps.lines, line)
		}
		sets = append(sets, ps)
	}
	return sets, nil
}

// globError wraps a GlobError in the PolicyError Load returns.
func globError(ge *GlobError) error {
	return &PolicyError{Line: ge.Line, Msg: ge.message(false), Err: ge}
}

func (s parsedSet) split() (pos, neg []*glob, posAt, negAt []int) {
	for i, g := range s.globs {
		if g.negate {
			neg, negAt = append(neg, g), append(negAt, i)
		} else {
			pos, posAt = append(pos, g), append(posAt, i)
		}
	}
	return pos, neg, posAt, negAt
}

func (s parsedSet) refuse(i int, err error, construct, rewrite, example, format string, args ...any) error {
	return globError(&GlobError{Section: s.name, Index: i, Line: s.lines[i], Glob: Glob(s.globs[i].raw),
		Err: err, Construct: construct, Reason: fmt.Sprintf(format, args...), Rewrite: rewrite, Example: example})
}

func (s parsedSet) undecided(i int) error {
	return s.refuse(i, ErrUnsupportedGlob, "too-complex", "", "", "the glob is too complex to check against the rest of the section; split it into simpler globs")
}

// checkMatches refuses a set that lists only exclusions, a positive glob
// that matches no clean path or only excluded ones, and an exclusion that
// removes nothing the positive globs match.
func (s parsedSet) checkMatches() error {
	pos, neg, posAt, negAt := s.split()
	if len(neg) > 0 && len(pos) == 0 {
		var ex []string
		for _, g := range neg {
			ex = append(ex, quote(g.raw))
		}
		return s.refuse(negAt[0], ErrNeverMatches, "only-exclusions", `["**", `+strings.Join(ex, ", ")+"] for everything but those", "",
			"%s lists only exclusions, so it matches nothing: an exclusion removes paths from what the section's other globs match (in paths-filter a lone exclusion means everything but it)", s.name)
	}
	var negL *lang
	if len(neg) > 0 {
		negL = newLang(neg)
	}
	for k, g := range pos {
		// A literal alternative (the glob's own text, say) that no
		// exclusion matches is a witness; search only without one.
		if slices.ContainsFunc(g.literals(), func(w string) bool { return negL == nil || !negL.matches(w) }) {
			continue
		}
		gl := g.language()
		_, found, decided := find([]*lang{gl}, []bool{true})
		switch {
		case !decided:
			return s.undecided(posAt[k])
		case !found:
			return s.refuse(posAt[k], ErrNeverMatches, "matches-nothing", "", "", "it matches no path a diff can list")
		}
		if negL == nil {
			continue
		}
		_, found, decided = outside([]*lang{gl}, []bool{true}, neg, g)
		switch {
		case !decided:
			return s.undecided(posAt[k])
		case !found:
			return s.refuse(posAt[k], ErrNeverMatches, "all-excluded", "", "", "every path it matches is excluded by an exclusion of %s", s.name)
		}
	}
	if len(neg) > 0 {
		posL := newLang(pos)
		for k, g := range neg {
			gl := g.language()
			if slices.ContainsFunc(g.literals(), posL.matches) || slices.ContainsFunc(pos, func(p *glob) bool { return slices.ContainsFunc(p.literals(), gl.matches) }) {
				continue
			}
			_, found, decided := meets([]*lang{gl}, []bool{true}, pos)
			switch {
			case !decided:
				return s.undecided(negAt[k])
			case !found:
				return s.refuse(negAt[k], ErrNeverMatches, "excludes-nothing", "", "", "the exclusion removes nothing: no positive glob of %s matches a path it matches", s.name)
			}
		}
	}
	return nil
}

// checkWithin refuses a glob of s that, after s's own exclusions, matches
// a path outside ci (not matched by a positive ci glob, or removed by a ci
// exclusion).
func (s parsedSet) checkWithin(ci parsedSet) error {
	pos, neg, posAt, _ := s.split()
	if len(pos) == 0 {
		return nil
	}
	ciPos, ciNeg, _, _ := ci.split()
	// Without ci exclusions, a glob whose every alternative starts with a
	// directory some "D/**" of ci holds is inside ci; the search is for the
	// rest.
	var dirs []string
	if len(ciNeg) == 0 {
		for _, g := range ciPos {
			dirs = append(dirs, g.globstarDirs()...)
		}
	}
	var negL *lang
	for k, g := range pos {
		if g.within(dirs) {
			continue
		}
		if negL == nil {
			negL = newLang(neg)
		}
		base, want := []*lang{g.language(), negL}, []bool{true, false}
		w, found, decided := outside(base, want, ciPos, g)
		why := "which no ci glob matches"
		if decided && !found && len(ciNeg) > 0 {
			w, found, decided = meets(base, want, ciNeg)
			why = "which a ci exclusion removes from ci"
		}
		switch {
		case !decided:
			return s.undecided(posAt[k])
		case found:
			return s.refuse(posAt[k], ErrRefinesOutsideCI, "outside-ci", "", w,
				"it matches %q, %s: gpu.device_control and gpu.hosted_only only refine CI paths, and a path outside ci is classified as if these lists did not name it; narrow the glob to paths the ci globs match, or add those paths to ci", w, why)
		}
	}
	return nil
}

// outside searches for a clean path that each of base holds or lacks (as
// find's want says) and that no glob of cs holds, and returns the shortest
// one it finds; found false means there is none, decided false that the
// search was too large.
//
// The search over the union of cs is exponential in the number of globs
// (each "**/D/**" keeps its own state along the path), so the union is
// searched only when it must be: first each glob of cs alone, those most like
// like (with more of its literal segments among like's) first, and a path is in the
// union when one of them holds every path base allows; a path outside one
// that no other holds is outside the union. What is left is searched over
// the globs of cs that hold a path base allows at all: the others add
// nothing to the union there. Every step is exact.
func outside(base []*lang, want []bool, cs []*glob, like *glob) (path string, found, decided bool) {
	if len(cs) == 0 {
		return find(append(base, newLang(nil)), append(want, false))
	}
	segs := like.literalSegments()
	order := slices.Clone(cs)
	score := func(c *glob) int {
		n := 0
		for seg := range c.literalSegments() {
			if segs[seg] {
				n++
			}
		}
		return n
	}
	slices.SortStableFunc(order, func(a, b *glob) int { return score(b) - score(a) })
	langs := append(slices.Clip(base), nil)
	wants := append(slices.Clip(want), false)
	best := ""
	for _, c := range order {
		langs[len(base)] = c.language()
		w, found, decided := find(langs, wants)
		switch {
		case decided && !found:
			return "", false, true
		case found && !slices.ContainsFunc(cs, func(o *glob) bool { return o.language().matches(w) }):
			if best == "" || len(w) < len(best) {
				best = w
			}
		}
	}
	if best != "" {
		return best, true, true
	}
	var kept []*glob
	wants[len(base)] = true
	for _, c := range cs {
		langs[len(base)] = c.language()
		if _, found, decided := find(langs, wants); found || !decided {
			kept = append(kept, c)
		}
	}
	langs[len(base)] = newLang(kept)
	wants[len(base)] = false
	return find(langs, wants)
}

// meets searches for a clean path that each of base holds or lacks (as
// find's want says) and that a glob of cs holds: the shortest over the
// globs of cs, each searched on its own (a path is in the union when it is
// in one of them).
func meets(base []*lang, want []bool, cs []*glob) (path string, found, decided bool) {
	langs := append(slices.Clip(base), nil)
	wants := append(slices.Clip(want), true)
	decided = true
	for _, c := range cs {
		langs[len(base)] = c.language()
		w, f, d := find(langs, wants)
		switch {
		case !d:
			decided = false
		case f && (!found || len(w) < len(path)):
			path, found = w, true
		}
	}
	if found {
		return path, true, true
	}
	return "", false, decided
}
