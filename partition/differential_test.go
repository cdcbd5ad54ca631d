package partition

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/gpugate/gpugate/internal/testsys"
)

// tricky listings: what encoding/json decodes in ways a hand-written
// reader could miss.
var nextestCorners = map[string]string{
	"empty":                  ``,
	"null document":          `null`,
	"array document":         `[]`,
	"string document":        `"rust-suites"`,
	"trailing garbage":       `{"rust-suites": {"a": {"testcases": {"t": {}}}}} garbage`,
	"keys fold case":         `{"RUST-SUITES": {"a": {"Binary-ID": "b", "STATUS": "listed", "TestCases": {"t": {"Filter-Match": {"Status": "mismatch", "REASON": "string"}}}}}}`,
	"kelvin and long s":      `{"ru\u017ft-suites": {"a": {"testcases": {"t": {}}}}}`,
	"escaped key":            `{"rust\u002dsuites": {"a\u0000b": {"binary-id": "x\ny", "testcases": {"\ud83d\ude00": null, "\ud800": {}, "\udc00\ud800": {}, "\ud800\u0041": {}}}}}`,
	"invalid utf-8":          "{\"rust-suites\": {\"a\xff\": {\"testcases\": {\"t\xc3\": {}, \"\xed\xa0\x80\": {}}}}}",
	"raw control character":  "{\"rust-suites\": {\"a\": {\"testcases\": {\"t\x01\": {}}}}}",
	"suite repeated":         `{"rust-suites": {"a": {"status": "skipped"}, "a": {"testcases": {"t": {}}}}}`,
	"suite repeated, skip":   `{"rust-suites": {"a": {"testcases": {"t": {}}}, "b": {}, "a": {"status": "skipped"}}}`,
	"rust-suites repeated":   `{"rust-suites": {"a": {"testcases": {"t": {}}}}, "rust-suites": {"b": {"testcases": {"u": {}}}}}`,
	"rust-suites null":       `{"rust-suites": {"a": {"testcases": {"t": {}}}}, "rust-suites": null}`,
	"rust-suites null, then": `{"rust-suites": null, "rust-suites": {"a": {"testcases": {"t": {}}}}}`,
	"case repeated":          `{"rust-suites": {"a": {"testcases": {"t": {"filter-match": {"status": "mismatch", "reason": "string"}}, "t": {}}}}}`,
	"case repeated, bad":     `{"rust-suites": {"a": {"testcases": {"t": {}, "u": {}, "t": {"filter-match": {"status": "mismatch", "reason": "string"}}}}}}`,
	"testcases repeated":     `{"rust-suites": {"a": {"testcases": {"t": {}, "v": {}}, "binary-id": "b", "testcases": {"u": {}, "t": {}}}}}`,
	"testcases null":         `{"rust-suites": {"a": {"testcases": {"t": {}}, "testcases": null, "testcases": {"u": {}}}}}`,
	"filter-match merged":    `{"rust-suites": {"a": {"testcases": {"t": {"filter-match": {"status": "mismatch"}, "filter-match": {"reason": "expression"}}}}}}`,
	"filter-match null":      `{"rust-suites": {"a": {"testcases": {"t": {"filter-match": {"status": "mismatch", "reason": "partition"}, "filter-match": null}}}}}`,
	"status null":            `{"rust-suites": {"a": {"status": "skipped", "status": null, "testcases": {}}}}`,
	"binary-id null":         `{"rust-suites": {"a": {"binary-id": "b", "binary-id": null, "testcases": {"t": {}}}}}`,
	"binary-id empty":        `{"rust-suites": {"a": {"binary-id": "", "testcases": {"t": {}}}}}`,
	"same binary-id twice":   `{"rust-suites": {"a": {"binary-id": "x", "testcases": {"t": {}}}, "b": {"binary-id": "x", "testcases": {"t": {}}}}}`,
	"unsorted":               `{"rust-suites": {"b": {"testcases": {"z": {}, "a": {}}}, "a": {"testcases": {"t": null}}}}`,
	"ignored wrong type":     `{"rust-suites": {"a": {"testcases": {"t": {"ignored": "yes"}}}}}`,
	"ignored null":           `{"rust-suites": {"a": {"testcases": {"t": {"ignored": null}}}}}`,
	"status wrong type":      `{"rust-suites": {"a": {"status": 1, "testcases": {"t": {}}}}}`,
	"suite wrong type":       `{"rust-suites": {"a": []}}`,
	"testcases wrong type":   `{"rust-suites": {"a": {"testcases": []}}}`,
	"numbers":                `{"test-count": -0.5e+10, "x": [0, -1, 1.25, 1E3, 2e-2, true, false, null, {}, [], ""], "rust-suites": {}}`,
	"bad number":             `{"test-count": 01, "rust-suites": {}}`,
	"bad number 2":           `{"test-count": 1., "rust-suites": {}}`,
	"bad number 3":           `{"test-count": -, "rust-suites": {}}`,
	"bad literal":            `{"x": nul, "rust-suites": {}}`,
	"bad escape":             `{"x": "\q", "rust-suites": {}}`,
	"bad unicode escape":     `{"x": "\u12g4", "rust-suites": {}}`,
	"trailing comma":         `{"rust-suites": {},}`,
	"trailing comma array":   `{"x": [1,], "rust-suites": {}}`,
	"missing colon":          `{"rust-suites" {}}`,
	"unterminated":           `{"rust-suites": {"a": {"testcases": {"t": {}`,
	"unterminated string":    `{"rust-suites": {"a`,
	"whitespace":             " \t\r\n{ \"rust-suites\" : { \"a\" : { \"testcases\" : { \"t\" : { } } } } } ",
	"skipped suffix":         `{"rust-suites": {"a": {"status": "skipped-default-filter"}}}`,
	"other mismatch":         `{"rust-suites": {"a": {"testcases": {"t": {"filter-match": {"status": "mismatch", "reason": "ignored"}}}}}}`,
}

// checkNextestSame parses data with ParseNextestList, in one read and a
// byte at a time, and with the encoding/json reference: the same
// inventory, or an error from both.
func checkNextestSame(t *testing.T, data []byte) {
	t.Helper()
	want, wantErr := refParseNextestList(bytes.NewReader(data))
	for _, r := range []func() *bytes.Reader{func() *bytes.Reader { return bytes.NewReader(data) }} {
		for name, rd := range map[string]interface{ Read([]byte) (int, error) }{"whole": r(), "byte at a time": iotest.OneByteReader(r()), "half": iotest.HalfReader(r())} {
			got, err := ParseNextestList(rd)
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("%s: %q: err %v, encoding/json's %v", name, data, err, wantErr)
			}
			if err != nil {
				if !errors.Is(err, ErrInventory) {
					t.Fatalf("%s: %q: %v is not ErrInventory", name, data, err)
				}
				continue
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("%s: %q (-encoding/json +got):\n%s", name, data, diff)
			}
		}
	}
}

func TestParseNextestList_ReadsWhatEncodingJSONReads(t *testing.T) {
	for name, doc := range nextestCorners {
		t.Run(name, func(t *testing.T) { checkNextestSame(t, []byte(doc)) })
	}
	seed, err := os.ReadFile("testdata/nextest-list.json")
	if err != nil {
		t.Fatal(err)
	}
	checkNextestSame(t, seed)
	inv, _ := benchIDs(3000)
	var buf bytes.Buffer
	if err := writeNextestList(&buf, inv); err != nil {
		t.Fatal(err)
	}
	checkNextestSame(t, buf.Bytes())
	// A string longer than the read buffer, and one across its end.
	long := strings.Repeat("é", 100<<10)
	checkNextestSame(t, []byte(`{"x": "`+long+`", "rust-suites": {"a": {"testcases": {"`+long+`\n": {}}}}}`))
}

// encoding/json refuses values nested deeper than 10,000.
func TestParseNextestList_NestingLimit(t *testing.T) {
	for _, depth := range []int{9999, 10000} {
		doc := `{"x": ` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `, "rust-suites": {"a": {"testcases": {"t": {}}}}}`
		checkNextestSame(t, []byte(doc))
		doc = `{"x": ` + strings.Repeat(`{"y":`, depth-1) + "1" + strings.Repeat("}", depth-1) + `, "rust-suites": {"a": {"testcases": {"t": {}}}}}`
		checkNextestSame(t, []byte(doc))
	}
	if _, err := ParseNextestList(strings.NewReader(`{"x": ` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `, "rust-suites": {}}`)); !errors.Is(err, ErrInventory) {
		t.Errorf("10,001 levels: %v", err)
	}
}

func FuzzParseNextestList_SameAsEncodingJSON(f *testing.F) {
	for _, doc := range nextestCorners {
		f.Add([]byte(doc))
	}
	for _, path := range []string{"testdata/nextest-list.json", "testdata/nextest/docs-camino.json", "testdata/nextest/runner-test-list-expected.json"} {
		seed, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(seed)
	}
	f.Fuzz(checkNextestSame)
}

var goCorners = map[string]string{
	"run":               `{"Action":"run","Package":"p","Test":"TestA"}`,
	"fold case":         `{"ACTION":"run","package":"p","tEST":"TestA"}`,
	"repeated":          `{"Action":"run","Package":"p","Test":"TestA","Test":"TestB","Action":"pass"}` + "\n" + `{"Action":"pass","Action":"run","Package":"p","Test":"TestC"}`,
	"null keeps":        `{"Action":"run","Package":"p","Test":"TestA","Test":null}`,
	"escapes":           `{"Action":"run","Package":"p\u00e9","Test":"Test\u0041\n\ud800"}`,
	"list json escapes": `{"Action":"output","Package":"p\u00e9\n","Output":"TestX\u00e9\n"}`,
	"list json":         `{"Action":"output","Package":"p","Output":"TestX\n"}` + "\n" + `{"Action":"output","Package":"p","Output":"  Benchmark\u0059 \t\n"}` + "\n" + `{"Action":"output","Package":"p","Output":"ok  \tp\t0.1s\n"}`,
	"list plain":        "TestB\nExampleC\nok  \tp\t0.01s\n",
	"build fail":        `{"ImportPath":"p","Action":"build-fail"}`,
	"failed build":      `{"Action":"fail","Package":"p","FailedBuild":"p [p.test]"}`,
	"trailing garbage":  `{"Action":"run","Package":"p","Test":"TestA"} x`,
	"trailing space":    "{\"Action\":\"run\",\"Package\":\"p\",\"Test\":\"TestA\"} \t\u00a0",
	"wrong type":        `{"Action":"run","Package":"p","Test":1}`,
	"other fields":      `{"Time":"2026-01-01T00:00:00Z","Action":"pass","Package":"p","Test":"TestA","Elapsed":0.01,"X":[{"y":null}]}`,
	"not an object":     `{"Action":"run"`,
	"two objects":       `{"Action":"run","Package":"p","Test":"TestA"}{}`,
	"duplicates sorted": `{"Action":"run","Package":"q","Test":"TestB"}` + "\n" + `{"Action":"run","Package":"p","Test":"TestA"}` + "\n" + `{"Action":"run","Package":"q","Test":"TestB"}`,
	"FAIL":              "FAIL\nTestA\nFAIL\tp [build failed]\n",
	"pending":           "TestA\n",
	"not a line":        "hello\n",
}

func checkGoSame(t *testing.T, data []byte) {
	t.Helper()
	want, wantErr := refParseGoTestJSON(bytes.NewReader(data))
	got, err := ParseGoTestJSON(bytes.NewReader(data))
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%q: err %v, before %v", data, err, wantErr)
	}
	if err != nil {
		if !errors.Is(err, ErrInventory) {
			t.Fatalf("%q: %v is not ErrInventory", data, err)
		}
		return
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("%q (-before +got):\n%s", data, diff)
	}
}

func TestParseGoTestJSON_ReadsWhatItReadBefore(t *testing.T) {
	for name, doc := range goCorners {
		t.Run(name, func(t *testing.T) { checkGoSame(t, []byte(doc)) })
	}
	inv, _ := goBenchIDs(3000)
	var buf bytes.Buffer
	if err := writeGoTestJSON(&buf, inv); err != nil {
		t.Fatal(err)
	}
	checkGoSame(t, buf.Bytes())
}

func FuzzParseGoTestJSON_SameAsBefore(f *testing.F) {
	for _, doc := range goCorners {
		f.Add([]byte(doc))
	}
	f.Fuzz(checkGoSame)
}

func FuzzIsGoTestName_SameAsTheRegexp(f *testing.F) {
	for _, s := range []string{"TestA", "Test", "Examplex", "Benchmark/x", "Fuzz\xff", "TestA B", "TestA\v", "Tes", "xTest"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := isGoTestName([]byte(s)), refGoTestName.MatchString(s); got != want {
			t.Fatalf("%q: %v, the regexp says %v", s, got, want)
		}
	})
}

// checkInput builds an inventory and a partition from fuzz bytes: small
// alphabets of binaries and names, so that tests repeat, collide and near
// each other (rename hints), in any order.
func checkInput(data []byte) (Inventory, Partition) {
	bins := []string{"a", "b", "a::t"}
	names := []string{"x", "y", "xy", "x_1", "case_10", "case_1", "tests::case_2", "z"}
	var inv Inventory
	var p Partition
	for i := 0; i+1 < len(data); i += 2 {
		id := TestID{bins[int(data[i]>>4)%len(bins)], names[int(data[i]&15)%len(names)]}
		switch data[i+1] % 4 {
		case 0, 1:
			inv = append(inv, id)
		case 2:
			p.Entries = append(p.Entries, Entry{ID: id, Category: "host", File: fmt.Sprintf("f%d.tsv", data[i+1]%3), Line: i})
		case 3:
			inv = append(inv, id)
			p.Entries = append(p.Entries, Entry{ID: id, Category: "single-gpu", Line: i})
		}
	}
	return inv, p
}

func checkCheckSame(t *testing.T, inv Inventory, p Partition) {
	t.Helper()
	want := refCheck(inv, p)
	for name, check := range map[string]func(Inventory, Partition) Report{"Check": Check, "by merge": checkByMerge, "by maps": checkByMaps} {
		got := check(inv, p)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("%s: inventory %v, partition %v (-before +got):\n%s", name, inv, p.Entries, diff)
		}
		if got.String() != want.String() {
			t.Fatalf("%s: report\n%s\nbefore\n%s", name, got, want)
		}
	}
}

func TestCheck_ReportsWhatItReportedBefore(t *testing.T) {
	checkCheckSame(t, nil, Partition{})
	checkCheckSame(t, seedInventory(t), seedPartition(t))
	inv, p := benchIDs(20_000)
	checkCheckSame(t, inv, p)
	// Out of order: reversed, and two files one after the other.
	rev := reversed(inv)
	checkCheckSame(t, rev, Merge(Partition{Entries: p.Entries[10_000:]}, Partition{Entries: p.Entries[:10_000]}))
	for seed := range 200 {
		data := make([]byte, 2*(seed%40))
		for i := range data {
			data[i] = byte(seed*7919 + i*104729 + i*i)
		}
		inv, p := checkInput(data)
		checkCheckSame(t, inv, p)
	}
}

func reversed(inv Inventory) Inventory {
	out := make(Inventory, len(inv))
	for i, id := range inv {
		out[len(inv)-1-i] = id
	}
	return out
}

func FuzzCheck_SameReportAsBefore(f *testing.F) {
	f.Add([]byte{0x00, 0, 0x01, 2, 0x12, 3, 0x12, 2, 0x05, 0, 0x15, 2, 0x04, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		inv, p := checkInput(data)
		checkCheckSame(t, inv, p)
	})
}

func checkTSVSame(t *testing.T, data []byte) {
	t.Helper()
	want, wantErr := refParseTSV(bytes.NewReader(data), "p.tsv")
	got, err := parseTSV(bytes.NewReader(data), "p.tsv")
	if fmt.Sprint(err) != fmt.Sprint(wantErr) {
		t.Fatalf("%q: err %v, before %v", data, err, wantErr)
	}
	if err != nil && !errors.Is(err, ErrTSV) {
		t.Fatalf("%q: %v is not ErrTSV", data, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("%q (-before +got):\n%s", data, diff)
	}
}

var tsvCorners = []string{
	"", "\n", "# c\n\n", "a\tb\thost\n", "a\tb\thost\tnote\n", "a\tb\thost\tnote\textra\n", "a\tb\n",
	"a\tb\thost\r\n", " a\tb\thost\n", "a\t \thost\n", "a\tb\t\n", "a\tb\thost\t\n", "a\tb\thost\t note \n",
	"\u00a0a\tb\thost\n", "  # indented comment\n", "a\tb\thost", "a\tb\thost\n\r\n", "a\xff\tb\thost\n",
	"a\tb\thost\r\r\n", "\t\t\n", "a\tb\tc\td\te\tf\n",
}

func TestParseTSV_ReadsWhatItReadBefore(t *testing.T) {
	for _, doc := range tsvCorners {
		checkTSVSame(t, []byte(doc))
	}
	_, p := benchIDs(3000)
	var buf bytes.Buffer
	if err := writeTSV(&buf, p); err != nil {
		t.Fatal(err)
	}
	checkTSVSame(t, buf.Bytes())
	checkTSVSame(t, []byte(strings.Repeat("x", 2<<20)+"\n"))
}

// ParseTSVFile counts a file's lines first to size the entries: the same
// partition as reading it as a stream, a last line with no newline
// included, and a count that falls short (the file grew) only costs a
// copy.
func TestParseTSVFile_SameAsTheStream(t *testing.T) {
	_, p := benchIDs(5000)
	var buf bytes.Buffer
	if err := writeTSV(&buf, p); err != nil {
		t.Fatal(err)
	}
	docs := append([]string{buf.String(), strings.TrimSuffix(buf.String(), "\n")}, tsvCorners...)
	for i, doc := range docs {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("p%d.tsv", i))
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		want, wantErr := refParseTSV(strings.NewReader(doc), path)
		got, err := ParseTSVFile(path)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("%d: err %v, want %v", i, err, wantErr)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("%d (-stream +file):\n%s", i, diff)
		}
		for _, lines := range []int{1, 7, 5000} {
			short, err := parseTSVSized(strings.NewReader(doc), path, lines)
			if fmt.Sprint(err) != fmt.Sprint(wantErr) {
				t.Fatalf("%d, %d lines: err %v, want %v", i, lines, err, wantErr)
			}
			if diff := cmp.Diff(want, short); diff != "" {
				t.Fatalf("%d, counted %d lines (-stream +file):\n%s", i, lines, diff)
			}
		}
	}
}

// A partition read from a pipe is read once, never counted first.
func TestParseTSVFile_ReadsAPipeOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.tsv")
	if err := testsys.Mkfifo(path); err != nil {
		t.Skipf("no named pipes here: %v", err)
	}
	doc := "# header\na\tb\thost\nc\td\tsingle-gpu\tnote\n"
	done := make(chan error, 1)
	go func() { done <- os.WriteFile(path, []byte(doc), 0o644) }()
	got, err := ParseTSVFile(path)
	if werr := <-done; werr != nil {
		t.Fatal(werr)
	}
	want, _ := refParseTSV(strings.NewReader(doc), path)
	if err != nil || !cmp.Equal(want, got) {
		t.Errorf("%+v, %v; want %+v", got, err, want)
	}
}

func FuzzParseTSV_SameAsBefore(f *testing.F) {
	for _, doc := range tsvCorners {
		f.Add([]byte(doc))
	}
	f.Fuzz(checkTSVSame)
}

// goSplitsInput is a partition of Go tests and subtests from data: two
// bytes an entry (package and name, category).
func goSplitsInput(data []byte) Partition {
	pkgs := []string{"p", "q", "p/x"}
	names := []string{"TestA", "TestA/x", "TestA/y", "TestA/x/z", "TestA-b", "TestA_b", "TestA_b/x", "TestB", "TestB/", "Test/A"}
	cats := []string{"host", "single-gpu", "two-device"}
	var p Partition
	for i := 0; i+1 < len(data); i += 2 {
		id := TestID{pkgs[int(data[i]>>4)%len(pkgs)], names[int(data[i]&15)%len(names)]}
		p.Entries = append(p.Entries, Entry{ID: id, Category: cats[int(data[i+1])%len(cats)], Line: i/2 + 1})
	}
	return p
}

func checkGoSplitsSame(t *testing.T, p Partition) {
	t.Helper()
	if diff := cmp.Diff(refGoSplits(p), GoSplits(p)); diff != "" {
		t.Fatalf("partition %v (-before +got):\n%s", p.Entries, diff)
	}
}

func TestGoSplits_SplitsWhatItSplitBefore(t *testing.T) {
	checkGoSplitsSame(t, Partition{})
	checkGoSplitsSame(t, seedPartition(t))
	_, p := goBenchIDs(20_000)
	checkGoSplitsSame(t, p)
	// 5,000 tests with three subtests each, every fifth split, listed
	// out of order.
	p = Partition{}
	for i := range 20_000 {
		k := (i * 7919) % 5000
		name, cat := fmt.Sprintf("TestT%d", k), "host"
		if j := i / 5000; j > 0 {
			name += fmt.Sprintf("/s%d", j)
			if k%5 == 0 && j == 2 {
				cat = "single-gpu"
			}
		}
		p.Entries = append(p.Entries, Entry{ID: TestID{fmt.Sprintf("pkg%d", k%3), name}, Category: cat, Line: i + 1})
	}
	if len(GoSplits(p)) == 0 {
		t.Fatal("the subtest partition splits no test: the comparison would prove nothing")
	}
	checkGoSplitsSame(t, p)
	rng := rand.New(rand.NewPCG(33, 1))
	for range 500 {
		data := make([]byte, 2*rng.IntN(40))
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		checkGoSplitsSame(t, goSplitsInput(data))
	}
}

func FuzzGoSplits_SameAsBefore(f *testing.F) {
	f.Add([]byte{0x00, 0, 0x01, 1, 0x02, 0, 0x14, 2, 0x15, 0, 0x27, 1, 0x28, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		checkGoSplitsSame(t, goSplitsInput(data))
	})
}

// allocated is the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestGoSplits_ATestInOneCategoryCostsNoSplitRecord(t *testing.T) {
	const n = 20_000
	_, p := goBenchIDs(n)
	var splits []SplitTest
	per := float64(allocated(func() { splits = GoSplits(p) })) / n
	if len(splits) != 0 {
		t.Fatalf("%d split tests in a partition with every test in one category", len(splits))
	}
	// A map slot and a group's category for each test; a split record (a
	// map of categories and a list of names) for every test would be
	// hundreds of bytes more, and two million tests would not fit in 1 GiB.
	if per > 160 {
		t.Errorf("GoSplits allocated %.0f bytes per test of a partition with no split test; want at most 160", per)
	}
}

func TestParseTSVFiles_OneFileIsKeptNotCopied(t *testing.T) {
	const n = 20_000
	_, p := benchIDs(n)
	path := filepath.Join(t.TempDir(), "p.tsv")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(writeTSV(f, p), f.Close()); err != nil {
		t.Fatal(err)
	}
	var one, all Partition
	alone := allocated(func() { one, err = ParseTSVFile(path) })
	if err != nil {
		t.Fatal(err)
	}
	merged := allocated(func() { all, err = DefaultConfig().ParseTSVFiles(path) })
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(one, all); diff != "" {
		t.Fatalf("ParseTSVFiles of one file read other entries than ParseTSVFile (-file +files):\n%s", diff)
	}
	// Half the entries' size: a copy of them all is more, Validate's
	// bookkeeping much less.
	if extra, entries := int64(merged)-int64(alone), n*int64(unsafe.Sizeof(Entry{})); extra > entries/2 {
		t.Errorf("ParseTSVFiles allocated %d bytes more than ParseTSVFile for one file of %d entries (%d bytes): the entries were copied", extra, n, entries)
	}
}
