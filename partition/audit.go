package partition

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// The inventory listing formats ParseInventory reads.
const (
	FormatNextest = "nextest" // cargo nextest list --message-format json
	FormatGo      = "go"      // go test -json (or go test -json -list)
)

// ErrFormat is matched when an inventory format is neither FormatNextest
// nor FormatGo.
var ErrFormat = errors.New("partition: unknown inventory format")

// ParseInventory reads an inventory listing in format: ParseNextestList
// for FormatNextest, ParseGoTestJSON for FormatGo. The listing is read as
// a stream, never held whole.
func ParseInventory(r io.Reader, format string) (Inventory, error) {
	switch format {
	case FormatNextest:
		return ParseNextestList(r)
	case FormatGo:
		return ParseGoTestJSON(r)
	}
	return nil, fmt.Errorf("%w %q: use %s or %s", ErrFormat, format, FormatNextest, FormatGo)
}

// Audit is what checking a partition against a real inventory found:
// Check's report and, for a Go inventory, the tests the partition splits
// across categories (GoSplits), which no go test -run lane can hold apart.
type Audit struct {
	Tests  int         // tests in the inventory
	Lines  int         // partition lines
	Report Report      // Check's
	Splits []SplitTest // FormatGo only
}

// AuditListing reads the inventory listing in format (ParseInventory) and
// checks p against it.
func AuditListing(listing io.Reader, format string, p Partition) (Audit, error) {
	inv, err := ParseInventory(listing, format)
	if err != nil {
		return Audit{}, err
	}
	a := Audit{Tests: len(inv), Lines: len(p.Entries), Report: Check(inv, p)}
	if format == FormatGo {
		a.Splits = GoSplits(p)
	}
	return a, nil
}

// AuditFiles reads the partition files (Config.ParseTSVFiles) and checks
// them against the inventory listing in format (AuditListing).
func (c Config) AuditFiles(listing io.Reader, format string, paths ...string) (Audit, error) {
	p, err := c.ParseTSVFiles(paths...)
	if err != nil {
		return Audit{}, err
	}
	return AuditListing(listing, format, p)
}

// Outputs are the check's step outputs: ok, and the counts of tests,
// lines, new, stale and duplicate tests, and split Go tests. The whole
// report is ReportJSON, too long for a step output on a first adoption.
func (a Audit) Outputs() [][2]string {
	return [][2]string{{"ok", strconv.FormatBool(a.OK())}, {"tests", strconv.Itoa(a.Tests)}, {"lines", strconv.Itoa(a.Lines)},
		{"new", strconv.Itoa(len(a.Report.New))}, {"stale", strconv.Itoa(len(a.Report.Stale))}, {"duplicates", strconv.Itoa(len(a.Report.Duplicates))}, {"split", strconv.Itoa(len(a.Splits))}}
}

// OK reports whether the report is OK and no Go test is split.
func (a Audit) OK() bool { return a.Report.OK() && len(a.Splits) == 0 }

// String is the audit as a person reads it: the counts, the report (the
// exact TSV lines to add or remove), then each split Go test.
func (a Audit) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d tests in the inventory, %d partition lines\n", a.Tests, a.Lines)
	b.WriteString(a.Report.String())
	if len(a.Splits) > 0 {
		fmt.Fprintf(&b, "%d Go test(s) split across categories; go test -run runs a test with all its subtests, so put each test and its subtests in one category:\n", len(a.Splits))
		for _, sp := range a.Splits {
			fmt.Fprintf(&b, "  %s\n", sp)
		}
	}
	return b.String()
}

// ReportJSON is the whole report as JSON, for tools: an empty list is [],
// never null.
func (a Audit) ReportJSON() string {
	r := a.Report
	r.New, r.Stale, r.Duplicates = nonNil(r.New), nonNil(r.Stale), nonNil(r.Duplicates)
	data, _ := json.Marshal(r) // plain structs of strings, ints and bools: it cannot fail
	return string(data)
}

// nonNil is s, or an empty slice for nil: JSON [] instead of null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
