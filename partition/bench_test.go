package partition

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpugate/gpugate/internal/testsys"
)

// benchIDs is n tests in 350 binaries (50 crates of 7 suites), sorted as
// nextest lists them, and a partition of them in the same order in which
// every thousandth test carries its old name: a handful of new tests and
// as many stale lines with rename hints.
func benchIDs(n int) (Inventory, Partition) {
	inv := make(Inventory, n)
	for i := range n {
		inv[i] = TestID{fmt.Sprintf("crate%d::suite%d", i%50, i%7), fmt.Sprintf("module%d::tests::case_%d", i%300, i)}
	}
	inv.sort()
	p := Partition{Entries: make([]Entry, 0, n)}
	for i, id := range inv {
		if i%1000 == 0 {
			id.Name += "_old"
		}
		p.Entries = append(p.Entries, Entry{ID: id, Category: "host", File: "p.tsv", Line: i + 1})
	}
	return inv, p
}

// writeNextestList writes inv as `cargo nextest list --message-format json`
// prints it: one compact line, every binary's metadata, its test cases
// sorted (nextest's BTreeMaps), most of them matching and some ignored.
// Two million tests take about 200 MB.
func writeNextestList(w io.Writer, inv Inventory) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	fmt.Fprintf(bw, `{"rust-build-meta":{"target-directory":"/home/ci/work/target","base-output-directories":["debug"],"non-test-binaries":{},"build-script-out-dirs":{},"linked-paths":[],"platforms":{"host":{"platform":{"triple":"x86_64-unknown-linux-gnu","target-features":"unknown"},"libdir":{"status":"available","path":"/home/ci/.rustup/toolchains/stable/lib"}},"targets":[]},"target-platforms":[],"target-platform":null},"test-count":%d,"rust-suites":{`, len(inv))
	for i := 0; i < len(inv); {
		bin := inv[i].Binary
		crate, kind, _ := strings.Cut(bin, "::")
		if i > 0 {
			bw.WriteByte(',')
		}
		fmt.Fprintf(bw, `%q:{"package-name":%q,"binary-id":%q,"binary-name":%q,"package-id":"path+file:///home/ci/work/crates/%s#0.4.0","kind":"test","binary-path":"/home/ci/work/target/debug/deps/%s-3b1a0f2c9d8e7f60","build-platform":"target","cwd":"/home/ci/work/crates/%s","status":"listed","testcases":{`, bin, crate, bin, kind, crate, kind, crate)
		for j, start := i, i; j < len(inv) && inv[j].Binary == bin; j++ {
			if j > start {
				bw.WriteByte(',')
			}
			if j%10 == 0 {
				fmt.Fprintf(bw, `%q:{"ignored":true,"filter-match":{"status":"mismatch","reason":"ignored"}}`, inv[j].Name)
			} else {
				fmt.Fprintf(bw, `%q:{"ignored":false,"filter-match":{"status":"matches"}}`, inv[j].Name)
			}
			i = j + 1
		}
		bw.WriteString("}}")
	}
	bw.WriteString("}}\n")
	return bw.Flush()
}

// writeGoTestJSON writes inv as `go test -json` reports a passing run: per
// package a start event, per test its run, two output lines and its pass,
// then the package's summary.
func writeGoTestJSON(w io.Writer, inv Inventory) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	ts := `"Time":"2026-08-14T09:30:00.123456789Z"`
	for i := 0; i < len(inv); {
		pkg := inv[i].Binary
		fmt.Fprintf(bw, "{%s,\"Action\":\"start\",\"Package\":%q}\n", ts, pkg)
		j := i
		for ; j < len(inv) && inv[j].Binary == inv[i].Binary; j++ {
			name := inv[j].Name
			fmt.Fprintf(bw, "{%s,\"Action\":\"run\",\"Package\":%q,\"Test\":%q}\n", ts, pkg, name)
			fmt.Fprintf(bw, "{%s,\"Action\":\"output\",\"Package\":%q,\"Test\":%q,\"Output\":%q}\n", ts, pkg, name, "=== RUN   "+name+"\n")
			fmt.Fprintf(bw, "{%s,\"Action\":\"output\",\"Package\":%q,\"Test\":%q,\"Output\":%q}\n", ts, pkg, name, "--- PASS: "+name+" (0.00s)\n")
			fmt.Fprintf(bw, "{%s,\"Action\":\"pass\",\"Package\":%q,\"Test\":%q,\"Elapsed\":0}\n", ts, pkg, name)
		}
		fmt.Fprintf(bw, "{%s,\"Action\":\"output\",\"Package\":%q,\"Output\":\"PASS\\n\"}\n", ts, pkg)
		fmt.Fprintf(bw, "{%s,\"Action\":\"output\",\"Package\":%q,\"Output\":\"ok  \\t%s\\t0.123s\\n\"}\n", ts, pkg, pkg)
		fmt.Fprintf(bw, "{%s,\"Action\":\"pass\",\"Package\":%q,\"Elapsed\":0.123}\n", ts, pkg)
		i = j
	}
	return bw.Flush()
}

func goBenchPackage(binary string) string {
	return "example.com/" + strings.ReplaceAll(binary, "::", "/")
}

// goBenchName makes "module7::tests::case_12" the Go test
// "TestModule7_case_12".
func goBenchName(name string) string {
	mod, rest, _ := strings.Cut(name, "::tests::")
	return "TestM" + strings.TrimPrefix(mod, "m") + "_" + rest
}

// goBenchIDs is benchIDs as Go tests, sorted as ParseGoTestJSON returns
// them, with the partition's every thousandth test renamed.
func goBenchIDs(n int) (Inventory, Partition) {
	inv, _ := benchIDs(n)
	for i := range inv {
		inv[i] = TestID{goBenchPackage(inv[i].Binary), goBenchName(inv[i].Name)}
	}
	inv.sort()
	p := Partition{Entries: make([]Entry, 0, n)}
	for i, id := range inv {
		if i%1000 == 0 {
			id.Name += "_old"
		}
		p.Entries = append(p.Entries, Entry{ID: id, Category: "host", File: "p.tsv", Line: i + 1})
	}
	return inv, p
}

func writeTSV(w io.Writer, p Partition) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	bw.WriteString("# binary-id\ttest\tcategory\tnote\n")
	for _, e := range p.Entries {
		bw.WriteString(e.TSV())
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// benchListing is a listing (nextest or go) of n tests and its partition
// file, and what Check reports for them.
type benchListing struct {
	listing, tsv []byte
	parse        func(io.Reader) (Inventory, error)
	want         Report
}

func newBenchListing(tb testing.TB, format string, n int) benchListing {
	tb.Helper()
	var (
		l   benchListing
		inv Inventory
		p   Partition
		buf bytes.Buffer
		err error
	)
	switch format {
	case "nextest":
		inv, p = benchIDs(n)
		err = writeNextestList(&buf, inv)
		l.parse = ParseNextestList
	case "go":
		inv, p = goBenchIDs(n)
		err = writeGoTestJSON(&buf, inv)
		l.parse = ParseGoTestJSON
	}
	if err != nil {
		tb.Fatal(err)
	}
	l.listing = bytes.Clone(buf.Bytes())
	buf.Reset()
	if err := writeTSV(&buf, p); err != nil {
		tb.Fatal(err)
	}
	l.tsv = buf.Bytes()
	l.want = Check(inv, p)
	return l
}

// parseAndCheck is what `partition check` does: read the listing and the
// partition file and compare them.
func parseAndCheck(parse func(io.Reader) (Inventory, error), listing, tsv io.Reader) (Report, int, error) {
	inv, err := parse(listing)
	if err != nil {
		return Report{}, 0, err
	}
	p, err := ParseTSV(tsv)
	if err != nil {
		return Report{}, 0, err
	}
	return Check(inv, p), len(inv), nil
}

// benchHuge skips the two-million-test case unless the -bench pattern
// names it: it writes a gigabyte and more and runs for a minute, so it
// runs only when asked for by name, and never with -short.
func benchHuge(b *testing.B) {
	b.Helper()
	if testing.Short() {
		b.Skip("-short")
	}
	if f := flag.Lookup("test.bench"); f == nil || !strings.Contains(f.Value.String(), "2000000") {
		b.Skip("two million tests: run with -bench 'ParseAndCheckPeak/.*/tests=2000000' -benchtime 1x")
	}
}

// BenchmarkParseAndCheck parses a listing and a partition file, both in
// memory, and checks one against the other (the parse and Check that
// `partition check` runs; BenchmarkParseAndCheckPeak runs the whole
// command's path from files),
// for a realistic inventory (2,000 tests) and 100x that: nextest's listing
// and go test -json's run events, each with a handful of new and stale
// tests. ns/test is the time per op over the number of tests.
func BenchmarkParseAndCheck(b *testing.B) {
	for _, format := range []string{"nextest", "go"} {
		for _, n := range []int{2_000, 200_000} {
			b.Run(fmt.Sprintf("format=%s/tests=%d", format, n), func(b *testing.B) {
				l := newBenchListing(b, format, n)
				b.SetBytes(int64(len(l.listing) + len(l.tsv)))
				b.ReportAllocs()
				for b.Loop() {
					r, _, err := parseAndCheck(l.parse, bytes.NewReader(l.listing), bytes.NewReader(l.tsv))
					if err != nil {
						b.Fatal(err)
					}
					if len(r.New) != len(l.want.New) || len(r.Stale) != len(l.want.Stale) || r.OK() {
						b.Fatalf("%d new and %d stale, want %d and %d", len(r.New), len(r.Stale), len(l.want.New), len(l.want.Stale))
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/test")
			})
		}
	}
}

// BenchmarkParseAndCheckPeak is examples/partition's check in a child
// process (this test binary, running TestPeakHelper): Config.AuditFiles
// over the listing and the partition on disk, the listing streamed through
// the command's buffered reader (from=file) or, for comparison, read into
// memory first (from=memory), so that its memory is its own: it reports its peak
// resident memory (VmHWM in /proc/self/status, "peak-RSS-MiB"), the heap it
// obtained from the OS ("heap-sys-MiB", runtime.MemStats.HeapSys at the
// end: the heap does not give back address space) and all it allocated
// ("total-alloc-MiB"), and its time per test ("ns/test"; a fresh process
// pays for first touching each page it uses). 200,000 tests, and two
// million when asked for by name: -bench 'ParseAndCheckPeak/.*/tests=2000000'
// (the files take 0.2 GB for nextest, 1.3 GB for go).
func BenchmarkParseAndCheckPeak(b *testing.B) {
	for _, format := range []string{"nextest", "go"} {
		for _, n := range []int{200_000, 2_000_000} {
			b.Run(fmt.Sprintf("format=%s/tests=%d", format, n), func(b *testing.B) {
				if n > 200_000 {
					benchHuge(b)
				}
				benchParseAndCheckChild(b, format, n)
			})
		}
	}
}

const peakHelperEnv = "PARTITION_PEAK_HELPER"

// benchParseAndCheckChild writes the listing and the partition to files
// and runs parseAndCheck on them in a child process (this test binary,
// running TestPeakHelper), so its peak memory is its own.
func benchParseAndCheckChild(b *testing.B, format string, n int) {
	dir := b.TempDir()
	listing, tsv := filepath.Join(dir, "listing.json"), filepath.Join(dir, "p.tsv")
	var inv Inventory
	var p Partition
	var write func(io.Writer, Inventory) error
	switch format {
	case "nextest":
		inv, p = benchIDs(n)
		write = writeNextestList
	case "go":
		inv, p = goBenchIDs(n)
		write = writeGoTestJSON
	}
	want := Check(inv, p)
	for path, w := range map[string]func(io.Writer) error{
		listing: func(w io.Writer) error { return write(w, inv) },
		tsv:     func(w io.Writer) error { return writeTSV(w, p) },
	} {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := errors.Join(w(f), f.Close()); err != nil {
			b.Fatal(err)
		}
	}
	inv, p = nil, Partition{}
	runtime.GC()
	fi, err := os.Stat(listing)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%s listing of %d tests: %d MB", format, n, fi.Size()>>20)
	// from=file streams the listing, as examples/partition's check command
	// does; from=memory reads it into memory first.
	for _, from := range []string{"file", "memory"} {
		b.Run("from="+from, func(b *testing.B) {
			b.SetBytes(fi.Size())
			runPeakHelper(b, fmt.Sprintf("%s\t%s\t%s\t%s\t%d\t%d", format, from, listing, tsv, len(want.New), len(want.Stale)), n)
		})
	}
}

func runPeakHelper(b *testing.B, spec string, n int) {
	var m map[string]float64
	for b.Loop() {
		cmd := exec.Command(os.Args[0], "-test.run=^TestPeakHelper$", "-test.bench=^$", "-test.count=1")
		cmd.Env = append(os.Environ(), peakHelperEnv+"="+spec)
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("%v\n%s", err, out)
		}
		m = map[string]float64{}
		for _, line := range strings.Split(string(out), "\n") {
			if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && strings.HasPrefix(k, "peak.") {
				if f, err := strconv.ParseFloat(v, 64); err == nil {
					m[strings.TrimPrefix(k, "peak.")] = f
				}
			}
		}
		if len(m) == 0 {
			b.Fatalf("the child reported nothing:\n%s", out)
		}
	}
	for k, v := range m {
		b.ReportMetric(v, k)
	}
	b.ReportMetric(m["check-ns"]/float64(n), "ns/test")
}

// TestPeakHelper is benchParseAndCheckChild's child; it does nothing
// unless PARTITION_PEAK_HELPER names the files.
func TestPeakHelper(t *testing.T) {
	spec := os.Getenv(peakHelperEnv)
	if spec == "" {
		t.Skip("the child of BenchmarkParseAndCheck's two-million-test case")
	}
	f := strings.Split(spec, "\t")
	if len(f) != 6 {
		t.Fatalf("%s=%q", peakHelperEnv, spec)
	}
	start, cpu0 := time.Now(), testsys.CPUTime()
	a, err := func() (Audit, error) {
		var listing io.Reader
		if f[1] == "memory" {
			data, err := os.ReadFile(f[2])
			if err != nil {
				return Audit{}, err
			}
			listing = bytes.NewReader(data)
		} else {
			file, err := os.Open(f[2])
			if err != nil {
				return Audit{}, err
			}
			defer file.Close()
			listing = bufio.NewReaderSize(file, 1<<20) // as examples/partition reads it
		}
		return DefaultConfig().AuditFiles(listing, f[0], f[3])
	}()
	if err != nil {
		t.Fatal(err)
	}
	r, n := a.Report, a.Tests
	elapsed, cpu := time.Since(start), testsys.CPUTime()-cpu0
	if fmt.Sprint(len(r.New)) != f[4] || fmt.Sprint(len(r.Stale)) != f[5] {
		t.Fatalf("%d tests: %d new and %d stale, want %s and %s", n, len(r.New), len(r.Stale), f[4], f[5])
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("peak.check-ns=%d\n", elapsed.Nanoseconds())
	if cpu >= 0 {
		fmt.Printf("peak.cpu-ns=%d\n", cpu.Nanoseconds())
	}
	if rss := testsys.MaxRSS(); rss > 0 {
		fmt.Printf("peak.peak-RSS-MiB=%.1f\n", float64(rss)/(1<<20))
	}
	fmt.Printf("peak.heap-sys-MiB=%.1f\npeak.total-alloc-MiB=%.1f\n", float64(ms.HeapSys)/(1<<20), float64(ms.TotalAlloc)/(1<<20))
}
