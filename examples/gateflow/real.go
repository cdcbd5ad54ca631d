package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/gpugate/gpugate/changepolicy"
	"github.com/gpugate/gpugate/cost"
	"github.com/gpugate/gpugate/gate"
	"github.com/gpugate/gpugate/gateflow"
	"github.com/gpugate/gpugate/ghclient"
	"github.com/gpugate/gpugate/internal/cli"
	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/rest"
	"github.com/gpugate/gpugate/runpod/runpodgh"
)

// ownership tags the pods of a real run: the reaper reclaims them when
// that attempt of the run completes or is superseded by a re-run, so the
// attempt must be the one this process runs in.
func (o options) ownership(getenv func(string) string) runpod.Ownership {
	return runpod.Ownership{Repository: o.repo, Workflow: getenv("GITHUB_WORKFLOW_REF"), RunID: o.runID, RunAttempt: o.runAttempt}
}

// realFlow runs the lifecycle against RunPod and GitHub. The test job is
// the GPU job of -run-id, which picks up the accepted runner by its label;
// the watchdog follows it through the Actions API. -json prints its
// outcome.
func realFlow(ctx context.Context, o options, getenv func(string) string, out io.Writer) (*gateflow.Outcome, error) {
	key := getenv("RUNPOD_API_KEY")
	switch {
	case key == "":
		return nil, errors.New("gateflow: RUNPOD_API_KEY is not set (or run without -real for the embedded demonstration)")
	case o.repo == "" || o.pr == 0 || o.actor == "":
		return nil, errors.New("gateflow: -real needs -repo owner/name, -pr N and -actor LOGIN")
	case o.runID == 0:
		return nil, errors.New("gateflow: -real needs -run-id: the reaper relies on the ownership tag and the watchdog follows that run's GPU job")
	}
	owner, name, err := cli.SplitRepo("gateflow", o.repo)
	if err != nil {
		return nil, err
	}
	cfg, err := runpod.LoadConfig(runpod.ExampleConfig)
	if o.config != "" {
		cfg, err = runpod.LoadConfigFile(o.config)
	}
	if err != nil {
		return nil, err
	}
	// Every pod proves CUDA before its runner registers; settled before
	// any API call.
	var startup runpod.PodTemplate
	if _, err := o.startup.Apply(&startup, cfg, true); err != nil {
		return nil, err
	}
	gh, err := ghclient.New(ctx, getenv)
	if err != nil {
		return nil, fmt.Errorf("gateflow: %w", err)
	}
	policy, err := changepolicy.Load(changepolicy.ExamplePolicy)
	if err != nil {
		return nil, err
	}
	listing, err := changepolicy.ListPullRequest(ctx, gh, owner, name, o.pr)
	if err != nil {
		return nil, err
	}
	api, err := rest.ClientFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	image, err := runpod.ResolveImage(ctx, o.image)
	if err != nil {
		return nil, err
	}
	gr := runpodgh.Repo{Client: gh, Owner: owner, Name: name}
	repo := &gate.GitHub{Client: gh, Owner: owner, Repo: name}
	w := gateflow.Deps{
		Policy: policy, Repo: repo, Checks: repo, API: api, Registry: gr.Registry(o.org),
		Progress: gr.Progress(o.runID, o.runAttempt, o.job, o.step), PR: gr.PR(o.pr), Runs: gr.Runs(), RunID: o.runID,
		Config: cfg, Image: image, Startup: startup, Watch: runpod.DefaultWatchOptions(),
		Owner: o.ownership(getenv),
		Log:   slog.New(slog.NewTextHandler(os.Stderr, nil)),
		// The real job reports its own marks through the cost evidence
		// (cost.Collect); here the stages after startup stay unknown.
		StartJob: func(string) <-chan cost.Marks {
			ch := make(chan cost.Marks, 1)
			ch <- cost.Marks{}
			return ch
		},
	}
	oc, err := gateflow.Run(ctx, w, listing, o.actor, o.pr, out)
	if err != nil {
		return &oc, err
	}
	fmt.Fprintf(out, "conclusion: CI GPU gate %s\n", oc.Gate)
	return &oc, nil
}
