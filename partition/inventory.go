package partition

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
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

// ParseNextestList reads `cargo nextest list --message-format json`. Every
// test case is in the inventory, ignored ones included. A binary listed as
// skipped has no test cases, and a test marked as filtered out by a
// string, expression, partition or default filter (a profile's
// default-filter applies to list unless --ignore-default-filter is given)
// shows that the listing was made within a filter, which may skip whole
// binaries: both are errors, since the inventory must be listed with no
// filters.
//
// The listing is read as a stream, never held whole: only the inventory
// is kept (its names share a few strings, each holding many). It is read as encoding/json would decode it into its fields
// (object keys matched case-insensitively, the last of a repeated key
// winning, null leaving a field as it was), and anything else in it must
// still be valid JSON.
func ParseNextestList(r io.Reader) (Inventory, error) {
	p := nextestParser{d: newJSONReader(r)}
	if err := p.document(); err != nil {
		return nil, fmt.Errorf("%w: nextest list JSON: %v", ErrInventory, err)
	}
	if !p.listed {
		return nil, fmt.Errorf("%w: no rust-suites object: is this `cargo nextest list --message-format json` output?", ErrInventory)
	}
	p.inv, p.filtered = p.store.flat(), p.storeFiltered.flat()
	p.dedupe()
	for _, s := range p.suites {
		if strings.HasPrefix(s.status, "skipped") {
			return nil, fmt.Errorf("%w: binary %s was %s (not listed): %s", ErrInventory, s.binary(), s.status, listUnfiltered)
		}
		for i := s.start; i < s.end; i++ {
			if reason := p.filtered[i]; reason != notFiltered {
				return nil, fmt.Errorf("%w: %s %s was filtered out (%s): %s", ErrInventory, s.binary(), p.inv[i].Name, filterReasons[reason], listUnfiltered)
			}
		}
	}
	inv := p.inv
	if len(inv) == 0 {
		return nil, nil
	}
	if !slices.IsSortedFunc(inv, compareIDs) {
		inv.sort()
	}
	return inv, nil
}

// listUnfiltered is what to do about a listing made within a filter.
const listUnfiltered = "list with no filters (no -E, no test-name arguments, and --ignore-default-filter, since a profile's default-filter applies to list too) so every test is enumerated"

// nextestSuite is one binary of a nextest listing: its test cases are
// inv[start:end].
type nextestSuite struct {
	key, id, status string
	start, end      int
}

func (s nextestSuite) binary() string { return cmp.Or(s.id, s.key) }

type nextestParser struct {
	d      *jsonReader
	listed bool // a rust-suites object was read (and not reset by null)
	suites []nextestSuite
	// The binary being read: its test cases, their filters, and the text
	// of the names not yet made strings (each ending at its nameEnds):
	// names are slices of strings of many names, one allocation for many
	// tests.
	cur         []TestID
	curFiltered []filterReason
	names       []byte
	nameEnds    []int
	// The binaries read, as they are read, and then in one slice.
	store         chunked[TestID]
	storeFiltered chunked[filterReason]
	name          []byte // the test case being read
	inv           Inventory
	// filtered is, for each test case, the filter that left it out, if
	// one that makes the listing incomplete.
	filtered []filterReason
}

func (p *nextestParser) document() error {
	// A null document decodes to nothing.
	return p.d.objectOrNull("the listing", nil, func(key []byte) error {
		if fieldIs(key, "rust-suites") {
			return p.rustSuites()
		}
		return p.d.skipValue()
	})
}

func (p *nextestParser) rustSuites() error {
	p.listed = true
	return p.d.objectOrNull("rust-suites", func() { // null empties the map
		p.listed, p.suites = false, p.suites[:0]
		p.store, p.storeFiltered = chunked[TestID]{}, chunked[filterReason]{}
	}, p.suite)
}

// suite reads one binary's entry. A repeated binary key replaces the
// earlier entry (dedupe drops it).
func (p *nextestParser) suite(key []byte) error {
	s := nextestSuite{key: string(key), start: p.store.n}
	p.clearCases()
	err := p.d.objectOrNull("a rust-suites entry", nil, func(key []byte) error {
		switch {
		case fieldIs(key, "testcases"):
			return p.testcases()
		case fieldIs(key, "binary-id"):
			return p.stringField(&s.id, "binary-id")
		case fieldIs(key, "status"):
			return p.stringField(&s.status, "status")
		}
		return p.d.skipValue()
	})
	if err != nil {
		return err
	}
	p.flushNames()
	id := s.binary()
	for i := range p.cur {
		p.cur[i].Binary = id
	}
	p.store.add(p.cur...)
	p.storeFiltered.add(p.curFiltered...)
	s.end = p.store.n
	p.suites = append(p.suites, s)
	return nil
}

func (p *nextestParser) clearCases() {
	p.cur, p.curFiltered, p.names, p.nameEnds = p.cur[:0], p.curFiltered[:0], p.names[:0], p.nameEnds[:0]
}

// addCase adds a test case of the binary being read.
func (p *nextestParser) addCase(name []byte, filtered filterReason) {
	const chunk = 16 << 10
	if len(p.names)+len(name) > chunk {
		p.flushNames()
	}
	p.names = append(p.names, name...)
	p.nameEnds = append(p.nameEnds, len(p.names))
	p.cur = append(p.cur, TestID{})
	p.curFiltered = append(p.curFiltered, filtered)
	if len(p.names) > chunk {
		p.flushNames()
	}
}

// flushNames gives the test cases waiting for their names their names.
func (p *nextestParser) flushNames() {
	if len(p.nameEnds) == 0 {
		return
	}
	text := string(p.names)
	cases := p.cur[len(p.cur)-len(p.nameEnds):]
	from := 0
	for k, end := range p.nameEnds {
		cases[k].Name, from = text[from:end], end
	}
	p.names, p.nameEnds = p.names[:0], p.nameEnds[:0]
}

func (p *nextestParser) stringField(dst *string, name string) error {
	v, ok, err := p.d.stringOrNull(name)
	if ok && string(v) != *dst {
		*dst = string(v)
	}
	return err
}

// testcases reads a binary's test cases; they follow its earlier ones, if
// the key repeats (its map is merged into).
func (p *nextestParser) testcases() error {
	return p.d.objectOrNull("testcases", p.clearCases, p.testcase) // null empties the binary's map
}

// filterReason is why nextest left a test case out of a listing, when
// the reason means the listing is incomplete.
type filterReason uint8

const (
	notFiltered filterReason = iota
	filteredByString
	filteredByExpression
	filteredByPartition
	filteredByDefault // the profile's default-filter, which list applies unless told not to
)

var filterReasons = [...]string{"", "string", "expression", "partition", "default-filter"}

// testcase reads one test case, a key of testcases: its "ignored" (which
// never matters, but must be a bool) and its filter-match.
func (p *nextestParser) testcase(key []byte) error {
	p.name = append(p.name[:0], key...)
	var fm filterMatch
	err := p.d.objectOrNull("a test case", nil, func(key []byte) error {
		switch {
		case fieldIs(key, "filter-match"):
			return p.filterMatch(&fm)
		case fieldIs(key, "ignored"):
			c, err := p.d.peek()
			switch {
			case err != nil:
				return err
			case c == 't':
				return p.d.literal("true")
			case c == 'f':
				return p.d.literal("false")
			case c == 'n':
				return p.d.literal("null")
			}
			return p.d.typeErr(c, "bool", "ignored")
		}
		return p.d.skipValue()
	})
	if err != nil {
		return err
	}
	filtered := notFiltered
	if fm.mismatch {
		filtered = fm.reason
	}
	p.addCase(p.name, filtered)
	return nil
}

// filterMatch is what a test case's filter-match says, as far as a
// listing's completeness goes.
type filterMatch struct {
	mismatch bool         // its status is "mismatch"
	reason   filterReason // its reason, if one that makes the listing incomplete
}

// filterMatch reads a test case's filter-match into fm: a repeated
// filter-match is merged into the first, as encoding/json decodes into one
// struct.
func (p *nextestParser) filterMatch(fm *filterMatch) error {
	return p.d.objectOrNull("filter-match", nil, func(key []byte) error {
		switch {
		case fieldIs(key, "status"):
			v, ok, err := p.d.stringOrNull("status")
			if ok {
				fm.mismatch = string(v) == "mismatch"
			}
			return err
		case fieldIs(key, "reason"):
			v, ok, err := p.d.stringOrNull("reason")
			if ok {
				fm.reason = notFiltered
				for r := filteredByString; r <= filteredByDefault; r++ {
					if string(v) == filterReasons[r] {
						fm.reason = r
					}
				}
			}
			return err
		}
		return p.d.skipValue()
	})
}

// dedupe keeps, as decoding into maps would, the last entry of a binary
// key listed more than once and the last of a test case listed more than
// once in a binary. nextest lists both sorted and once each, which is
// checked first.
func (p *nextestParser) dedupe() {
	if !strictlyIncreasing(len(p.suites), func(i int) string { return p.suites[i].key }) {
		last := make(map[string]int, len(p.suites))
		for i, s := range p.suites {
			last[s.key] = i
		}
		kept := p.suites[:0]
		w := 0
		for i, s := range p.suites {
			if last[s.key] != i {
				continue
			}
			n := copy(p.inv[w:], p.inv[s.start:s.end])
			copy(p.filtered[w:], p.filtered[s.start:s.end])
			s.start, s.end, w = w, w+n, w+n
			kept = append(kept, s)
		}
		p.suites, p.inv, p.filtered = kept, p.inv[:w], p.filtered[:w]
	}
	w := 0 // where the next suite's cases go: suites before it may have shrunk
	for k, s := range p.suites {
		cases := p.inv[s.start:s.end]
		if strictlyIncreasing(len(cases), func(i int) string { return cases[i].Name }) {
			if w != s.start {
				copy(p.inv[w:], cases)
				copy(p.filtered[w:], p.filtered[s.start:s.end])
			}
		} else {
			// The last of each name, in name order.
			idx := make([]int, len(cases))
			for i := range idx {
				idx[i] = s.start + i
			}
			slices.SortStableFunc(idx, func(a, b int) int { return strings.Compare(p.inv[a].Name, p.inv[b].Name) })
			var ids []TestID
			var filtered []filterReason
			for i, j := range idx {
				if i+1 < len(idx) && p.inv[idx[i+1]].Name == p.inv[j].Name {
					continue
				}
				ids = append(ids, p.inv[j])
				filtered = append(filtered, p.filtered[j])
			}
			copy(p.inv[w:], ids)
			copy(p.filtered[w:], filtered)
			cases = ids
		}
		p.suites[k].start, p.suites[k].end = w, w+len(cases)
		w += len(cases)
	}
	p.inv, p.filtered = p.inv[:w], p.filtered[:w]
}

// strictlyIncreasing reports whether the n strings at(0), at(1)... are in
// increasing order, none twice.
func strictlyIncreasing(n int, at func(int) string) bool {
	for i := 1; i < n; i++ {
		if at(i-1) >= at(i) {
			return false
		}
	}
	return true
}

func (inv Inventory) sort() { slices.SortFunc(inv, compareIDs) }

// compareIDs orders tests by binary, then name.
func compareIDs(a, b TestID) int {
	if c := strings.Compare(a.Binary, b.Binary); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// isGoTestName reports whether s is a name go test -list prints: it
// matches ^(Test|Example|Benchmark|Fuzz)[^\s/]*$ (\s being RE2's
// [\t\n\f\r ]).
func isGoTestName(s []byte) bool {
	var rest []byte
	for _, p := range [...]string{"Test", "Example", "Benchmark", "Fuzz"} {
		if len(s) >= len(p) && string(s[:len(p)]) == p {
			rest = s[len(p):]
			break
		}
	}
	if rest == nil {
		return false
	}
	for _, c := range rest {
		switch c {
		case '\t', '\n', '\f', '\r', ' ', '/':
			return false
		}
	}
	return true
}

// goEvent is what ParseGoTestJSON uses of one go test -json event. Output
// is kept as its JSON text, decoded only when it is used (-json -list).
type goEvent struct {
	action, pkg, importPath, test, failedBuild []byte
	outputJSON                                 []byte
}

// goEventField is the field of goEvent's (untagged) struct that
// encoding/json would decode a key into: exactly, or case-insensitively.
func goEventField(key []byte) int {
	switch string(key) {
	case "Action":
		return 0
	case "Package":
		return 1
	case "ImportPath":
		return 2
	case "Test":
		return 3
	case "Output":
		return 4
	case "FailedBuild":
		return 5
	case "Time", "Elapsed":
		return -1
	}
	for i, f := range [...]string{"Action", "Package", "ImportPath", "Test", "Output", "FailedBuild"} {
		if strings.EqualFold(string(key), f) {
			return i
		}
	}
	return -1
}

// parseGoEvent reads one line's event as json.Unmarshal would into a
// struct of those string fields: the line is one object and nothing else,
// any other field is skipped but must be valid, a repeated key's last
// value wins and null leaves a field as it was. The strings are views of
// line or of d's buffer, valid until d is reset.
func parseGoEvent(d *jsonReader, line []byte, ev *goEvent) error {
	d.reset(line)
	*ev = goEvent{}
	c, err := d.peek()
	if err != nil {
		return err
	}
	if c != '{' {
		return d.syntaxErr(0, "looking for beginning of value")
	}
	err = d.object(func(key []byte) error {
		var dst *[]byte
		switch goEventField(key) {
		case 0:
			dst = &ev.action
		case 1:
			dst = &ev.pkg
		case 2:
			dst = &ev.importPath
		case 3:
			dst = &ev.test
		case 4:
			c, err := d.peek()
			switch {
			case err != nil:
				return err
			case c == '"':
				at := d.pos
				err := d.skipString()
				ev.outputJSON = line[at:d.pos]
				return err
			case c == 'n':
				return d.literal("null")
			}
			return d.typeErr(c, "string", "Output")
		case 5:
			dst = &ev.failedBuild
		default:
			return d.skipValue()
		}
		v, ok, err := d.stringOrNull("a go test event's field")
		if ok {
			*dst = v
		}
		return err
	})
	if err != nil {
		return err
	}
	if _, err := d.peek(); err == nil {
		return d.syntaxErr(0, "after top-level value")
	}
	return nil
}

// output decodes the event's Output, which parseGoEvent checked, with d
// (which must not be the reader that read the event: the event's other
// fields may be in its buffer).
func (ev *goEvent) output(d *jsonReader) []byte {
	if ev.outputJSON == nil {
		return nil
	}
	d.reset(ev.outputJSON)
	s, _ := d.readString()
	return s
}

// ParseGoTestJSON reads `go test -json` events (each package and test that
// ran, subtests included) or `go test -list` output (plain, or with -json).
// A package that failed to build, or whose listing failed, is an error:
// its tests would be missing, and their partition lines would look stale.
// It reads a line at a time and keeps only the inventory.
func ParseGoTestJSON(r io.Reader) (Inventory, error) {
	var tests chunked[TestID]
	var last TestID // the test added last
	lastPkg := ""   // one string per package, shared by its tests
	add := func(pkg, name []byte) {
		if string(pkg) != lastPkg {
			lastPkg = string(pkg)
		}
		if tests.n > 0 && last.Binary == lastPkg && last.Name == string(name) {
			return
		}
		last = TestID{lastPkg, string(name)}
		tests.add(last)
	}
	var pending [][]byte // -list names waiting for their package line
	var ev goEvent
	d := &jsonReader{}
	od := &jsonReader{} // for Output: its strings must not overwrite d's
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		trimmed := bytes.TrimSpace(line)
		switch {
		case len(trimmed) == 0:
		case trimmed[0] == '{':
			if err := parseGoEvent(d, trimmed, &ev); err != nil {
				return nil, fmt.Errorf("%w: line %d: %v", ErrInventory, n, err)
			}
			switch action := string(ev.action); {
			case action == "build-fail" || len(ev.failedBuild) > 0:
				return nil, fmt.Errorf("%w: line %d: %s failed to build, so its tests are missing from the inventory: fix the build and list again", ErrInventory, n, cmp.Or(string(ev.failedBuild), string(ev.importPath), string(ev.pkg)))
			case len(ev.test) > 0 && len(ev.pkg) > 0 && action == "run":
				add(ev.pkg, ev.test)
			case len(ev.test) == 0 && action == "output" && len(ev.pkg) > 0:
				// go test -json -list: the names arrive as output lines.
				if name := bytes.TrimSpace(ev.output(od)); isGoTestName(name) {
					add(ev.pkg, name)
				}
			}
		case isGoTestName(trimmed):
			pending = append(pending, bytes.Clone(trimmed))
		case bytes.HasPrefix(line, []byte("ok  ")), bytes.HasPrefix(line, []byte("ok\t")):
			fields := strings.Fields(string(line))
			if len(fields) < 2 {
				return nil, fmt.Errorf("%w: line %d: malformed package line %q", ErrInventory, n, line)
			}
			for _, name := range pending {
				add([]byte(fields[1]), name)
			}
			pending = nil
		case bytes.HasPrefix(line, []byte("?   ")), bytes.HasPrefix(line, []byte("FAIL")), bytes.HasPrefix(line, []byte("PASS")):
			// "FAIL\tpkg [build failed]": that package's tests are missing.
			if bytes.HasPrefix(line, []byte("FAIL")) && (len(pending) > 0 || string(trimmed) != "FAIL") {
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
	inv := Inventory(tests.flat())
	if !slices.IsSortedFunc(inv, compareIDs) {
		inv.sort()
	}
	return slices.Compact(inv), nil
}
