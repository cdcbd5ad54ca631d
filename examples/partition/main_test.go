package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpugate/gpugate/partition"
)

func runCmd(t *testing.T, stdin string, args ...string) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, func(string) string { return "" }, strings.NewReader(stdin), &out, &errOut)
	return code, out.String() + errOut.String()
}

func TestExampleCheckFailsOnTheUnclassifiedTest(t *testing.T) {
	code, out := runCmd(t, "")
	if code != 1 || !strings.Contains(out, "+ tenferro-cuda::capability\ttwo_device_registration\t<category>") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

func TestCheckSelectShards(t *testing.T) {
	dir := t.TempDir()
	tsv := filepath.Join(dir, "p.tsv")
	os.WriteFile(tsv, []byte("example.com/m\tTestA\thost\nexample.com/m\tTestB\tsingle-gpu\n"), 0o644)
	inv := `{"Action":"run","Package":"example.com/m","Test":"TestA"}` + "\n" + `{"Action":"run","Package":"example.com/m","Test":"TestB"}` + "\n"
	if code, out := runCmd(t, inv, "check", "-format", "go", tsv); code != 0 || !strings.Contains(out, "every test is in exactly one category") {
		t.Errorf("check: exit %d\n%s", code, out)
	}
	// A listing that found nothing (go test -json of a package that failed
	// to build lists no test) fails the check.
	if code, out := runCmd(t, `{"Action":"start","Package":"example.com/m"}`+"\n", "check", "-format", "go", tsv); code != 1 || !strings.Contains(out, "the inventory lists no test") {
		t.Errorf("check of an empty inventory: exit %d\n%s", code, out)
	}
	if code, out := runCmd(t, "", "select", "-category", "single-gpu", "-render", "go", tsv); code != 0 || out != "example.com/m\t^(TestB)$\n" {
		t.Errorf("select: exit %d %q", code, out)
	}
	split := filepath.Join(dir, "split.tsv")
	os.WriteFile(split, []byte("example.com/m\tTestA\thost\nexample.com/m\tTestB/small\tsingle-gpu\nexample.com/m\tTestB/huge\tbenchmark\n"), 0o644)
	splitInv := `{"Action":"run","Package":"example.com/m","Test":"TestA"}` + "\n" + `{"Action":"run","Package":"example.com/m","Test":"TestB/small"}` + "\n" + `{"Action":"run","Package":"example.com/m","Test":"TestB/huge"}` + "\n"
	if code, out := runCmd(t, splitInv, "check", "-format", "go", split); code != 1 || !strings.Contains(out, "1 Go test(s) split across categories") || !strings.Contains(out, "example.com/m TestB is in benchmark (TestB/huge) and single-gpu (TestB/small)") {
		t.Errorf("check of a split test: exit %d\n%s", code, out)
	}
	if code, out := runCmd(t, "", "select", "-category", "single-gpu", "-render", "go", split); code != 1 || !strings.Contains(out, "example.com/m TestB is in benchmark (TestB/huge) and single-gpu (TestB/small)") || strings.Contains(out, "^(") {
		t.Errorf("select of a split test: exit %d %q", code, out)
	}
	units := filepath.Join(dir, "units.json")
	os.WriteFile(units, []byte(`[{"name":"a.cu","cost":"3h"},{"name":"b.cu","cost":"2h"},{"name":"c.cu","cost":"1h"}]`), 0o644)
	if code, out := runCmd(t, "", "shards", "-n", "2", units); code != 0 || !strings.Contains(out, "shard 0: 3h0m0s of compiling: a.cu") || !strings.Contains(out, "shard 1: 3h0m0s of compiling: b.cu c.cu") {
		t.Errorf("shards: exit %d\n%s", code, out)
	}
	if code, _ := runCmd(t, "", "bogus"); code != 2 {
		t.Error("unknown subcommand must exit 2")
	}
}

func TestARefusedCommandLineExitsTwoAndSaysWhyOnce(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"an unknown flag":                {[]string{"select", "-nope", "p.tsv"}, "flag provided but not defined: -nope"},
		"shards without a file":          {[]string{"shards", "-n", "2"}, "partition shards: name one units file"},
		"shards with two files":          {[]string{"shards", "a.json", "b.json"}, "partition shards: name one units file"},
		"more shards than a matrix runs": {[]string{"shards", "-n", "257", "units.json"}, "partition shards: -n 257: the shards are a GitHub Actions matrix, which runs at most 256 jobs"},
		"check with a bad -value":        {[]string{"check", "-example=maybe"}, `invalid boolean value "maybe"`},
	} {
		t.Run(name, func(t *testing.T) {
			code, out := runCmd(t, "", tc.args...)
			if code != 2 || strings.Count(out, tc.want) != 1 || strings.Contains(out, "::error::") {
				t.Errorf("exit %d, output:\n%s\nwant exit 2 and %q once", code, out, tc.want)
			}
		})
	}
}

func TestLongCompileSubcommands(t *testing.T) {
	dir := t.TempDir()
	a, b, c := strings.Repeat("a", 64), strings.Repeat("b", 64), strings.Repeat("c", 64)
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(text), 0o644)
		return p
	}
	shard0 := write("shard-0.sha256", a+"  build/gemv.o\n")
	shard1 := write("shard-1.sha256", b+"  build/attn.o\n")
	reused := write("link.sha256", a+"  build/gemv.o\n"+b+"  build/attn.o\n")
	rebuilt := write("rebuilt.sha256", a+"  build/gemv.o\n"+c+"  build/attn.o\n")
	state := filepath.Join(dir, "chain-state.json")
	for name, tc := range map[string]struct {
		args []string
		code int
		want string
	}{
		"objects reused":          {[]string{"verify-objects", "-present", reused, shard0, shard1}, 0, "every one of the 2 shard objects was reused"},
		"a silent full recompile": {[]string{"verify-objects", "-present", rebuilt, shard0, shard1}, 1, "rebuilt or changed build/attn.o"},
		"no manifests":            {[]string{"verify-objects", "-present", reused}, 2, "give -present"},
		"a chain that fits":       {[]string{"chain", "-estimate", "10h"}, 0, "2 link(s), each compiling under a 5h30m0s timeout"},
		"a chain too short":       {[]string{"chain", "-estimate", "12h"}, 1, "wired 2 deep"},
		"batches":                 {[]string{"batches", "-jobs", "2100", "-runners", "40", "-typical", "1h"}, 0, "2100 job(s) in 5 batch(es): [480 480 480 480 180]"},
		"first cell update":       {[]string{"chain-state", "-state", state, "-cell", "natten", "-link", "1"}, 0, "every cell done: false"},
	} {
		t.Run(name, func(t *testing.T) {
			if code, out := runCmd(t, "", tc.args...); code != tc.code || !strings.Contains(out, tc.want) {
				t.Errorf("exit %d, output:\n%s\nwant exit %d and %q", code, out, tc.code, tc.want)
			}
		})
	}
	// One cell finishing never marks another done, and no cell goes back.
	runCmd(t, "", "chain-state", "-state", state, "-cell", "natten", "-link", "1")
	if code, out := runCmd(t, "", "chain-state", "-state", state, "-cell", "pytorch3d", "-link", "2", "-done"); code != 0 || !strings.Contains(out, "cell pytorch3d: link 2, done true; every cell done: false") {
		t.Errorf("exit %d: %s", code, out)
	}
	if code, out := runCmd(t, "", "chain-state", "-state", state, "-cell", "pytorch3d", "-link", "1"); code != 1 || !strings.Contains(out, "back to 1") {
		t.Errorf("a link going back: exit %d: %s", code, out)
	}
	if code, out := runCmd(t, "", "chain-state", "-state", state, "-cell", "natten", "-link", "2", "-done"); code != 0 || !strings.Contains(out, "every cell done: true") {
		t.Errorf("exit %d: %s", code, out)
	}
}

// A link of a checkpoint chain: the tree is written whole, restored into a
// fresh directory with its sub-second mtimes, and the command line refuses
// a checkpoint inside the tree it would contain.
func TestCheckpointAndRestore(t *testing.T) {
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "fresh-runner", "source") // restore makes it
	os.MkdirAll(filepath.Join(src, "build"), 0o755)
	f := filepath.Join(src, "build", "gemv.o")
	os.WriteFile(f, []byte("object"), 0o644)
	mt := time.Date(2026, 8, 14, 9, 30, 0, 123456789, time.UTC)
	os.Chtimes(f, mt, mt)
	ckpt := filepath.Join(t.TempDir(), "ckpt.tar")
	if code, out := runCmd(t, "", "checkpoint", "-o", ckpt, src); code != 0 || !strings.Contains(out, "checkpoint "+src+": 1 file(s), 1 dir(s), 0 symlink(s), 6 B") {
		t.Fatalf("exit %d: %s", code, out)
	}
	if code, out := runCmd(t, "", "restore", "-i", ckpt, dst); code != 0 || !strings.Contains(out, "1 file(s)") {
		t.Fatalf("exit %d: %s", code, out)
	}
	if info, err := os.Stat(filepath.Join(dst, "build", "gemv.o")); err != nil || !info.ModTime().Equal(mt) {
		t.Errorf("restored %v (%v), want mtime %v", info, err, mt)
	}
	for name, args := range map[string][]string{
		"inside the tree": {"checkpoint", "-o", filepath.Join(src, "ckpt.tar"), src},
		"no directory":    {"checkpoint", "-o", ckpt},
		"no file":         {"restore", dst},
	} {
		if code, out := runCmd(t, "", args...); code != 2 {
			t.Errorf("%s: exit %d: %s", name, code, out)
		}
	}
	if _, err := os.Stat(filepath.Join(src, "ckpt.tar")); err == nil {
		t.Error("a refused checkpoint was written")
	}
	bad := filepath.Join(t.TempDir(), "bad.tar")
	os.WriteFile(bad, []byte("not a tar"), 0o644)
	if code, out := runCmd(t, "", "restore", "-i", bad, dst); code != 1 || !strings.Contains(out, "bad checkpoint") {
		t.Errorf("a bad checkpoint: exit %d: %s", code, out)
	}
}

// runActions runs a subcommand as an Actions step and returns its exit
// code, its output and the step outputs it wrote.
func runActions(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	outFile := filepath.Join(t.TempDir(), "output")
	env := map[string]string{"GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": outFile}
	var out bytes.Buffer
	code := run(args, func(k string) string { return env[k] }, strings.NewReader(""), &out, &out)
	written, _ := os.ReadFile(outFile)
	return code, out.String(), string(written)
}

// The compile-sharding ADR's chain, as the adoption workflow runs it: each
// cell and link uploads its own state file; chain-status folds whatever was
// downloaded into the next link's matrix (unfinished cells and the link
// each resumes from), one cell's resume link, and the completion check.
func TestChainStatusResumesEachCellFromItsOwnStateFiles(t *testing.T) {
	dir := t.TempDir()
	states := filepath.Join(dir, "chain-state")
	record := func(artifact string, args ...string) {
		t.Helper()
		p := filepath.Join(states, artifact, "state.json")
		os.MkdirAll(filepath.Dir(p), 0o755)
		if code, out := runCmd(t, "", append([]string{"chain-state", "-state", p}, args...)...); code != 0 {
			t.Fatalf("exit %d: %s", code, out)
		}
	}
	cells := `["natten","pytorch3d","xformers"]`
	// The first link: nothing downloaded yet, every cell starts fresh.
	if code, out, outputs := runActions(t, "chain-status", "-cells", cells, states); code != 0 ||
		!strings.Contains(outputs, `pending=[{"cell":"natten","link":0},{"cell":"pytorch3d","link":0},{"cell":"xformers","link":0}]`) {
		t.Errorf("first link: exit %d\n%s\n%s", code, out, outputs)
	}
	record("chain-state-natten-1", "-cell", "natten", "-link", "1")
	record("chain-state-pytorch3d-1", "-cell", "pytorch3d", "-link", "1", "-done")
	record("chain-state-xformers-1", "-cell", "xformers", "-link", "1")
	record("chain-state-natten-2", "-cell", "natten", "-link", "2")
	if code, out, outputs := runActions(t, "chain-status", "-cells", cells, states); code != 0 ||
		!strings.Contains(outputs, `pending=[{"cell":"natten","link":2},{"cell":"xformers","link":1}]`) || !strings.Contains(outputs, "all_done=false") {
		t.Errorf("third link: exit %d\n%s\n%s", code, out, outputs)
	}
	if code, _, outputs := runActions(t, "chain-status", "-cell", "natten", states); code != 0 || !strings.Contains(outputs, "link=2\ndone=false\n") {
		t.Errorf("one cell: exit %d\n%s", code, outputs)
	}
	if code, out, _ := runActions(t, "chain-status", "-cells", "natten,pytorch3d,xformers", "-require-done", states); code != 1 ||
		!strings.Contains(out, "::error::compileplan: the checkpoint chain did not finish every cell: natten (at link 2), xformers (at link 1)") {
		t.Errorf("unfinished: exit %d\n%s", code, out)
	}
	record("chain-state-natten-3", "-cell", "natten", "-link", "3", "-done")
	record("chain-state-xformers-2", "-cell", "xformers", "-link", "2", "-done")
	if code, out, outputs := runActions(t, "chain-status", "-cells", cells, "-require-done", states); code != 0 || !strings.Contains(outputs, "pending=[]\nall_done=true\n") {
		t.Errorf("finished: exit %d\n%s\n%s", code, out, outputs)
	}
	os.WriteFile(filepath.Join(states, "stray.json"), []byte("[1,2]"), 0o644)
	if code, out, _ := runActions(t, "chain-status", "-cells", cells, states); code != 1 || !strings.Contains(out, "is not a chain state file") {
		t.Errorf("a foreign file: exit %d\n%s", code, out)
	}
	for name, args := range map[string][]string{
		"no cells":      {"chain-status", states},
		"no states":     {"chain-status", "-cells", cells},
		"a broken list": {"chain-status", "-cells", `["natten",`, states},
		"an empty cell": {"chain-status", "-cells", "natten,,xformers", states},
		"a cell twice":  {"chain-status", "-cells", `["natten","natten"]`, states},
		"a cell with /": {"chain-status", "-cells", `["cu12/py3"]`, states},
		"one cell, :":   {"chain-state", "-state", filepath.Join(dir, "s.json"), "-cell", "cu12:py3", "-link", "1"},
	} {
		if code, out := runCmd(t, "", args...); code != 2 {
			t.Errorf("%s: exit %d: %s", name, code, out)
		}
	}
}

// The sharded build's plan job hands each compile job its units and the
// objects it must produce.
func TestShardsWritesTheCompileMatrix(t *testing.T) {
	units := filepath.Join(t.TempDir(), "units.json")
	os.WriteFile(units, []byte(`[{"name":"a.cu","cost":"3h"},{"name":"b.cu","cost":"2h","objects":["b1.o","b2.o"]},{"name":"c.cu","cost":"1h"}]`), 0o644)
	code, out, outputs := runActions(t, "shards", "-n", "2", units)
	want := `shards=[{"index":0,"units":["a.cu"],"manifest":["a.cu.o"]},{"index":1,"units":["b.cu","c.cu"],"manifest":["b1.o","b2.o","c.cu.o"]}]` + "\n"
	if code != 0 || outputs != want {
		t.Errorf("exit %d\n%s\noutputs %q\nwant %q", code, out, outputs, want)
	}
	// More shards than units: the empty ones get no job.
	if _, _, outputs := runActions(t, "shards", "-n", "5", units); strings.Count(outputs, `"index"`) != 3 {
		t.Errorf("five shards of three units: %s", outputs)
	}
	none := filepath.Join(t.TempDir(), "none.json")
	os.WriteFile(none, []byte(`[]`), 0o644)
	if code, out, _ := runActions(t, "shards", "-n", "2", none); code != 1 || !strings.Contains(out, "lists no compile units") {
		t.Errorf("no units: exit %d\n%s", code, out)
	}
}

// -json prints the subcommand's outputs instead of its text: the check's
// report as JSON (the lines to add or remove, for tools), a lane's filter,
// a chain's plan.
func TestJSONPrintsTheOutputs(t *testing.T) {
	code, out := runCmd(t, "", "check", "-example", "-json")
	var got struct {
		OK     string           `json:"ok"`
		Tests  string           `json:"tests"`
		Report partition.Report `json:"report"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != 1 {
		t.Fatalf("check -example -json: exit %d, %v:\n%s", code, err, out)
	}
	want := []partition.TestID{{Binary: "tenferro-cuda::capability", Name: "two_device_registration"}}
	if got.OK != "false" || got.Tests != "6" || !cmp.Equal(got.Report.New, want) {
		t.Errorf("check -json: %+v", got)
	}
	// In Actions the step outputs carry the counts, not the report.
	outFile := filepath.Join(t.TempDir(), "out")
	var stdout, stderr bytes.Buffer
	run([]string{"check", "-example"}, func(k string) string { return map[string]string{"GITHUB_OUTPUT": outFile}[k] }, strings.NewReader(""), &stdout, &stderr)
	if outputs, _ := os.ReadFile(outFile); string(outputs) != "ok=false\ntests=6\nlines=5\nnew=1\nstale=0\nduplicates=0\nsplit=0\n" {
		t.Errorf("check's step outputs:\n%s", outputs)
	}
	dir := t.TempDir()
	tsv := filepath.Join(dir, "p.tsv")
	os.WriteFile(tsv, []byte("example.com/m\tTestA\thost\nexample.com/m\tTestB\tsingle-gpu\n"), 0o644)
	if code, out := runCmd(t, "", "select", "-json", "-category", "single-gpu", tsv); code != 0 || out != `{"filter":"(binary_id(=example.com/m) & (test(=TestB)))","not_run":"","tests":"1"}`+"\n" {
		t.Errorf("select -json: exit %d %q", code, out)
	}
	if code, out := runCmd(t, "", "chain", "-json", "-estimate", "10h", "-job-cap", "6h", "-depth", "4"); code != 0 || !strings.HasPrefix(out, `{"links":"2","compile_timeout_seconds":"`) {
		t.Errorf("chain -json: exit %d %q", code, out)
	}
}

// A lane named wrong selects nothing, and nextest given none() runs
// nothing: a misspelt category is refused, and -require-tests refuses an
// empty lane before anything is bought for it.
func TestSelectRefusesAnUnknownCategoryAndWithRequireTestsAnEmptyLane(t *testing.T) {
	tsv := filepath.Join(t.TempDir(), "p.tsv")
	os.WriteFile(tsv, []byte("example.com/m\tTestA\thost\n"), 0o644)
	if code, out := runCmd(t, "", "select", "-category", "singel-gpu", tsv); code != 1 || !strings.Contains(out, `category "singel-gpu" is not configured`) {
		t.Errorf("a misspelt category: exit %d, %s", code, out)
	}
	if code, out := runCmd(t, "", "select", "-category", "single-gpu", tsv); code != 0 || out != "none()\n" {
		t.Errorf("an empty lane without -require-tests: exit %d, %q", code, out)
	}
	if code, out := runCmd(t, "", "select", "-category", "single-gpu", "-require-tests", tsv); code != 1 || !strings.Contains(out, "the single-gpu lane selects no test") {
		t.Errorf("an empty lane with -require-tests: exit %d, %s", code, out)
	}
	if code, _ := runCmd(t, "", "select", "-category", "host", "-require-tests", tsv); code != 0 {
		t.Errorf("a lane with a test, -require-tests: exit %d", code)
	}
}

// A large lane's filterset must still fit one argument: the host lane of a
// big workspace is rendered as the complement of the small GPU lane.
func TestSelect_ALargeLaneFitsOneArgument(t *testing.T) {
	var tsv strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&tsv, "tenferro-core\ttests::algebra::contraction::case_%04d_with_a_long_parameterized_name\thost\n", i)
	}
	tsv.WriteString("tenferro-cuda\tdevice::tests::context_creates\tsingle-gpu\n")
	file := filepath.Join(t.TempDir(), "p.tsv")
	os.WriteFile(file, []byte(tsv.String()), 0o644)
	code, out := runCmd(t, "", "select", "-category", "host", file)
	if code != 0 || strings.TrimSpace(out) != "not ((binary_id(=tenferro-cuda) & (test(=device::tests::context_creates))))" {
		t.Errorf("host: exit %d, %d bytes: %.200s", code, len(out), out)
	}
	if code, out := runCmd(t, "", "select", "-category", "single-gpu", file); code != 0 || !strings.HasPrefix(out, "(binary_id(=tenferro-cuda)") {
		t.Errorf("single-gpu: exit %d %q", code, out)
	}
}
