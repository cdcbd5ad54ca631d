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
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

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

// errMismatch is check's result when the partition does not match the
// inventory: exit 1, with one annotation in Actions.
var errMismatch = errors.New("partition: the test partition does not match the inventory; see the lines above")

func run(args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	gha := ghaction.FromEnv(getenv)
	if len(args) == 0 {
		args = []string{"check", "-example"}
	}
	sub := func(name, usage string, f func(fs *flag.FlagSet, args []string, gha ghaction.Env, stdout io.Writer) error) cli.Subcommand {
		return cli.Subcommand{Name: name, Usage: usage, Run: func(args []string) error {
			fs := flag.NewFlagSet("partition "+name, flag.ContinueOnError)
			fs.SetOutput(stderr)
			return f(fs, args, gha, stdout)
		}}
	}
	err := cli.Dispatch("partition", stderr, args,
		sub("check", "[-inventory FILE|-] [-format nextest|go] PARTITION.tsv... | -example", func(fs *flag.FlagSet, args []string, gha ghaction.Env, stdout io.Writer) error {
			return check(fs, args, gha, stdin, stdout)
		}),
		sub("select", "-category single-gpu [-render nextest|go|lines|not-run] [-require-tests] PARTITION.tsv...", selectLane),
		sub("shards", "-n 4 UNITS.json", shards),
		sub("verify-objects", "-present LINK.sha256 SHARD.sha256...", verifyObjects),
		sub("chain", "-estimate 10h [-job-cap 6h] [-depth 2]", chain),
		sub("chain-state", "-state STATE.json -cell NAME -link N [-done]", chainState),
		sub("chain-status", "-cells '[\"a\",\"b\"]' [-cell NAME] [-require-done] DIR|STATE.json...", chainStatus),
		sub("batches", "-jobs 2100 [-runners 40] [-typical 1h] [-queue-cap 24h]", batches),
		sub("checkpoint", "-o CKPT.tar DIR", checkpoint),
		sub("restore", "-i CKPT.tar DIR", checkpoint),
	)
	gha.JSON = ghaction.JSONRequested(args) // stdout carries only JSON: annotations go to stderr
	if errors.Is(err, errMismatch) {
		if gha.Actions {
			annotations := stdout
			if gha.JSON {
				annotations = stderr
			}
			ghaction.Error(annotations, err.Error())
		}
		return 1
	}
	code := cli.Status(err)
	if code == 1 {
		gha.Fail(stdout, stderr, err)
	}
	return code
}

// check checks the partition against the real inventory, or the bundled
// example with -example.
func check(fs *flag.FlagSet, args []string, gha ghaction.Env, stdin io.Reader, stdout io.Writer) error {
	ghaction.JSONFlag(fs, &stdout, &gha)
	invFile := fs.String("inventory", "-", "inventory file, - for stdin")
	format := fs.String("format", "nextest", "inventory format: nextest (cargo nextest list --message-format json) or go (go test -json / -list)")
	example := fs.Bool("example", false, "check the bundled example")
	if err := cli.FlagsThenFiles(fs, args); err != nil {
		return err
	}
	switch {
	case *example && fs.NArg() > 0:
		return cli.Refuse(fs, "-example checks the bundled partition: name no partition files (%q)", fs.Args())
	case !*example && fs.NArg() == 0:
		return cli.Refuse(fs, "name at least one partition file (or -example for the bundled one)")
	case *format != partition.FormatNextest && *format != partition.FormatGo:
		return cli.Refuse(fs, "-format %q: use nextest or go", *format)
	}
	listing := stdin // streamed to the parser: a listing is never held whole
	var p partition.Partition
	var err error
	if *example {
		listing = bytes.NewReader(exampleList)
		p, err = partition.ParseTSVNamed(bytes.NewReader(examplePartition), "cuda_test_partition.tsv")
		fmt.Fprintln(stdout, "checking the bundled example: a nextest listing with one test nobody has classified yet")
	} else {
		if *invFile != "-" {
			f, err := os.Open(*invFile)
			if err != nil {
				return fmt.Errorf("partition: read inventory: %w", err)
			}
			defer f.Close()
			listing = bufio.NewReaderSize(f, 1<<20)
		}
		p, err = partition.DefaultConfig().ParseTSVFiles(fs.Args()...)
	}
	if err != nil {
		return err
	}
	a, err := partition.AuditListing(listing, *format, p)
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, a)
	outputs := [][2]string{{"ok", strconv.FormatBool(a.OK())}, {"tests", strconv.Itoa(a.Tests)}, {"lines", strconv.Itoa(a.Lines)},
		{"new", strconv.Itoa(len(a.Report.New))}, {"stale", strconv.Itoa(len(a.Report.Stale))}, {"duplicates", strconv.Itoa(len(a.Report.Duplicates))}, {"split", strconv.Itoa(len(a.Splits))}}
	if gha.Echo != nil {
		// The whole report only with -json: a first adoption can list
		// thousands of tests, too many for a step output.
		outputs = append(outputs, [2]string{"report", a.ReportJSON()})
	}
	if err := gha.SetOutputs(outputs...); err != nil || a.OK() {
		return err
	}
	return errMismatch
}

// selectLane prints a lane; in Actions it also writes the outputs filter
// (the lane as a nextest filterset) and not_run (every not-run or excluded
// test, comma-separated, for the gate's NOT RUN list).
func selectLane(fs *flag.FlagSet, args []string, gha ghaction.Env, stdout io.Writer) error {
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
	if !slices.Contains(partition.Renderings, *render) {
		return cli.Refuse(fs, "-render %q: use nextest, go, lines or not-run", *render)
	}
	in := func(err error) error {
		return fmt.Errorf("%w (-category %s in %s)", err, *cat, strings.Join(fs.Args(), " "))
	}
	cfg := partition.DefaultConfig()
	p, err := cfg.ParseTSVFiles(fs.Args()...)
	if err != nil {
		return err
	}
	s, err := cfg.Selection(p, *cat, *requireTests)
	if err != nil {
		return in(err)
	}
	text, err := s.Render(*render)
	if err != nil && *render == "go" {
		return in(err)
	} else if err != nil {
		return err
	}
	fmt.Fprint(stdout, text)
	return gha.SetOutputs([2]string{"filter", s.Filter}, [2]string{"not_run", partition.NotRunOutput(s.NotRun)}, [2]string{"tests", strconv.Itoa(len(s.Lane.Tests))})
}
