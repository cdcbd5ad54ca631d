package changepolicy

import (
	"bufio"
	"encoding/json"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/bmatcuk/doublestar/v4"
)

// naiveMatch is what the index decides, without the index: every glob's
// every alternative through doublestar.Match, in policy order.
func naiveMatch(t *testing.T, idx *index, path string) []setMatch {
	t.Helper()
	out := make([]setMatch, idx.sets())
	for i := range out {
		out[i] = setMatch{pos: -1}
	}
	for id, g := range idx.globs {
		hit := false
		for _, alt := range g.g.pattern {
			m, err := doublestar.Match(alt, path)
			if err != nil {
				t.Fatalf("%q: alternative %q: %v", g.raw, alt, err)
			}
			hit = hit || m
		}
		if !hit {
			continue
		}
		m := &out[g.set]
		switch {
		case g.negate:
			m.neg = true
		case m.pos < 0:
			m.pos = int32(id)
		}
	}
	return out
}

var pathAlphabet = []string{"a", "b", ".", "-", "_", "x", "md", "NOTES", "README", "0", "1", "5", "é"}

// instantiate writes a random path that one of g's alternatives matches,
// or nearly: stars and globstars filled in from a small alphabet, then
// (half the time) one mutation, so that near misses are tried as well.
func instantiate(rng *rand.Rand, g *glob) string {
	e := g.exps[rng.IntN(len(g.exps))]
	var b strings.Builder
	for _, t := range e {
		switch t.kind {
		case tLit:
			b.WriteRune(t.r)
		case tSlash:
			b.WriteByte('/')
		case tAny:
			b.WriteString(string([]rune(pathAlphabet[rng.IntN(len(pathAlphabet))])[0]))
		case tStar:
			for range rng.IntN(3) {
				b.WriteString(pathAlphabet[rng.IntN(len(pathAlphabet))])
			}
		case tGlobstar:
			for i := range rng.IntN(3) {
				if i > 0 {
					b.WriteByte('/')
				}
				b.WriteString(pathAlphabet[rng.IntN(len(pathAlphabet))])
			}
		case tClass:
			if rs := classRanges(t); len(rs) > 0 {
				r := rs[rng.IntN(len(rs))]
				b.WriteRune(r.lo + rune(rng.IntN(int(min(r.hi-r.lo, 64))+1)))
			}
		}
	}
	p := b.String()
	for strings.Contains(p, "//") {
		p = strings.ReplaceAll(p, "//", "/")
	}
	p = strings.Trim(p, "/")
	if p == "" || rng.IntN(2) == 0 {
		return p
	}
	i := rng.IntN(len(p) + 1)
	switch rng.IntN(5) {
	case 0:
		if i < len(p) {
			p = p[:i] + p[i+1:]
		}
	case 1:
		p = p[:i] + pathAlphabet[rng.IntN(len(pathAlphabet))] + p[i:]
	case 2:
		if j := strings.LastIndexByte(p, '/'); j > 0 {
			p = p[:j]
		}
	case 3:
		p += "/" + pathAlphabet[rng.IntN(len(pathAlphabet))]
	case 4:
		p = pathAlphabet[rng.IntN(len(pathAlphabet))] + "/" + p
	}
	return p
}

// checkIndex compares idx with naiveMatch on n random paths drawn from
// its globs, and on extra; it returns how many paths matched some glob.
func checkIndex(t *testing.T, rng *rand.Rand, idx *index, n int, extra []string) (checked, matched int) {
	t.Helper()
	got := make([]setMatch, idx.sets())
	try := func(path string) {
		if checkPath(path) != "" {
			return
		}
		checked++
		want := naiveMatch(t, idx, path)
		idx.match(path, got)
		if !slices.Equal(got, want) {
			t.Fatalf("path %q: index %v, doublestar over every alternative %v", path, got, want)
		}
		if slices.ContainsFunc(want, func(m setMatch) bool { return m.pos >= 0 || m.neg }) {
			matched++
		}
	}
	for _, p := range extra {
		try(p)
	}
	for range n {
		try(instantiate(rng, idx.globs[rng.IntN(len(idx.globs))].g))
	}
	return checked, matched
}

// The index decides each glob shape without doublestar and finds
// candidates by directory, tail and basename; it must decide as
// doublestar does. Over the benchmark policy (braces, "**/NAME*", "D/**",
// exclusions), the example policy and random paths drawn from their globs,
// every set's outcome is the one doublestar.Match gives on every
// alternative; and on the benchmark policy, whose globs have none of the
// constructs the package documentation lists as read differently, each
// glob agrees with doublestar.Match on the glob as written, braces and all
// (but for the glob's own text, which it matches as picomatch does).
func TestIndex_AgreesWithDoublestarOnPolicies(t *testing.T) {
	ex, err := Load(ExamplePolicy)
	if err != nil {
		t.Fatal(err)
	}
	bench := benchPolicy(t, 200)
	var extra []string
	for _, c := range benchChanges(2000) {
		extra = append(extra, c.Path)
	}
	rng := rand.New(rand.NewPCG(3, 5))
	for name, p := range map[string]*Policy{"example": ex, "bench": bench} {
		checked, matched := checkIndex(t, rng, p.idx, 20000, extra)
		if checked < 15000 || matched < checked/4 {
			t.Fatalf("%s: only %d paths checked, %d matching", name, checked, matched)
		}
		t.Logf("%s: %d paths checked, %d matching", name, checked, matched)
	}
	for _, g := range bench.idx.globs {
		body := strings.TrimPrefix(g.raw, "!")
		one := newIndex()
		one.add(setDocs, 0, g.g)
		out := make([]setMatch, firstLane)
		for range 200 {
			path := instantiate(rng, g.g)
			// A glob also matches its own text, as picomatch's do (the
			// package documentation lists it).
			if checkPath(path) != "" || path == body {
				continue
			}
			raw, err := doublestar.Match(body, path)
			if err != nil {
				t.Fatal(err)
			}
			one.match(path, out)
			if got := out[setDocs].pos >= 0 || out[setDocs].neg; got != raw {
				t.Fatalf("%q on %q: index %v, doublestar.Match on the glob as written %v", g.raw, path, got, raw)
			}
		}
	}
}

// The same over every glob of the picomatch and paths-filter suites in
// testdata that Load accepts, each alone, on the suite's own path and
// random paths drawn from the glob.
func TestIndex_AgreesWithDoublestarOnCorpora(t *testing.T) {
	var cases []corpusCase
	f, err := os.Open("testdata/picomatch-cases.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var c corpusCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("testdata/paths-filter-cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var pf []corpusCase
	if err := json.Unmarshal(data, &pf); err != nil {
		t.Fatal(err)
	}
	cases = append(cases, pf...)
	rng := rand.New(rand.NewPCG(9, 1))
	seen := map[string]bool{}
	globs, checked, matched := 0, 0, 0
	for _, c := range cases {
		for _, raw := range c.patterns(t) {
			g, prob := parseGlob(raw)
			if prob != nil || seen[raw] {
				continue
			}
			seen[raw] = true
			globs++
			idx := newIndex()
			idx.add(setDocs, 0, g)
			c, m := checkIndex(t, rng, idx, 30, []string{c.Path})
			checked, matched = checked+c, matched+m
		}
	}
	if globs < 500 || matched < checked/4 {
		t.Fatalf("only %d globs, %d paths checked, %d matching", globs, checked, matched)
	}
	t.Logf("%d globs, %d paths checked, %d matching", globs, checked, matched)
}
