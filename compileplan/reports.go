package compileplan

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// The steps' reports: what each long-compile step says to a person
// (String) and hands on to the next step (Outputs, named as the adoption
// workflows read them from $GITHUB_OUTPUT).

// ShardPlan is a sharded build's plan: its shards, in index order.
type ShardPlan []Shard

// ReadShardPlan balances the units of the units file (ReadUnits) into n
// shards (Shards).
func ReadShardPlan(unitsFile string, n int) (ShardPlan, error) {
	units, err := ReadUnits(unitsFile)
	if err != nil {
		return nil, err
	}
	return Shards(units, n)
}

// String is a line per shard: its index, its compile time and its units.
func (p ShardPlan) String() string {
	var b strings.Builder
	for _, s := range p {
		fmt.Fprintf(&b, "shard %d: %s of compiling: %s\n", s.Index, s.Cost, strings.Join(s.Units, " "))
	}
	return b.String()
}

// Outputs are the plan's step outputs: shards, the compile jobs' matrix
// (Matrix) as JSON.
func (p ShardPlan) Outputs() [][2]string {
	matrix, _ := json.Marshal(Matrix(p)) // plain structs of strings and ints: it cannot fail
	return [][2]string{{"shards", string(matrix)}}
}

// String says how many links the chain takes and each link's compile
// timeout.
func (c Chain) String() string {
	return fmt.Sprintf("%d link(s), each compiling under a %s timeout\n", c.Links, c.CompileBudget)
}

// Outputs are the chain's step outputs: links, and
// compile_timeout_seconds, each link's compile budget.
func (c Chain) Outputs() [][2]string {
	return [][2]string{{"links", strconv.Itoa(c.Links)}, {"compile_timeout_seconds", strconv.Itoa(int(c.CompileBudget.Seconds()))}}
}

// Status is where a checkpoint chain stands for its cells.
type Status struct {
	One    string        // the one cell asked about, whose outputs are its own (CellOutputs); "" for every cell
	Cells  []string      // every cell of the chain
	Files  int           // the state files read
	State  ChainState    // folded from them
	Resume []ResumePoint // each unfinished cell and the link it resumes from, in the order of Cells
}

// ReadStatus folds the state files and directories at paths
// (ReadChainStates) and says where each of cells resumes
// (ChainState.Resume).
func ReadStatus(cells []string, paths ...string) (Status, error) {
	state, files, err := ReadChainStates(paths...)
	if err != nil {
		return Status{}, err
	}
	return Status{Cells: cells, Files: files, State: state, Resume: state.Resume(cells)}, nil
}

// String counts the state files and the unfinished cells, then says where
// each unfinished cell resumes, a line each.
func (s Status) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d state file(s); %d of %d cell(s) unfinished\n", s.Files, len(s.Resume), len(s.Cells))
	for _, r := range s.Resume {
		fmt.Fprintf(&b, "  %s resumes from link %d\n", r.Cell, r.Link)
	}
	return b.String()
}

// Outputs are the next link's step outputs: pending, the unfinished cells
// and their resume links as JSON (the next link's matrix; [] when none),
// and all_done; with One, the one cell's (CellOutputs).
func (s Status) Outputs() [][2]string {
	if s.One != "" {
		return s.CellOutputs(s.One)
	}
	data, _ := json.Marshal(s.Resume) // plain structs: it cannot fail
	return [][2]string{{"pending", string(data)}, {"all_done", strconv.FormatBool(len(s.Resume) == 0)}}
}

// CellOutputs are one cell's step outputs: link, the link it resumes from,
// and done.
func (s Status) CellOutputs(cell string) [][2]string {
	return [][2]string{{"link", strconv.Itoa(s.State[cell].Link)}, {"done", strconv.FormatBool(s.State[cell].Done)}}
}

// CheckpointReport is what a checkpoint wrote from Dir, or a restore
// restored into it.
type CheckpointReport struct {
	Restored bool
	Dir      string
	Stats    CheckpointStats
}

// String says which tree was checkpointed (or restored) and what it holds.
func (r CheckpointReport) String() string {
	verb := "checkpoint"
	if r.Restored {
		verb = "restore"
	}
	return fmt.Sprintf("%s %s: %s\n", verb, r.Dir, r.Stats)
}

// Outputs are the step outputs: files and bytes.
func (r CheckpointReport) Outputs() [][2]string {
	return [][2]string{{"files", strconv.Itoa(r.Stats.Files)}, {"bytes", strconv.FormatInt(r.Stats.Bytes, 10)}}
}

// ObjectReuse is the link step's check passing: every one of Objects
// shard objects was reused unchanged (VerifyObjectFiles).
type ObjectReuse struct{ Objects int }

// String says how many shard objects were reused.
func (r ObjectReuse) String() string {
	return fmt.Sprintf("every one of the %d shard objects was reused unchanged\n", r.Objects)
}

// Outputs are the check's step outputs: objects, how many were reused.
func (r ObjectReuse) Outputs() [][2]string { return [][2]string{{"objects", strconv.Itoa(r.Objects)}} }

// CellRecord is one cell's update recorded in a chain state file
// (RecordCell): the cell, and the whole state the file now holds.
type CellRecord struct {
	Cell  string
	State ChainState
}

// String says where the cell stands and whether every cell is done.
func (r CellRecord) String() string {
	st := r.State[r.Cell]
	return fmt.Sprintf("cell %s: link %d, done %v; every cell done: %v\n", r.Cell, st.Link, st.Done, len(r.State.Pending()) == 0)
}

// Outputs are the update's step outputs: done, the cell's, and all_done,
// every cell's in the file.
func (r CellRecord) Outputs() [][2]string {
	return [][2]string{{"done", strconv.FormatBool(r.State[r.Cell].Done)}, {"all_done", strconv.FormatBool(len(r.State.Pending()) == 0)}}
}

// BatchPlan is a dispatch of Jobs jobs split into batches of Sizes
// (Batches).
type BatchPlan struct {
	Jobs  int
	Sizes []int
}

// String says how many jobs go in how many batches of which sizes.
func (p BatchPlan) String() string {
	return fmt.Sprintf("%d job(s) in %d batch(es): %v\n", p.Jobs, len(p.Sizes), p.Sizes)
}

// Outputs are the plan's step outputs: batches, the sizes as a JSON array
// ([] when there is nothing to dispatch, never null).
func (p BatchPlan) Outputs() [][2]string {
	data, _ := json.Marshal(append([]int{}, p.Sizes...)) // ints: it cannot fail
	return [][2]string{{"batches", string(data)}}
}
