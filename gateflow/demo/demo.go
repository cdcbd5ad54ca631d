// Package demo is gpugate's main job on embedded defaults, in process,
// without credentials or network: one pull request's whole paid gate
// (gateflow.Run) against in-process fakes of RunPod and GitHub, then the
// same tested merge ref again (reused: no pod is created) and a docs-only
// change (not required: no pod is created). Its scenario has a capacity
// miss after the catalog read, a host that fails the CUDA proof and a 429,
// all three in the attempt table. Simulated time runs TimeScale times
// faster than its schedule; money does not: every second and dollar it
// prints is restated at real time from that schedule, so it prints the
// same on every run. It links the fakes; a real run does not.
package demo

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/gpugate/gpugate/changepolicy"
	"github.com/gpugate/gpugate/cost"
	"github.com/gpugate/gpugate/gate"
	"github.com/gpugate/gpugate/gate/gatetest"
	"github.com/gpugate/gpugate/gateflow"
	"github.com/gpugate/gpugate/internal/podstartup"
	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/runpodtest"
)

//go:embed example.diff
var exampleDiff []byte

//go:embed docs-only.diff
var docsOnlyDiff []byte

// PinnedImage is the runner image of the demonstration, pinned by digest
// as runpod.ResolveImage would pin it.
const PinnedImage = "ghcr.io/actions/actions-runner:2.323.0@sha256:831a2607a2618e4b79d9323b4c72330f3861768a061c2b92a845e9d214d80e5b"

// Doc is what the demonstration did: what -json prints.
type Doc struct {
	Runs []gateflow.Outcome `json:"runs"`
	// PodCreates counts the create requests of each run, in order.
	PodCreates []int `json:"pod_creates"`
	// USD is what every pod cost, the rejected candidates included, at
	// real time: the run was TimeScale times faster, its money was not.
	USD         float64 `json:"usd"`
	TimeScale   int     `json:"time_scale"`
	Throttled   int     `json:"throttled_answers"` // 429s the client rode out
	PodsRunning int     `json:"pods_running"`      // after the last run: zero
}

// Run runs the demonstration, narrating to out.
func Run(ctx context.Context, out io.Writer) (*Doc, error) {
	policy, err := changepolicy.Load(changepolicy.ExamplePolicy)
	if err != nil {
		return nil, err
	}
	code, err := changepolicy.ParseNameStatus(exampleDiff)
	if err != nil {
		return nil, err
	}
	docs, err := changepolicy.ParseNameStatus(docsOnlyDiff)
	if err != nil {
		return nil, err
	}
	cfg, err := runpod.LoadConfig(runpod.ExampleConfig)
	if err != nil {
		return nil, err
	}
	cfg.StartupPoll, cfg.StartupTimeout = 100*time.Millisecond, 10*time.Second
	// The schedule at real time; the fake and the job play it compressed.
	rt := &realTime{provision: 20 * time.Second, start: 30 * time.Second, proof: 30 * time.Second,
		setup: 20 * time.Second, tests: 80 * time.Second, cleanup: 10 * time.Second,
		throttle: runpodtest.Fault{Method: "GET", Path: "/v2/pods/*", Status: 429, RetryAfter: "1"}}
	fake := runpodtest.New(runpodtest.WithSchedule(compressed(rt.provision), compressed(rt.start)))
	rt.requests = fake.Requests
	api, err := fake.NewClient()
	if err != nil {
		return nil, err
	}
	reg := fake.NewRegistry()
	reg.SetProofTime(compressed(rt.proof))
	// The scenario: the cheapest card sells out after the catalog read, the
	// next host fails its CUDA proof, and a 429 with Retry-After pauses the
	// client once.
	reg.FailProofOn("NVIDIA GeForce RTX 4090")
	fake.AddFault(rt.throttle)

	const head1, merge1 = "7fc2a91c3b5e4d6f8a9b0c1d2e3f405162738495", "9a1b2c3d4e5f60718293a4b5c6d7e8f901234567"
	const head2, merge2 = "5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f", "1f2e3d4c5b6a79880716253443526170f9e8d7c6"
	repo := gatetest.NewRepo()
	repo.Roles = map[string]string{"maintainer": "maintain"}
	repo.PRs = map[int]gate.PullRequest{
		42: {Number: 42, Open: true, HeadSHA: head1, MergeSHA: merge1, HeadRepoID: 1, BaseRepoID: 1},
		43: {Number: 43, Open: true, HeadSHA: head2, MergeSHA: merge2, HeadRepoID: 1, BaseRepoID: 1},
	}
	// The fake's pods run no script, so the demonstration renders the
	// in-image variant of the startup; -real packs the built proof.
	var startup runpod.PodTemplate
	if _, err := (podstartup.Options{}).Apply(&startup, cfg, false); err != nil {
		return nil, err
	}
	progress := &runpodtest.Progress{}
	w := gateflow.Deps{
		Startup: startup,
		Policy:  policy, Repo: repo, Checks: gatetest.NewChecks(), API: api, Registry: reg, Progress: progress,
		PR: runpodtest.NewPR(head1), Config: cfg, Image: PinnedImage, Log: slog.New(slog.DiscardHandler),
		Owner: runpod.Ownership{Repository: "example/gpu-project", Workflow: ".github/workflows/runpod-gpu-test.yml", RunID: 1, RunAttempt: 1},
		Watch: runpod.WatchOptions{SetupDeadline: 10 * time.Second, Lifetime: 30 * time.Second, Poll: 100 * time.Millisecond, StartGrace: 2 * time.Second},
		StartJob: func(string) <-chan cost.Marks {
			return playJob(progress, compressed(rt.setup), compressed(rt.tests), "success")
		},
		AfterCatalog: func() { fake.SetStock("NVIDIA L4", 0) },
		RealTime:     rt,
	}
	fmt.Fprintln(out, "== PR #42: a CUDA kernel change (first run of its tested merge ref)")
	doc := &Doc{}
	first, err := gateflow.Run(ctx, w, changepolicy.Listing{Changes: code, HeadSHA: head1}, "maintainer", 42, out)
	doc.Runs = append(doc.Runs, first)
	if err != nil {
		return doc, err
	}
	created := fake.Count("POST", "/v2/pods")
	fmt.Fprintln(out, "\n== PR #42 again: a duplicate delivery for the same tested merge ref")
	second, err := gateflow.Run(ctx, w, changepolicy.Listing{Changes: code, HeadSHA: head1}, "maintainer", 42, out)
	doc.Runs = append(doc.Runs, second)
	if err != nil {
		return doc, err
	}
	again := fake.Count("POST", "/v2/pods") - created
	fmt.Fprintln(out, "\n== PR #43: a docs-only change")
	w.PR = runpodtest.NewPR(head2)
	third, err := gateflow.Run(ctx, w, changepolicy.Listing{Changes: docs, HeadSHA: head2}, "maintainer", 43, out)
	doc.Runs = append(doc.Runs, third)
	if err != nil {
		return doc, err
	}
	docsCreated := fake.Count("POST", "/v2/pods") - created - again
	throttled := 0
	for _, r := range fake.Requests() {
		if r.Status == 429 {
			throttled++
		}
	}
	fmt.Fprintf(out, "\nconclusion: CI GPU gate %s on %s for PR #42 (pod create requests: first run %d, second run %d); docs-only PR #43: gate not required, %d pods.\n",
		first.Gate, first.Result.GPUTypeID, created, again, docsCreated) // the first run provisioned: lifecycle returned no error
	usd := first.Result.RejectedCost
	if first.Cost != nil {
		usd += first.Cost.Window.Cost
	}
	fmt.Fprintf(out, "every pod cost $%.6f, the rejected candidates included; 429 answers ridden out: %d; pods still running: %d\n", usd, throttled, len(fake.Running()))
	fmt.Fprintf(out, "(%s)\n", rt)
	doc.PodCreates, doc.USD, doc.TimeScale, doc.Throttled, doc.PodsRunning = []int{created, again, docsCreated}, usd, TimeScale, throttled, len(fake.Running())
	if n := len(fake.Running()); n != 0 || again != 0 || docsCreated != 0 {
		return doc, fmt.Errorf("demo: invariant broken: %d pods running, %d created on reuse, %d for docs", n, again, docsCreated)
	}
	return doc, nil
}

// playJob plays the GPU test job against the fake progress: the job
// starts, its tests start after setup, and it completes after run.
func playJob(p *runpodtest.Progress, setup, run time.Duration, conclusion string) <-chan cost.Marks {
	p.Set(runpod.JobProgress{})
	ch := make(chan cost.Marks, 1)
	start := time.Now()
	time.AfterFunc(setup, func() {
		testsStarted := time.Now()
		p.Set(runpod.JobProgress{TestsStarted: true})
		time.AfterFunc(run, func() {
			ended := time.Now()
			p.Set(runpod.JobProgress{TestsStarted: true, Completed: true, Conclusion: conclusion})
			ch <- cost.Marks{JobStarted: &start, TestsStarted: &testsStarted, TestsEnded: &ended}
		})
	})
	return ch
}
