package partition

// The parsers and Check as they were before they streamed and merged
// (commit aef5374), and GoSplits as it was before it grouped in two passes
// (commit 68fd9d4), kept as the reference the fuzz targets compare the new
// ones with: same inventory, same report, an error for the same inputs.
// One rule has changed since: a test the profile's default-filter left out
// is refused, as one left out by -E is.

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
)

func refSort(inv Inventory) {
	slices.SortFunc(inv, func(a, b TestID) int {
		if c := strings.Compare(a.Binary, b.Binary); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
}

type refNextestList struct {
	Suites map[string]struct {
		BinaryID  string `json:"binary-id"`
		Status    string `json:"status"`
		TestCases map[string]struct {
			Ignored     bool `json:"ignored"`
			FilterMatch struct {
				Status string `json:"status"`
				Reason string `json:"reason"`
			} `json:"filter-match"`
		} `json:"testcases"`
	} `json:"rust-suites"`
}

// refParseNextestList is ParseNextestList as it was: it reads `cargo nextest list --message-format json`. Every
// test case is in the inventory, ignored ones included. A binary listed as
// skipped has no test cases, and tests filtered out by string, expression or
// partition filters were not enumerated faithfully: both are errors, since
// the inventory must be listed with no filters.
func refParseNextestList(r io.Reader) (Inventory, error) {
	var l refNextestList
	dec := json.NewDecoder(r)
	if err := dec.Decode(&l); err != nil {
		return nil, fmt.Errorf("%w: nextest list JSON: %v", ErrInventory, err)
	}
	if l.Suites == nil {
		return nil, fmt.Errorf("%w: no rust-suites object: is this `cargo nextest list --message-format json` output?", ErrInventory)
	}
	var inv Inventory
	for key, s := range l.Suites {
		id := s.BinaryID
		if id == "" {
			id = key
		}
		if strings.HasPrefix(s.Status, "skipped") {
			return nil, fmt.Errorf("%w: binary %s was %s (not listed): list with no filters (no -E, no test-name arguments, no default-filter) so every test is enumerated", ErrInventory, id, s.Status)
		}
		for name, tc := range s.TestCases {
			if tc.FilterMatch.Status == "mismatch" {
				switch tc.FilterMatch.Reason {
				case "string", "expression", "partition", "default-filter":
					return nil, fmt.Errorf("%w: %s %s was filtered out (%s): list with no filters so every test is enumerated", ErrInventory, id, name, tc.FilterMatch.Reason)
				}
			}
			inv = append(inv, TestID{Binary: id, Name: name})
		}
	}
	refSort(inv)
	return inv, nil
}

type refGoEvent struct {
	Action      string
	Package     string
	ImportPath  string // build events
	Test        string
	Output      string
	FailedBuild string
}

var refGoTestName = regexp.MustCompile(`^(Test|Example|Benchmark|Fuzz)[^\s/]*$`)

// refParseGoTestJSON is ParseGoTestJSON as it was: it reads `go test -json` events (each package and test that
// ran, subtests included) or `go test -list` output (plain, or with -json).
// A package that failed to build, or whose listing failed, is an error:
// its tests would be missing, and their partition lines would look stale.
func refParseGoTestJSON(r io.Reader) (Inventory, error) {
	seen := map[TestID]bool{}
	var inv Inventory
	add := func(id TestID) {
		if !seen[id] {
			seen[id] = true
			inv = append(inv, id)
		}
	}
	var pending []string // -list names waiting for their package line
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "":
		case strings.HasPrefix(trimmed, "{"):
			var ev refGoEvent
			if err := json.Unmarshal([]byte(trimmed), &ev); err != nil {
				return nil, fmt.Errorf("%w: line %d: %v", ErrInventory, n, err)
			}
			switch {
			case ev.Action == "build-fail" || ev.FailedBuild != "":
				return nil, fmt.Errorf("%w: line %d: %s failed to build, so its tests are missing from the inventory: fix the build and list again", ErrInventory, n, cmp.Or(ev.FailedBuild, ev.ImportPath, ev.Package))
			case ev.Test != "" && ev.Package != "" && ev.Action == "run":
				add(TestID{ev.Package, ev.Test})
			case ev.Test == "" && ev.Action == "output" && ev.Package != "":
				// go test -json -list: the names arrive as output lines.
				if name := strings.TrimSpace(ev.Output); refGoTestName.MatchString(name) {
					add(TestID{ev.Package, name})
				}
			}
		case refGoTestName.MatchString(trimmed):
			pending = append(pending, trimmed)
		case strings.HasPrefix(line, "ok  "), strings.HasPrefix(line, "ok\t"):
			fields := strings.Fields(line)
			if len(fields) < 2 {
				return nil, fmt.Errorf("%w: line %d: malformed package line %q", ErrInventory, n, line)
			}
			for _, name := range pending {
				add(TestID{fields[1], name})
			}
			pending = nil
		case strings.HasPrefix(line, "?   "), strings.HasPrefix(line, "FAIL"), strings.HasPrefix(line, "PASS"):
			// "FAIL\tpkg [build failed]": that package's tests are missing.
			if strings.HasPrefix(line, "FAIL") && (len(pending) > 0 || trimmed != "FAIL") {
				return nil, fmt.Errorf("%w: line %d: listing failed, so tests are missing from the inventory: %s: fix it and list again", ErrInventory, n, line)
			}
		default:
			return nil, fmt.Errorf("%w: line %d: %q is neither a go test -json event nor a go test -list line", ErrInventory, n, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInventory, err)
	}
	if len(pending) > 0 {
		return nil, fmt.Errorf("%w: %d test names without their package line (run go test -list with a package pattern)", ErrInventory, len(pending))
	}
	refSort(inv)
	return inv, nil
}

// refCheck is Check as it was: it compares the real inventory with the partition: every test in
// exactly one category (exhaustive, disjoint across the archive set's
// files), and no entries for tests that no longer exist, with a rename hint
// when the same name appears under another binary or a near name in the
// same binary. An inventory with no test is never OK (Report.Empty).
func refCheck(inv Inventory, p Partition) Report {
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
	// Index the new tests for rename hints.
	newByName := map[string][]TestID{}
	newByBinary := map[string][]TestID{}
	for _, id := range r.New {
		newByName[id.Name] = append(newByName[id.Name], id)
		newByBinary[id.Binary] = append(newByBinary[id.Binary], id)
	}
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

func refParseTSV(r io.Reader, file string) (Partition, error) {
	var p Partition
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	where := func(n int) string {
		if file == "" {
			return fmt.Sprintf("line %d", n)
		}
		return fmt.Sprintf("%s:%d", file, n)
	}
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) < 3 || len(f) > 4 {
			return Partition{}, fmt.Errorf("%w: %s: want binary-id<TAB>test-name<TAB>category[<TAB>note], got %d field(s)", ErrTSV, where(n), len(f))
		}
		for i, v := range f[:3] {
			if strings.TrimSpace(v) == "" || v != strings.TrimSpace(v) {
				return Partition{}, fmt.Errorf("%w: %s: field %d is empty or has surrounding spaces", ErrTSV, where(n), i+1)
			}
		}
		e := Entry{ID: TestID{f[0], f[1]}, Category: f[2], File: file, Line: n}
		if len(f) == 4 {
			e.Note = f[3]
		}
		p.Entries = append(p.Entries, e)
	}
	if err := sc.Err(); err != nil {
		return Partition{}, fmt.Errorf("%w: %s: %v", ErrTSV, file, err)
	}
	return p, nil
}

func refGoSplits(p Partition) []SplitTest {
	byTop := map[TestID]*SplitTest{}
	for _, e := range p.Entries {
		k := goTop(e.ID)
		if byTop[k] == nil {
			byTop[k] = &SplitTest{Package: k.Binary, Test: k.Name, In: map[string][]string{}}
		}
		byTop[k].In[e.Category] = append(byTop[k].In[e.Category], e.ID.Name)
	}
	var out []SplitTest
	for _, k := range slices.SortedFunc(maps.Keys(byTop), func(a, b TestID) int {
		return cmp.Or(strings.Compare(a.Binary, b.Binary), strings.Compare(a.Name, b.Name))
	}) {
		if len(byTop[k].In) > 1 {
			out = append(out, *byTop[k])
		}
	}
	return out
}
