package changepolicy

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/bmatcuk/doublestar/v4"
)

// The static checks ask their questions of an automaton built from each
// glob; they are sound only if it is the matcher's language. For random
// globs and paths over a small alphabet (so that they often match), the
// index, doublestar over the glob's alternatives and the automaton agree;
// where the glob has none of the constructs the package documentation
// lists as read differently, doublestar on the glob as written agrees too.
func TestGlob_MatcherIndexAndAutomatonAgree(t *testing.T) {
	parts := []string{"a", "b", ".", "/", "*", "**", "?", "[ab]", "[!a]", "[^.]", "{a,b/}", "{,a}", `\*`, "/**", "**/", "{a/**,b}", "{a,{b,.}}", "{*,{a,b}/}", "[b]", "x]"}
	pathParts := []string{"a", "b", ".", "/", "*", "ab", ".a"}
	rng := rand.New(rand.NewPCG(7, 7))
	checked, matched := 0, 0
	for range 60000 {
		var pb, xb strings.Builder
		for range 1 + rng.IntN(6) {
			pb.WriteString(parts[rng.IntN(len(parts))])
		}
		for range 1 + rng.IntN(6) {
			xb.WriteString(pathParts[rng.IntN(len(pathParts))])
		}
		pattern, path := pb.String(), xb.String()
		if checkPath(path) != "" {
			continue
		}
		g, prob := parseGlob(pattern)
		if prob != nil {
			continue
		}
		checked++
		want := false
		for _, alt := range g.pattern {
			m, err := doublestar.Match(alt, path)
			if err != nil {
				t.Fatalf("%q: alternative %q: %v", pattern, alt, err)
			}
			want = want || m
		}
		if want {
			matched++
		}
		idx := newIndex()
		idx.add(setDocs, 0, g)
		out := make([]setMatch, firstLane)
		idx.match(path, out)
		if got := out[setDocs].member(); got != want {
			t.Fatalf("index: %q on %q = %v, doublestar over %q = %v", pattern, path, got, g.pattern, want)
		}
		if got := regexp.MustCompile(`^(?s:` + g.re + `)$`).MatchString(path); got != want {
			t.Fatalf("automaton %q: %q on %q = %v, doublestar over %q = %v", g.re, pattern, path, got, g.pattern, want)
		}
		if raw, err := doublestar.Match(pattern, path); err == nil && raw && !want && !strings.Contains(pattern, "[!") && !strings.Contains(pattern, "[^") {
			t.Fatalf("doublestar: %q matches %q, this matcher does not", pattern, path)
		}
		if !strings.ContainsAny(pattern, `[{\`) && !strings.Contains(pattern, "***") {
			if raw, err := doublestar.Match(pattern, path); err == nil && raw != want {
				t.Fatalf("doublestar: %q on %q = %v, this matcher %v", pattern, path, raw, want)
			}
		}
	}
	if checked < 10000 || matched < 1000 {
		t.Fatalf("only %d accepted globs checked, %d matching", checked, matched)
	}
	t.Logf("%d globs checked, %d matching", checked, matched)
}
