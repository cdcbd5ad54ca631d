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
	err := cli.Dispatch("partition", stderr, args, cli.Verbs("partition", gha, stdin, stdout, stderr,
		cli.Verb{Name: "check", Usage: "[-inventory FILE|-] [-format nextest|go] PARTITION.tsv... | -example", Flags: check},
		cli.Verb{Name: "select", Usage: "-category single-gpu [-render nextest|go|lines|not-run] [-require-tests] PARTITION.tsv...", Flags: selectLane},
		cli.Verb{Name: "shards", Usage: "-n 4 UNITS.json", Flags: shards},
		cli.Verb{Name: "verify-objects", Usage: "-present LINK.sha256 SHARD.sha256...", Flags: verifyObjects},
		cli.Verb{Name: "chain", Usage: "-estimate 10h [-job-cap 6h] [-depth 2]", Flags: chain},
		cli.Verb{Name: "chain-state", Usage: "-state STATE.json -cell NAME -link N [-done]", Flags: chainState},
		cli.Verb{Name: "chain-status", Usage: "-cells '[\"a\",\"b\"]' [-cell NAME] [-require-done] DIR|STATE.json...", Flags: chainStatus},
		cli.Verb{Name: "batches", Usage: "-jobs 2100 [-runners 40] [-typical 1h] [-queue-cap 24h]", Flags: batches},
		cli.Verb{Name: "checkpoint", Usage: "-o CKPT.tar DIR", Flags: checkpoint},
		cli.Verb{Name: "restore", Usage: "-i CKPT.tar DIR", Flags: checkpoint},
	)...)
	gha.JSON = ghaction.JSONRequested(args) // stdout carries only JSON: annotations go to stderr
	if errors.Is(err, errMismatch) {
		gha.Annotate(stdout, stderr, err.Error()) // the report above says what differs
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
func check(fs *flag.FlagSet) cli.Work {
	invFile := fs.String("inventory", "-", "inventory file, - for stdin")
	format := fs.String("format", "nextest", "inventory format: nextest (cargo nextest list --message-format json) or go (go test -json / -list)")
	example := fs.Bool("example", false, "check the bundled example")
	return cli.Work{Parse: cli.FlagsThenFiles, Run: func(w cli.Step) ([][2]string, error) {
		switch {
		case *example && fs.NArg() > 0:
			return nil, cli.Refuse(fs, "-example checks the bundled partition: name no partition files (%q)", fs.Args())
		case !*example && fs.NArg() == 0:
			return nil, cli.Refuse(fs, "name at least one partition file (or -example for the bundled one)")
		case *format != partition.FormatNextest && *format != partition.FormatGo:
			return nil, cli.Refuse(fs, "-format %q: use nextest or go", *format)
		}
		a, err := audit(w, *example, *invFile, *format, fs.Args())
		if err != nil {
			return nil, err
		}
		fmt.Fprint(w.Out, a)
		outputs := a.Outputs()
		if w.JSON {
			// The whole report only with -json: a first adoption can list
			// thousands of tests, too many for a step output.
			outputs = append(outputs, [2]string{"report", a.ReportJSON()})
		}
		if a.OK() {
			return outputs, nil
		}
		return outputs, errMismatch
	}}
}

// audit checks the partition files against the inventory listing in
// invFile (- for stdin), or the bundled example.
func audit(w cli.Step, example bool, invFile, format string, files []string) (partition.Audit, error) {
	if example {
		fmt.Fprintln(w.Out, "checking the bundled example: a nextest listing with one test nobody has classified yet")
		p, err := partition.ParseTSVNamed(bytes.NewReader(examplePartition), "cuda_test_partition.tsv")
		if err != nil {
			return partition.Audit{}, err
		}
		return partition.AuditListing(bytes.NewReader(exampleList), format, p)
	}
	listing := w.In // streamed to the parser: a listing is never held whole
	if invFile != "-" {
		f, err := os.Open(invFile)
		if err != nil {
			return partition.Audit{}, fmt.Errorf("partition: read inventory: %w", err)
		}
		defer f.Close()
		listing = bufio.NewReaderSize(f, 1<<20)
	}
	return partition.DefaultConfig().AuditFiles(listing, format, files...)
}

// selectLane prints a lane; in Actions it also writes the outputs filter
// (the lane as a nextest filterset) and not_run (every not-run or excluded
// test, comma-separated, for the gate's NOT RUN list).
func selectLane(fs *flag.FlagSet) cli.Work {
	cat := fs.String("category", "single-gpu", "the lane's category")
	render := fs.String("render", "nextest", "nextest (a filterset), go (-run patterns per package), lines, or not-run")
	requireTests := fs.Bool("require-tests", false, "exit 1 when the lane selects no test (a paid pod would run nothing)")
	return cli.Work{Parse: cli.FlagsThenFiles, Run: func(w cli.Step) ([][2]string, error) {
		if fs.NArg() == 0 {
			return nil, cli.Refuse(fs, "name at least one partition file")
		}
		if err := cli.Require(fs, "category"); err != nil {
			return nil, err
		}
		if !slices.Contains(partition.Renderings, *render) {
			return nil, cli.Refuse(fs, "-render %q: use nextest, go, lines or not-run", *render)
		}
		s, err := partition.DefaultConfig().SelectFiles(*cat, *requireTests, fs.Args()...)
		if errors.Is(err, partition.ErrCategory) {
			return nil, fmt.Errorf("%w (-category %s in %s)", err, *cat, strings.Join(fs.Args(), " "))
		} else if err != nil {
			return nil, err
		}
		text, err := s.Render(*render)
		if err != nil && *render == "go" {
			return nil, fmt.Errorf("%w (-category %s in %s)", err, *cat, strings.Join(fs.Args(), " "))
		} else if err != nil {
			return nil, err
		}
		fmt.Fprint(w.Out, text)
		return s.Outputs(), nil
	}}
}
