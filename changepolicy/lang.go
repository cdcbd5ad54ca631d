package changepolicy

import (
	"encoding/binary"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode/utf8"
)

// lang is the set of paths a union of globs matches, compiled from the
// globs' RE2 form (glob.re) to an NFA, so that the static checks ask exact
// questions of it: can a path be in this set and not in that one?
type lang struct {
	prog *syntax.Prog
	mark []uint32 // per instruction: the step (gen) that last reached it
	gen  uint32
}

// newLang compiles the union of the globs' languages; no globs is the empty
// language.
func newLang(globs []*glob) *lang {
	var res []string
	for _, g := range globs {
		res = append(res, "(?:"+g.re+")")
	}
	re := `[^\x00-\x{10FFFF}]`
	if len(res) > 0 {
		re = strings.Join(res, "|")
	}
	parsed, err := syntax.Parse("(?s:"+re+")", syntax.Perl)
	if err != nil {
		panic("changepolicy: a glob compiled to an invalid expression: " + err.Error())
	}
	prog, err := syntax.Compile(parsed.Simplify())
	if err != nil {
		panic("changepolicy: a glob compiled to an invalid expression: " + err.Error())
	}
	return &lang{prog: prog, mark: make([]uint32, len(prog.Inst))}
}

// language is the glob's own automaton, compiled once.
func (g *glob) language() *lang {
	if g.lang == nil {
		g.lang = newLang([]*glob{g})
	}
	return g.lang
}

// literals lists the glob's wildcard-free alternatives that are paths a
// diff can list: each is a path the glob matches.
func (g *glob) literals() []string {
	var out []string
	if body := strings.TrimPrefix(g.raw, "!"); checkPath(body) == "" {
		out = append(out, body) // matched by its meaning or, failing that, as its text
	}
	for _, e := range g.exps {
		if lit, ok := literal(e); ok && checkPath(lit) == "" {
			out = append(out, lit)
		}
	}
	return out
}

// globstarDirs lists D for each alternative of the form "D/**" (D
// literal), and "" for a bare "**": every path under D, and D itself,
// matches.
func (g *glob) globstarDirs() []string {
	var out []string
	for _, e := range g.exps {
		n := len(e)
		switch {
		case n == 1 && e[0].kind == tGlobstar:
			out = append(out, "")
		case n >= 3 && e[n-1].kind == tGlobstar && e[n-2].kind == tSlash:
			if d, ok := literal(e[:n-2]); ok {
				out = append(out, d)
			}
		}
	}
	return out
}

// within reports whether every path the glob matches lies under one of
// dirs (as globstarDirs returns them): each alternative's literal head, up
// to its first wildcard, starts with "D/", or is D.
func (g *glob) within(dirs []string) bool {
	if len(dirs) == 0 {
		return false
	}
	for _, e := range g.exps {
		var head strings.Builder
		wild := false
	scan:
		for _, t := range e {
			switch t.kind {
			case tLit:
				head.WriteRune(t.r)
			case tSlash:
				head.WriteByte('/')
			default:
				wild = true
				break scan
			}
		}
		h := head.String()
		if !slices.ContainsFunc(dirs, func(d string) bool {
			return d == "" || strings.HasPrefix(h, d+"/") || (!wild && h == d)
		}) {
			return false
		}
	}
	return true
}

// matches reports whether the language holds s.
func (l *lang) matches(s string) bool {
	set, acc := l.start()
	for _, r := range s {
		if len(set) == 0 {
			return false
		}
		set, acc = l.step(set, r)
	}
	return acc
}

// closure appends pc and every instruction reachable from it without
// input that this step has not reached yet, and reports whether a match is
// among them.
func (l *lang) closure(out []uint32, pc uint32) ([]uint32, bool) {
	if l.mark[pc] == l.gen {
		return out, false
	}
	l.mark[pc] = l.gen
	out = append(out, pc)
	in := &l.prog.Inst[pc]
	switch in.Op {
	case syntax.InstMatch:
		return out, true
	case syntax.InstAlt, syntax.InstAltMatch:
		out, a := l.closure(out, in.Out)
		out, b := l.closure(out, in.Arg)
		return out, a || b
	case syntax.InstCapture, syntax.InstNop, syntax.InstEmptyWidth:
		// No anchors are generated; following an empty-width assertion
		// over-approximates, which no caller relies on.
		return l.closure(out, in.Out)
	}
	return out, false
}

// step returns the sorted states after reading r from the states in.
func (l *lang) step(in []uint32, r rune) ([]uint32, bool) {
	l.gen++
	var out []uint32
	acc := false
	for _, pc := range in {
		i := &l.prog.Inst[pc]
		switch i.Op {
		case syntax.InstRune, syntax.InstRune1, syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
			if i.MatchRune(r) {
				var a bool
				if out, a = l.closure(out, i.Out); a {
					acc = true
				}
			}
		}
	}
	slices.Sort(out)
	return out, acc
}

func (l *lang) start() ([]uint32, bool) {
	l.gen++
	out, acc := l.closure(nil, uint32(l.prog.Start))
	slices.Sort(out)
	return out, acc
}

// boundaries adds the first rune of every run of runes the language's
// instructions treat alike.
func (l *lang) boundaries(b map[rune]bool) {
	for _, in := range l.prog.Inst {
		switch in.Op {
		case syntax.InstRune:
			for i := 0; i+1 < len(in.Rune); i += 2 {
				b[in.Rune[i]] = true
				b[in.Rune[i+1]+1] = true
			}
			if len(in.Rune) == 1 {
				b[in.Rune[0]] = true
				b[in.Rune[0]+1] = true
			}
		case syntax.InstRune1:
			b[in.Rune[0]] = true
			b[in.Rune[0]+1] = true
		}
	}
}

// Clean-path states: a path git lists is relative, has no empty, "." or
// ".." segment, no NUL and no trailing '/'.
const (
	cleanStart = iota // at the start of a segment
	cleanDot          // the segment so far is "."
	cleanDots         // the segment so far is ".."
	cleanName         // the segment is a name
	cleanDead
)

func cleanStep(s int, r rune) int {
	switch {
	case s == cleanDead || r == 0:
		return cleanDead
	case r == '/':
		if s == cleanName {
			return cleanStart
		}
		return cleanDead
	case r == '.' && s == cleanStart:
		return cleanDot
	case r == '.' && s == cleanDot:
		return cleanDots
	}
	return cleanName
}

// maxStates bounds the search; past it the question is answered as
// "undecided", and callers refuse the policy (fail safe).
const maxStates = 50000

// find searches for a clean path that each language holds (want[i] true)
// or lacks (want[i] false). It returns the shortest such path and true;
// "", false when there is none; and decided false when the search was too
// large to finish.
func find(langs []*lang, want []bool) (path string, found, decided bool) {
	// The alphabet: runs of runes every language (and the clean-path
	// automaton) treats alike, each read as one representative.
	bounds := map[rune]bool{0: true, 1: true, '.': true, '/': true, '/' + 1: true} // '.'+1 is '/'
	for _, l := range langs {
		l.boundaries(bounds)
	}
	var starts []rune
	for r := range bounds {
		if r >= 0 && r <= utf8.MaxRune {
			starts = append(starts, r)
		}
	}
	slices.Sort(starts)
	reps := make([]rune, 0, len(starts))
	for i, lo := range starts {
		hi := rune(utf8.MaxRune)
		if i+1 < len(starts) {
			hi = starts[i+1] - 1
		}
		reps = append(reps, representative(lo, hi))
	}

	type state struct {
		sets  [][]uint32
		acc   []bool
		clean int
	}
	// A state's key is its sets in binary, each prefixed with its length:
	// exact (no two states share one) and cheap to build.
	var buf []byte
	key := func(s state) []byte {
		buf = append(buf[:0], byte(s.clean))
		for _, set := range s.sets {
			buf = binary.LittleEndian.AppendUint32(buf, uint32(len(set)))
			for _, pc := range set {
				buf = binary.LittleEndian.AppendUint32(buf, pc)
			}
		}
		return buf
	}
	ok := func(s state) bool {
		if s.clean != cleanName {
			return false
		}
		for i, a := range s.acc {
			if a != want[i] {
				return false
			}
		}
		return true
	}
	first := state{clean: cleanStart}
	for _, l := range langs {
		set, acc := l.start()
		first.sets = append(first.sets, set)
		first.acc = append(first.acc, acc)
	}
	type visit struct {
		s      state
		parent int
		r      rune
	}
	seen := map[string]bool{string(key(first)): true}
	queue := []visit{{s: first, parent: -1}}
	for qi := 0; qi < len(queue); qi++ {
		cur := queue[qi].s
		if ok(cur) {
			var rs []rune
			for i := qi; queue[i].parent >= 0; i = queue[i].parent {
				rs = append(rs, queue[i].r)
			}
			slices.Reverse(rs)
			return string(rs), true, true
		}
		for _, r := range reps {
			next := state{clean: cleanStep(cur.clean, r)}
			if next.clean == cleanDead {
				continue
			}
			for i, l := range langs {
				set, acc := l.step(cur.sets[i], r)
				next.sets = append(next.sets, set)
				next.acc = append(next.acc, acc)
			}
			// A language that can no longer match and must: prune.
			dead := false
			for i, set := range next.sets {
				if want[i] && len(set) == 0 {
					dead = true
				}
			}
			if dead {
				continue
			}
			k := key(next)
			if seen[string(k)] {
				continue
			}
			if len(seen) >= maxStates {
				return "", false, false
			}
			seen[string(k)] = true
			queue = append(queue, visit{s: next, parent: qi, r: r})
		}
	}
	return "", false, true
}

// representative picks a readable rune from [lo, hi]: a lowercase letter,
// a digit or an uppercase letter when there is one, else lo.
func representative(lo, hi rune) rune {
	for _, r := range "xabcdefghijklmnopqrstuvwyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ-_" {
		if lo <= r && r <= hi {
			return r
		}
	}
	return lo
}

// literalSegments is the set of the glob's wildcard-free path segments,
// over all its alternatives.
func (g *glob) literalSegments() map[string]bool {
	out := map[string]bool{}
	for _, e := range g.exps {
		var seg strings.Builder
		lit := true
		for i := 0; i <= len(e); i++ {
			if i == len(e) || e[i].kind == tSlash {
				if lit && seg.Len() > 0 {
					out[seg.String()] = true
				}
				seg.Reset()
				lit = true
				continue
			}
			if e[i].kind == tLit {
				seg.WriteRune(e[i].r)
			} else {
				lit = false
			}
		}
	}
	return out
}
