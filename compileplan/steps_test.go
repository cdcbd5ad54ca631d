package compileplan

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Each step refuses inputs it cannot run before it reads or writes
// anything: an *InputError (ErrInput) whose one-line Refusal names the
// inputs by their flags.
func TestSteps_InputsAStepCannotRunAreRefusedBeforeAnythingIsRead(t *testing.T) {
	dir := t.TempDir()
	units := write(t, dir, "units.json", `[{"name":"a.cu","cost":"1h"}]`)
	inside := filepath.Join(dir, "ckpt.tar")
	tests := map[string]struct {
		run  func() error
		want string
	}{
		"shards without a units file": {func() error { _, err := ShardInputs{N: 2}.Plan(nil); return err }, "name one units file"},
		"shards with two":             {func() error { _, err := ShardInputs{N: 2}.Plan([]string{units, units}); return err }, "name one units file"},
		"more shards than a matrix": {func() error { _, err := ShardInputs{N: MaxMatrixJobs + 1}.Plan([]string{units}); return err },
			"-n 257: the shards are a GitHub Actions matrix, which runs at most 256 jobs"},
		"verify without manifests": {func() error { _, err := VerifyInputs{Present: units}.Verify(nil); return err }, "give -present"},
		"a chain without estimate": {func() error { _, err := ChainInputs{JobCap: 6 * time.Hour, Depth: 2}.Plan(); return err }, "give -estimate"},
		"a cell without state":     {func() error { _, err := CellInputs{Cell: "a"}.Record(); return err }, "give -state FILE and -cell NAME"},
		"a cell with a colon": {func() error {
			_, err := CellInputs{State: filepath.Join(dir, "s.json"), Cell: "cu12:py3"}.Record()
			return err
		},
			`-cell "cu12:py3" cannot be part of an artifact name (no " : < > | * ? \ / or spaces around it)`},
		"a broken cell list": {func() error { _, err := StatusInputs{Cells: `["a",`}.Read([]string{dir}); return err }, `-cells "[\"a\"," is not a JSON array`},
		"a cell twice": {func() error { _, err := StatusInputs{Cells: "a,a"}.Read([]string{dir}); return err },
			`-cells "a,a" names a cell twice, an empty one, or one an artifact name cannot carry (" : < > | * ? \ / or spaces around it)`},
		"no state paths":         {func() error { _, err := StatusInputs{Cells: "a"}.Read(nil); return err }, "give -cells (or -cell) and the state files"},
		"no cells":               {func() error { _, err := StatusInputs{}.Read([]string{dir}); return err }, "give -cells (or -cell)"},
		"a checkpoint, no file":  {func() error { _, err := CheckpointInputs{}.Run([]string{dir}); return err }, "give -o FILE and one directory"},
		"a restore, no file":     {func() error { _, err := CheckpointInputs{Restore: true}.Run([]string{dir}); return err }, "give -i FILE and one directory"},
		"a checkpoint in a tree": {func() error { _, err := CheckpointInputs{File: inside}.Run([]string{dir}); return err }, "-o " + inside + " is inside " + dir},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.run()
			var ie *InputError
			if !errors.As(err, &ie) || !errors.Is(err, ErrInput) || !strings.HasPrefix(ie.Refusal(), tc.want) || ie.Error() != "compileplan: "+ie.Refusal() {
				t.Errorf("err = %v, want an InputError refusing %q", err, tc.want)
			}
		})
	}
}

// Each step's report says in its text and hands on in its outputs what
// the adoption workflows read: the matrix, the chain's budget, a cell's
// and every cell's progress, the next link's matrix, the batch sizes, the
// tree's counts.
func TestSteps_TheReportsAreWhatTheWorkflowsRead(t *testing.T) {
	dir := t.TempDir()
	units := write(t, dir, "units.json", `[{"name":"a.cu","cost":"3h"},{"name":"b.cu","cost":"2h","objects":["b1.o","b2.o"]},{"name":"c.cu","cost":"1h"}]`)
	plan, err := ShardInputs{N: 2}.Plan([]string{units})
	want := [][2]string{{"shards", `[{"index":0,"units":["a.cu"],"manifest":["a.cu.o"]},{"index":1,"units":["b.cu","c.cu"],"manifest":["b1.o","b2.o","c.cu.o"]}]`}}
	if diff := cmp.Diff(want, plan.Outputs()); err != nil || diff != "" || plan.String() != "shard 0: 3h0m0s of compiling: a.cu\nshard 1: 3h0m0s of compiling: b.cu c.cu\n" {
		t.Errorf("shards: %v %q (-want +got):\n%s", err, plan, diff)
	}
	c, err := ChainInputs{Estimate: 10 * time.Hour, JobCap: 6 * time.Hour, Depth: 2}.Plan()
	if diff := cmp.Diff([][2]string{{"links", "2"}, {"compile_timeout_seconds", "19800"}}, c.Outputs()); err != nil || diff != "" || c.String() != "2 link(s), each compiling under a 5h30m0s timeout\n" {
		t.Errorf("chain: %v %q (-want +got):\n%s", err, c, diff)
	}
	state := filepath.Join(dir, "state.json")
	if _, err := (CellInputs{State: state, Cell: "natten", Link: 1}).Record(); err != nil {
		t.Fatal(err)
	}
	rec, err := CellInputs{State: state, Cell: "xformers", Link: 2, Done: true}.Record()
	if diff := cmp.Diff([][2]string{{"done", "true"}, {"all_done", "false"}}, rec.Outputs()); err != nil || diff != "" || rec.String() != "cell xformers: link 2, done true; every cell done: false\n" {
		t.Errorf("chain-state: %v %q (-want +got):\n%s", err, rec, diff)
	}
	st, err := StatusInputs{Cells: `["natten","xformers","pytorch3d"]`}.Read([]string{state})
	want = [][2]string{{"pending", `[{"cell":"natten","link":1},{"cell":"pytorch3d","link":0}]`}, {"all_done", "false"}}
	if diff := cmp.Diff(want, st.Outputs()); err != nil || diff != "" || st.String() != "1 state file(s); 2 of 3 cell(s) unfinished\n  natten resumes from link 1\n  pytorch3d resumes from link 0\n" {
		t.Errorf("chain-status: %v %q (-want +got):\n%s", err, st, diff)
	}
	one, err := StatusInputs{Cell: "natten"}.Read([]string{state})
	if diff := cmp.Diff([][2]string{{"link", "1"}, {"done", "false"}}, one.Outputs()); err != nil || diff != "" {
		t.Errorf("one cell: %v (-want +got):\n%s", err, diff)
	}
	b, err := BatchInputs{Jobs: 0, Runners: 40, Typical: time.Hour, QueueCap: 24 * time.Hour}.Plan()
	if diff := cmp.Diff([][2]string{{"batches", "[]"}}, b.Outputs()); err != nil || diff != "" || b.String() != "0 job(s) in 0 batch(es): []\n" {
		t.Errorf("batches: %v %q (-want +got):\n%s", err, b, diff)
	}
	tree := filepath.Join(dir, "tree")
	write(t, tree, "build/gemv.o", "object")
	ckpt := filepath.Join(t.TempDir(), "ckpt.tar")
	w, err := CheckpointInputs{File: ckpt}.Run([]string{tree})
	if diff := cmp.Diff([][2]string{{"files", "1"}, {"bytes", "6"}}, w.Outputs()); err != nil || diff != "" || !strings.HasPrefix(w.String(), "checkpoint "+tree+": 1 file(s)") {
		t.Errorf("checkpoint: %v %q (-want +got):\n%s", err, w, diff)
	}
	r, err := CheckpointInputs{File: ckpt, Restore: true}.Run([]string{filepath.Join(dir, "fresh")})
	if err != nil || !strings.HasPrefix(r.String(), "restore "+filepath.Join(dir, "fresh")+": 1 file(s)") || r.Stats.Files != 1 {
		t.Errorf("restore: %v %q", err, r)
	}
	present := write(t, dir, "link.sha256", strings.Repeat("a", 64)+"  build/a.o\n")
	reuse, err := VerifyInputs{Present: present}.Verify([]string{present})
	if diff := cmp.Diff([][2]string{{"objects", "1"}}, reuse.Outputs()); err != nil || diff != "" || reuse.String() != "every one of the 1 shard objects was reused unchanged\n" {
		t.Errorf("verify: %v %q (-want +got):\n%s", err, reuse, diff)
	}
}
