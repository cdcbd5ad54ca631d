// Command watch is the hosted lifecycle watchdog for an accepted RunPod
// pod: it deletes the pod if its setup does not reach the tests within the
// setup deadline, if it outlives the lifetime backstop, if the GPU job ends
// before its tests start, or if the pull request moves or closes (then it
// cancels the obsolete run).
//
//	watch -pod ID -repo owner/name -run-id N -run-attempt N -job "Run GPU tests" \
//	    -test-step "Run CUDA tests from archive" [-pr N -head SHA]
//	watch -simulate
//
// Real runs read RUNPOD_API_KEY and GitHub credentials: GITHUB_TOKEN, or
// a GitHub App (GITHUB_APP_ID, GITHUB_APP_INSTALLATION_ID,
// GITHUB_APP_PRIVATE_KEY_FILE).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/gpugate/gpugate/ghclient"
	"github.com/gpugate/gpugate/internal/cli"
	"github.com/gpugate/gpugate/internal/ghaction"
	"github.com/gpugate/gpugate/internal/stepsignal"
	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/rest"
	"github.com/gpugate/gpugate/runpod/runpodgh"
	"github.com/gpugate/gpugate/runpod/runpodtest"
)

func main() {
	stepsignal.FinishOnSignal() // a deletion in flight finishes
	os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

type options struct {
	pod, repo, job, step, head string
	runID                      int64
	attempt                    int
	pr                         int
	setup, lifetime, poll      time.Duration
	githubPoll                 time.Duration
	simulate, json, verbose    bool
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("watch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	def := runpod.DefaultWatchOptions()
	fs.StringVar(&o.pod, "pod", "", "the accepted pod's ID")
	fs.StringVar(&o.repo, "repo", getenv("GITHUB_REPOSITORY"), "owner/name")
	cli.RunFlags(fs, getenv, &o.runID, &o.attempt, "of the GPU job (the watchdog follows that attempt's jobs)")
	fs.StringVar(&o.job, "job", "Run GPU tests", "the GPU job's name")
	fs.StringVar(&o.step, "test-step", "Run CUDA tests from archive", "the step whose start disarms the setup deadline")
	fs.IntVar(&o.pr, "pr", 0, "pull request number (0: a manual validation, never obsolete)")
	fs.StringVar(&o.head, "head", "", "the authorized PR head SHA, with -pr")
	fs.DurationVar(&o.setup, "setup-deadline", def.SetupDeadline, "from the pod's start to the tests starting")
	fs.DurationVar(&o.lifetime, "lifetime", def.Lifetime, "total lifetime backstop from the pod's start")
	fs.DurationVar(&o.poll, "poll", def.Poll, "cadence of the pod reads")
	fs.DurationVar(&o.githubPoll, "github-poll", def.GitHubPoll, "cadence of the pull request and job-progress reads (the repository's Actions token has 1,000 requests an hour)")
	fs.BoolVar(&o.simulate, "simulate", false, "watch a fake pod through a bundled scenario (time scaled down 100x)")
	fs.BoolVar(&o.json, "json", false, "print the result as JSON")
	fs.BoolVar(&o.verbose, "v", false, "log events to stderr")
	if exit, ok := cli.Parse(fs, args); !ok {
		return exit
	}
	if !o.simulate {
		if err := cli.Require(fs, "pod", "run-id", "repo"); err != nil {
			return cli.Status(err)
		}
		if _, _, err := cli.SplitRepo("watch", o.repo); err != nil {
			return cli.Status(cli.Refuse(fs, "-repo %q: want owner/name", o.repo))
		}
	}
	res, err := watch(ctx, o, getenv, stdout, stderr)
	if res.Outcome != "" {
		if werr := ghaction.FromEnv(getenv).SetOutputs([2]string{"outcome", string(res.Outcome)}, [2]string{"deleted", strconv.FormatBool(res.Deleted)}); werr != nil && err == nil {
			err = werr
		}
		if o.json {
			data, _ := json.MarshalIndent(res, "", "  ")
			fmt.Fprintln(stdout, string(data))
		} else {
			fmt.Fprintf(stdout, "outcome: %s (%s); deleted: %v; run cancelled: %v; pod reads: %d; cost so far: USD %.6f\n",
				res.Outcome, res.Reason, res.Deleted, res.RunCanceled, res.PodReads, res.CostSoFar)
		}
	}
	if err != nil {
		ghaction.FromEnv(getenv).Fail(stdout, stderr, err)
		return 1
	}
	return 0
}

func watch(ctx context.Context, o options, getenv func(string) string, stdout, stderr io.Writer) (runpod.WatchResult, error) {
	opts := runpod.WatchOptions{SetupDeadline: o.setup, Lifetime: o.lifetime, Poll: o.poll, GitHubPoll: o.githubPoll, StartGrace: runpod.DefaultWatchOptions().StartGrace}
	log := slog.New(slog.DiscardHandler)
	if o.verbose {
		log = slog.New(slog.NewTextHandler(stderr, nil))
	}
	if o.simulate {
		narration := stdout
		if o.json {
			narration = stderr // -json writes only JSON to stdout
		}
		return simulate(ctx, opts, log, narration)
	}
	owner, name, repoErr := cli.SplitRepo("watch", o.repo)
	if getenv("RUNPOD_API_KEY") == "" {
		return runpod.WatchResult{}, errors.New("watch: RUNPOD_API_KEY is not set (or use -simulate)")
	}
	if err := ghclient.RequireCredentials(getenv); err != nil {
		return runpod.WatchResult{}, fmt.Errorf("watch: job progress needs GitHub: %w", err)
	}
	switch {
	case o.pod == "" || o.runID == 0 || repoErr != nil:
		return runpod.WatchResult{}, errors.New("watch: -pod, -run-id and -repo owner/name are required")
	}
	api, err := rest.ClientFromEnv(getenv)
	if err != nil {
		return runpod.WatchResult{}, err
	}
	gh, err := ghclient.New(ctx, getenv)
	if err != nil {
		return runpod.WatchResult{}, fmt.Errorf("watch: %w", err)
	}
	deps := runpod.WatchDeps{
		API:      api,
		Progress: &runpodgh.Progress{Client: gh, Owner: owner, Repo: name, RunID: o.runID, Attempt: int64(o.attempt), Job: o.job, TestStep: o.step},
		Runs:     &runpodgh.Runs{Client: gh, Owner: owner, Repo: name},
		RunID:    o.runID,
		Head:     o.head,
		Log:      log,
	}
	if o.pr != 0 {
		deps.PR = &runpodgh.PR{Client: gh, Owner: owner, Repo: name, Number: o.pr}
	}
	return runpod.Watch(ctx, deps, o.pod, opts)
}

// simulate accepts a fake pod, lets its tests start, then moves the pull
// request's head: the watchdog deletes the pod first and cancels the run.
func simulate(ctx context.Context, opts runpod.WatchOptions, log *slog.Logger, stdout io.Writer) (runpod.WatchResult, error) {
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
	fmt.Fprintf(stdout, "watching %s: tests start after 150 s (scaled), the PR head moves after 300 s\n", pod.ID)
	res, err := runpod.Watch(ctx, runpod.WatchDeps{API: c, Progress: prog, PR: pr, Head: "aaaa", Runs: runs, RunID: 1, Log: log}, pod.ID, opts)
	fmt.Fprintf(stdout, "pods left running: %d; runs cancelled: %v\n", len(srv.Running()), runs.Canceled())
	if errors.Is(err, runpod.ErrObsolete) {
		err = nil // the scenario's expected ending
	}
	return res, err
}
