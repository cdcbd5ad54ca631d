// Command provision buys the cheapest RunPod GPU pod that proves it can run
// CUDA, one candidate at a time, and hands its runner label to the GPU job.
//
//	provision -simulate        # in process, no credentials: a bundled scenario
//	provision -config runpod.yml -image ghcr.io/actions/actions-runner:latest@sha256:… \
//	    -proof gpugate-smoke -nvrtc-tiers tiers.yml \
//	    -org my-org -repo owner/name -run-id 123 -run-attempt 1 [-pr 45 -head <sha>]
//
// Every candidate pod starts with the CUDA proof (smoke.NewPodStartup): the
// -proof binary travels packed in the create request's environment, runs
// before the runner registers, and a failure stops the container. Real runs
// refuse to buy pods without a proof or with unpinned NVRTC checksums.
//
// Real runs read RUNPOD_API_KEY and GitHub credentials (GITHUB_TOKEN, or a
// GitHub App: GITHUB_APP_ID, GITHUB_APP_INSTALLATION_ID,
// GITHUB_APP_PRIVATE_KEY_FILE). In GitHub Actions the
// accepted pod's ID, runner label, GPU and hourly price go to $GITHUB_OUTPUT
// and the attempt table to the step summary.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gpugate/gpugate/gate"
	"github.com/gpugate/gpugate/internal/cli"
	"github.com/gpugate/gpugate/internal/ghaction"
	"github.com/gpugate/gpugate/internal/podstartup"
	"github.com/gpugate/gpugate/internal/runpodenv"
	"github.com/gpugate/gpugate/internal/stepsignal"
	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/rest"
	"github.com/gpugate/gpugate/runpod/runpoddemo"
	"github.com/gpugate/gpugate/runpod/runpodgh"
)

func main() {
	// A cancelled step deletes the pod it created before it exits.
	ctx, stop := stepsignal.UndoOnSignal()
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

type options struct {
	startup                              podstartup.Options
	pods                                 podstartup.Pods
	org, head, localLabel                string
	pr                                   int
	simulate, json, verbose, deleteAfter bool
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("provision", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.BoolVar(&o.simulate, "simulate", false, "run in process against a fake RunPod and a fake runner registry")
	fs.StringVar(&o.org, "org", "", "GitHub organization whose runners the pod registers with")
	fs.IntVar(&o.pr, "pr", 0, "pull request number: stop when its head moves or it closes")
	fs.StringVar(&o.head, "head", "", "the authorized PR head SHA, with -pr")
	fs.StringVar(&o.localLabel, "local-label", gate.DefaultLocalLabel, "with -pr: a PR carrying this label was validated on a maintainer's GPU, so nothing is bought (paid_path_skipped)")
	fs.BoolVar(&o.deleteAfter, "delete", false, "delete the accepted pod at the end (always with -simulate)")
	fs.BoolVar(&o.json, "json", false, "print the result as JSON")
	fs.BoolVar(&o.verbose, "v", false, "log every provisioning event to stderr")
	o.pods.Register(fs, getenv)
	o.startup.Register(fs)
	if exit, ok := cli.Parse(fs, args); !ok {
		return exit
	}
	if err := required(fs, o); err != nil {
		return cli.Status(err)
	}
	if err := provision(ctx, o, getenv, stdout, stderr); err != nil {
		ghaction.FromEnv(getenv).Fail(stdout, stderr, err)
		return 1
	}
	return 0
}

// required refuses a real run's command line without what it cannot buy
// a pod without: the ownership tags the reaper relies on, and one CUDA
// proof for the pods to run before their runners register.
func required(fs *flag.FlagSet, o options) error {
	if o.simulate {
		return nil
	}
	if err := cli.Require(fs, "repo", "run-id"); err != nil {
		return err
	}
	if _, _, err := cli.SplitRepo("provision", o.pods.Repo); err != nil {
		return cli.Refuse(fs, "-repo %q: want owner/name", o.pods.Repo)
	}
	return o.startup.Refuse(fs)
}

// world is what Provision runs against: real services or the simulation.
type world struct {
	api      *rest.Client
	registry runpod.RunnerRegistry
	pr       runpod.PRState
	demo     *runpoddemo.Provisioning
	skipped  string // why the paid path is skipped: nothing is bought
}

func provision(ctx context.Context, o options, getenv func(string) string, stdout, stderr io.Writer) error {
	text, narration := cli.Writers(o.json, stdout, stderr)
	if o.simulate {
		o.pods.Repo, o.pods.RunID = cmp.Or(o.pods.Repo, runpoddemo.Repository), cmp.Or(o.pods.RunID, 1)
	}
	// The pods' startup (tier table, packed proof, command) is settled
	// before any API call: real runs refuse here without a proof.
	cfg, tmpl, st, err := o.pods.Load(o.startup, !o.simulate)
	if err != nil {
		return err
	}
	w, err := connect(ctx, o, getenv, &cfg)
	if err != nil {
		return err
	}
	if w.skipped != "" {
		fmt.Fprintf(narration, "paid path skipped: %s\n", w.skipped)
		gha := ghaction.FromEnv(getenv)
		return errors.Join(gha.AppendSummary("### RunPod provisioning\n\nSkipped: "+w.skipped+".\n"), gha.SetOutputs([2]string{"paid_path_skipped", "true"}))
	}
	if w.demo == nil {
		// Pin the image before any GPU is allocated; every candidate of
		// this run uses the same digest.
		if tmpl.Image, err = runpod.ResolveImage(ctx, tmpl.Image); err != nil {
			return err
		}
		fmt.Fprintf(narration, "image: %s\n", tmpl.Image)
	}
	// A misspelled GPU type would waste a create per candidate: refused
	// before anything is bought.
	plan, catalogErr, err := runpod.PlanFromCatalog(ctx, w.api, cfg)
	if catalogErr != nil {
		fmt.Fprintf(stderr, "provision: catalog unavailable, using static candidates: %v\n", catalogErr)
	}
	if err != nil {
		return err
	}
	if w.demo != nil {
		w.demo.AfterCatalog()
	}
	if st.Payload != nil {
		fmt.Fprintf(text, "CUDA proof in the create request: %v\n", st.Payload)
	}
	fmt.Fprint(text, runpod.PlanText(plan, cfg.MaxProvisionAttempts))
	deps := runpod.Deps{API: w.api, Registry: w.registry, PR: w.pr, Head: o.head, LocalLabel: o.localLabel, Log: cli.Logger(o.verbose, stderr)}
	res, perr := runpod.Provision(ctx, deps, cfg, plan, tmpl)
	if err := report(o, tmpl.Owner, res, getenv, stdout, narration); err != nil {
		return err
	}
	if perr != nil {
		return perr
	}
	if w.demo != nil || o.deleteAfter {
		if err := runpod.Delete(ctx, w.api, res.PodID); err != nil {
			return err
		}
		fmt.Fprintf(text, "deleted pod %s (confirmed)\n", res.PodID)
	}
	if w.demo != nil {
		fmt.Fprintln(text, w.demo.Bill(res.PodID))
	}
	return nil
}

// connect builds the real clients, or the simulation with a time scale
// that finishes in seconds.
func connect(ctx context.Context, o options, getenv func(string) string, cfg *runpod.Config) (world, error) {
	if o.simulate {
		demo, err := runpoddemo.NewProvisioning(cfg)
		if err != nil {
			return world{}, err
		}
		return world{api: demo.API, registry: demo.Registry, demo: demo}, nil
	}
	owner, name, settings := cli.SplitRepo("provision", o.pods.Repo)
	if o.pods.Repo == "" || o.pods.RunID == 0 {
		settings = errors.New("provision: -repo and -run-id are required: the reaper relies on those ownership tags")
	}
	api, gh, err := runpodenv.Clients(ctx, getenv, "provision", "minting JIT runner configs needs GitHub", settings)
	if err != nil {
		return world{}, err
	}
	repo := runpodgh.Repo{Client: gh, Owner: owner, Name: name}
	w := world{api: api, registry: repo.Registry(o.org)}
	if o.pr != 0 {
		w.pr = repo.PR(o.pr)
		// The local-validation label may have been added after
		// authorization: read it again before anything is bought.
		skip, err := gate.PaidPathSkipped(ctx, &gate.GitHub{Client: gh, Owner: owner, Repo: name}, o.pr, o.localLabel)
		if err != nil {
			return world{}, fmt.Errorf("provision: %w", err)
		}
		if skip {
			w.skipped = fmt.Sprintf("#%d carries %q: it was validated on a maintainer's GPU, so no pod is bought", o.pr, o.localLabel)
		}
	}
	return w, nil
}

func report(o options, owner runpod.Ownership, res runpod.Result, getenv func(string) string, stdout, narration io.Writer) error {
	gha := ghaction.FromEnv(getenv)
	if err := gha.AppendSummary("### RunPod provisioning\n\n" + res.Markdown()); err != nil {
		return err
	}
	outputs, err := runpodgh.ProvisionOutputs(res)
	if err != nil {
		return err
	}
	var retErr error
	if rec, ok := res.RetentionRecord(owner); ok {
		// The reaper spares a retained pod only while an artifact of this
		// name exists; the workflow uploads this file under it.
		// Without the file there is no record, and the reaper reclaims the
		// pods: that failure is reported after the outputs cleanup needs.
		data, _ := json.MarshalIndent(rec, "", "  ")
		if err := os.WriteFile(o.pods.RetentionFile, append(data, '\n'), 0o644); err != nil {
			retErr = fmt.Errorf("provision: retention record %s not written, so the reaper will reclaim the kept pods: %w", rec.Name(), err)
		} else {
			outputs = append(outputs, [2]string{"retention_record", rec.Name()}, [2]string{"retention_file", o.pods.RetentionFile})
		}
		fmt.Fprintf(narration, "kept for debugging, still billing: %s (retention record %s)\n", strings.Join(rec.PodIDs, ", "), rec.Name())
	}
	if err := gha.SetOutputs(outputs...); err != nil {
		return errors.Join(retErr, err)
	}
	if retErr != nil {
		return retErr
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	fmt.Fprint(stdout, res.Text())
	return nil
}
