package partition

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func seedInventory(t testing.TB) Inventory {
	t.Helper()
	f, err := os.Open("testdata/nextest-list.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	inv, err := ParseNextestList(f)
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

func seedPartition(t testing.TB) Partition {
	t.Helper()
	var ps []Partition
	for _, f := range []string{"testdata/cuda_test_partition.tsv", "testdata/pjrt_test_partition.tsv"} {
		p, err := ParseTSVFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	return Merge(ps...)
}

func TestParseNextestList_IgnoredTestsArePartOfTheInventory(t *testing.T) {
	got := seedInventory(t)
	want := Inventory{
		{"tenferro-cuda", "device::tests::context_creates"},
		{"tenferro-cuda", "layout::tests::strides_roundtrip"},
		{"tenferro-cuda::capability", "gemm_matches_cpu"},
		{"tenferro-cuda::capability", "guide_examples_compile"},
		{"tenferro-cuda::capability", "two_device_registration"},
		{"tenferro-pjrt::bin/pjrt-e2e", "plugin_executes_add"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestParseNextestList_AFilteredListingIsAnErrorSayingListWithNoFilters(t *testing.T) {
	for name, doc := range map[string]string{
		"skipped binary":  `{"rust-suites": {"a::t": {"binary-id": "a::t", "status": "skipped", "testcases": {}}}}`,
		"default filter":  `{"rust-suites": {"a::t": {"binary-id": "a::t", "status": "skipped-default-filter", "testcases": {}}}}`,
		"string filtered": `{"rust-suites": {"a": {"binary-id": "a", "status": "listed", "testcases": {"x": {"ignored": false, "filter-match": {"status": "mismatch", "reason": "string"}}}}}}`,
		"not a listing":   `{"tests": []}`,
		"not JSON":        `nope`,
	} {
		_, err := ParseNextestList(strings.NewReader(doc))
		if !errors.Is(err, ErrInventory) {
			t.Errorf("%s: err = %v", name, err)
		} else if strings.Contains(name, "filter") || strings.Contains(name, "skipped") {
			if !strings.Contains(err.Error(), "list with no filters") {
				t.Errorf("%s: %v does not say how to fix it", name, err)
			}
		}
	}
}

// A profile's default-filter applies to cargo nextest list unless
// --ignore-default-filter is given, and marks each test it leaves out
// (nextest-metadata's MismatchReason::DefaultFilter), or skips a binary
// it leaves out whole (skipped-default-filter), whose tests are then
// unlisted: a listing made within it is refused, as one made within -E
// is, so that the inventory is always listed with no filter at all.
func TestParseNextestList_ATestTheDefaultFilterLeftOutIsRefusedAsForE(t *testing.T) {
	for _, reason := range []string{"expression", "default-filter"} {
		doc := `{"rust-suites": {"a": {"binary-id": "a", "status": "listed", "testcases": {"gpu": {"kind": "test", "ignored": false, "filter-match": {"status": "mismatch", "reason": "` + reason + `"}}}}}}`
		checkNextestSame(t, []byte(doc))
		if _, err := ParseNextestList(strings.NewReader(doc)); !errors.Is(err, ErrInventory) {
			t.Errorf("a test filtered out by %s: %v, want ErrInventory", reason, err)
		}
	}
	skipped := `{"rust-suites": {"a": {"binary-id": "a", "status": "skipped-default-filter", "testcases": {}}}}`
	if _, err := ParseNextestList(strings.NewReader(skipped)); !errors.Is(err, ErrInventory) {
		t.Errorf("a binary the default filter skipped: %v, want ErrInventory", err)
	}
	// Reasons that leave the test listed are not filters.
	for _, reason := range []string{"ignored", "not-benchmark", "rerun-already-passed"} {
		doc := `{"rust-suites": {"a": {"binary-id": "a", "status": "listed", "testcases": {"gpu": {"ignored": true, "filter-match": {"status": "mismatch", "reason": "` + reason + `"}}}}}}`
		if inv, err := ParseNextestList(strings.NewReader(doc)); err != nil || len(inv) != 1 {
			t.Errorf("a test marked %s: %v, %v; want it listed", reason, inv, err)
		}
	}
}

// goModule writes a small module with a test, its two subtests and a
// skipped test, and returns a function that runs the go command there and
// returns what it printed. It skips where there is no go command.
func goModule(t *testing.T) func(args ...string) []byte {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/m\n\ngo 1.21\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "m_test.go"), []byte(`package m

import "testing"

func TestAdd(t *testing.T) {
	t.Run("small", func(t *testing.T) {})
	t.Run("big numbers", func(t *testing.T) {})
}

func TestSkipped(t *testing.T) { t.Skip("needs a GPU") }
`), 0o644)
	return func(args ...string) []byte {
		cmd := exec.Command(gobin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go %v: %v\n%s", args, err, out)
		}
		return out
	}
}

// TestParseGoTestJSON_RealOutputIncludesSubtests runs go test -json and go
// test -list on a small module and parses what the go command printed.
func TestParseGoTestJSON_RealOutputIncludesSubtests(t *testing.T) {
	goCmd := goModule(t)
	want := Inventory{{"example.com/m", "TestAdd"}, {"example.com/m", "TestAdd/big_numbers"}, {"example.com/m", "TestAdd/small"}, {"example.com/m", "TestSkipped"}}
	for name, args := range map[string][]string{"json": {"test", "-json", "./..."}, "list": {"test", "-list", ".", "./..."}, "list json": {"test", "-json", "-list", ".", "./..."}} {
		out := goCmd(args...)
		got, err := ParseGoTestJSON(strings.NewReader(string(out)))
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		w := want
		if strings.Contains(name, "list") {
			w = Inventory{{"example.com/m", "TestAdd"}, {"example.com/m", "TestSkipped"}} // -list does not enumerate subtests
		}
		if diff := cmp.Diff(w, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

// The check command's path over what go test -json really prints: a test
// whose subtests are in two categories cannot be run in one lane without
// the other's, so the audit names it and is not OK, though every test is
// classified exactly once.
func TestAuditFiles_RealGoOutputNamesATestSplitAcrossCategories(t *testing.T) {
	out := goModule(t)("test", "-json", "./...")
	tsv := filepath.Join(t.TempDir(), "go_test_partition.tsv")
	os.WriteFile(tsv, []byte("example.com/m\tTestAdd\thost\nexample.com/m\tTestAdd/small\thost\n"+
		"example.com/m\tTestAdd/big_numbers\tsingle-gpu\nexample.com/m\tTestSkipped\tsingle-gpu\n"), 0o644)
	a, err := DefaultConfig().AuditFiles(bytes.NewReader(out), FormatGo, tsv)
	if err != nil {
		t.Fatal(err)
	}
	want := []SplitTest{{Package: "example.com/m", Test: "TestAdd", In: map[string][]string{"host": {"TestAdd", "TestAdd/small"}, "single-gpu": {"TestAdd/big_numbers"}}}}
	if diff := cmp.Diff(want, a.Splits); diff != "" || !a.Report.OK() || a.OK() || a.Tests != 4 {
		t.Errorf("audit %+v: want every test classified once, TestAdd split and not OK (-want +got splits):\n%s", a, diff)
	}
}

// TestParseGoTestJSON_APackageThatFailedToBuildIsAnError: go's real output
// for a module where one package does not compile. Its tests would be
// missing from the inventory, and Check would then call their partition
// lines stale and say to remove them.
func TestParseGoTestJSON_APackageThatFailedToBuildIsAnError(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/m\n\ngo 1.21\n"), 0o644)
	os.MkdirAll(filepath.Join(dir, "a"), 0o755)
	os.MkdirAll(filepath.Join(dir, "b"), 0o755)
	os.WriteFile(filepath.Join(dir, "a", "a_test.go"), []byte("package a\n\nimport \"testing\"\n\nfunc TestA(t *testing.T) {}\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "b", "b_test.go"), []byte("package b\n\nimport \"testing\"\n\nfunc TestB(t *testing.T) { undefined() }\n"), 0o644)
	for name, args := range map[string][]string{"json": {"test", "-json", "./..."}, "list": {"test", "-list", ".", "./..."}, "list json": {"test", "-json", "-list", ".", "./..."}} {
		cmd := exec.Command(gobin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		out, _ := cmd.Output() // go exits 1; stdout is what a workflow pipes on
		inv, err := ParseGoTestJSON(strings.NewReader(string(out)))
		if !errors.Is(err, ErrInventory) || !strings.Contains(err.Error(), "example.com/m/b") || !strings.Contains(err.Error(), "list again") {
			t.Errorf("%s: inventory %v, err %v\n%s", name, inv, err, out)
		}
	}
}

func TestParseTSV_ErrorsNameFileAndLine(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "cuda_test_partition.tsv")
	os.WriteFile(p, []byte("# header\na\tb\thost\nonly\ttwo\n"), 0o644)
	_, err := ParseTSVFile(p)
	if !errors.Is(err, ErrTSV) || !strings.Contains(err.Error(), p+":3") {
		t.Errorf("err = %v", err)
	}
	if _, err := ParseTSV(strings.NewReader("a\t \thost\n")); !errors.Is(err, ErrTSV) {
		t.Errorf("blank name: %v", err)
	}
	bad := Partition{Entries: []Entry{{ID: TestID{"a", "b"}, Category: "gpu", File: "x.tsv", Line: 4}}}
	if err := DefaultConfig().Validate(bad); !errors.Is(err, ErrTSV) || !strings.Contains(err.Error(), "x.tsv:4") {
		t.Errorf("unknown category: %v", err)
	}
	if err := DefaultConfig().Validate(seedPartition(t)); err != nil {
		t.Error(err)
	}
}

func TestCheck_TheSeedPartitionIsExhaustiveAndDisjoint(t *testing.T) {
	if r := Check(seedInventory(t), seedPartition(t)); !r.OK() {
		t.Errorf("%s", r)
	}
}

func TestCheck_NewTestsFailUntilClassified(t *testing.T) {
	inv := append(seedInventory(t), TestID{"tenferro-cuda::capability", "cuda_fft_roundtrip"})
	r := Check(inv, seedPartition(t))
	if r.OK() || len(r.New) != 1 || !strings.Contains(r.String(), "+ tenferro-cuda::capability\tcuda_fft_roundtrip\t<category>") {
		t.Errorf("%s", r)
	}
}

// A CUDA-looking name, a feature gate or #[ignore] never classifies a test:
// the ignored, CUDA-named test below is still unclassified.
func TestCheck_NameFeatureGateOrIgnoreAloneNeverClassifies(t *testing.T) {
	doc := `{"rust-suites": {"tenferro-cuda": {"binary-id": "tenferro-cuda", "status": "listed", "testcases": {
		"cuda::gpu_only_kernel": {"ignored": true, "filter-match": {"status": "mismatch", "reason": "ignored"}}}}}}`
	inv, err := ParseNextestList(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if r := Check(inv, Partition{}); len(r.New) != 1 {
		t.Errorf("%+v", r)
	}
}

// TestCheck_AnEmptyInventoryProvesNothing: a listing that found no test
// (the wrong features, an empty archive) is not an exhaustive partition,
// even with no lines to go stale: every lane would run nothing.
func TestCheck_AnEmptyInventoryProvesNothing(t *testing.T) {
	inv, err := ParseNextestList(strings.NewReader(`{"rust-build-meta": {}, "test-count": 0, "rust-suites": {}}`))
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]Partition{"no lines": {}, "seed lines": seedPartition(t)} {
		r := Check(inv, p)
		if !r.Empty || r.OK() || !strings.Contains(r.String(), "the inventory lists no test") {
			t.Errorf("%s: %+v\n%s", name, r, r)
		}
	}
	if r := Check(seedInventory(t), seedPartition(t)); r.Empty {
		t.Errorf("the seed inventory is not empty: %+v", r)
	}
}

func TestCheck_DisjointAcrossTheArchiveSetsFiles(t *testing.T) {
	extra, _ := ParseTSV(strings.NewReader("tenferro-cuda\tlayout::tests::strides_roundtrip\tsingle-gpu\n"))
	extra.Entries[0].File = "testdata/pjrt_test_partition.tsv"
	r := Check(seedInventory(t), Merge(seedPartition(t), extra))
	if len(r.Duplicates) != 1 || len(r.Duplicates[0].Entries) != 2 || !strings.Contains(r.String(), "also at testdata/cuda_test_partition.tsv:3") {
		t.Errorf("%s", r)
	}
}

func TestCheck_StaleEntriesWithRenameHints(t *testing.T) {
	inv := Inventory{
		{"tenferro-cuda", "device::tests::context_creates"},
		{"tenferro-cuda", "layout::tests::strides_round_trip"}, // renamed
		{"tenferro-cuda::capability_v2", "gemm_matches_cpu"},   // moved binary
		{"tenferro-cuda::capability", "two_device_registration"},
		{"tenferro-cuda::capability", "guide_examples_compile"},
		{"tenferro-pjrt::bin/pjrt-e2e", "plugin_executes_add"},
	}
	r := Check(inv, seedPartition(t))
	hints := map[string]string{}
	for _, s := range r.Stale {
		hints[s.Entry.ID.Name] = s.Hint
	}
	if !strings.Contains(hints["layout::tests::strides_roundtrip"], "renamed? tenferro-cuda layout::tests::strides_round_trip") ||
		!strings.Contains(hints["gemm_matches_cpu"], "tenferro-cuda::capability_v2") {
		t.Errorf("hints %v\n%s", hints, r)
	}
	if !strings.Contains(r.String(), "- testdata/cuda_test_partition.tsv:3: tenferro-cuda\tlayout::tests::strides_roundtrip\thost") {
		t.Errorf("the report must print the exact line to remove:\n%s", r)
	}
}

func TestSelect_RendersNextestAndGoFilters(t *testing.T) {
	l := Select(seedPartition(t), "single-gpu")
	if len(l.Tests) != 3 {
		t.Fatalf("%+v", l)
	}
	want := "(binary_id(=tenferro-cuda) & (test(=device::tests::context_creates))) | (binary_id(=tenferro-cuda::capability) & (test(=gemm_matches_cpu))) | (binary_id(=tenferro-pjrt::bin/pjrt-e2e) & (test(=plugin_executes_add)))"
	if got := l.NextestFilter(); got != want {
		t.Errorf("filter\n got %s\nwant %s", got, want)
	}
	gl := Lane{Tests: []TestID{{"example.com/m", "TestAdd/small"}, {"example.com/m", "TestAdd/big"}, {"example.com/m", "TestX.y"}}}
	if got, err := gl.GoRunPatterns(Partition{}); err != nil || !cmp.Equal(got, map[string]string{"example.com/m": `^(TestAdd|TestX\.y)$`}) {
		t.Errorf("%v %v", got, err)
	}
	if (Lane{}).NextestFilter() != "none()" {
		t.Error("an empty lane must select nothing")
	}
}

// Lanes are disjoint and a not-run test never runs: `go test -run` runs a
// parent with every subtest, so a Go test whose subtests are in two
// categories cannot be rendered for either lane.
func TestGoRunPatterns_ASubtestNeverRunsInAnotherCategorysLane(t *testing.T) {
	p := Partition{Entries: []Entry{
		{ID: TestID{"example.com/m", "TestAdd"}, Category: "single-gpu"},
		{ID: TestID{"example.com/m", "TestAdd/small"}, Category: "single-gpu"},
		{ID: TestID{"example.com/m", "TestAdd/huge"}, Category: "benchmark"},
		{ID: TestID{"example.com/m", "TestB"}, Category: "single-gpu"},
		{ID: TestID{"example.com/n", "TestAdd"}, Category: "host"},
	}}
	for _, cat := range []string{"single-gpu", "benchmark"} {
		_, err := Select(p, cat).GoRunPatterns(p)
		if !errors.Is(err, ErrSplitTest) || !strings.Contains(err.Error(), "example.com/m TestAdd is in benchmark (TestAdd/huge) and single-gpu (TestAdd, TestAdd/small)") {
			t.Errorf("%s: %v", cat, err)
		}
	}
	// Another package's test of the same name is another test.
	if got, err := Select(p, "host").GoRunPatterns(p); err != nil || !cmp.Equal(got, map[string]string{"example.com/n": "^(TestAdd)$"}) {
		t.Errorf("host: %v %v", got, err)
	}
	p.Entries[2].Category = "single-gpu"
	if got, err := Select(p, "single-gpu").GoRunPatterns(p); err != nil || !cmp.Equal(got, map[string]string{"example.com/m": "^(TestAdd|TestB)$"}) {
		t.Errorf("whole tests: %v %v", got, err)
	}
}

// A lane never passes without running what it holds: go test -list lists
// benchmarks, and -run selects one without ever running it.
func TestGoRunPatterns_ABenchmarkInARunLaneIsRefused(t *testing.T) {
	p := Partition{Entries: []Entry{
		{ID: TestID{"example.com/m", "TestA"}, Category: "single-gpu"},
		{ID: TestID{"example.com/m", "BenchmarkGemm"}, Category: "single-gpu"},
		{ID: TestID{"example.com/m", "BenchmarkAttn"}, Category: "benchmark"},
		{ID: TestID{"example.com/m", "FuzzParse"}, Category: "host"},
	}}
	if _, err := Select(p, "single-gpu").GoRunPatterns(p); !errors.Is(err, ErrBenchmark) || !strings.Contains(err.Error(), "example.com/m BenchmarkGemm: the single-gpu lane would pass without running them") {
		t.Errorf("single-gpu: %v", err)
	}
	// A pattern too long for one argument is refused, not cut.
	var many Partition
	for i := range 5000 {
		many.Entries = append(many.Entries, Entry{ID: TestID{"example.com/m", fmt.Sprintf("TestContractionWithALongDescriptiveName%05d", i)}, Category: "host"})
	}
	if _, err := Select(many, "host").GoRunPatterns(many); !errors.Is(err, ErrFilterTooLong) || !strings.Contains(err.Error(), "the host lane's -run pattern for example.com/m takes") {
		t.Errorf("5,000 tests in one package: %v", err)
	}
	// A fuzz target's seed corpus runs under -run.
	if got, err := Select(p, "host").GoRunPatterns(p); err != nil || got["example.com/m"] != "^(FuzzParse)$" {
		t.Errorf("host: %v %v", got, err)
	}
}

func TestNotRun_NotRunAndExcludedAreNeverPassed(t *testing.T) {
	got := NotRun(DefaultConfig(), seedPartition(t))
	want := []string{"tenferro-cuda::capability two_device_registration (two-device): a separately provisioned two-GPU run"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func FuzzParseNextestList(f *testing.F) {
	data, _ := os.ReadFile("testdata/nextest-list.json")
	f.Add(data)
	f.Add([]byte(`{"rust-suites": {}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		inv, err := ParseNextestList(strings.NewReader(string(data)))
		if err != nil {
			if !errors.Is(err, ErrInventory) {
				t.Fatal(err)
			}
			return
		}
		Check(inv, Partition{})
	})
}

func FuzzParseGoTestJSON(f *testing.F) {
	f.Add([]byte(`{"Action":"run","Package":"p","Test":"TestA"}` + "\n" + "TestB\nok  \tp\t0.01s\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		inv, err := ParseGoTestJSON(strings.NewReader(string(data)))
		if err != nil && !errors.Is(err, ErrInventory) {
			t.Fatal(err)
		}
		for _, id := range inv {
			if id.Binary == "" || id.Name == "" {
				t.Fatalf("empty identity %+v", id)
			}
		}
	})
}

func FuzzParseTSV(f *testing.F) {
	data, _ := os.ReadFile("testdata/cuda_test_partition.tsv")
	f.Add(data)
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseTSV(strings.NewReader(string(data)))
		if err != nil {
			if !errors.Is(err, ErrTSV) {
				t.Fatal(err)
			}
			return
		}
		for _, e := range p.Entries {
			if e.ID.Binary == "" || e.ID.Name == "" || e.Category == "" || e.Line == 0 {
				t.Fatalf("%+v", e)
			}
		}
	})
}

// BenchmarkCheck checks a realistic inventory (2,000 tests) and the 100x
// case (200,000), each with a handful of new and stale tests.
func BenchmarkCheck(b *testing.B) {
	for _, n := range []int{2_000, 200_000} {
		b.Run(fmt.Sprintf("tests=%d", n), func(b *testing.B) {
			inv := make(Inventory, n)
			p := Partition{Entries: make([]Entry, 0, n)}
			for i := range n {
				inv[i] = TestID{fmt.Sprintf("crate%d::suite%d", i%50, i%7), fmt.Sprintf("module%d::tests::case_%d", i%300, i)}
				if i%1000 != 0 {
					p.Entries = append(p.Entries, Entry{ID: inv[i], Category: "host", File: "p.tsv", Line: i})
				} else {
					p.Entries = append(p.Entries, Entry{ID: TestID{inv[i].Binary, inv[i].Name + "_old"}, Category: "host", File: "p.tsv", Line: i})
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				if Check(inv, p).OK() {
					b.Fatal("want differences")
				}
			}
		})
	}
}

// A lane named wrong selects nothing: Config.Lane refuses a category the
// configuration does not define, and, when tests are required, an empty
// lane.
func TestLane_RefusesAnUnknownCategoryAndARequiredEmptyLane(t *testing.T) {
	p := Partition{Entries: []Entry{{ID: TestID{Binary: "b", Name: "t"}, Category: "host"}}}
	cfg := DefaultConfig()
	if _, err := cfg.Lane(p, "singel-gpu", false); !errors.Is(err, ErrCategory) {
		t.Errorf("a misspelt category: %v", err)
	}
	if l, err := cfg.Lane(p, "single-gpu", false); err != nil || len(l.Tests) != 0 {
		t.Errorf("an empty lane, not required: %+v, %v", l, err)
	}
	if _, err := cfg.Lane(p, "single-gpu", true); !errors.Is(err, ErrCategory) {
		t.Errorf("an empty lane, required: %v", err)
	}
	if l, err := cfg.Lane(p, "host", true); err != nil || len(l.Tests) != 1 {
		t.Errorf("the host lane: %+v, %v", l, err)
	}
}

// The lanes' promise, for Go, under random partitions: whenever Check
// passes and every lane renders, `go test -run` with a lane's pattern runs
// each inventoried test (subtests with their parent, as go test does) in
// exactly one lane, its own category's. Names carry regexp metacharacters.
func TestGoLanes_EveryTestRunsInExactlyItsOwnLane(t *testing.T) {
	cats := []string{"host", "single-gpu", "benchmark"}
	tops := []string{"TestA", "TestA2", "TestB.x", "Test(C)", "TestD+", "TestE|F"}
	for seed := range 500 {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		var inv Inventory
		var p Partition
		for _, pkg := range []string{"example.com/m", "example.com/m/sub"} {
			for _, top := range tops {
				if rng.IntN(3) == 0 {
					continue
				}
				names := []string{top}
				for s := range rng.IntN(3) {
					names = append(names, fmt.Sprintf("%s/case_%d", top, s))
				}
				// Usually a whole test in one category, sometimes split.
				cat := cats[rng.IntN(len(cats))]
				for _, n := range names {
					c := cat
					if rng.IntN(8) == 0 {
						c = cats[rng.IntN(len(cats))]
					}
					id := TestID{pkg, n}
					inv = append(inv, id)
					p.Entries = append(p.Entries, Entry{ID: id, Category: c})
				}
			}
		}
		if !Check(inv, p).OK() {
			continue
		}
		patterns := map[string]map[string]*regexp.Regexp{}
		rendered := true
		for _, c := range cats {
			pats, err := Select(p, c).GoRunPatterns(p)
			if errors.Is(err, ErrSplitTest) {
				rendered = false
				continue
			}
			if err != nil {
				t.Fatalf("seed %d: %s: %v", seed, c, err)
			}
			patterns[c] = map[string]*regexp.Regexp{}
			for pkg, pat := range pats {
				patterns[c][pkg] = regexp.MustCompile(pat)
			}
		}
		if !rendered {
			continue
		}
		for _, e := range p.Entries {
			top, _, _ := strings.Cut(e.ID.Name, "/")
			var ranIn []string
			for _, c := range cats {
				if re := patterns[c][e.ID.Binary]; re != nil && re.MatchString(top) {
					ranIn = append(ranIn, c)
				}
			}
			if len(ranIn) != 1 || ranIn[0] != e.Category {
				t.Fatalf("seed %d: %s runs in %v, its category is %s", seed, e.ID, ranIn, e.Category)
			}
		}
	}
}

// readMatcherText reads a filterset matcher's text from s the way nextest's
// parser does (nextest-filtering's unicode_string): plain text up to an
// unescaped ")" or ",", and the escapes \\, \), \,, \/, \n, \r, \t, \b, \f
// and \u{...}; any other escape is an error. It returns the text and the
// rest of s.
func readMatcherText(s string) (string, string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ')', ',':
			return b.String(), s[i:], nil
		case '\\':
			if i+1 == len(s) {
				return "", "", errors.New("a trailing backslash")
			}
			i++
			switch e := s[i]; e {
			case '\\', ')', ',', '/':
				b.WriteByte(e)
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			default:
				return "", "", fmt.Errorf("invalid escape character %q", e)
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", "", errors.New("no closing parenthesis")
}

// A lane's filterset names exactly its tests as nextest reads it, whatever
// characters a binary ID or test name holds (parameterized and data-driven
// harnesses put parentheses, commas and slashes in names).
func FuzzNextestFilter_NextestReadsBackTheExactNames(f *testing.F) {
	f.Add("tenferro-cuda::capability", "gemm_matches_cpu")
	f.Add("crate::bin/e2e", "case(1, 2)")
	f.Add(`a\b`, `x) | all() | test(=y`)
	f.Fuzz(func(t *testing.T, binary, name string) {
		if binary == "" || name == "" {
			return
		}
		got := Lane{Tests: []TestID{{binary, name}}}.NextestFilter()
		rest, ok := strings.CutPrefix(got, "(binary_id(=")
		if !ok {
			t.Fatalf("%q", got)
		}
		b, rest, err := readMatcherText(rest)
		if err != nil || b != binary {
			t.Fatalf("binary_id reads back %q (%v) from %q, want %q", b, err, got, binary)
		}
		rest, ok = strings.CutPrefix(rest, ") & (test(=")
		if !ok {
			t.Fatalf("%q", got)
		}
		n, rest, err := readMatcherText(rest)
		if err != nil || n != name || rest != ")))" {
			t.Fatalf("test reads back %q (%v), rest %q, from %q, want %q", n, err, rest, got, name)
		}
	})
}

// evalFilterset evaluates, as nextest would for one test, the filtersets
// NextestFilterWithin writes: none(), all(), not (X), and unions of
// (binary_id(=B) & (test(=N) | ...)), with nextest's escapes.
func evalFilterset(t *testing.T, f string, id TestID) bool {
	t.Helper()
	switch {
	case f == "none()":
		return false
	case f == "all()":
		return true
	case strings.HasPrefix(f, "not (") && strings.HasSuffix(f, ")"):
		return !evalFilterset(t, f[len("not ("):len(f)-1], id)
	}
	rest, match := f, false
	for {
		var ok bool
		if rest, ok = strings.CutPrefix(rest, "(binary_id(="); !ok {
			t.Fatalf("unexpected filterset at %q", rest)
		}
		bin, r, err := readMatcherText(rest)
		if err != nil {
			t.Fatal(err)
		}
		if rest, ok = strings.CutPrefix(r, ") & ("); !ok {
			t.Fatalf("unexpected filterset at %q", r)
		}
		for {
			if rest, ok = strings.CutPrefix(rest, "test(="); !ok {
				t.Fatalf("unexpected filterset at %q", rest)
			}
			name, r, err := readMatcherText(rest)
			if err != nil {
				t.Fatal(err)
			}
			match = match || (bin == id.Binary && name == id.Name)
			rest = strings.TrimPrefix(r, ")")
			if rest, ok = strings.CutPrefix(rest, " | "); !ok {
				break
			}
		}
		if rest, ok = strings.CutPrefix(rest, "))"); !ok {
			t.Fatalf("unexpected filterset at %q", rest)
		}
		if rest == "" {
			return match
		}
		if rest, ok = strings.CutPrefix(rest, " | "); !ok {
			t.Fatalf("unexpected filterset at %q", rest)
		}
	}
}

// A lane's filterset selects exactly its category's tests, whether it
// names them or, when that is too long for one argument, names the rest of
// a partition that Check proved exhaustive; when neither fits, the lane is
// refused rather than cut.
func TestNextestFilterWithin_SelectsExactlyTheLane(t *testing.T) {
	cats := []string{"host", "single-gpu", "two-device"}
	names := []string{"a", "tests::b(1, 2)", `c\d`, "e)f", "g/h"}
	var complements, refused int
	defer func() {
		if complements == 0 || refused == 0 {
			t.Errorf("%d complements and %d refusals: the cases do not reach both", complements, refused)
		}
	}()
	for seed := range 300 {
		rng := rand.New(rand.NewPCG(uint64(seed), 3))
		var p Partition
		for _, bin := range []string{"crate", "crate::bin/e2e"} {
			for i := range 1 + rng.IntN(20) {
				id := TestID{bin, fmt.Sprintf("%s_%d", names[rng.IntN(len(names))], i)}
				p.Entries = append(p.Entries, Entry{ID: id, Category: cats[rng.IntN(len(cats))]})
			}
		}
		max := 60 + rng.IntN(600)
		for _, c := range cats {
			l := Select(p, c)
			f, err := l.NextestFilterWithin(p, max)
			if err != nil {
				if !errors.Is(err, ErrFilterTooLong) || len(l.NextestFilter()) <= max {
					t.Fatalf("seed %d: %s: %v", seed, c, err)
				}
				refused++
				continue
			}
			if strings.HasPrefix(f, "not (") {
				complements++
			}
			if len(f) > max {
				t.Fatalf("seed %d: %s: %d bytes, over %d", seed, c, len(f), max)
			}
			for _, e := range p.Entries {
				if got := evalFilterset(t, f, e.ID); got != (e.Category == c) {
					t.Fatalf("seed %d: the %s lane's %q selects %s (%s): %v", seed, c, f, e.ID, e.Category, got)
				}
			}
		}
	}
}

// nextest's own published listings, as nextest writes them (see
// testdata/SOURCES.md): the documentation's example is read whole; nextest's
// expected output has a binary a filterset skipped, which leaves its tests
// unlisted, so it is refused, and read whole once that binary is left out.
// Both are read as encoding/json reads them.
func TestParseNextestList_ReadsNextestsOwnListings(t *testing.T) {
	read := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join("testdata/nextest", name))
		if err != nil {
			t.Fatal(err)
		}
		checkNextestSame(t, data)
		return data
	}
	inv, err := ParseNextestList(bytes.NewReader(read("docs-camino.json")))
	camino := Inventory{{"camino", "serde_impls::tests::invalid_utf8"}, {"camino", "serde_impls::tests::valid_utf8"},
		{"camino", "tests::test_borrowed_into"}, {"camino", "tests::test_deref_mut"}, {"camino", "tests::test_owned_into"}}
	if diff := cmp.Diff(camino, inv); err != nil || diff != "" {
		t.Errorf("camino: %v (-want +got):\n%s", err, diff)
	}
	runner := read("runner-test-list-expected.json")
	if _, err := ParseNextestList(bytes.NewReader(runner)); !errors.Is(err, ErrInventory) {
		t.Errorf("a listing with a skipped binary: %v, want ErrInventory", err)
	}
	var listing map[string]any
	if err := json.Unmarshal(runner, &listing); err != nil {
		t.Fatal(err)
	}
	delete(listing["rust-suites"].(map[string]any), "fake-package::skipped-binary")
	unskipped, err := json.Marshal(listing)
	if err != nil {
		t.Fatal(err)
	}
	checkNextestSame(t, unskipped)
	inv, err = ParseNextestList(bytes.NewReader(unskipped))
	var want Inventory
	for _, name := range []string{"benches::bench_foo", "benches::ignored_bench_foo", "tests::baz::test_ignored", "tests::baz::test_quux", "tests::foo::test_bar", "tests::ignored::test_bar"} {
		want = append(want, TestID{"fake-package::fake-binary", name})
	}
	if diff := cmp.Diff(want, inv); err != nil || diff != "" {
		t.Errorf("nextest's listing, ignored tests and benchmarks included: %v (-want +got):\n%s", err, diff)
	}
}
