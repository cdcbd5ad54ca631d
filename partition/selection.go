package partition

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Renderings are the ways Selection.Render writes a lane: a nextest
// filterset, go test -run patterns per package, the lane's tests one a
// line, or the NOT RUN list.
var Renderings = []string{"nextest", "go", "lines", "not-run"}

// ErrRendering is matched when Selection.Render is asked for a rendering
// that is not one of Renderings.
var ErrRendering = errors.New("partition: unknown rendering")

// Selection is one category's lane as a workflow step needs it: the lane,
// its nextest filterset (fitted within MaxFilterBytes) and the NOT RUN list
// the gate summary reports.
type Selection struct {
	Lane   Lane
	Filter string   // NextestFilterWithin MaxFilterBytes; "" when it does not fit
	NotRun []string // NotRun of the whole partition
	// FilterErr is why Filter is empty: a filterset over MaxFilterBytes.
	// Only the nextest rendering fails on it; with another, an empty
	// filter is left for nextest to refuse.
	FilterErr error
	p         Partition
}

// Selection selects category's lane from p as Lane does, refusing a
// category c does not configure and, with requireTests, an empty lane.
func (c Config) Selection(p Partition, category string, requireTests bool) (Selection, error) {
	l, err := c.Lane(p, category, requireTests)
	if err != nil {
		return Selection{}, err
	}
	s := Selection{Lane: l, NotRun: NotRun(c, p), p: p}
	s.Filter, s.FilterErr = l.NextestFilterWithin(p, MaxFilterBytes)
	return s, nil
}

// SelectFiles reads the partition files (ParseTSVFiles) and selects
// category's lane from them (Selection). A refusal of the lane itself, not
// of the files, wraps ErrCategory.
func (c Config) SelectFiles(category string, requireTests bool, paths ...string) (Selection, error) {
	p, err := c.ParseTSVFiles(paths...)
	if err != nil {
		return Selection{}, err
	}
	return c.Selection(p, category, requireTests)
}

// Outputs are the lane's step outputs: filter (the nextest filterset),
// not_run (NotRunOutput, for the gate's NOT RUN list) and tests, how many
// tests the lane selects.
func (s Selection) Outputs() [][2]string {
	return [][2]string{{"filter", s.Filter}, {"not_run", NotRunOutput(s.NotRun)}, {"tests", strconv.Itoa(len(s.Lane.Tests))}}
}

// Render writes the lane as rendering (one of Renderings) says, a line
// each: the filterset (FilterErr when it does not fit); "package<TAB>
// pattern" per package, sorted (GoRunPatterns' refusals); each test; or
// each NOT RUN item.
func (s Selection) Render(rendering string) (string, error) {
	var b strings.Builder
	switch rendering {
	case "nextest":
		if s.FilterErr != nil {
			return "", s.FilterErr
		}
		b.WriteString(s.Filter + "\n")
	case "go":
		pats, err := s.Lane.GoRunPatterns(s.p)
		if err != nil {
			return "", err
		}
		for _, pkg := range slices.Sorted(maps.Keys(pats)) {
			fmt.Fprintf(&b, "%s\t%s\n", pkg, pats[pkg])
		}
	case "lines":
		for _, id := range s.Lane.Tests {
			b.WriteString(id.String() + "\n")
		}
	case "not-run":
		for _, item := range s.NotRun {
			b.WriteString(item + "\n")
		}
	default:
		return "", fmt.Errorf("%w %q: use %s", ErrRendering, rendering, strings.Join(Renderings, ", "))
	}
	return b.String(), nil
}

// MaxNotRunOutput bounds NotRunOutput. The NOT RUN list reaches the gate's
// publish step as one environment variable and one argument, each of which
// Linux caps at 128 KiB (a longer one fails the exec, and the gate is
// never published), and the check summary that lists it holds 65,535
// characters.
const MaxNotRunOutput = 32 << 10

// NotRunOutput joins a NOT RUN list with commas (one item each, a comma
// inside an item made a semicolon), up to MaxNotRunOutput bytes; what does
// not fit is counted in a last item, never dropped silently.
func NotRunOutput(notRun []string) string {
	more := func(n int) string {
		return fmt.Sprintf("… and %d more not run or excluded (partition select -render not-run lists them all)", n)
	}
	var b strings.Builder
	for i, s := range notRun {
		item := strings.ReplaceAll(s, ",", ";")
		need := b.Len() + 1 + len(item)
		if left := len(notRun) - i - 1; left > 0 {
			need += 1 + len(more(left)) // room to say what follows
		}
		if need > MaxNotRunOutput {
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			b.WriteString(more(len(notRun) - i))
			break
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(item)
	}
	return b.String()
}
