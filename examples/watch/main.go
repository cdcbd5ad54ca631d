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
	"os"
	"strconv"
	"time"

	"github.com/gpugate/gpugate/internal/cli"
	"github.com/gpugate/gpugate/internal/ghaction"
	"github.com/gpugate/gpugate/internal/runpodenv"
	"github.com/gpugate/gpugate/internal/stepsignal"
	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/runpoddemo"
	"github.com/gpugate/gpugate/runpod/runpodgh"
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
	log := cli.Logger(o.verbose, stderr)
	if o.simulate {
		_, narration := cli.Writers(o.json, stdout, stderr) // -json writes only JSON to stdout
		return runpoddemo.Watch(ctx, opts, log, narration)
	}
	owner, name, settings := cli.SplitRepo("watch", o.repo)
	if o.pod == "" || o.runID == 0 || settings != nil {
		settings = errors.New("watch: -pod, -run-id and -repo owner/name are required")
	}
	api, gh, err := runpodenv.Clients(ctx, getenv, "watch", "job progress needs GitHub", settings)
	if err != nil {
		return runpod.WatchResult{}, err
	}
	repo := runpodgh.Repo{Client: gh, Owner: owner, Name: name}
	deps := runpod.WatchDeps{API: api, Progress: repo.Progress(o.runID, o.attempt, o.job, o.step), Runs: repo.Runs(), RunID: o.runID, Head: o.head, Log: log}
	if o.pr != 0 {
		deps.PR = repo.PR(o.pr)
	}
	return runpod.Watch(ctx, deps, o.pod, opts)
}
