package partition

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Stale is a partition entry whose test no longer exists.
type Stale struct {
	Entry Entry  `json:"entry"`
	Hint  string `json:"hint,omitempty"` // a likely rename, when one is found
}

// Duplicate is a test listed more than once across an archive set's files.
type Duplicate struct {
	ID      TestID  `json:"id"`
	Entries []Entry `json:"entries"`
}

// Report is the result of Check.
type Report struct {
	// Empty: the inventory lists no test at all. A listing that found
	// nothing (the wrong features, an empty archive, a build that listed
	// another package) proves no partition right, and every lane would run
	// nothing.
	Empty      bool        `json:"empty"`
	New        []TestID    `json:"new"`        // in the inventory, in no category
	Stale      []Stale     `json:"stale"`      // in the partition, not in the inventory
	Duplicates []Duplicate `json:"duplicates"` // in more than one line
}

// OK reports whether the inventory lists tests and the partition is
// exhaustive and disjoint and has no stale entries.
func (r Report) OK() bool {
	return !r.Empty && len(r.New) == 0 && len(r.Stale) == 0 && len(r.Duplicates) == 0
}

// String prints the exact TSV lines to add or remove.
func (r Report) String() string {
	if r.OK() {
		return "partition: every test is in exactly one category\n"
	}
	var b strings.Builder
	if r.Empty {
		b.WriteString("the inventory lists no test: check the listing command (its features, its archive, its packages); a lane would run nothing\n")
	}
	if len(r.New) > 0 {
		fmt.Fprintf(&b, "%d test(s) in no category. Audit each body and its helpers, then add a line with its category (a name, feature gate or #[ignore] alone never decides it):\n", len(r.New))
		for _, id := range r.New {
			fmt.Fprintf(&b, "+ %s\t%s\t<category>\n", id.Binary, id.Name)
		}
	}
	if len(r.Stale) > 0 {
		fmt.Fprintf(&b, "%d stale line(s) for tests that no longer exist; remove them:\n", len(r.Stale))
		for _, s := range r.Stale {
			fmt.Fprintf(&b, "- %s: %s", s.Entry.where(), s.Entry.TSV())
			if s.Hint != "" {
				fmt.Fprintf(&b, "    # %s", s.Hint)
			}
			b.WriteString("\n")
		}
	}
	if len(r.Duplicates) > 0 {
		fmt.Fprintf(&b, "%d test(s) listed more than once; keep exactly one line each:\n", len(r.Duplicates))
		for _, d := range r.Duplicates {
			for _, e := range d.Entries[1:] {
				fmt.Fprintf(&b, "- %s: %s    # also at %s\n", e.where(), e.TSV(), d.Entries[0].where())
			}
		}
	}
	return b.String()
}

// Check compares the real inventory with the partition: every test in
// exactly one category (exhaustive, disjoint across the archive set's
// files), and no entries for tests that no longer exist, with a rename hint
// when the same name appears under another binary or a near name in the
// same binary. An inventory with no test is never OK (Report.Empty).
//
// Both lists are walked in test order: the inventory is sorted as the
// parsers return it, and partition files are kept sorted, so its cost is
// linear in their length; the few lines out of order are sorted first.
// Lists far from sorted are indexed in maps instead.
func Check(inv Inventory, p Partition) Report {
	if disordered(inv, func(id *TestID) *TestID { return id }) || disordered(p.Entries, func(e *Entry) *TestID { return &e.ID }) {
		return checkByMaps(inv, p)
	}
	return checkByMerge(inv, p)
}

// checkByMerge is Check walking both lists in test order.
func checkByMerge(inv Inventory, p Partition) Report {
	ents := p.Entries
	r := Report{Empty: len(inv) == 0}
	invOrder := sortedOrder(inv, func(id *TestID) *TestID { return id })
	entOrder := sortedOrder(ents, func(e *Entry) *TestID { return &e.ID })
	invAt := func(k int) *TestID {
		if invOrder != nil {
			return &inv[invOrder[k]]
		}
		return &inv[k]
	}
	entAt := func(k int) int {
		if entOrder != nil {
			return entOrder[k]
		}
		return k
	}
	var newTests, stale []int // indices in inv and in ents
	type dup struct{ first, at, n int }
	var dups []dup // runs entOrder[at:at+n] of one test's entries
	for i, j := 0, 0; i < len(inv) || j < len(ents); {
		c := 1
		switch {
		case j == len(ents):
			c = -1
		case i < len(inv):
			c = compareIDs(*invAt(i), ents[entAt(j)].ID)
		}
		if c < 0 {
			if invOrder != nil {
				newTests = append(newTests, invOrder[i])
			} else {
				newTests = append(newTests, i)
			}
			i++
			continue
		}
		// The entries for the test at j, in the partition's order.
		id := &ents[entAt(j)].ID
		g := j + 1
		for g < len(ents) && ents[entAt(g)].ID == *id {
			g++
		}
		if g-j > 1 {
			dups = append(dups, dup{entAt(j), j, g - j})
		}
		if c == 0 {
			for i < len(inv) && *invAt(i) == *id {
				i++
			}
		} else {
			for k := j; k < g; k++ {
				stale = append(stale, entAt(k))
			}
		}
		j = g
	}
	// Report in the inventory's and the partition's own order.
	if invOrder != nil {
		slices.Sort(newTests)
	}
	if entOrder != nil {
		slices.Sort(stale)
		slices.SortFunc(dups, func(a, b dup) int { return a.first - b.first })
	}
	for _, i := range newTests {
		r.New = append(r.New, inv[i])
	}
	for _, d := range dups {
		list := make([]Entry, d.n)
		for k := range list {
			list[k] = ents[entAt(d.at+k)]
		}
		r.Duplicates = append(r.Duplicates, Duplicate{ID: list[0].ID, Entries: list})
	}
	if len(stale) > 0 {
		newByName, newByBinary := newIndex(r.New)
		r.Stale = make([]Stale, len(stale))
		for k, e := range stale {
			r.Stale[k] = Stale{Entry: ents[e], Hint: hint(ents[e].ID, newByName, newByBinary)}
		}
	}
	return r
}

// disordered reports whether s is far from sorted (more than one adjacent
// pair in 32 out of order), when sorting it would cost more than indexing
// it in maps.
func disordered[T any](s []T, id func(*T) *TestID) bool {
	descents := 0
	for i := 1; i < len(s); i++ {
		if compareIDs(*id(&s[i-1]), *id(&s[i])) > 0 {
			if descents++; descents*32 > len(s) {
				return true
			}
		}
	}
	return false
}

// checkByMaps is Check for lists far from sorted: it indexes both in maps.
func checkByMaps(inv Inventory, p Partition) Report {
	r := Report{Empty: len(inv) == 0}
	inInv := make(map[TestID]bool, len(inv))
	for _, id := range inv {
		inInv[id] = true
	}
	byID := make(map[TestID][]Entry, len(p.Entries))
	for _, e := range p.Entries {
		byID[e.ID] = append(byID[e.ID], e)
	}
	for _, id := range inv {
		if _, ok := byID[id]; !ok {
			r.New = append(r.New, id)
		}
	}
	newByName, newByBinary := newIndex(r.New)
	for _, e := range p.Entries {
		if list := byID[e.ID]; len(list) > 1 && list[0] == e {
			r.Duplicates = append(r.Duplicates, Duplicate{ID: e.ID, Entries: list})
		}
		if !inInv[e.ID] {
			r.Stale = append(r.Stale, Stale{Entry: e, Hint: hint(e.ID, newByName, newByBinary)})
		}
	}
	return r
}

// newIndex indexes the new tests for rename hints.
func newIndex(tests []TestID) (byName, byBinary map[string][]TestID) {
	byName, byBinary = map[string][]TestID{}, map[string][]TestID{}
	for _, id := range tests {
		byName[id.Name] = append(byName[id.Name], id)
		byBinary[id.Binary] = append(byBinary[id.Binary], id)
	}
	return byName, byBinary
}

// sortedOrder returns the indices of s in (test, index) order, or nil
// when s is in that order already. Listings and partition files are
// sorted, or nearly (a few lines out of place, files of an archive set
// one after another): it keeps the longest run in order it finds greedily,
// sorts what breaks the order, and merges the two, so that its cost is
// linear in len(s) plus k log k for the k elements out of place.
func sortedOrder[T any](s []T, id func(*T) *TestID) []int {
	less := func(a, b int) bool { // (test, index) order
		c := compareIDs(*id(&s[a]), *id(&s[b]))
		return c < 0 || c == 0 && a < b
	}
	sorted := true
	for i := 1; i < len(s) && sorted; i++ {
		sorted = compareIDs(*id(&s[i-1]), *id(&s[i])) <= 0
	}
	if sorted {
		return nil
	}
	run := make([]int, 0, len(s))
	var out []int
	for i := range s {
		if n := len(run); n > 0 && less(i, run[n-1]) {
			if n < 2 || less(i, run[n-2]) {
				out = append(out, i) // i is too small for the run
				continue
			}
			out = append(out, run[n-1]) // the run's last was too large
			run = run[:n-1]
		}
		run = append(run, i)
	}
	slices.SortFunc(out, func(a, b int) int {
		if less(a, b) {
			return -1
		}
		return 1
	})
	merged := make([]int, 0, len(s))
	for len(run) > 0 && len(out) > 0 {
		if less(out[0], run[0]) {
			merged, out = append(merged, out[0]), out[1:]
		} else {
			merged, run = append(merged, run[0]), run[1:]
		}
	}
	return append(append(merged, run...), out...)
}

func hint(id TestID, byName, byBinary map[string][]TestID) string {
	if moved := byName[id.Name]; len(moved) > 0 {
		return fmt.Sprintf("moved? the same test now exists in binary %s", moved[0].Binary)
	}
	best, bestD := "", 1<<30
	candidates := byBinary[id.Binary]
	if len(candidates) > 2000 {
		candidates = candidates[:2000] // bounded work per stale line
	}
	for _, c := range candidates {
		if d := distance(id.Name, c.Name, 8); d < bestD {
			best, bestD = c.Name, d
		}
	}
	if best != "" && bestD <= max(3, len(id.Name)/5) {
		return fmt.Sprintf("renamed? %s %s is new", id.Binary, best)
	}
	return ""
}

// distance is the Levenshtein distance of a and b, giving up (returning
// limit+1) once it exceeds limit.
func distance(a, b string, limit int) int {
	if d := len(a) - len(b); d > limit || -d > limit {
		return limit + 1
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin > limit {
			return limit + 1
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Lane is the tests of one category.
type Lane struct {
	Category string
	Tests    []TestID
}

// Select returns the tests of a category, sorted.
func Select(p Partition, category string) Lane {
	return Lane{Category: category, Tests: testsWhere(p, func(c string) bool { return c == category })}
}

// testsWhere returns, sorted and once each, the tests of the entries whose
// category keep accepts.
func testsWhere(p Partition, keep func(category string) bool) []TestID {
	var ids []TestID
	for _, e := range p.Entries {
		if keep(e.Category) {
			ids = append(ids, e.ID)
		}
	}
	Inventory(ids).sort()
	return slices.Compact(ids)
}

// filtersetSpecial escapes a matcher's text as nextest's filterset parser
// reads it: the text ends at an unescaped ")" or ",", and a backslash
// starts an escape, of which only \\, \), \, and \/ (besides \n and the
// like) exist. "(" is plain text; "\(" is an invalid escape.
var filtersetSpecial = strings.NewReplacer(`\`, `\\`, `)`, `\)`, `,`, `\,`)

// NextestFilter renders the lane as a nextest filterset expression, exact
// binary IDs and test names, grouped by binary. An empty lane selects
// nothing.
func (l Lane) NextestFilter() string {
	if len(l.Tests) == 0 {
		return "none()"
	}
	var groups []string
	for i := 0; i < len(l.Tests); {
		j := i
		var names []string
		for ; j < len(l.Tests) && l.Tests[j].Binary == l.Tests[i].Binary; j++ {
			names = append(names, "test(="+filtersetSpecial.Replace(l.Tests[j].Name)+")")
		}
		groups = append(groups, fmt.Sprintf("(binary_id(=%s) & (%s))", filtersetSpecial.Replace(l.Tests[i].Binary), strings.Join(names, " | ")))
		i = j
	}
	return strings.Join(groups, " | ")
}

// MaxFilterBytes bounds a rendered nextest filterset: it is passed as one
// argument (-E) and one environment variable, and Linux caps each at
// 128 KiB; a longer one fails the exec ("argument list too long").
const MaxFilterBytes = 120 << 10

// ErrFilterTooLong is matched by NextestFilterWithin's refusal, and by
// GoRunPatterns' for a package whose pattern would not fit one argument.
var ErrFilterTooLong = errors.New("partition: the lane's nextest filterset is too long for one argument")

// NextestFilterWithin renders the lane as a filterset of at most max
// bytes: its own tests when they fit (NextestFilter), else the complement
// within p, "not (every other category's tests)" (l being Select(p,
// l.Category)). The complement selects the lane exactly only when p covers
// the listed tests exactly, as a passing Check proves; a test p lacks would
// run in it. When neither fits, it fails with ErrFilterTooLong.
func (l Lane) NextestFilterWithin(p Partition, max int) (string, error) {
	own := l.NextestFilter()
	if len(own) <= max {
		return own, nil
	}
	others := Lane{Tests: testsWhere(p, func(c string) bool { return c != l.Category })}
	complement := "all()"
	if len(others.Tests) > 0 {
		complement = "not (" + others.NextestFilter() + ")"
	}
	if len(complement) <= max {
		return complement, nil
	}
	return "", fmt.Errorf("%w: the %s lane's %d tests take %d bytes, and the rest of the partition %d, over %d: split the category into smaller lanes", ErrFilterTooLong, l.Category, len(l.Tests), len(own), len(complement), max)
}

// ErrSplitTest is matched by GoRunPatterns' refusal: the partition puts a
// Go test and its subtests in more than one category.
var ErrSplitTest = errors.New("partition: a Go test is split across categories")

// SplitTest is a Go top-level test whose entries (the test itself and its
// subtests) a partition puts in more than one category.
type SplitTest struct {
	Package string              `json:"package"`
	Test    string              `json:"test"`
	In      map[string][]string `json:"in"` // category -> the entries' names there
}

func (s SplitTest) String() string {
	var in []string
	for _, c := range slices.Sorted(maps.Keys(s.In)) {
		in = append(in, fmt.Sprintf("%s (%s)", c, strings.Join(s.In[c], ", ")))
	}
	return fmt.Sprintf("%s %s is in %s", s.Package, s.Test, strings.Join(in, " and "))
}

// goTop is the top-level Go test an entry belongs to: the unit go test -run
// selects.
func goTop(id TestID) TestID {
	name, _, _ := strings.Cut(id.Name, "/")
	return TestID{id.Binary, name}
}

// GoSplits lists, sorted, the Go top-level tests that p splits across
// categories. `go test -run` runs a subtest only with its parent and a
// parent with every subtest, so such a test cannot be run in one lane
// without running its other category's subtests there too.
func GoSplits(p Partition) []SplitTest {
	// One pass finds the split tests and one more collects their entries:
	// a test in one category, nearly every test, costs a map entry and
	// nothing more.
	type group struct {
		category string
		split    *SplitTest
	}
	index := make(map[TestID]int, len(p.Entries))
	groups := make([]group, 0, len(p.Entries))
	var splits []*SplitTest
	for _, e := range p.Entries {
		k := goTop(e.ID)
		i, ok := index[k]
		switch {
		case !ok:
			index[k] = len(groups)
			groups = append(groups, group{category: e.Category})
		case groups[i].split == nil && groups[i].category != e.Category:
			groups[i].split = &SplitTest{Package: k.Binary, Test: k.Name, In: map[string][]string{}}
			splits = append(splits, groups[i].split)
		}
	}
	if len(splits) == 0 {
		return nil
	}
	for _, e := range p.Entries {
		if s := groups[index[goTop(e.ID)]].split; s != nil {
			s.In[e.Category] = append(s.In[e.Category], e.ID.Name)
		}
	}
	slices.SortFunc(splits, func(a, b *SplitTest) int {
		return cmp.Or(strings.Compare(a.Package, b.Package), strings.Compare(a.Test, b.Test))
	})
	out := make([]SplitTest, len(splits))
	for i, s := range splits {
		out[i] = *s
	}
	return out
}

// ErrBenchmark is matched by GoRunPatterns' refusal of a lane holding a
// benchmark, which `go test -run` never runs.
var ErrBenchmark = errors.New("partition: go test -run does not run benchmarks")

// GoRunPatterns renders the lane as one `go test -run` pattern per package,
// matching its top-level tests exactly. A lane holding any of a test that p
// splits across categories (GoSplits) is refused with ErrSplitTest: it
// would run the other category's subtests too, a not-run category's among
// them, and the lanes would overlap. A lane holding a benchmark (which
// `go test -list` lists) is refused with ErrBenchmark: -run would select it
// and never run it, and the lane would pass without it. A package whose
// pattern would pass MaxFilterBytes is refused with ErrFilterTooLong.
func (l Lane) GoRunPatterns(p Partition) (map[string]string, error) {
	mine := map[TestID]bool{}
	byPkg := map[string][]string{}
	var benchmarks []string
	for _, id := range l.Tests {
		if k := goTop(id); !mine[k] {
			mine[k] = true
			byPkg[k.Binary] = append(byPkg[k.Binary], regexp.QuoteMeta(k.Name))
			if strings.HasPrefix(k.Name, "Benchmark") {
				benchmarks = append(benchmarks, k.Binary+" "+k.Name)
			}
		}
	}
	if len(benchmarks) > 0 {
		return nil, fmt.Errorf("%w: %s: the %s lane would pass without running them; put benchmarks in an excluded category and run them with -bench", ErrBenchmark, strings.Join(benchmarks, ", "), l.Category)
	}
	var split []string
	for _, s := range GoSplits(p) {
		if mine[TestID{s.Package, s.Test}] {
			split = append(split, s.String())
		}
	}
	if len(split) > 0 {
		return nil, fmt.Errorf("%w: %s: go test -run selects whole top-level tests; put each of these tests and all its subtests in one category", ErrSplitTest, strings.Join(split, "; "))
	}
	out := make(map[string]string, len(byPkg))
	for pkg, names := range byPkg {
		out[pkg] = "^(" + strings.Join(names, "|") + ")$"
		if len(out[pkg]) > MaxFilterBytes {
			return nil, fmt.Errorf("%w: the %s lane's -run pattern for %s takes %d bytes, over %d: split its tests into more categories", ErrFilterTooLong, l.Category, pkg, len(out[pkg]), MaxFilterBytes)
		}
	}
	return out, nil
}

// NotRun lists, for a gate summary, every test in a not-run or excluded
// category: these are never reported as passed.
func NotRun(cfg Config, p Partition) []string {
	var out []string
	for _, e := range p.Entries {
		switch cfg.Kind(e.Category) {
		case KindNotRun, KindExcluded:
			s := fmt.Sprintf("%s (%s)", e.ID, e.Category)
			if e.Note != "" {
				s += ": " + e.Note
			}
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}
