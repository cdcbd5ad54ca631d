package main

// The long-compile subcommands: flag wiring over package compileplan's
// steps, which refuse what cannot run, plan, check and report.

import (
	"flag"
	"time"

	"github.com/gpugate/gpugate/compileplan"
	"github.com/gpugate/gpugate/internal/cli"
)

// shards balances the compile units into shards, the compile jobs' matrix.
func shards(fs *flag.FlagSet) cli.Work {
	var in compileplan.ShardInputs
	fs.IntVar(&in.N, "n", 4, "number of shards")
	return cli.Work{Parse: cli.FlagsAndArgs, Run: func(w cli.Step) ([][2]string, error) {
		return cli.Show(w)(in.Plan(fs.Args()))
	}}
}

// verifyObjects asserts the link step reused every shard's objects: a
// silent full recompile fails loudly.
func verifyObjects(fs *flag.FlagSet) cli.Work {
	var in compileplan.VerifyInputs
	fs.StringVar(&in.Present, "present", "", "sha256sum listing of the objects in the link step's build tree")
	return cli.Work{Parse: cli.FlagsAndArgs, Run: func(w cli.Step) ([][2]string, error) {
		return cli.Show(w)(in.Verify(fs.Args()))
	}}
}

// chain plans the sequential checkpoint links of a build that outlasts one
// job.
func chain(fs *flag.FlagSet) cli.Work {
	var in compileplan.ChainInputs
	fs.DurationVar(&in.Estimate, "estimate", 0, "the build's estimated compile time")
	fs.DurationVar(&in.JobCap, "job-cap", 6*time.Hour, "the per-job cap (6h on GitHub-hosted runners)")
	fs.IntVar(&in.Depth, "depth", 2, "how many links the workflow's chain is wired for")
	return cli.Work{Run: func(w cli.Step) ([][2]string, error) { return cli.Show(w)(in.Plan()) }}
}

// chainState records one matrix cell's chain progress in a state file:
// only that cell changes, and a done cell stays done.
func chainState(fs *flag.FlagSet) cli.Work {
	var in compileplan.CellInputs
	fs.StringVar(&in.State, "state", "", "the JSON state file (created when missing)")
	fs.StringVar(&in.Cell, "cell", "", "the matrix cell")
	fs.IntVar(&in.Link, "link", 0, "the link the cell reached")
	fs.BoolVar(&in.Done, "done", false, "the cell's build finished")
	return cli.Work{Run: func(w cli.Step) ([][2]string, error) { return cli.Show(w)(in.Record()) }}
}

// chainStatus folds the state files every link left (one per cell and
// link) and says where each unfinished cell resumes: the matrix of the
// next link, one cell's resume link, or, with -require-done, the chain's
// completion check.
func chainStatus(fs *flag.FlagSet) cli.Work {
	var in compileplan.StatusInputs
	fs.StringVar(&in.Cells, "cells", "", `every cell of the chain: a JSON array ("[\"a\",\"b\"]", as the matrix has it) or a comma-separated list`)
	fs.StringVar(&in.Cell, "cell", "", "report this one cell's resume link (outputs link and done)")
	requireDone := fs.Bool("require-done", false, "exit 1 unless every cell is done")
	return cli.Work{Parse: cli.FlagsAndArgs, Run: func(w cli.Step) ([][2]string, error) {
		st, err := in.Read(fs.Args())
		outputs, err := cli.Show(w)(st, err)
		if err == nil && *requireDone {
			if err := st.State.Finished(st.Cells); err != nil {
				return nil, err // after the status: which cells are left, and where
			}
		}
		return outputs, err
	}}
}

// batches sizes dispatches so each clears well inside the queue cap.
func batches(fs *flag.FlagSet) cli.Work {
	var in compileplan.BatchInputs
	fs.IntVar(&in.Jobs, "jobs", 0, "how many jobs to dispatch")
	fs.IntVar(&in.Runners, "runners", 40, "runners working the queue")
	fs.DurationVar(&in.Typical, "typical", time.Hour, "a typical job's duration")
	fs.DurationVar(&in.QueueCap, "queue-cap", 24*time.Hour, "how long a queued job may wait before it is discarded")
	return cli.Work{Run: func(w cli.Step) ([][2]string, error) { return cli.Show(w)(in.Plan()) }}
}

// checkpoint writes (partition checkpoint) or restores (partition restore)
// the tree of a sequential checkpoint chain's link: the whole source and
// build tree as a PAX tar, so ninja sees every file as old as it was.
func checkpoint(fs *flag.FlagSet) cli.Work {
	in := compileplan.CheckpointInputs{Restore: fs.Name() == "partition restore"}
	if in.Restore {
		fs.StringVar(&in.File, "i", "", "the checkpoint tar to restore")
	} else {
		fs.StringVar(&in.File, "o", "", "the checkpoint tar to write (outside DIR)")
	}
	return cli.Work{Parse: cli.FlagsAndArgs, Run: func(w cli.Step) ([][2]string, error) {
		return cli.Show(w)(in.Run(fs.Args()))
	}}
}
