package changepolicy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// corpusOutcome is what this package does with one glob-test case: it
// loads a policy whose docs set is patterns and classifies a change of
// path. "match" and "no-match" say whether path is docs; a refusal names
// the sentinel Load's error wraps and the construct it names
// ("refused:unsupported:extglob"); "invalid-path" is a path Classify
// refuses, one that no diff lists.
func corpusOutcome(patterns []string, path string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(patterns); err != nil {
		panic(err)
	}
	p, err := Load([]byte("docs: " + strings.TrimSpace(b.String()) + "\n"))
	var ge *GlobError
	switch {
	case errors.As(err, &ge) && errors.Is(err, ErrInvalidPolicy):
		kind := map[error]string{ErrUnsupportedGlob: "unsupported", ErrNeverMatches: "never-matches", ErrInvalidGlob: "invalid", ErrRefinesOutsideCI: "outside-ci"}[ge.Err]
		return "refused:" + kind + ":" + ge.Construct
	case err != nil:
		return fmt.Sprintf("load-error: %v", err)
	}
	d, err := Classify(p, []Change{{Path: path}})
	switch {
	case errors.Is(err, ErrInvalidChange):
		return "invalid-path"
	case err != nil:
		return fmt.Sprintf("classify-error: %v", err)
	case d.Class == DocsOnly:
		return "match"
	case d.Class == Code:
		return "no-match"
	}
	return "class " + string(d.Class)
}

// corpusCase is one case of a glob test suite, as testdata holds it (see
// testdata/SOURCES.md): the suite's pattern(s), path and expected result,
// and what this package does with them (Want), with the reason when that
// differs from the suite.
type corpusCase struct {
	Src          string          `json:"src"`
	Pattern      json.RawMessage `json:"pattern"`  // picomatch: a string or a list
	Patterns     []string        `json:"patterns"` // paths-filter: one filter's list
	Path         string          `json:"path"`
	Options      map[string]any  `json:"options"`       // picomatch options the suite passed
	FilterStatus string          `json:"filter_status"` // paths-filter: the filter's change-status condition
	Expected     bool            `json:"expected"`
	PathsFilter  any             `json:"paths_filter"` // picomatch 2.3.1 with {dot: true}: true, false or "throws"
	Want         string          `json:"want"`
	Reason       string          `json:"reason"`
}

func (c corpusCase) patterns(t *testing.T) []string {
	t.Helper()
	if c.Patterns != nil {
		return c.Patterns
	}
	var one string
	if err := json.Unmarshal(c.Pattern, &one); err == nil {
		return []string{one}
	}
	var list []string
	if err := json.Unmarshal(c.Pattern, &list); err != nil {
		t.Fatalf("%s: pattern %s is neither a string nor a list", c.Src, c.Pattern)
	}
	return list
}

// corpusDifferences are the reasons a case may differ from its suite
// besides a refusal (whose reason is the refused construct); doc.go lists
// every one of them.
var corpusDifferences = []string{"dotfiles", "exclusions-subtract", "status-filter", "option:NAME", "path-not-clean"}

// checkCorpusCase holds a case's recorded outcome to the package and its
// reason to the rules: no reason where the result agrees with the suite,
// and a documented one wherever it does not.
func checkCorpusCase(t *testing.T, c corpusCase, doc string, count map[string]int) {
	t.Helper()
	pats := c.patterns(t)
	if got := corpusOutcome(pats, c.Path); got != c.Want {
		t.Errorf("%s: %q on %q: got %s, the data says %s (%s)", c.Src, pats, c.Path, got, c.Want, c.Reason)
		return
	}
	documented := func(name string) {
		if _, seen := count["doc:"+name]; seen {
			return
		}
		count["doc:"+name] = 0
		if !strings.Contains(doc, "`"+name+"`") {
			t.Errorf("%s: reason %q is not listed in doc.go", c.Src, name)
		}
	}
	switch kind, construct, _ := strings.Cut(strings.TrimPrefix(c.Want, "refused:"), ":"); {
	case strings.HasPrefix(c.Want, "refused:"):
		if c.Reason != construct {
			t.Errorf("%s: refused (%s) with reason %q, want the construct %q", c.Src, kind, c.Reason, construct)
		}
		documented(construct)
		count["refused: "+construct]++
	case c.Want == "invalid-path":
		if c.Reason != "path-not-clean" {
			t.Errorf("%s: path %q refused with reason %q, want path-not-clean", c.Src, c.Path, c.Reason)
		}
		documented(c.Reason)
		count[c.Reason]++
	case (c.Want == "match") == c.Expected:
		if c.Reason != "" {
			t.Errorf("%s: agrees with the suite but gives the reason %q", c.Src, c.Reason)
		}
		count["agree"]++
	default:
		ok := false
		switch {
		case c.Reason == "dotfiles":
			// The suite ran picomatch without dot: true; paths-filter sets it.
			ok = c.Options == nil && c.PathsFilter == (c.Want == "match")
		case strings.HasPrefix(c.Reason, "option:"):
			ok = len(c.Options) > 0
			c.Reason = "option:NAME"
		case c.Reason == "exclusions-subtract":
			ok = slices.ContainsFunc(pats, func(p string) bool { return strings.HasPrefix(p, "!") })
		case c.Reason == "status-filter":
			ok = c.FilterStatus != ""
		}
		if !ok {
			t.Errorf("%s: %q on %q is %s, the suite expects %v: reason %q does not explain it", c.Src, pats, c.Path, c.Want, c.Expected, c.Reason)
		}
		documented(c.Reason)
		count[c.Reason]++
	}
}

func readDoc(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range corpusDifferences {
		if !bytes.Contains(doc, []byte("`"+r+"`")) {
			t.Errorf("doc.go does not list the difference %q", r)
		}
	}
	return string(doc)
}

func logCounts(t *testing.T, total int, count map[string]int) {
	t.Helper()
	var keys []string
	for k := range count {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		if strings.HasPrefix(k, "doc:") {
			continue
		}
		fmt.Fprintf(&b, "\n  %-32s %d", k, count[k])
	}
	t.Logf("%d cases:%s", total, b.String())
}

// Globs behave as a paths-filter user expects, or are refused: every
// path/pattern/expected case of picomatch's own test suite (the matcher
// dorny/paths-filter uses) runs through Load and Classify, and each either
// agrees with the suite or differs for a reason the package documentation
// lists: a refused construct, a path no diff lists, dotfiles (which
// paths-filter matches, as this package does), or a picomatch option the
// case set and paths-filter does not.
func TestGlob_PicomatchSuiteAgreesOrDiffersAsDocumented(t *testing.T) {
	doc := readDoc(t)
	f, err := os.Open("testdata/picomatch-cases.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	count, total := map[string]int{}, 0
	for sc.Scan() {
		var c corpusCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("line %d: %v", total+1, err)
		}
		total++
		checkCorpusCase(t, c, doc, count)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if total < 9000 {
		t.Fatalf("only %d picomatch cases", total)
	}
	logCounts(t, total, count)
}

// The same for dorny/paths-filter's own filter tests: each filter is one
// set, each file one change.
func TestGlob_PathsFilterSuiteAgreesOrDiffersAsDocumented(t *testing.T) {
	doc := readDoc(t)
	data, err := os.ReadFile("testdata/paths-filter-cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []corpusCase
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatal("no paths-filter cases")
	}
	count := map[string]int{}
	for _, c := range cases {
		checkCorpusCase(t, c, doc, count)
	}
	logCounts(t, len(cases), count)
}
