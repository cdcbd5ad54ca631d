// Command gateflow is gpugate's main job: one run of the paid GPU gate's
// lifecycle for a change.
//
//	classify the diff → authorize → reuse check → candidate plan from the
//	catalog → resolve the runner image → provision with the CUDA proof →
//	hand the accepted runner to the test job → watchdog → cleanup with
//	confirmed deletion → gate publication → cost report
//
// With no flags it runs on embedded defaults, in process, without
// credentials or network: a bundled code change, the fake RunPod (its
// catalog snapshot) and a fake GitHub, and a scenario with a capacity miss,
// a host that fails the CUDA proof and a 429, all three in its attempt
// table. It then runs the same tested ref again (the gate is reused; no pod
// is created) and a docs-only change (the gate is not required; no pod is
// created). Simulated time runs 100x faster than its schedule; money does
// not: every second and dollar it prints is restated at real time from
// that schedule (package gateflow/demo), so it prints the same on every run.
//
//	gateflow                     # the embedded demonstration
//	gateflow -simulate-fleet     # a month of pull requests: gpugate vs baselines
//	gateflow -real -repo owner/name -pr 45 -actor LOGIN -run-id ID -job "Run GPU tests" \
//	    [-config runpod.yml] [-image REF] [-org ORG]
//
// The real mode reads RUNPOD_API_KEY and GITHUB_TOKEN and drives the same
// code against the real services: the test job is the workflow run's GPU
// job, which the watchdog follows.
//
// With -json, any mode prints what happened as one JSON document instead
// of the narration: each run's class, gate kind, provisioning attempts and
// cost report, or the fleet simulation's rows.
package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/gpugate/gpugate/gateflow/demo"
	"github.com/gpugate/gpugate/gateflow/econ"
	"github.com/gpugate/gpugate/internal/cli"
	"github.com/gpugate/gpugate/internal/ghaction"
	"github.com/gpugate/gpugate/internal/podstartup"
	"github.com/gpugate/gpugate/internal/stepsignal"
)

func main() {
	// A cancelled step deletes the pod it created before it exits.
	ctx, stop := stepsignal.UndoOnSignal()
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

type options struct {
	real, simulateFleet      bool
	json                     bool
	repo, actor, config      string
	image, org, job, step    string
	pr                       int
	runID                    int64
	runAttempt               int
	seed                     int64
	prsPerMonth              int
	model                    string
	deliveriesPerUpstreamRun float64
	startup                  podstartup.Options
}

// flags defines the command line into o; the defaults come from getenv.
func flags(o *options, getenv func(string) string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("gateflow", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&o.real, "real", false, "run against the real RunPod and GitHub (RUNPOD_API_KEY, GITHUB_TOKEN)")
	fs.BoolVar(&o.simulateFleet, "simulate-fleet", false, "replay a month of pull requests through gpugate and the baselines")
	fs.BoolVar(&o.json, "json", false, "print what happened as one JSON document instead of the narration")
	fs.StringVar(&o.repo, "repo", getenv("GITHUB_REPOSITORY"), "owner/name (real mode)")
	fs.IntVar(&o.pr, "pr", 0, "pull request number (real mode)")
	fs.StringVar(&o.actor, "actor", getenv("GITHUB_ACTOR"), "who asked for validation (real mode)")
	fs.StringVar(&o.config, "config", "", "RunPod configuration (YAML); default: the bundled example")
	fs.StringVar(&o.image, "image", "ghcr.io/actions/actions-runner:latest", "runner image (real mode; pinned to its digest before any GPU is bought)")
	fs.StringVar(&o.org, "org", "", "organization whose runners the pod registers with (real mode; default: repository runners)")
	cli.RunFlags(fs, getenv, &o.runID, &o.runAttempt, "whose GPU job uses the pod (real mode; the watchdog follows that attempt's jobs, the reaper its tag)")
	fs.StringVar(&o.job, "job", "Run GPU tests", "the GPU job's name (real mode)")
	fs.StringVar(&o.step, "test-step", "Run CUDA tests from archive", "the step that runs the tests (real mode)")
	fs.Int64Var(&o.seed, "seed", 1, "simulation seed (-simulate-fleet)")
	fs.IntVar(&o.prsPerMonth, "merge-refs", 120, "tested merge refs in the simulated month (-simulate-fleet)")
	fs.StringVar(&o.model, "failure-model", "", "YAML overriding the simulation's failure model (stock_out, proof_fail, outage, not_delivering, max_tries_per_ref, failed_job_seconds)")
	o.startup.Register(fs)
	fs.Float64Var(&o.deliveriesPerUpstreamRun, "runs-per-upstream-run", 3.0, "GPU gate runs started per upstream CI run before reuse (3.0 was measured on a real project)")
	return fs
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	var o options
	fs := flags(&o, getenv, stderr)
	if exit, ok := cli.Parse(fs, args); !ok {
		return exit
	}
	if err := refuse(fs, o); err != nil {
		return cli.Status(err)
	}
	narration := stdout
	if o.json {
		narration = io.Discard
	}
	// doc stays nil (nothing printed) when a mode fails before it has
	// anything to report.
	var doc any
	var err error
	switch {
	case o.simulateFleet:
		var m econ.FailureModel
		if m, err = econ.LoadModel(o.model); err == nil {
			doc, err = document(econ.Simulate(ctx, econ.Options{MergeRefs: o.prsPerMonth, RunsPerUpstreamRun: o.deliveriesPerUpstreamRun, Seed: o.seed, Model: m}, narration))
		}
	case o.real:
		doc, err = document(realFlow(ctx, o, getenv, narration))
	default:
		doc, err = document(demo.Run(ctx, narration))
	}
	if o.json && doc != nil {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if jerr := enc.Encode(doc); jerr != nil && err == nil {
			err = fmt.Errorf("gateflow: %w", jerr)
		}
	}
	if err != nil {
		ghaction.FromEnv(getenv).Fail(stdout, stderr, err)
		return 1
	}
	return 0
}

// refuse refuses a command line a mode cannot run: -real without its
// target, its run or the CUDA proof, and a simulated month of nothing.
func refuse(fs *flag.FlagSet, o options) error {
	switch {
	case o.real && o.simulateFleet:
		return cli.Refuse(fs, "-real and -simulate-fleet are different modes: pass one")
	case o.real:
		if err := cli.Require(fs, "repo", "pr", "actor", "run-id"); err != nil {
			return err // the reaper relies on the run's ownership tag, the watchdog follows its GPU job
		}
		if _, _, err := cli.SplitRepo("gateflow", o.repo); err != nil {
			return cli.Refuse(fs, "-repo %q: want owner/name", o.repo)
		}
		switch {
		case o.startup.Proof == "" && o.startup.ProofPath == "":
			return cli.Refuse(fs, "-real needs the CUDA proof: -proof FILE (built from ./examples/smoke) or -proof-path PATH (inside the runner image)")
		case o.startup.Proof != "" && o.startup.ProofPath != "":
			return cli.Refuse(fs, "-proof and -proof-path are alternatives: pass one")
		}
	case o.simulateFleet:
		if o.prsPerMonth <= 0 || o.deliveriesPerUpstreamRun < 1 {
			return cli.Refuse(fs, "-merge-refs must be positive and -runs-per-upstream-run at least 1 (got %d, %g)", o.prsPerMonth, o.deliveriesPerUpstreamRun)
		}
	}
	return nil
}

// document passes a mode's result on for -json, a nil one as no
// document at all (not a JSON null).
func document[T any](d *T, err error) (any, error) {
	if d == nil {
		return nil, err
	}
	return d, err
}
