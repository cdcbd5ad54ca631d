package partition

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const goListing = `{"Action":"run","Package":"example.com/m","Test":"TestA"}
{"Action":"run","Package":"example.com/m","Test":"TestB/small"}
{"Action":"run","Package":"example.com/m","Test":"TestB/huge"}
`

func TestAuditListing_GoTestsSplitAcrossCategoriesFailOnlyAGoAudit(t *testing.T) {
	p, err := ParseTSV(strings.NewReader("example.com/m\tTestA\thost\nexample.com/m\tTestB/small\tsingle-gpu\nexample.com/m\tTestB/huge\tbenchmark\n"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := AuditListing(strings.NewReader(goListing), FormatGo, p)
	if err != nil {
		t.Fatal(err)
	}
	if a.Tests != 3 || a.Lines != 3 || !a.Report.OK() || len(a.Splits) != 1 || a.OK() {
		t.Errorf("%+v: want an OK report with one split test, and not OK", a)
	}
	if want := "1 Go test(s) split across categories"; !strings.Contains(a.String(), want) || !strings.HasPrefix(a.String(), "3 tests in the inventory, 3 partition lines\n") {
		t.Errorf("String:\n%s", a)
	}
	if _, err := ParseInventory(strings.NewReader(goListing), "xml"); !errors.Is(err, ErrFormat) {
		t.Errorf("an unknown format: %v, want ErrFormat", err)
	}
	if _, err := AuditListing(strings.NewReader("not json"), FormatNextest, p); !errors.Is(err, ErrInventory) {
		t.Errorf("a broken listing: %v, want ErrInventory", err)
	}
}

// The report for tools: an empty list is [], never null.
func TestAudit_ReportJSONListsNothingAsAnEmptyList(t *testing.T) {
	var r map[string]any
	if err := json.Unmarshal([]byte((Audit{}).ReportJSON()), &r); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"new", "stale", "duplicates"} {
		if l, ok := r[k].([]any); !ok || len(l) != 0 {
			t.Errorf("%s is %v, want []", k, r[k])
		}
	}
	a := Audit{Report: Report{New: []TestID{{Binary: "core", Name: "tests::add"}}}}
	var back Report
	if err := json.Unmarshal([]byte(a.ReportJSON()), &back); err != nil || !cmp.Equal(a.Report.New, back.New) {
		t.Errorf("%s: %v", a.ReportJSON(), err)
	}
}

func TestParseTSVFiles_MergesTheArchiveSetAndChecksItsCategories(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := write("a.tsv", "core\ttests::add\thost\n"), write("b.tsv", "core::gpu\tgemm\tsingle-gpu\n")
	p, err := DefaultConfig().ParseTSVFiles(a, b)
	if err != nil || len(p.Entries) != 2 || p.Entries[0].File != a || p.Entries[1].File != b {
		t.Fatalf("%+v, %v", p, err)
	}
	if _, err := DefaultConfig().ParseTSVFiles(a, write("c.tsv", "core\ttests::sub\tgpu\n")); !errors.Is(err, ErrTSV) {
		t.Errorf("an unknown category: %v, want ErrTSV", err)
	}
	if _, err := DefaultConfig().ParseTSVFiles(); !errors.Is(err, ErrTSV) {
		t.Errorf("no file: %v, want ErrTSV", err)
	}
	// A copy read from elsewhere names itself as a file does.
	p, err = ParseTSVNamed(strings.NewReader("# bundled\ncore\ttests::add\thost\n"), "bundled.tsv")
	if err != nil || len(p.Entries) != 1 || p.Entries[0].File != "bundled.tsv" || p.Entries[0].Line != 2 {
		t.Errorf("%+v, %v", p, err)
	}
}

// The check step reads its partition files and the listing in one call,
// and its outputs count what the report lists: a lane file's errors come
// back as they are, naming the file.
func TestAuditFiles_TheOutputsCountWhatTheReportLists(t *testing.T) {
	dir := t.TempDir()
	tsv := filepath.Join(dir, "p.tsv")
	os.WriteFile(tsv, []byte("example.com/m\tTestA\thost\nexample.com/m\tTestB/small\tsingle-gpu\nexample.com/m\tTestGone\thost\n"), 0o644)
	a, err := DefaultConfig().AuditFiles(strings.NewReader(goListing), FormatGo, tsv)
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]string{{"ok", "false"}, {"tests", "3"}, {"lines", "3"}, {"new", "1"}, {"stale", "1"}, {"duplicates", "0"}, {"split", "0"}}
	if diff := cmp.Diff(want, a.Outputs()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	bad := filepath.Join(dir, "bad.tsv")
	os.WriteFile(bad, []byte("example.com/m\tTestA\tnowhere\n"), 0o644)
	if _, err := DefaultConfig().AuditFiles(strings.NewReader(goListing), FormatGo, bad); !errors.Is(err, ErrTSV) || !strings.Contains(err.Error(), bad) {
		t.Errorf("an unknown category: %v, want ErrTSV naming %s", err, bad)
	}
}
