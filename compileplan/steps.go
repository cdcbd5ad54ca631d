package compileplan

import (
	"errors"
	"fmt"
	"time"
)

// The long-compile steps as the adoption workflows run them (the partition
// command's shards, verify-objects, chain, chain-state, chain-status,
// batches, checkpoint and restore): each step's inputs, named as the
// command's flags name them, refused before anything is read or written
// when the step cannot run (an *InputError), then the step, which returns
// its report (reports.go).

// MaxMatrixJobs is the most jobs one matrix of a GitHub Actions workflow
// run can have: the most shards a sharded build can use.
const MaxMatrixJobs = 256

// ErrInput is matched by every *InputError.
var ErrInput = errors.New("compileplan: the step's inputs are refused")

// InputError is a step refusing its inputs before it reads or writes
// anything. Reason says why in one line, naming each input by its flag.
type InputError struct{ Reason string }

// Error is the reason, package-prefixed.
func (e *InputError) Error() string { return "compileplan: " + e.Reason }

// Is reports whether target is ErrInput.
func (e *InputError) Is(target error) bool { return target == ErrInput }

// Refusal is the reason alone, for a command line's one-line refusal.
func (e *InputError) Refusal() string { return e.Reason }

// refuse is an *InputError.
func refuse(format string, args ...any) error {
	return &InputError{Reason: fmt.Sprintf(format, args...)}
}

// ShardInputs are the shards step's inputs.
type ShardInputs struct {
	N int // -n: how many shards, a matrix job each
}

// Plan balances the units of the one units file in files into in.N shards
// (ReadShardPlan). More than MaxMatrixJobs shards is refused: no matrix
// runs them.
func (in ShardInputs) Plan(files []string) (ShardPlan, error) {
	switch {
	case len(files) != 1:
		return nil, refuse("name one units file (JSON: [{\"name\": \"a.cu\", \"cost\": \"40m\"}])")
	case in.N > MaxMatrixJobs:
		return nil, refuse("-n %d: the shards are a GitHub Actions matrix, which runs at most %d jobs", in.N, MaxMatrixJobs)
	}
	return ReadShardPlan(files[0], in.N)
}

// VerifyInputs are the verify-objects step's inputs.
type VerifyInputs struct {
	Present string // -present: the sha256sum listing of the link step's build tree
}

// Verify checks that the link step reused every object of the shards'
// manifests, sha256sum listings each (VerifyObjectFiles).
func (in VerifyInputs) Verify(manifests []string) (ObjectReuse, error) {
	if in.Present == "" || len(manifests) == 0 {
		return ObjectReuse{}, refuse("give -present LINK.sha256 and each shard's manifest (sha256sum listings)")
	}
	n, err := VerifyObjectFiles(in.Present, manifests...)
	return ObjectReuse{Objects: n}, err
}

// ChainInputs are the chain step's inputs.
type ChainInputs struct {
	Estimate time.Duration // -estimate: the build's compile time
	JobCap   time.Duration // -job-cap: the per-job cap
	Depth    int           // -depth: how many links the workflow's chain is wired for
}

// Plan plans the chain's links (PlanChain). No estimate is refused.
func (in ChainInputs) Plan() (Chain, error) {
	if in.Estimate <= 0 {
		return Chain{}, refuse("give -estimate, the build's compile time (e.g. 10h)")
	}
	return PlanChain(in.Estimate, in.JobCap, in.Depth)
}

// CellInputs are the chain-state step's inputs: one cell's update.
type CellInputs struct {
	State string // -state: the state file
	Cell  string // -cell: the matrix cell
	Link  int    // -link: the link it reached
	Done  bool   // -done: its build finished
}

// cellChars is what an artifact name cannot carry, for the refusals.
const cellChars = `(" : < > | * ? \ / or spaces around it)`

// Record records the update in the state file (RecordCell). A cell an
// artifact name cannot carry is refused (CheckCells).
func (in CellInputs) Record() (CellRecord, error) {
	switch {
	case in.State == "" || in.Cell == "":
		return CellRecord{}, refuse("give -state FILE and -cell NAME")
	case CheckCells(in.Cell) != nil:
		return CellRecord{}, refuse("-cell %q cannot be part of an artifact name (no %s", in.Cell, cellChars[1:])
	}
	state, err := RecordCell(in.State, in.Cell, CellState{Link: in.Link, Done: in.Done})
	return CellRecord{Cell: in.Cell, State: state}, err
}

// StatusInputs are the chain-status step's inputs.
type StatusInputs struct {
	Cells string // -cells: every cell, a JSON array or a comma-separated list (ParseCells)
	Cell  string // -cell: only this one cell, whose link and done are the outputs
}

// Read folds the state files and directories at paths (ReadStatus) for
// the cells. A malformed cell list, a cell named twice, empty or one an
// artifact name cannot carry, no cell or no path is refused.
func (in StatusInputs) Read(paths []string) (Status, error) {
	cells, err := ParseCells(in.Cells)
	var le *CellListError
	if errors.As(err, &le) {
		return Status{}, refuse("-cells %q is not a JSON array of names: %v", le.List, le.Err)
	}
	if in.Cell != "" {
		cells = []string{in.Cell}
	}
	switch {
	case CheckCells(cells...) != nil:
		return Status{}, refuse("-cells %q names a cell twice, an empty one, or one an artifact name cannot carry %s", in.Cells, cellChars)
	case len(cells) == 0 || len(paths) == 0:
		return Status{}, refuse("give -cells (or -cell) and the state files or directories the links' artifacts were downloaded to")
	}
	st, err := ReadStatus(cells, paths...)
	st.One = in.Cell
	return st, err
}

// BatchInputs are the batches step's inputs.
type BatchInputs struct {
	Jobs     int           // -jobs: how many jobs to dispatch
	Runners  int           // -runners: the runners working the queue
	Typical  time.Duration // -typical: a typical job's duration
	QueueCap time.Duration // -queue-cap: how long a job may wait queued
}

// Plan sizes the batches (Batches).
func (in BatchInputs) Plan() (BatchPlan, error) {
	sizes, err := Batches(in.Jobs, in.Runners, in.Typical, in.QueueCap)
	return BatchPlan{Jobs: in.Jobs, Sizes: sizes}, err
}

// CheckpointInputs are the checkpoint and restore steps' inputs.
type CheckpointInputs struct {
	File    string // -o (checkpoint) or -i (restore): the checkpoint tar
	Restore bool   // restore the tree instead of writing its checkpoint
}

// flag is the checkpoint file's flag.
func (in CheckpointInputs) flag() string {
	if in.Restore {
		return "i"
	}
	return "o"
}

// Run writes the tree of the one directory in dirs to the checkpoint
// (WriteCheckpointFile), or restores the checkpoint into it
// (RestoreCheckpointFile). A checkpoint inside its own tree is refused.
func (in CheckpointInputs) Run(dirs []string) (CheckpointReport, error) {
	if in.File == "" || len(dirs) != 1 {
		return CheckpointReport{}, refuse("give -%s FILE and one directory", in.flag())
	}
	r := CheckpointReport{Restored: in.Restore, Dir: dirs[0]}
	var err error
	if in.Restore {
		r.Stats, err = RestoreCheckpointFile(in.File, r.Dir)
	} else {
		r.Stats, err = WriteCheckpointFile(in.File, r.Dir)
	}
	if errors.Is(err, ErrInsideTree) {
		return CheckpointReport{}, refuse("-o %s is inside %s: the checkpoint would contain itself", in.File, r.Dir)
	}
	return r, err
}
