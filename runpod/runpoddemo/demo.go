// Package runpoddemo holds the bundled demonstrations the RunPod commands
// run with -simulate: each step of the paid lifecycle against runpodtest's
// fakes, in process, without credentials, its time scaled down. It links
// the fakes, so a library user's real run does not import it; the commands
// link it only for their -simulate paths.
//
//   - Provisioning: a fake RunPod whose cheapest card runs out after the
//     catalog read, whose next host fails its CUDA proof, and which answers
//     one pod read with a 429 and Retry-After; Bill is what it charged.
//   - Reaping: a fake account holding one pod of each reap rule.
//   - AcceptedPod: one pod provisioned and accepted, for cleanup to end.
//   - Watch: the watchdog over a fake pod whose pull request's head moves
//     after its tests started.
package runpoddemo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/rest"
	"github.com/gpugate/gpugate/runpod/runpodtest"
)

// Repository and Workflow are the ownership the demonstrations' pods are
// tagged with.
const (
	Repository = "example/gpu-project"
	Workflow   = ".github/workflows/runpod-gpu-test.yml"
)

// Provisioning is provisioning's demonstration. Its fake starts pods in
// under a second and its registry passes a pod's CUDA proof 400 ms after
// the pod runs.
type Provisioning struct {
	API      *rest.Client
	Registry *runpodtest.Registry
	fake     *runpodtest.Server
}

// NewProvisioning builds the demonstration's fake and scales cfg's
// startup poll and timeout down to match its schedule.
func NewProvisioning(cfg *runpod.Config) (*Provisioning, error) {
	fake := runpodtest.New(runpodtest.WithSchedule(300*time.Millisecond, 500*time.Millisecond))
	api, err := fake.NewClient()
	if err != nil {
		return nil, err
	}
	reg := fake.NewRegistry()
	reg.SetProofTime(400 * time.Millisecond)
	cfg.StartupPoll, cfg.StartupTimeout = 100*time.Millisecond, 5*time.Second
	return &Provisioning{API: api, Registry: reg, fake: fake}, nil
}

// AfterCatalog plays the scenario once the catalog was read: the cheapest
// card (NVIDIA L4) runs out, every NVIDIA GeForce RTX 4090 host fails its
// CUDA proof, and the next pod read is answered 429 with Retry-After: 1.
func (p *Provisioning) AfterCatalog() {
	p.fake.SetStock("NVIDIA L4", 0)
	p.Registry.FailProofOn("NVIDIA GeForce RTX 4090")
	p.fake.AddFault(runpodtest.Fault{Method: "GET", Path: "/v2/pods/*", Status: 429, RetryAfter: "1"})
}

// Bill is one line on what the fake charged up to now: the total, the
// seconds billed for pods other than accepted (the rejected candidates),
// the API requests and how many were answered 429, and the pods left
// running.
func (p *Provisioning) Bill(accepted string) string {
	total, rejected := 0.0, 0.0
	for _, e := range p.fake.Ledger() {
		total += e.Cost(time.Now())
		if e.PodID != accepted {
			rejected += e.BilledSeconds(time.Now())
		}
	}
	throttled := 0
	for _, r := range p.fake.Requests() {
		if r.Status == 429 {
			throttled++
		}
	}
	return fmt.Sprintf("simulated bill (time scaled ~100x down): USD %.6f, of which %.1f s on rejected candidates; %d API requests, %d answered 429; pods left running: %d",
		total, rejected, len(p.fake.Requests()), throttled, len(p.fake.Running()))
}

// Reaping is the reaper's demonstration: an account holding a foreign
// notebook, an active run's pod, a superseded attempt's, a completed run's,
// a debug run's retained pod, and a pod stuck before its start for three
// hours, all but the notebook tagged for Repository and Workflow. The pods
// are created now and read with their timestamps shifted into the past, so
// their ages are realistic.
type Reaping struct {
	Deps runpod.ReapDeps
	fake *runpodtest.Server
}

// Running is how many of the account's pods still run.
func (r *Reaping) Running() int { return len(r.fake.Running()) }

// NewReaping builds the account.
func NewReaping(ctx context.Context) (*Reaping, error) {
	srv := runpodtest.New(runpodtest.WithSchedule(0, 0))
	srv.SetBehavior("NVIDIA RTX A4000", runpodtest.Behavior{ProvisionFor: 100 * time.Hour})
	c, err := srv.NewClient()
	if err != nil {
		return nil, err
	}
	runs := runpodtest.NewRuns()
	owner := func(run int64, attempt int) *runpod.Ownership {
		return &runpod.Ownership{Repository: Repository, Workflow: Workflow, RunID: run, RunAttempt: attempt}
	}
	now := time.Now()
	pods := []struct {
		name string
		o    *runpod.Ownership
		gpu  string
		run  *runpod.RunInfo
		age  time.Duration
	}{
		{"alice-notebook", nil, "NVIDIA L4", nil, 5 * time.Hour},
		{"", owner(101, 1), "NVIDIA L4", &runpod.RunInfo{ID: 101, Status: "in_progress", Attempt: 1, Event: "workflow_run"}, 30 * time.Minute},
		{"", owner(102, 1), "NVIDIA L40S", &runpod.RunInfo{ID: 102, Status: "in_progress", Attempt: 2, Event: "workflow_run"}, time.Hour},
		{"", owner(103, 1), "NVIDIA A100-SXM4-80GB", &runpod.RunInfo{ID: 103, Status: "completed", Attempt: 1, Event: "workflow_run", CompletedAt: now.Add(-20 * time.Minute)}, time.Hour},
		{"", owner(104, 1), "NVIDIA GeForce RTX 4090", &runpod.RunInfo{ID: 104, Status: "completed", Attempt: 1, Event: "workflow_dispatch", CompletedAt: now.Add(-time.Hour)}, 2 * time.Hour},
		{"", owner(105, 1), "NVIDIA RTX A4000", &runpod.RunInfo{ID: 105, Status: "in_progress", Attempt: 1, Event: "workflow_run"}, 3 * time.Hour},
	}
	ages := map[string]time.Duration{}
	for _, p := range pods {
		env, name := map[string]string{}, p.name
		if p.o != nil {
			env, name = p.o.Tags(), p.o.Prefix()+"-c1"
		}
		pod, err := c.CreatePod(ctx, rest.CreatePodRequest{Name: name, Image: "ghcr.io/actions/actions-runner:latest", Env: env, GPU: rest.GPURequest{ID: p.gpu, Count: 1}})
		if err != nil {
			return nil, err
		}
		ages[pod.ID] = p.age
		if p.run != nil {
			info := *p.run
			info.Repository, info.Workflow = Repository, Workflow
			runs.Set(info)
			if info.Event == "workflow_dispatch" {
				runs.Retain(info.ID, runpod.RetentionRecord{RunID: info.ID, Attempt: 1, PodIDs: []string{pod.ID}}.Name())
			}
		}
	}
	return &Reaping{Deps: runpod.ReapDeps{API: agedAPI{c, ages}, Runs: runs, Retention: runs}, fake: srv}, nil
}

// agedAPI shifts each pod's timestamps into the past by its age.
type agedAPI struct {
	*rest.Client
	ages map[string]time.Duration
}

func (a agedAPI) ListPods(ctx context.Context) ([]rest.Pod, error) {
	pods, err := a.Client.ListPods(ctx)
	for i := range pods {
		by := a.ages[pods[i].ID]
		pods[i].CreatedAt = pods[i].CreatedAt.Add(-by)
		if pods[i].StartedAt != nil {
			t := pods[i].StartedAt.Add(-by)
			pods[i].StartedAt = &t
		}
	}
	return pods, err
}

// AcceptedPod provisions one pod on a fake with the example configuration
// and returns the fake's client and the accepted pod's ID: what cleanup
// ends.
func AcceptedPod(ctx context.Context) (*rest.Client, string, error) {
	fake := runpodtest.New(runpodtest.WithSchedule(20*time.Millisecond, 20*time.Millisecond))
	api, err := fake.NewClient()
	if err != nil {
		return nil, "", err
	}
	reg := fake.NewRegistry()
	reg.SetProofTime(20 * time.Millisecond)
	cfg, err := runpod.LoadConfig(runpod.ExampleConfig)
	if err != nil {
		return nil, "", err
	}
	cfg.StartupPoll, cfg.StartupTimeout = 10*time.Millisecond, 5*time.Second
	plan := runpod.CandidatePlan(cfg, nil)
	res, err := runpod.Provision(ctx, runpod.Deps{API: api, Registry: reg, Log: slog.New(slog.DiscardHandler)}, cfg, plan,
		runpod.PodTemplate{Image: "ghcr.io/actions/actions-runner:latest", Owner: runpod.Ownership{Repository: Repository, Workflow: Workflow, RunID: 1, RunAttempt: 1}})
	if err != nil {
		return nil, "", err
	}
	return api, res.PodID, nil
}

// Watch runs the watchdog over a fake pod, opts scaled down 100x: the
// pod's tests start after 150 s (scaled), then the pull request's head
// moves after 300 s, so the watchdog deletes the pod first and cancels the
// run. It narrates on out; the obsolete ending is the scenario's, not an
// error.
func Watch(ctx context.Context, opts runpod.WatchOptions, log *slog.Logger, out io.Writer) (runpod.WatchResult, error) {
	const scale = 100
	opts.SetupDeadline, opts.Lifetime, opts.Poll, opts.GitHubPoll, opts.StartGrace = opts.SetupDeadline/scale, opts.Lifetime/scale, opts.Poll/scale, opts.GitHubPoll/scale, opts.StartGrace/scale
	srv := runpodtest.New(runpodtest.WithSchedule(10*time.Millisecond, 10*time.Millisecond))
	c, err := srv.NewClient()
	if err != nil {
		return runpod.WatchResult{}, err
	}
	pod, err := c.CreatePod(ctx, rest.CreatePodRequest{Name: "gpugate-1-1-c1", Image: "ghcr.io/actions/actions-runner:latest", GPU: rest.GPURequest{ID: "NVIDIA L4", Count: 1}})
	if err != nil {
		return runpod.WatchResult{}, err
	}
	time.Sleep(30 * time.Millisecond)
	prog := &runpodtest.Progress{}
	pr := runpodtest.NewPR("aaaa")
	runs := runpodtest.NewRuns()
	time.AfterFunc(1500*time.Millisecond, func() { prog.Set(runpod.JobProgress{TestsStarted: true}) })
	time.AfterFunc(3*time.Second, func() { pr.Set(runpod.PR{Open: true, HeadSHA: "bbbb"}, nil) })
	fmt.Fprintf(out, "watching %s: tests start after 150 s (scaled), the PR head moves after 300 s\n", pod.ID)
	res, err := runpod.Watch(ctx, runpod.WatchDeps{API: c, Progress: prog, PR: pr, Head: "aaaa", Runs: runs, RunID: 1, Log: log}, pod.ID, opts)
	fmt.Fprintf(out, "pods left running: %d; runs cancelled: %v\n", len(srv.Running()), runs.Canceled())
	if errors.Is(err, runpod.ErrObsolete) {
		err = nil // the scenario's expected ending
	}
	return res, err
}
