package main

// The long-compile subcommands: flag wiring and printing over package
// compileplan, which plans and checks what they report.

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/gpugate/gpugate/compileplan"
	"github.com/gpugate/gpugate/internal/cli"
	"github.com/gpugate/gpugate/internal/ghaction"
)

// shards balances the compile units into shards, the compile jobs' matrix.
func shards(fs *flag.FlagSet, args []string, gha ghaction.Env, stdout io.Writer) error {
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
	units, err := compileplan.ReadUnits(fs.Arg(0))
	if err != nil {
		return err
	}
	ss, err := compileplan.Shards(units, *n)
	if err != nil {
		return err
	}
	for _, s := range ss {
		fmt.Fprintf(stdout, "shard %d: %s of compiling: %s\n", s.Index, s.Cost, strings.Join(s.Units, " "))
	}
	matrix, _ := json.Marshal(compileplan.Matrix(ss))
	return gha.SetOutputs([2]string{"shards", string(matrix)})
}

// verifyObjects asserts the link step reused every shard's objects: a
// silent full recompile fails loudly.
func verifyObjects(fs *flag.FlagSet, args []string, gha ghaction.Env, stdout io.Writer) error {
	ghaction.JSONFlag(fs, &stdout, &gha)
	present := fs.String("present", "", "sha256sum listing of the objects in the link step's build tree")
	if err := cli.FlagsAndArgs(fs, args); err != nil {
		return err
	}
	if *present == "" || fs.NArg() == 0 {
		return cli.Refuse(fs, "give -present LINK.sha256 and each shard's manifest (sha256sum listings)")
	}
	total, err := compileplan.VerifyObjectFiles(*present, fs.Args()...)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "every one of the %d shard objects was reused unchanged\n", total)
	return gha.SetOutputs([2]string{"objects", strconv.Itoa(total)})
}

// chain plans the sequential checkpoint links of a build that outlasts one
// job.
func chain(fs *flag.FlagSet, args []string, gha ghaction.Env, stdout io.Writer) error {
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
func chainState(fs *flag.FlagSet, args []string, gha ghaction.Env, stdout io.Writer) error {
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
	if compileplan.CheckCells(*cell) != nil {
		return cli.Refuse(fs, "-cell %q cannot be part of an artifact name (no \" : < > | * ? \\ / or spaces around it)", *cell)
	}
	state, err := compileplan.RecordCell(*file, *cell, compileplan.CellState{Link: *link, Done: *done})
	if err != nil {
		return err
	}
	all := len(state.Pending()) == 0
	fmt.Fprintf(stdout, "cell %s: link %d, done %v; every cell done: %v\n", *cell, state[*cell].Link, state[*cell].Done, all)
	return gha.SetOutputs([2]string{"done", strconv.FormatBool(state[*cell].Done)}, [2]string{"all_done", strconv.FormatBool(all)})
}

// chainStatus folds the state files every link left (one per cell and
// link) and says where each unfinished cell resumes: the matrix of the
// next link, one cell's resume link, or, with -require-done, the chain's
// completion check.
func chainStatus(fs *flag.FlagSet, args []string, gha ghaction.Env, stdout io.Writer) error {
	ghaction.JSONFlag(fs, &stdout, &gha)
	cellsFlag := fs.String("cells", "", `every cell of the chain: a JSON array ("[\"a\",\"b\"]", as the matrix has it) or a comma-separated list`)
	one := fs.String("cell", "", "report this one cell's resume link (outputs link and done)")
	requireDone := fs.Bool("require-done", false, "exit 1 unless every cell is done")
	if err := cli.FlagsAndArgs(fs, args); err != nil {
		return err
	}
	cells, err := compileplan.ParseCells(*cellsFlag)
	var le *compileplan.CellListError
	if errors.As(err, &le) {
		return cli.Refuse(fs, "-cells %q is not a JSON array of names: %v", le.List, le.Err)
	}
	if *one != "" {
		cells = []string{*one}
	}
	if compileplan.CheckCells(cells...) != nil {
		return cli.Refuse(fs, "-cells %q names a cell twice, an empty one, or one an artifact name cannot carry (\" : < > | * ? \\ / or spaces around it)", *cellsFlag)
	}
	if len(cells) == 0 || fs.NArg() == 0 {
		return cli.Refuse(fs, "give -cells (or -cell) and the state files or directories the links' artifacts were downloaded to")
	}
	state, files, err := compileplan.ReadChainStates(fs.Args()...)
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
		return gha.SetOutputs([2]string{"link", strconv.Itoa(state[*one].Link)}, [2]string{"done", strconv.FormatBool(state[*one].Done)})
	}
	data, _ := json.Marshal(resume)
	return gha.SetOutputs([2]string{"pending", string(data)}, [2]string{"all_done", strconv.FormatBool(len(resume) == 0)})
}

// batches sizes dispatches so each clears well inside the queue cap.
func batches(fs *flag.FlagSet, args []string, gha ghaction.Env, stdout io.Writer) error {
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
	data, _ := json.Marshal(append([]int{}, sizes...)) // none is [], not null
	return gha.SetOutputs([2]string{"batches", string(data)})
}

// checkpoint writes (partition checkpoint) or restores (partition restore)
// the tree of a sequential checkpoint chain's link: the whole source and
// build tree as a PAX tar, so ninja sees every file as old as it was.
func checkpoint(fs *flag.FlagSet, args []string, gha ghaction.Env, stdout io.Writer) error {
	ghaction.JSONFlag(fs, &stdout, &gha)
	verb := strings.TrimPrefix(fs.Name(), "partition ")
	flagName, what, do := "o", "the checkpoint tar to write (outside DIR)", compileplan.WriteCheckpointFile
	if verb == "restore" {
		flagName, what, do = "i", "the checkpoint tar to restore", compileplan.RestoreCheckpointFile
	}
	file := fs.String(flagName, "", what)
	if err := cli.FlagsAndArgs(fs, args); err != nil {
		return err
	}
	if *file == "" || fs.NArg() != 1 {
		return cli.Refuse(fs, "give -%s FILE and one directory", flagName)
	}
	st, err := do(*file, fs.Arg(0))
	if errors.Is(err, compileplan.ErrInsideTree) {
		return cli.Refuse(fs, "-o %s is inside %s: the checkpoint would contain itself", *file, fs.Arg(0))
	} else if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s %s: %s\n", verb, fs.Arg(0), st)
	return gha.SetOutputs([2]string{"files", strconv.Itoa(st.Files)}, [2]string{"bytes", strconv.FormatInt(st.Bytes, 10)})
}
