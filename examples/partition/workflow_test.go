package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpugate/gpugate/internal/workflowtest"
)

// The long-build adoption workflows run this command from their shell
// steps. These tests run those steps as written, with this test binary as
// the partition on their PATH and the artifact transfers done by copying.

func TestMain(m *testing.M) {
	if os.Getenv("GPUGATE_PARTITION_MAIN") == "1" {
		main()
	}
	os.Exit(m.Run())
}

// newRunner returns a step runner whose partition is this test binary.
func newRunner(t *testing.T, tools ...string) *workflowtest.Runner {
	t.Helper()
	r := workflowtest.NewRunner(t, tools...)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	wrapper := "#!/bin/sh\nGPUGATE_PARTITION_MAIN=1 exec '" + exe + "' \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "partition"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	r.Path = bin + ":" + r.Path
	return r
}

// The compile step maps the build's exit to the link's outcome: done,
// timed out (checkpoint and go on), or a genuine failure that stops the
// cell with an annotation.
func TestTheLinkMapsTheBuildsExitToDoneCheckpointOrFailure(t *testing.T) {
	r := newRunner(t, "timeout")
	compile := workflowtest.Read(t, "cuda-build-link.yml").Jobs["build"].Step(t, "build", func(s workflowtest.Step) bool { return s.ID == "build" })
	os.MkdirAll(filepath.Join(r.Workspace, compile.WorkingDirectory), 0o755)
	build := filepath.Join(t.TempDir(), "cuda-build.sh")
	os.WriteFile(build, []byte("#!/bin/sh\nexit \"$EXIT\"\n"), 0o755)
	for exit, want := range map[string]struct {
		code    int
		outcome string
		says    string
	}{
		"0":   {0, "done", ""},
		"124": {0, "timed-out", "::notice::natten: the compile used link 2's 19800s budget"},
		"137": {0, "timed-out", "checkpointing the tree"},
		"2":   {2, "", "::error::natten: the build failed in link 2 (exit 2)"},
	} {
		res := r.Run(t, compile, map[string]string{"BUILD": build, "TIMEOUT": "19800", "CELL": "natten", "LINK": "2", "EXIT": exit})
		if res.Code != want.code || res.Output("outcome") != want.outcome || !strings.Contains(res.Out, want.says) {
			t.Errorf("build exit %s: step exit %d, outcome %q, output %q; want exit %d, outcome %q, %q", exit, res.Code, res.Output("outcome"), res.Out, want.code, want.outcome, want.says)
		}
	}
}

// One cell through three links of the chain, running the link workflow's
// own steps: the first link checks out, times out and checkpoints; the
// second resumes from that checkpoint with every mtime intact, times out
// again; a re-run of the second (its state already recorded) resumes from
// its own checkpoint, not the first's; the third finishes, and the
// completion check passes only then.
func TestACellResumesFromItsFurthestCheckpointAcrossLinksAndReruns(t *testing.T) {
	r := newRunner(t)
	link := workflowtest.Read(t, "cuda-build-link.yml")
	chain := workflowtest.Read(t, "cuda-chain-build.yml")
	build := link.Jobs["build"]
	resume := build.Step(t, "resume", workflowtest.Runs("partition chain-status -cell "))
	restore := build.Step(t, "restore", workflowtest.Runs("partition restore "))
	checkpoint := build.Step(t, "checkpoint", workflowtest.Runs("partition checkpoint "))
	record := build.Step(t, "record", func(s workflowtest.Step) bool { return strings.Contains(s.Run, "partition chain-state ") })
	pending := link.Jobs["pending"].Step(t, "status", workflowtest.Runs("partition chain-status -cells "))
	complete := chain.Jobs["complete"].Step(t, "completion check", workflowtest.Runs("partition chain-status -cells "))
	const cells = `["natten","pytorch3d"]`
	tree := filepath.Join(r.Workspace, "source")
	states := filepath.Join(r.Temp, "chain-state")
	ckpts := t.TempDir() // the run's artifacts
	mtime := time.Date(2026, 8, 14, 9, 30, 0, 123456789, time.UTC)

	// The state artifact, downloaded where build (RUNNER_TEMP) and pending
	// and complete (the workspace) download every chain-state-*.
	uploadState := func(link string) {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(r.Temp, "state", "state.json"))
		if err != nil {
			t.Fatal(err)
		}
		for _, dir := range []string{states, filepath.Join(r.Workspace, "chain-state")} {
			dst := filepath.Join(dir, "chain-state-natten-"+link, "state.json")
			os.MkdirAll(filepath.Dir(dst), 0o755)
			os.WriteFile(dst, data, 0o644)
		}
	}
	resumeAt := func() string {
		t.Helper()
		res := r.Run(t, resume, map[string]string{"CELL": "natten"})
		if res.Code != 0 {
			t.Fatalf("resume: %s", res.Out)
		}
		return res.Output("link")
	}
	linkOf := func(link, outcome string) {
		t.Helper()
		at := resumeAt()
		if at == "0" {
			os.MkdirAll(filepath.Join(tree, "build"), 0o755) // the checkout
			os.WriteFile(filepath.Join(tree, "gemv.cu"), []byte("kernel"), 0o644)
		} else {
			os.RemoveAll(tree) // a fresh runner
			os.MkdirAll(filepath.Join(r.Temp, "ckpt"), 0o755)
			data, err := os.ReadFile(filepath.Join(ckpts, "chain-ckpt-natten-"+at))
			if err != nil {
				t.Fatalf("link %s resumes from link %s, whose checkpoint was never uploaded", link, at)
			}
			os.WriteFile(filepath.Join(r.Temp, "ckpt", "checkpoint.tar"), data, 0o644)
			if res := r.Run(t, restore, nil); res.Code != 0 {
				t.Fatalf("restore: %s", res.Out)
			}
		}
		// The compile: one more object per link, each with its own mtime.
		obj := filepath.Join(tree, "build", "link"+link+".o")
		os.WriteFile(obj, []byte(link), 0o644)
		os.Chtimes(obj, mtime, mtime)
		if outcome == "timed-out" {
			if res := r.Run(t, checkpoint, nil); res.Code != 0 {
				t.Fatalf("checkpoint: %s", res.Out)
			}
			data, _ := os.ReadFile(filepath.Join(r.Temp, "checkpoint.tar"))
			os.WriteFile(filepath.Join(ckpts, "chain-ckpt-natten-"+link), data, 0o644)
		}
		if res := r.Run(t, record, map[string]string{"CELL": "natten", "LINK": link, "OUTCOME": outcome}); res.Code != 0 {
			t.Fatalf("record: %s", res.Out)
		}
		uploadState(link)
	}

	if at := resumeAt(); at != "0" {
		t.Fatalf("before any link the cell resumes at %s", at)
	}
	linkOf("1", "timed-out")
	linkOf("2", "timed-out")
	if at := resumeAt(); at != "2" {
		t.Errorf("a re-run of link 2 resumes from link %s, want its own checkpoint (2)", at)
	}
	// What link 2 built came back with the tree, mtimes intact.
	for _, o := range []string{"link1.o", "link2.o"} {
		if info, err := os.Stat(filepath.Join(tree, "build", o)); err != nil || !info.ModTime().Equal(mtime) {
			t.Errorf("%s after restoring: %v %v", o, info, err)
		}
	}
	if got := r.Run(t, pending, map[string]string{"CELLS": cells}).Output("pending"); got != `[{"cell":"natten","link":2},{"cell":"pytorch3d","link":0}]` {
		t.Errorf("the next link's matrix: %s", got)
	}
	if res := r.Run(t, complete, map[string]string{"CELLS": `["natten"]`}); res.Code != 1 || !strings.Contains(res.Out, "natten (at link 2)") {
		t.Errorf("completion before the cell finished: exit %d\n%s", res.Code, res.Out)
	}
	linkOf("3", "done")
	if res := r.Run(t, complete, map[string]string{"CELLS": `["natten"]`}); res.Code != 0 {
		t.Errorf("completion after the cell finished: exit %d\n%s", res.Code, res.Out)
	}
	if res := r.Run(t, complete, map[string]string{"CELLS": cells}); res.Code != 1 || !strings.Contains(res.Out, "pytorch3d (never checkpointed)") {
		t.Errorf("a cell that never ran passes the completion check: exit %d\n%s", res.Code, res.Out)
	}
}

// The sharded build's two shell steps, as written: each compile job
// records its objects' digests (failing on one it did not produce) and
// packs them; the link job passes only when it reused every object, and
// fails loudly on a recompile, even one that reproduces the digest.
func TestTheShardedBuildRecordsEveryObjectAndCatchesARecompile(t *testing.T) {
	r := newRunner(t, "jq", "tar", "sha256sum", "xargs", "find")
	wf := workflowtest.Read(t, "cuda-sharded-build.yml")
	pack := wf.Jobs["compile"].Step(t, "pack", workflowtest.Runs(`out="$RUNNER_TEMP/shard"`))
	unpack := wf.Jobs["link"].Step(t, "unpack", workflowtest.Runs("for t in "))
	verify := wf.Jobs["link"].Step(t, "verify", func(s workflowtest.Step) bool { return strings.Contains(s.Run, "partition verify-objects") })
	src := filepath.Join(r.Workspace, "source")
	shards := filepath.Join(r.Temp, "shards")
	os.MkdirAll(shards, 0o755)
	// A compile job: its checkout, the objects its build wrote, and the
	// pack step with the shard's manifest (the matrix's, as JSON).
	compile := func(index, manifest string, objects ...string) (int, string) {
		t.Helper()
		os.RemoveAll(src)
		os.MkdirAll(filepath.Join(src, "build"), 0o755)
		for _, o := range objects {
			os.WriteFile(filepath.Join(src, o), []byte("object "+o), 0o644)
		}
		res := r.Run(t, pack, map[string]string{"INDEX": index, "MANIFEST": manifest})
		for _, ext := range []string{".sha256", ".tar"} {
			data, _ := os.ReadFile(filepath.Join(r.Temp, "shard", "shard-"+index+ext))
			os.WriteFile(filepath.Join(shards, "shard-"+index+ext), data, 0o644)
		}
		return res.Code, res.Out
	}
	if code, out := compile("0", `["build/gemv.o"]`, "build/other.o"); code == 0 {
		t.Errorf("a shard that did not produce its object passed:\n%s", out)
	}
	if code, out := compile("0", `["build/gemv.o"]`, "build/gemv.o"); code != 0 {
		t.Fatalf("shard 0: %s", out)
	}
	if code, out := compile("1", `["build/attn.o"]`, "build/attn.o"); code != 0 {
		t.Fatalf("shard 1: %s", out)
	}
	link := func(relink func()) (int, string) {
		t.Helper()
		os.RemoveAll(src) // the link job's fresh checkout
		os.MkdirAll(src, 0o755)
		if res := r.Run(t, unpack, nil); res.Code != 0 {
			t.Fatalf("unpack: %s", res.Out)
		}
		relink()
		res := r.Run(t, verify, nil)
		return res.Code, res.Out
	}
	if code, out := link(func() {}); code != 0 || !strings.Contains(out, "every one of the 2 shard objects was reused") {
		t.Errorf("a link that reused every object: exit %d\n%s", code, out)
	}
	// The same bytes written again: the digests cannot tell, the mtime can.
	rebuild := func() {
		later := time.Now().Add(time.Minute)
		os.Chtimes(filepath.Join(src, "build", "attn.o"), later, later)
	}
	if code, out := link(rebuild); code != 1 || !strings.Contains(out, "::error::the link step compiled objects again (a silent recompile): build/attn.o") {
		t.Errorf("a recompile with the same digest: exit %d\n%s", code, out)
	}
	lose := func() { os.Remove(filepath.Join(src, "build", "gemv.o")) }
	if code, out := link(lose); code != 1 || !strings.Contains(out, "missing build/gemv.o") {
		t.Errorf("a lost object: exit %d\n%s", code, out)
	}
}
