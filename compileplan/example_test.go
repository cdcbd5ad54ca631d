package compileplan_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpugate/gpugate/compileplan"
)

// Three compile units over two shards: the longest first, each onto the
// shard with the least so far; each shard's manifest is the objects its
// compile job must produce.
func ExampleShards() {
	shards, _ := compileplan.Shards([]compileplan.Unit{
		{Name: "attn.cu", Cost: 3 * time.Hour},
		{Name: "gemv.cu", Cost: 2 * time.Hour},
		{Name: "norm.cu", Cost: time.Hour, Objects: []string{"norm_fwd.o", "norm_bwd.o"}},
	}, 2)
	for _, s := range shards {
		fmt.Println(s.Index, s.Cost, s.Units, s.Manifest)
	}
	// Output:
	// 0 3h0m0s [attn.cu] [attn.cu.o]
	// 1 3h0m0s [gemv.cu norm.cu] [gemv.cu.o norm_bwd.o norm_fwd.o]
}

// The link step checks the objects in its build tree against the shards'
// manifests: one rebuilt object is a silent full recompile, and fails.
func ExampleVerifyObjects() {
	a, b, c := strings.Repeat("a", 64), strings.Repeat("b", 64), strings.Repeat("c", 64)
	shard0, _ := compileplan.ParseSHA256Sums(strings.NewReader(a + "  build/gemv.o\n"))
	shard1, _ := compileplan.ParseSHA256Sums(strings.NewReader(b + "  build/attn.o\n"))
	link, _ := compileplan.ParseSHA256Sums(strings.NewReader(a + "  build/gemv.o\n" + c + "  build/attn.o\n"))
	err := compileplan.VerifyObjects([][]compileplan.Object{shard0, shard1}, link)
	var oe *compileplan.ObjectError
	fmt.Println(errors.Is(err, compileplan.ErrObjects), errors.As(err, &oe) && len(oe.Changed) == 1, oe.Changed)
	// Output:
	// true true [build/attn.o]
}

// A dispatch of 2,100 one-hour jobs on 40 runners, in batches that each
// clear within half of the 24-hour queue cap.
func ExampleBatches() {
	sizes, err := compileplan.Batches(2100, 40, time.Hour, 24*time.Hour)
	fmt.Println(sizes, err)
	// Output:
	// [480 480 480 480 180] <nil>
}

func ExamplePlanChain() {
	c, err := compileplan.PlanChain(10*time.Hour, 6*time.Hour, 2)
	fmt.Println(c.Links, c.CompileBudget, err)
	_, err = compileplan.PlanChain(20*time.Hour, 6*time.Hour, 2)
	fmt.Println(err != nil)
	// Output:
	// 2 5h30m0s <nil>
	// true
}

// Each cell of a chain leaves one state file per link; folded in any
// order, they say which cells the next link builds and from which
// checkpoint each resumes, and whether the chain is done.
func ExampleChainState_Resume() {
	state := compileplan.CombineChainStates(
		compileplan.ChainState{"natten": {Link: 2}},
		compileplan.ChainState{"pytorch3d": {Link: 1, Done: true}},
		compileplan.ChainState{"natten": {Link: 1}},
	)
	cells := []string{"natten", "pytorch3d", "xformers"}
	fmt.Println(state.Resume(cells))
	fmt.Println(state.Finished(cells))
	// Output:
	// [{natten 2} {xformers 0}]
	// compileplan: the checkpoint chain did not finish every cell: natten (at link 2), xformers (never checkpointed); re-run the failed jobs to resume each from its last checkpoint while the artifacts last, or raise the chain's depth
}

// A checkpoint chain link: the tree goes into a PAX tar and comes back with
// every modification time to the nanosecond, which ninja's restat needs.
func ExampleWriteCheckpoint() {
	src, _ := os.MkdirTemp("", "link1")
	dst, _ := os.MkdirTemp("", "link2")
	defer os.RemoveAll(src)
	defer os.RemoveAll(dst)
	obj := filepath.Join(src, "build", "gemv.o")
	os.MkdirAll(filepath.Dir(obj), 0o755)
	os.WriteFile(obj, []byte("object code"), 0o644)
	mtime := time.Date(2026, 8, 14, 9, 30, 0, 123456789, time.UTC)
	os.Chtimes(obj, mtime, mtime)

	var ckpt bytes.Buffer
	if _, err := compileplan.WriteCheckpoint(&ckpt, src); err != nil {
		panic(err)
	}
	st, err := compileplan.RestoreCheckpoint(&ckpt, dst)
	if err != nil {
		panic(err)
	}
	info, _ := os.Stat(filepath.Join(dst, "build", "gemv.o"))
	fmt.Println(st.Files, st.Dirs, st.Bytes)
	fmt.Println(info.ModTime().UTC().Format(time.RFC3339Nano))
	// Output:
	// 1 1 11
	// 2026-08-14T09:30:00.123456789Z
}

// The partition command's shards subcommand: a units file in, the compile
// jobs' matrix out.
func ExampleMatrix() {
	dir, _ := os.MkdirTemp("", "units")
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "cuda-units.json")
	os.WriteFile(file, []byte(`[{"name": "csrc/attn.cu", "cost": "40m"}, {"name": "csrc/gemv.cu", "cost": "25m", "objects": ["build/gemv.o"]}]`), 0o644)
	units, _ := compileplan.ReadUnits(file)
	shards, _ := compileplan.Shards(units, 4)
	matrix, _ := json.Marshal(compileplan.Matrix(shards))
	fmt.Println(string(matrix))
	// Output:
	// [{"index":0,"units":["csrc/attn.cu"],"manifest":["csrc/attn.cu.o"]},{"index":1,"units":["csrc/gemv.cu"],"manifest":["build/gemv.o"]}]
}

// A chain's links each record their cell's progress in a state file of
// their own; folded, the files say where each cell resumes.
func ExampleReadChainStates() {
	dir, _ := os.MkdirTemp("", "chain-state")
	defer os.RemoveAll(dir)
	for cell, st := range map[string]compileplan.CellState{"natten": {Link: 1}, "xformers": {Link: 1, Done: true}} {
		artifact := filepath.Join(dir, "chain-state-"+cell+"-1") // as download-artifact leaves it
		os.Mkdir(artifact, 0o755)
		compileplan.RecordCell(filepath.Join(artifact, "state.json"), cell, st)
	}
	state, files, _ := compileplan.ReadChainStates(dir)
	fmt.Println(files, state.Resume([]string{"natten", "xformers"}))
	// Output:
	// 2 [{natten 1}]
}

// A step's inputs are refused before anything runs, naming the flag;
// accepted, the step's report is its text and the outputs it hands on.
func ExampleChainInputs_Plan() {
	_, err := compileplan.ChainInputs{JobCap: 6 * time.Hour, Depth: 2}.Plan()
	fmt.Println(err)
	c, _ := compileplan.ChainInputs{Estimate: 10 * time.Hour, JobCap: 6 * time.Hour, Depth: 2}.Plan()
	fmt.Print(c)
	fmt.Println(c.Outputs())
	// Output:
	// compileplan: give -estimate, the build's compile time (e.g. 10h)
	// 2 link(s), each compiling under a 5h30m0s timeout
	// [[links 2] [compile_timeout_seconds 19800]]
}
