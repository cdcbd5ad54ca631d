// Command partition keeps test lanes exhaustive and plans long compiles:
//
//	partition check  [-inventory FILE|-] [-format nextest|go] PARTITION.tsv...   # exit 1 on any difference
//	partition select -category single-gpu [-render nextest|go|lines] PARTITION.tsv...
//	partition shards -n 4 UNITS.json                                             # [{"name":..., "cost":"2h"}]
//
// With no arguments, check runs on a bundled example (a nextest listing of
// a CUDA workspace and its partition files) with one new test, so it shows
// what a failing check prints.
package main

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

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
	var err error
	switch args[0] {
	case "check":
		var ok bool
		ok, err = check(args[1:], stdin, stdout, stderr)
		if err == nil && !ok {
			if gha.Actions {
				fmt.Fprintln(stdout, "::error::partition: the test partition does not match the inventory; see the lines above")
			}
			return 1
		}
	case "select":
		err = selectLane(args[1:], stdout, stderr)
	case "shards":
		err = shards(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprintln(stderr, "usage: partition check|select|shards [flags] (partition SUBCOMMAND -h)")
		return 0
	default:
		fmt.Fprintf(stderr, "partition: unknown subcommand %q: use check, select or shards\n", args[0])
		return 2
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
	return p, partition.SeedConfig().Validate(p)
}

func check(args []string, stdin io.Reader, stdout, stderr io.Writer) (bool, error) {
	fs := flag.NewFlagSet("partition check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	invFile := fs.String("inventory", "-", "inventory file, - for stdin")
	format := fs.String("format", "nextest", "inventory format: nextest (cargo nextest list --message-format json) or go (go test -json / -list)")
	example := fs.Bool("example", false, "check the bundled example")
	if err := cli.FlagsAndArgs(fs, args); err != nil {
		return false, err
	}
	var (
		invData []byte
		p       partition.Partition
		err     error
	)
	if *example {
		invData = exampleList
		p, err = partition.ParseTSV(bytes.NewReader(examplePartition))
		for i := range p.Entries {
			p.Entries[i].File = "cuda_test_partition.tsv"
		}
		fmt.Fprintln(stdout, "checking the bundled example: a nextest listing with one test nobody has classified yet")
	} else {
		if *invFile == "-" {
			invData, err = io.ReadAll(stdin)
		} else {
			invData, err = os.ReadFile(*invFile)
		}
		if err != nil {
			return false, fmt.Errorf("partition: read inventory: %w", err)
		}
		p, err = readPartitions(fs.Args())
	}
	if err != nil {
		return false, err
	}
	var inv partition.Inventory
	switch *format {
	case "nextest":
		inv, err = partition.ParseNextestList(bytes.NewReader(invData))
	case "go":
		inv, err = partition.ParseGoTestJSON(bytes.NewReader(invData))
	default:
		return false, fmt.Errorf("partition: -format %q: use nextest or go", *format)
	}
	if err != nil {
		return false, err
	}
	r := partition.Check(inv, p)
	fmt.Fprintf(stdout, "%d tests in the inventory, %d partition lines\n", len(inv), len(p.Entries))
	fmt.Fprint(stdout, r)
	return r.OK(), nil
}

func selectLane(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("partition select", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cat := fs.String("category", "single-gpu", "the lane's category")
	render := fs.String("render", "nextest", "nextest (a filterset), go (-run patterns per package), lines, or not-run")
	if err := cli.FlagsAndArgs(fs, args); err != nil {
		return err
	}
	p, err := readPartitions(fs.Args())
	if err != nil {
		return err
	}
	l := partition.Select(p, *cat)
	switch *render {
	case "nextest":
		fmt.Fprintln(stdout, l.NextestFilter())
	case "go":
		for pkg, pat := range l.GoRunPatterns() {
			fmt.Fprintf(stdout, "%s\t%s\n", pkg, pat)
		}
	case "lines":
		for _, id := range l.Tests {
			fmt.Fprintln(stdout, id)
		}
	case "not-run":
		for _, s := range partition.NotRun(partition.SeedConfig(), p) {
			fmt.Fprintln(stdout, s)
		}
	default:
		return fmt.Errorf("partition: -render %q: use nextest, go, lines or not-run", *render)
	}
	return nil
}

type unitJSON struct {
	Name    string   `json:"name"`
	Cost    string   `json:"cost"`
	Objects []string `json:"objects"`
}

func shards(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("partition shards", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("n", 4, "number of shards")
	if err := cli.FlagsAndArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return cli.Refuse(fs, "name one units file (JSON: [{\"name\": \"a.cu\", \"cost\": \"40m\"}])")
	}
	data, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return fmt.Errorf("partition: %w", err)
	}
	var raw []unitJSON
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("partition: %s: %w", fs.Arg(0), err)
	}
	var units []partition.Unit
	for _, u := range raw {
		d, err := time.ParseDuration(u.Cost)
		if err != nil {
			return fmt.Errorf("partition: unit %s: cost %q: %w", u.Name, u.Cost, err)
		}
		units = append(units, partition.Unit{Name: u.Name, Cost: d, Objects: u.Objects})
	}
	ss, err := partition.Shards(units, *n)
	if err != nil {
		return err
	}
	for _, s := range ss {
		fmt.Fprintf(stdout, "shard %d: %s of compiling: %s\n", s.Index, s.Cost, strings.Join(s.Units, " "))
	}
	return nil
}
