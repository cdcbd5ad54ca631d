// Command partition keeps test lanes exhaustive and plans long compiles:
//
//	partition check  [-inventory FILE|-] [-format nextest|go] PARTITION.tsv...   # exit 1 on any difference
//	partition select -category single-gpu [-render nextest|go|lines] [-require-tests] PARTITION.tsv...
//	partition shards -n 4 UNITS.json                                             # [{"name":..., "cost":"2h"}]
//	partition verify-objects -present LINK.sha256 SHARD.sha256...                 # sha256sum listings; exit 1 unless every shard object was reused
//	partition chain -estimate 10h [-job-cap 6h] [-depth 2]                        # checkpoint links; exit 1 if the wired depth is too short
//	partition chain-state -state STATE.json -cell NAME -link N [-done]            # per-cell progress, never last-writer-wins
//	partition chain-status -cells '["a","b"]' [-cell NAME] [-require-done] DIR|STATE.json...  # fold every link's state files: where each cell resumes
//	partition batches -jobs 2100 [-runners 40] [-typical 1h] [-queue-cap 24h]     # dispatch sizes that clear inside the queue cap
//	partition checkpoint -o CKPT.tar DIR                                          # the whole tree as a PAX tar (nanosecond mtimes)
//	partition restore -i CKPT.tar DIR                                             # into DIR (made if missing), every mtime as it was; refuses escaping entries
//
// Every subcommand takes -json: instead of its text it prints its step
// outputs (what it writes to $GITHUB_OUTPUT) as one JSON object; check's
// adds the whole report (the new, stale and duplicate lines).
//
// With no arguments, check runs on a bundled example (a nextest listing of
// a CUDA workspace and its partition files) with one new test, so it shows
// what a failing check prints.
package main

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpugate/gpugate/compileplan"
	"github.com/gpugate/gpugate/internal/cli"
	"github.com/gpugate/gpugate/internal/ghaction"
	"github.com/gpugate/gpugate/partition"
)

//go:embed example/nextest-list.json
var exampleList []byte

//go:embed example/cuda_test_partition.tsv
var examplePartition []byte

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	gha := ghaction.FromEnv(getenv)
	if len(args) == 0 {
		args = []string{"check", "-example"}
	}
	mismatch := false // check ran and the partition does not match
	sub := func(name, usage string, f func(args []string, gha ghaction.Env, stdout, stderr io.Writer) error) cli.Subcommand {
		return cli.Subcommand{Name: name, Usage: usage, Run: func(args []string) error { return f(args, gha, stdout, stderr) }}
	}
	err := cli.Dispatch("partition", stderr, args,
		cli.Subcommand{Name: "check", Usage: "[-inventory FILE|-] [-format nextest|go] PARTITION.tsv... | -example", Run: func(args []string) error {
			ok, err := check(args, gha, stdin, stdout, stderr)
			mismatch = err == nil && !ok
			return err
		}},
		sub("select", "-category single-gpu [-render nextest|go|lines|not-run] [-require-tests] PARTITION.tsv...", selectLane),
		sub("shards", "-n 4 UNITS.json", shards),
		sub("verify-objects", "-present LINK.sha256 SHARD.sha256...", verifyObjects),
		sub("chain", "-estimate 10h [-job-cap 6h] [-depth 2]", chain),
		sub("chain-state", "-state STATE.json -cell NAME -link N [-done]", chainState),
		sub("chain-status", "-cells '[\"a\",\"b\"]' [-cell NAME] [-require-done] DIR|STATE.json...", chainStatus),
		sub("batches", "-jobs 2100 [-runners 40] [-typical 1h] [-queue-cap 24h]", batches),
		sub("checkpoint", "-o CKPT.tar DIR", func(args []string, gha ghaction.Env, stdout, stderr io.Writer) error {
			return checkpoint("checkpoint", args, gha, stdout, stderr)
		}),
		sub("restore", "-i CKPT.tar DIR", func(args []string, gha ghaction.Env, stdout, stderr io.Writer) error {
			return checkpoint("restore", args, gha, stdout, stderr)
		}),
	)
	gha.JSON = ghaction.JSONRequested(args) // stdout carries only JSON: annotations go to stderr
	if mismatch {
		if gha.Actions {
			annotations := stdout
			if gha.JSON {
				annotations = stderr
			}
			ghaction.Error(annotations, "partition: the test partition does not match the inventory; see the lines above")
		}
		return 1
	}
	code := cli.Status(err)
	if code == 1 {
		gha.Fail(stdout, stderr, err)
	}
	return code
}

func readPartitions(paths []string) (partition.Partition, error) {
	if len(paths) == 0 {
		return partition.Partition{}, errors.New("partition: name at least one partition file")
	}
	var ps []partition.Partition
	for _, p := range paths {
		part, err := partition.ParseTSVFile(p)
		if err != nil {
			return partition.Partition{}, err
		}
		ps = append(ps, part)
	}
	p := partition.Merge(ps...)
	return p, partition.DefaultConfig().Validate(p)
}

func check(args []string, gha ghaction.Env, stdin io.Reader, stdout, stderr io.Writer) (bool, error) {
	fs := flag.NewFlagSet("partition check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ghaction.JSONFlag(fs, &stdout, &gha)
	invFile := fs.String("inventory", "-", "inventory file, - for stdin")
	format := fs.String("format", "nextest", "inventory format: nextest (cargo nextest list --message-format json) or go (go test -json / -list)")
	example := fs.Bool("example", false, "check the bundled example")
	if err := cli.FlagsThenFiles(fs, args); err != nil {
		return false, err
	}
	switch {
	case *example && fs.NArg() > 0:
		return false, cli.Refuse(fs, "-example checks the bundled partition: name no partition files (%q)", fs.Args())
	case !*example && fs.NArg() == 0:
		return false, cli.Refuse(fs, "name at least one partition file (or -example for the bundled one)")
	}
	switch *format {
	case "nextest", "go":
	default:
		return false, cli.Refuse(fs, "-format %q: use nextest or go", *format)
	}
	var (
		p   partition.Partition
		err error
	)
	var listing io.Reader // streamed to the parser: a listing is never held whole
	if *example {
		listing = bytes.NewReader(exampleList)
		p, err = partition.ParseTSV(bytes.NewReader(examplePartition))
		for i := range p.Entries {
			p.Entries[i].File = "cuda_test_partition.tsv"
		}
		fmt.Fprintln(stdout, "checking the bundled example: a nextest listing with one test nobody has classified yet")
	} else {
		if *invFile == "-" {
			listing = stdin
		} else {
			f, ferr := os.Open(*invFile)
			if ferr != nil {
				return false, fmt.Errorf("partition: read inventory: %w", ferr)
			}
			defer f.Close()
			listing = bufio.NewReaderSize(f, 1<<20)
		}
		p, err = readPartitions(fs.Args())
	}
	if err != nil {
		return false, err
	}
	var inv partition.Inventory
	switch *format {
	case "nextest":
		inv, err = partition.ParseNextestList(listing)
	case "go":
		inv, err = partition.ParseGoTestJSON(listing)
	default:
		return false, fmt.Errorf("partition: -format %q: use nextest or go", *format)
	}
	if err != nil {
		return false, err
	}
	r := partition.Check(inv, p)
	fmt.Fprintf(stdout, "%d tests in the inventory, %d partition lines\n", len(inv), len(p.Entries))
	fmt.Fprint(stdout, r)
	ok := r.OK()
	var splits []partition.SplitTest
	if *format == "go" {
		// go test -run cannot run part of a test: its lanes would overlap.
		if splits = partition.GoSplits(p); len(splits) > 0 {
			ok = false
			fmt.Fprintf(stdout, "%d Go test(s) split across categories; go test -run runs a test with all its subtests, so put each test and its subtests in one category:\n", len(splits))
			for _, sp := range splits {
				fmt.Fprintf(stdout, "  %s\n", sp)
			}
		}
	}
	outputs := [][2]string{{"ok", strconv.FormatBool(ok)}, {"tests", strconv.Itoa(len(inv))}, {"lines", strconv.Itoa(len(p.Entries))},
		{"new", strconv.Itoa(len(r.New))}, {"stale", strconv.Itoa(len(r.Stale))}, {"duplicates", strconv.Itoa(len(r.Duplicates))}, {"split", strconv.Itoa(len(splits))}}
	if gha.Echo != nil {
		// The whole report only with -json: a first adoption can list
		// thousands of tests, too many for a step output.
		// An empty list is [], not null.
		r.New, r.Stale, r.Duplicates = nonNil(r.New), nonNil(r.Stale), nonNil(r.Duplicates)
		report, err := json.Marshal(r)
		if err != nil {
			return false, fmt.Errorf("partition: %w", err)
		}
		outputs = append(outputs, [2]string{"report", string(report)})
	}
	return ok, gha.SetOutputs(outputs...)
}

// nonNil is s, or an empty slice for nil: JSON [] instead of null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// selectLane prints a lane; in Actions it also writes the outputs filter
// (the lane as a nextest filterset) and not_run (every not-run or excluded
// test, comma-separated, for the gate's NOT RUN list).
func selectLane(args []string, gha ghaction.Env, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("partition select", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ghaction.JSONFlag(fs, &stdout, &gha)
	cat := fs.String("category", "single-gpu", "the lane's category")
	render := fs.String("render", "nextest", "nextest (a filterset), go (-run patterns per package), lines, or not-run")
	requireTests := fs.Bool("require-tests", false, "exit 1 when the lane selects no test (a paid pod would run nothing)")
	if err := cli.FlagsThenFiles(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return cli.Refuse(fs, "name at least one partition file")
	}
	if err := cli.Require(fs, "category"); err != nil {
		return err
	}
	switch *render {
	case "nextest", "go", "lines", "not-run":
	default:
		return cli.Refuse(fs, "-render %q: use nextest, go, lines or not-run", *render)
	}
	p, err := readPartitions(fs.Args())
	if err != nil {
		return err
	}
	cfg := partition.DefaultConfig()
	l, err := cfg.Lane(p, *cat, *requireTests)
	if err != nil {
		return fmt.Errorf("%w (-category %s in %s)", err, *cat, strings.Join(fs.Args(), " "))
	}
	notRun := partition.NotRun(cfg, p)
	filter, ferr := l.NextestFilterWithin(p, partition.MaxFilterBytes)
	switch *render {
	case "nextest":
		if ferr != nil {
			return ferr
		}
		fmt.Fprintln(stdout, filter)
	case "go":
		pats, err := l.GoRunPatterns(p)
		if err != nil {
			return fmt.Errorf("%w (-category %s in %s)", err, *cat, strings.Join(fs.Args(), " "))
		}
		for _, pkg := range slices.Sorted(maps.Keys(pats)) {
			fmt.Fprintf(stdout, "%s\t%s\n", pkg, pats[pkg])
		}
	case "lines":
		for _, id := range l.Tests {
			fmt.Fprintln(stdout, id)
		}
	case "not-run":
		for _, s := range notRun {
			fmt.Fprintln(stdout, s)
		}
	default:
		return fmt.Errorf("partition: -render %q: use nextest, go, lines or not-run", *render)
	}
	// With another rendering, a filterset too long for nextest does not
	// fail the step: the filter output is left empty, which nextest refuses.
	return gha.SetOutputs([2]string{"filter", filter}, [2]string{"not_run", notRunOutput(notRun)}, [2]string{"tests", strconv.Itoa(len(l.Tests))})
}

// maxNotRunOutput bounds the not_run output. It reaches publish as one
// environment variable and one argument, each of which Linux caps at
// 128 KiB (a longer one fails the exec, and the gate is never published),
// and the check summary that lists it holds 65,535 characters.
const maxNotRunOutput = 32 << 10

// notRunOutput joins the NOT RUN list with commas (one item each), up to
// maxNotRunOutput; what does not fit is counted in a last item.
func notRunOutput(notRun []string) string {
	more := func(n int) string {
		return fmt.Sprintf("… and %d more not run or excluded (partition select -render not-run lists them all)", n)
	}
	var b strings.Builder
	for i, s := range notRun {
		item := strings.ReplaceAll(s, ",", ";")
		need := b.Len() + 1 + len(item)
		if left := len(notRun) - i - 1; left > 0 {
			need += 1 + len(more(left)) // room to say what follows
		}
		if need > maxNotRunOutput {
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			b.WriteString(more(len(notRun) - i))
			break
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(item)
	}
	return b.String()
}

type unitJSON struct {
	Name    string   `json:"name"`
	Cost    string   `json:"cost"`
	Objects []string `json:"objects"`
}

func shards(args []string, gha ghaction.Env, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("partition shards", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ghaction.JSONFlag(fs, &stdout, &gha)
	n := fs.Int("n", 4, "number of shards")
	if err := cli.FlagsAndArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return cli.Refuse(fs, "name one units file (JSON: [{\"name\": \"a.cu\", \"cost\": \"40m\"}])")
	}
	if *n > ghaction.MaxMatrixJobs {
		return cli.Refuse(fs, "-n %d: the shards are a GitHub Actions matrix, which runs at most %d jobs", *n, ghaction.MaxMatrixJobs)
	}
	data, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return fmt.Errorf("partition: %w", err)
	}
	var raw []unitJSON
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("partition: %s: %w", fs.Arg(0), err)
	}
	if len(raw) == 0 {
		return fmt.Errorf("partition: %s lists no compile units: there is nothing to shard", fs.Arg(0))
	}
	var units []compileplan.Unit
	for _, u := range raw {
		d, err := time.ParseDuration(u.Cost)
		if err != nil {
			return fmt.Errorf("partition: unit %s: cost %q: %w", u.Name, u.Cost, err)
		}
		units = append(units, compileplan.Unit{Name: u.Name, Cost: d, Objects: u.Objects})
	}
	ss, err := compileplan.Shards(units, *n)
	if err != nil {
		return err
	}
	for _, s := range ss {
		fmt.Fprintf(stdout, "shard %d: %s of compiling: %s\n", s.Index, s.Cost, strings.Join(s.Units, " "))
	}
	// The compile jobs' matrix: each shard's index, units and the objects
	// it must produce (its manifest).
	type cell struct {
		Index    int      `json:"index"`
		Units    []string `json:"units"`
		Manifest []string `json:"manifest"`
	}
	// A shard with nothing to compile gets no job.
	var matrix []cell
	for _, s := range ss {
		if len(s.Units) > 0 {
			matrix = append(matrix, cell{s.Index, s.Units, s.Manifest})
		}
	}
	out, _ := json.Marshal(matrix)
	return gha.SetOutputs([2]string{"shards", string(out)})
}

func readSums(path string) ([]compileplan.Object, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("partition: %w", err)
	}
	defer f.Close()
	objs, err := compileplan.ParseSHA256Sums(f)
	if err != nil {
		return nil, fmt.Errorf("partition: %s: %w", path, err)
	}
	return objs, nil
}

// verifyObjects asserts the link step reused every shard's objects: a
// silent full recompile fails loudly.
func verifyObjects(args []string, gha ghaction.Env, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("partition verify-objects", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ghaction.JSONFlag(fs, &stdout, &gha)
	present := fs.String("present", "", "sha256sum listing of the objects in the link step's build tree")
	if err := cli.FlagsAndArgs(fs, args); err != nil {
		return err
	}
	if *present == "" || fs.NArg() == 0 {
		return cli.Refuse(fs, "give -present LINK.sha256 and each shard's manifest (sha256sum listings)")
	}
	have, err := readSums(*present)
	if err != nil {
		return err
	}
	var manifests [][]compileplan.Object
	total := 0
	for _, m := range fs.Args() {
		objs, err := readSums(m)
		if err != nil {
			return err
		}
		manifests = append(manifests, objs)
		total += len(objs)
	}
	if err := compileplan.VerifyObjects(manifests, have); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "every one of the %d shard objects was reused unchanged\n", total)
	return gha.SetOutputs([2]string{"objects", strconv.Itoa(total)})
}

// chain plans the sequential checkpoint links of a build that outlasts one
// job.
func chain(args []string, gha ghaction.Env, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("partition chain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ghaction.JSONFlag(fs, &stdout, &gha)
	estimate := fs.Duration("estimate", 0, "the build's estimated compile time")
	jobCap := fs.Duration("job-cap", 6*time.Hour, "the per-job cap (6h on GitHub-hosted runners)")
	depth := fs.Int("depth", 2, "how many links the workflow's chain is wired for")
	if err := cli.Flags(fs, args); err != nil {
		return err
	}
	if *estimate <= 0 {
		return cli.Refuse(fs, "give -estimate, the build's compile time (e.g. 10h)")
	}
	c, err := compileplan.PlanChain(*estimate, *jobCap, *depth)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d link(s), each compiling under a %s timeout\n", c.Links, c.CompileBudget)
	return gha.SetOutputs([2]string{"links", strconv.Itoa(c.Links)}, [2]string{"compile_timeout_seconds", strconv.Itoa(int(c.CompileBudget.Seconds()))})
}

// chainState records one matrix cell's chain progress in a state file:
// only that cell changes, and a done cell stays done.
func chainState(args []string, gha ghaction.Env, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("partition chain-state", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ghaction.JSONFlag(fs, &stdout, &gha)
	file := fs.String("state", "", "the JSON state file (created when missing)")
	cell := fs.String("cell", "", "the matrix cell")
	link := fs.Int("link", 0, "the link the cell reached")
	done := fs.Bool("done", false, "the cell's build finished")
	if err := cli.Flags(fs, args); err != nil {
		return err
	}
	if *file == "" || *cell == "" {
		return cli.Refuse(fs, "give -state FILE and -cell NAME")
	}
	if !artifactSafe(*cell) {
		return cli.Refuse(fs, "-cell %q cannot be part of an artifact name (no \" : < > | * ? \\ / or spaces around it)", *cell)
	}
	state := compileplan.ChainState{}
	data, err := os.ReadFile(*file)
	switch {
	case err == nil:
		if state, err = compileplan.ParseChainState(data); err != nil {
			return fmt.Errorf("%s: %w", *file, err)
		}
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("partition: %w", err)
	}
	state, err = compileplan.MergeChainState(state, *cell, compileplan.CellState{Link: *link, Done: *done})
	if err != nil {
		return err
	}
	out, _ := json.MarshalIndent(state, "", "  ")
	if err := os.WriteFile(*file, append(out, '\n'), 0o644); err != nil {
		return fmt.Errorf("partition: %w", err)
	}
	all := len(state.Pending()) == 0
	fmt.Fprintf(stdout, "cell %s: link %d, done %v; every cell done: %v\n", *cell, state[*cell].Link, state[*cell].Done, all)
	return gha.SetOutputs([2]string{"done", strconv.FormatBool(state[*cell].Done)}, [2]string{"all_done", strconv.FormatBool(all)})
}

// artifactSafe says whether a cell name can be part of an artifact name
// (chain-state-<cell>-<link>, chain-ckpt-<cell>-<link>): upload-artifact
// refuses " : < > | * ? \ / and line breaks.
func artifactSafe(cell string) bool {
	return strings.TrimSpace(cell) == cell && cell != "" && !strings.ContainsAny(cell, "\":<>|*?\\/\r\n\t")
}

// chainStatus folds the state files every link left (one per cell and
// link) and says where each unfinished cell resumes: the matrix of the
// next link, one cell's resume link, or, with -require-done, the chain's
// completion check.
func chainStatus(args []string, gha ghaction.Env, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("partition chain-status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ghaction.JSONFlag(fs, &stdout, &gha)
	cellsFlag := fs.String("cells", "", `every cell of the chain: a JSON array ("[\"a\",\"b\"]", as the matrix has it) or a comma-separated list`)
	one := fs.String("cell", "", "report this one cell's resume link (outputs link and done)")
	requireDone := fs.Bool("require-done", false, "exit 1 unless every cell is done")
	if err := cli.FlagsAndArgs(fs, args); err != nil {
		return err
	}
	var cells []string
	if c := strings.TrimSpace(*cellsFlag); strings.HasPrefix(c, "[") {
		if err := json.Unmarshal([]byte(c), &cells); err != nil {
			return cli.Refuse(fs, "-cells %q is not a JSON array of names: %v", c, err)
		}
	} else if c != "" {
		cells = strings.Split(c, ",")
	}
	if *one != "" {
		cells = []string{*one}
	}
	seen := map[string]bool{}
	for _, c := range cells {
		if !artifactSafe(c) || seen[c] {
			return cli.Refuse(fs, "-cells %q names a cell twice, an empty one, or one an artifact name cannot carry (\" : < > | * ? \\ / or spaces around it)", *cellsFlag)
		}
		seen[c] = true
	}
	if len(cells) == 0 || fs.NArg() == 0 {
		return cli.Refuse(fs, "give -cells (or -cell) and the state files or directories the links' artifacts were downloaded to")
	}
	state, files, err := readChainStates(fs.Args())
	if err != nil {
		return err
	}
	resume := state.Resume(cells)
	fmt.Fprintf(stdout, "%d state file(s); %d of %d cell(s) unfinished\n", files, len(resume), len(cells))
	for _, r := range resume {
		fmt.Fprintf(stdout, "  %s resumes from link %d\n", r.Cell, r.Link)
	}
	if *requireDone {
		if err := state.Finished(cells); err != nil {
			return err
		}
	}
	if *one != "" {
		st := state[*one]
		return gha.SetOutputs([2]string{"link", strconv.Itoa(st.Link)}, [2]string{"done", strconv.FormatBool(st.Done)})
	}
	data, _ := json.Marshal(resume)
	return gha.SetOutputs([2]string{"pending", string(data)}, [2]string{"all_done", strconv.FormatBool(len(resume) == 0)})
}

// readChainStates reads every state file named, or under a directory
// named (every *.json file). A path that does not exist holds no states:
// the first link of a chain has none to download.
func readChainStates(paths []string) (compileplan.ChainState, int, error) {
	var states []compileplan.ChainState
	read := func(path string) error {
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("partition: %w", err)
		}
		s, err := compileplan.ParseChainState(data)
		if err != nil {
			return fmt.Errorf("%s is not a chain state file (partition chain-state writes them): %w", path, err)
		}
		states = append(states, s)
		return nil
	}
	for _, p := range paths {
		fi, err := os.Stat(p)
		switch {
		case errors.Is(err, os.ErrNotExist):
			continue
		case err != nil:
			return nil, 0, fmt.Errorf("partition: %w", err)
		case !fi.IsDir():
			if err := read(p); err != nil {
				return nil, 0, err
			}
			continue
		}
		err = filepath.WalkDir(p, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || filepath.Ext(path) != ".json" {
				return err
			}
			return read(path)
		})
		if err != nil {
			return nil, 0, err
		}
	}
	return compileplan.CombineChainStates(states...), len(states), nil
}

// batches sizes dispatches so each clears well inside the queue cap.
func batches(args []string, gha ghaction.Env, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("partition batches", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ghaction.JSONFlag(fs, &stdout, &gha)
	jobs := fs.Int("jobs", 0, "how many jobs to dispatch")
	runners := fs.Int("runners", 40, "runners working the queue")
	typical := fs.Duration("typical", time.Hour, "a typical job's duration")
	queueCap := fs.Duration("queue-cap", 24*time.Hour, "how long a queued job may wait before it is discarded")
	if err := cli.Flags(fs, args); err != nil {
		return err
	}
	sizes, err := compileplan.Batches(*jobs, *runners, *typical, *queueCap)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d job(s) in %d batch(es): %v\n", *jobs, len(sizes), sizes)
	data, _ := json.Marshal(nonNil(sizes))
	return gha.SetOutputs([2]string{"batches", string(data)})
}

// checkpoint writes (checkpoint) or restores (restore) the tree of a
// sequential checkpoint chain's link: the whole source and build tree as a
// PAX tar, so ninja sees every file as old as it was.
func checkpoint(verb string, args []string, gha ghaction.Env, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("partition "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	ghaction.JSONFlag(fs, &stdout, &gha)
	flagName, what := "o", "the checkpoint tar to write (outside DIR)"
	if verb == "restore" {
		flagName, what = "i", "the checkpoint tar to restore"
	}
	file := fs.String(flagName, "", what)
	if err := cli.FlagsAndArgs(fs, args); err != nil {
		return err
	}
	if *file == "" || fs.NArg() != 1 {
		return cli.Refuse(fs, "give -%s FILE and one directory", flagName)
	}
	dir := fs.Arg(0)
	var st compileplan.CheckpointStats
	if verb == "restore" {
		f, err := os.Open(*file)
		if err != nil {
			return fmt.Errorf("partition: %w", err)
		}
		defer f.Close()
		// A later link restores on a fresh runner, where nothing was
		// checked out: the tree's directory is made here.
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("partition: %w", err)
		}
		if st, err = compileplan.RestoreCheckpoint(bufio.NewReaderSize(f, 1<<20), dir); err != nil {
			return err
		}
	} else {
		absDir, err1 := filepath.Abs(dir)
		absFile, err2 := filepath.Abs(*file)
		if err := errors.Join(err1, err2); err != nil {
			return fmt.Errorf("partition: %w", err)
		}
		if rel, err := filepath.Rel(absDir, absFile); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return cli.Refuse(fs, "-o %s is inside %s: the checkpoint would contain itself", *file, dir)
		}
		f, err := os.Create(*file)
		if err != nil {
			return fmt.Errorf("partition: %w", err)
		}
		w := bufio.NewWriterSize(f, 1<<20)
		st, err = compileplan.WriteCheckpoint(w, dir)
		if err == nil {
			err = w.Flush()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(*file) // never leave half a checkpoint to be uploaded
			return err
		}
	}
	fmt.Fprintf(stdout, "%s %s: %d file(s), %d dir(s), %d symlink(s), %d B; newest %s\n", verb, dir, st.Files, st.Dirs, st.Symlinks, st.Bytes, st.Newest.Format(time.RFC3339Nano))
	return gha.SetOutputs([2]string{"files", strconv.Itoa(st.Files)}, [2]string{"bytes", strconv.FormatInt(st.Bytes, 10)})
}
