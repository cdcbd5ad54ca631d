package partition

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
)

// TestID identifies one test: nextest's binary-id (a stable API) and the
// test name; for Go, the package and the test (subtests included).
type TestID struct {
	Binary string `json:"binary"`
	Name   string `json:"name"`
}

// String is the binary and the test name, separated by one space.
func (id TestID) String() string { return id.Binary + " " + id.Name }

// Inventory is every test that exists.
type Inventory []TestID

// ErrInventory is matched by inventory parse errors.
var ErrInventory = errors.New("partition: invalid inventory")

type nextestList struct {
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

// ParseNextestList reads `cargo nextest list --message-format json`. Every
// test case is in the inventory, ignored ones included. A binary listed as
// skipped has no test cases, and tests filtered out by string, expression or
// partition filters were not enumerated faithfully: both are errors, since
// the inventory must be listed with no filters.
func ParseNextestList(r io.Reader) (Inventory, error) {
	var l nextestList
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
				case "string", "expression", "partition":
					return nil, fmt.Errorf("%w: %s %s was filtered out (%s): list with no filters so every test is enumerated", ErrInventory, id, name, tc.FilterMatch.Reason)
				}
			}
			inv = append(inv, TestID{Binary: id, Name: name})
		}
	}
	inv.sort()
	return inv, nil
}

func (inv Inventory) sort() {
	slices.SortFunc(inv, func(a, b TestID) int {
		if c := strings.Compare(a.Binary, b.Binary); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
}

type goEvent struct {
	Action      string
	Package     string
	ImportPath  string // build events
	Test        string
	Output      string
	FailedBuild string
}

var goTestName = regexp.MustCompile(`^(Test|Example|Benchmark|Fuzz)[^\s/]*$`)

// ParseGoTestJSON reads `go test -json` events (each package and test that
// ran, subtests included) or `go test -list` output (plain, or with -json).
// A package that failed to build, or whose listing failed, is an error:
// its tests would be missing, and their partition lines would look stale.
func ParseGoTestJSON(r io.Reader) (Inventory, error) {
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
			var ev goEvent
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
				if name := strings.TrimSpace(ev.Output); goTestName.MatchString(name) {
					add(TestID{ev.Package, name})
				}
			}
		case goTestName.MatchString(trimmed):
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
	inv.sort()
	return inv, nil
}
