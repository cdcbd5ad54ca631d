package compileplan

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpugate/gpugate/internal/workflowtest"
)

// The long-compile adoption workflows, cuda-chain-build.yml,
// cuda-build-link.yml and cuda-sharded-build.yml, wire what this package
// plans: each test reads one as written.

// linkJobs returns the chain workflow's link jobs in link order, failing
// the test when they are not link-1 .. link-N each calling the link
// workflow.
func linkJobs(t *testing.T, chain workflowtest.Workflow) []workflowtest.Job {
	t.Helper()
	var links []workflowtest.Job
	for k := 1; ; k++ {
		j, ok := chain.Jobs[fmt.Sprintf("link-%d", k)]
		if !ok {
			break
		}
		if j.Uses != "./.github/workflows/cuda-build-link.yml" || j.With["link"] != strconv.Itoa(k) {
			t.Errorf("link-%d calls %q with link %q", k, j.Uses, j.With["link"])
		}
		links = append(links, j)
	}
	if len(links) == 0 {
		t.Fatal("cuda-chain-build.yml wires no link jobs")
	}
	return links
}

// The compile-sharding ADR: "the chain ladder is wired 2 links deep while
// comments claim 10 (a chain that runs out loses its compute)". The plan
// refuses an estimate deeper than the links actually wired, each link
// follows the one before it, only the last fails on running out, and the
// required check reads every link.
func TestTheChainIsWiredAsDeepAsItsPlanRefusesBeyond(t *testing.T) {
	chain := workflowtest.Read(t, "cuda-chain-build.yml")
	links := linkJobs(t, chain)
	var plan string
	for _, s := range chain.Jobs["plan"].Steps {
		if strings.HasPrefix(s.Run, "partition chain ") {
			plan = s.Run
		}
	}
	m := regexp.MustCompile(`-depth (\d+)`).FindStringSubmatch(plan)
	if m == nil || m[1] != strconv.Itoa(len(links)) {
		t.Fatalf("plan runs %q, but %d links are wired: -depth must say so", plan, len(links))
	}
	if !strings.Contains(plan, "-job-cap 6h") {
		t.Errorf("plan %q does not size links to the 6-hour job cap", plan)
	}
	for i, j := range links {
		if i > 0 && !j.NeedsJob(fmt.Sprintf("link-%d", i)) {
			t.Errorf("link-%d does not follow link-%d: needs %v", i+1, i, j.Needs)
		}
		if want := strconv.FormatBool(i == len(links)-1); j.With["last"] != want && !(want == "false" && j.With["last"] == "") {
			t.Errorf("link-%d: last is %q, want %s", i+1, j.With["last"], want)
		}
		if j.With["compile_timeout_seconds"] != "${{ fromJSON(needs.plan.outputs.compile_timeout_seconds) }}" || !j.NeedsJob("plan") {
			t.Errorf("link-%d does not compile under the plan's timeout: %v", i+1, j.With)
		}
	}
	done := chain.Jobs["complete"]
	for i := range links {
		if !done.NeedsJob(fmt.Sprintf("link-%d", i+1)) {
			t.Errorf("complete does not wait for link-%d", i+1)
		}
	}
	required := false
	for _, s := range done.Steps {
		required = required || strings.Contains(s.Run, "partition chain-status") && strings.Contains(s.Run, "-require-done")
	}
	if done.If != "${{ !cancelled() }}" || !required {
		t.Errorf("complete (if %q) must run after any failed link and require every cell done", done.If)
	}
}

// The compile-sharding ADR: "the chain done flag is a matrix job output,
// which is last-writer-wins across cells and can starve an unfinished
// cell. Direction: fix per-cell gating." A link's matrix is the unfinished
// cells as the state artifacts say; each cell's progress is its own
// artifact per link; no matrix job has outputs at all.
func TestEachCellsProgressIsItsOwnArtifactNeverAMatrixOutput(t *testing.T) {
	link := workflowtest.Read(t, "cuda-build-link.yml")
	for name, j := range link.Jobs {
		if j.Strategy.Matrix.Include != "" && len(j.Outputs) > 0 {
			t.Errorf("matrix job %s has outputs %v: last-writer-wins across cells", name, j.Outputs)
		}
	}
	pending, build := link.Jobs["pending"], link.Jobs["build"]
	if pending.Outputs["cells"] != "${{ steps.status.outputs.pending }}" {
		t.Errorf("pending's cells output is %q", pending.Outputs["cells"])
	}
	status := false
	for _, s := range pending.Steps {
		status = status || s.ID == "status" && strings.HasPrefix(s.Run, "partition chain-status -cells ")
	}
	if !status {
		t.Error("pending does not read the state artifacts with partition chain-status")
	}
	if build.Strategy.Matrix.Include != "${{ fromJSON(needs.pending.outputs.cells) }}" || build.If != "needs.pending.outputs.cells != '[]'" {
		t.Errorf("build's matrix %q (if %q) is not the unfinished cells", build.Strategy.Matrix.Include, build.If)
	}
	if build.Strategy.FailFast == nil || *build.Strategy.FailFast {
		t.Error("one cell's failure cancels the other cells' compute: set fail-fast: false")
	}
	record, stateUpload, productUpload, checkpointUpload := -1, -1, -1, -1
	for i, s := range build.Steps {
		switch {
		case strings.Contains(s.Run, "partition chain-state "):
			record = i
		case strings.HasPrefix(s.Uses, "actions/upload-artifact@") && s.With["name"] == "chain-state-${{ matrix.cell }}-${{ inputs.link }}":
			stateUpload = i
		case strings.HasPrefix(s.Uses, "actions/upload-artifact@") && s.With["name"] == "build-${{ matrix.cell }}":
			productUpload = i
		case strings.HasPrefix(s.Uses, "actions/upload-artifact@") && s.With["name"] == "chain-ckpt-${{ matrix.cell }}-${{ inputs.link }}":
			checkpointUpload = i
		}
	}
	if record < 0 || stateUpload < record {
		t.Fatalf("build records its state at step %d and uploads it per cell and link at %d", record, stateUpload)
	}
	if productUpload < 0 || checkpointUpload < 0 || record < productUpload || record < checkpointUpload {
		t.Errorf("the state is recorded (step %d) before the product (%d) or checkpoint (%d) it names is uploaded", record, productUpload, checkpointUpload)
	}
}

// The compile-sharding ADR: "on expiry the ENTIRE source/ tree (sources +
// build state) is tarred as an artifact -- PAX format to preserve
// nanosecond mtimes, because ninja's restat check breaks on re-cloned
// sources (build/-only checkpoints were tried and abandoned)". A cell
// checks out only before its first checkpoint; afterwards it restores the
// tree it checkpointed, from the furthest link it reached.
func TestLaterLinksRestoreTheWholeCheckpointedTreeInsteadOfRecloning(t *testing.T) {
	build := workflowtest.Read(t, "cuda-build-link.yml").Jobs["build"]
	var checkout, download, restore, compile, checkpoint *workflowtest.Step
	resume := ""
	for i := range build.Steps {
		s := &build.Steps[i]
		switch {
		case strings.HasPrefix(s.Run, "partition chain-status -cell "):
			resume = s.ID
		case strings.HasPrefix(s.Uses, "actions/checkout@"):
			checkout = s
		case strings.HasPrefix(s.Uses, "actions/download-artifact@") && strings.HasPrefix(s.With["name"], "chain-ckpt-"):
			download = s
		case strings.HasPrefix(s.Run, "partition restore "):
			restore = s
		case s.ID == "build":
			compile = s
		case strings.HasPrefix(s.Run, "partition checkpoint "):
			checkpoint = s
		}
	}
	if resume == "" || checkout == nil || download == nil || restore == nil || compile == nil || checkpoint == nil {
		t.Fatalf("build lacks a step: resume %q checkout %v download %v restore %v compile %v checkpoint %v", resume, checkout, download, restore, compile, checkpoint)
	}
	first, later := "steps."+resume+".outputs.link == '0'", "steps."+resume+".outputs.link != '0'"
	if checkout.If != first || download.If != later || restore.If != later {
		t.Errorf("checkout if %q, checkpoint download if %q, restore if %q: a resumed cell must never re-clone", checkout.If, download.If, restore.If)
	}
	if download.With["name"] != "chain-ckpt-${{ matrix.cell }}-${{ steps."+resume+".outputs.link }}" {
		t.Errorf("the checkpoint downloaded is %q, not the one the cell's furthest link left", download.With["name"])
	}
	tree := checkout.With["path"]
	if tree == "" || compile.WorkingDirectory != tree || !strings.HasSuffix(strings.TrimSpace(restore.Run), " "+tree) || !strings.HasSuffix(strings.TrimSpace(checkpoint.Run), " "+tree) {
		t.Errorf("checkout into %q, build in %q, restore %q, checkpoint %q: the whole tree must travel", tree, compile.WorkingDirectory, restore.Run, checkpoint.Run)
	}
}

// The compile-sharding ADR: GitHub-hosted runners "cap a job at 6 hours",
// and each link's compile timeout must leave room to checkpoint inside it.
// The build job's own limit is the cap, and the plan's budget plus the
// margin fits it.
func TestEachLinksCompileTimeoutLeavesTheCheckpointMarginInsideTheJobCap(t *testing.T) {
	link := workflowtest.Read(t, "cuda-build-link.yml")
	limit := time.Duration(link.Jobs["build"].TimeoutMinutes) * time.Minute
	// The cap the plan sizes links to, as the chain workflow passes it.
	var jobCap time.Duration
	for _, s := range workflowtest.Read(t, "cuda-chain-build.yml").Jobs["plan"].Steps {
		if m := regexp.MustCompile(`-job-cap (\S+)`).FindStringSubmatch(s.Run); m != nil {
			jobCap, _ = time.ParseDuration(m[1])
		}
	}
	c, err := PlanChain(time.Hour, jobCap, 1)
	if err != nil {
		t.Fatalf("the plan's job cap %s: %v", jobCap, err)
	}
	if jobCap > 6*time.Hour || limit != jobCap || c.CompileBudget+ChainMargin > limit {
		t.Errorf("build's timeout-minutes %s, the plan's job cap %s: want the hosted 6 h cap in both, holding the %s budget plus the %s margin", limit, jobCap, c.CompileBudget, ChainMargin)
	}
	ranOut := false
	for _, s := range link.Jobs["build"].Steps {
		if s.If == "inputs.last && steps.build.outputs.outcome == 'timed-out'" {
			ranOut = strings.Contains(s.Run, "exit 1")
		}
	}
	if !ranOut {
		t.Error("a cell that times out in the last link does not fail the chain")
	}
}

// The compile-sharding ADR: "nothing asserts the link job actually reused
// the shards (a silent full recompile just runs slow). Direction: assert
// object reuse loudly." The link job checks every object against the
// shards' manifests and fails on any it wrote again.
func TestTheShardedLinkAssertsItReusedEveryShardObject(t *testing.T) {
	wf := workflowtest.Read(t, "cuda-sharded-build.yml")
	if got := wf.Jobs["compile"].Strategy.Matrix.Include; got != "${{ fromJSON(needs.plan.outputs.shards) }}" {
		t.Errorf("the compile matrix is %q, not the plan's shards", got)
	}
	var link, verify = wf.Jobs["link"], -1
	linked := -1
	for i, s := range link.Steps {
		switch {
		case strings.Contains(s.Run, "cuda-build.sh link"):
			linked = i
		case strings.Contains(s.Run, "partition verify-objects"):
			verify = i
			if !strings.Contains(s.Run, "-newer") {
				t.Error("the verify step does not catch an object rebuilt with the same digest")
			}
		}
	}
	if linked < 0 || verify < linked {
		t.Errorf("link step %d, verify-objects step %d: the reuse must be verified after linking", linked, verify)
	}
	for _, name := range []string{"compile", "link"} {
		j := wf.Jobs[name]
		if j.TimeoutMinutes == 0 || j.TimeoutMinutes > 360 {
			t.Errorf("%s: timeout-minutes %v", name, j.TimeoutMinutes)
		}
		if len(j.Steps) == 0 || j.Steps[0].With["step"] != "free-disk" {
			t.Errorf("%s does not free the runner's disk first", name)
		}
	}
}
