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
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gpugate/gpugate/gate"
	"github.com/gpugate/gpugate/ghclient"
	"github.com/gpugate/gpugate/internal/cli"
	"github.com/gpugate/gpugate/internal/ghaction"
	"github.com/gpugate/gpugate/internal/podstartup"
	"github.com/gpugate/gpugate/internal/stepsignal"
	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/rest"
	"github.com/gpugate/gpugate/runpod/runpodgh"
	"github.com/gpugate/gpugate/runpod/runpodtest"
)

func main() {
	// A cancelled step deletes the pod it created before it exits.
	ctx, stop := stepsignal.UndoOnSignal()
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

type options struct {
	startup                                          podstartup.Options
	config, image, prefix, org, repo, workflow, head string
	localLabel                                       string
	runID                                            int64
	runAttempt, pr                                   int
	simulate, json, verbose, deleteAfter, keepFailed bool
	retentionFile                                    string
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("provision", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.config, "config", "", "RunPod configuration (YAML or JSON); default: the bundled example (the default tiers)")
	fs.StringVar(&o.image, "image", "ghcr.io/actions/actions-runner:latest", "runner image, ideally pinned to a digest")
	fs.StringVar(&o.prefix, "prefix", "", "runner name/label prefix; default gpugate-<run-id>-<run-attempt>, the only one the reaper recognises (another needs runpod.ReapPolicy.Prefix)")
	fs.BoolVar(&o.simulate, "simulate", false, "run in process against a fake RunPod and a fake runner registry")
	fs.StringVar(&o.org, "org", "", "GitHub organization whose runners the pod registers with")
	fs.StringVar(&o.repo, "repo", getenv("GITHUB_REPOSITORY"), "owner/name of the repository (ownership tag; repository runners when -org is empty)")
	fs.StringVar(&o.workflow, "workflow", getenv("GITHUB_WORKFLOW_REF"), "the GPU workflow (ownership tag): its path, or GITHUB_WORKFLOW_REF's owner/repo/path@ref; tagged as the path the reaper matches")
	cli.RunFlags(fs, getenv, &o.runID, &o.runAttempt, "that owns the pods (ownership tag)")
	fs.IntVar(&o.pr, "pr", 0, "pull request number: stop when its head moves or it closes")
	fs.StringVar(&o.head, "head", "", "the authorized PR head SHA, with -pr")
	fs.StringVar(&o.localLabel, "local-label", gate.DefaultLocalLabel, "with -pr: a PR carrying this label was validated on a maintainer's GPU, so nothing is bought (paid_path_skipped)")
	fs.BoolVar(&o.deleteAfter, "delete", false, "delete the accepted pod at the end (always with -simulate)")
	fs.BoolVar(&o.keepFailed, "keep-failed-pods", false, "a debug dispatch's keep_failed_pods: keep candidates that failed their startup for inspection (still billing); outputs retention_record, the artifact name the reaper honours, and writes -retention-file for its upload")
	fs.StringVar(&o.retentionFile, "retention-file", filepath.Join(cmp.Or(getenv("RUNNER_TEMP"), os.TempDir()), "runpod-debug-retained.json"), "with -keep-failed-pods: where the retention record's artifact file goes")
	fs.BoolVar(&o.json, "json", false, "print the result as JSON")
	fs.BoolVar(&o.verbose, "v", false, "log every provisioning event to stderr")
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
	if _, _, err := cli.SplitRepo("provision", o.repo); err != nil {
		return cli.Refuse(fs, "-repo %q: want owner/name", o.repo)
	}
	switch {
	case o.startup.Proof == "" && o.startup.ProofPath == "":
		return cli.Refuse(fs, "a real run needs the CUDA proof: -proof FILE (built from ./examples/smoke) or -proof-path PATH (inside the runner image)")
	case o.startup.Proof != "" && o.startup.ProofPath != "":
		return cli.Refuse(fs, "-proof and -proof-path are alternatives: pass one")
	}
	return nil
}

// world is what Provision runs against: real services or the simulation.
type world struct {
	api      *rest.Client
	registry runpod.RunnerRegistry
	pr       runpod.PRState
	fake     *runpodtest.Server
	skipped  string // why the paid path is skipped: nothing is bought
}

func provision(ctx context.Context, o options, getenv func(string) string, stdout, stderr io.Writer) error {
	narration := stdout // -json writes only its document to stdout
	if o.json {
		narration = stderr
	}
	cfg, err := loadConfig(o)
	if err != nil {
		return err
	}
	if o.simulate && o.repo == "" {
		o.repo = "example/gpu-project"
	}
	if o.simulate && o.runID == 0 {
		o.runID = 1
	}
	// The pods' startup (tier table, packed proof, command) is settled
	// before any API call: real runs refuse here without a proof.
	tmpl := runpod.PodTemplate{
		KeepFailed:   o.keepFailed,
		RunnerPrefix: o.prefix,
		Owner:        runpod.Ownership{Repository: o.repo, Workflow: o.workflow, RunID: o.runID, RunAttempt: max(o.runAttempt, 1)},
		Disk:         40,
	}
	st, err := o.startup.Apply(&tmpl, cfg, !o.simulate)
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
		return errors.Join(gha.AppendSummary("### RunPod provisioning\n\nSkipped: "+w.skipped+".\n"),
			gha.SetOutputs([2]string{"paid_path_skipped", "true"}))
	}
	if w.fake == nil {
		// Pin the image before any GPU is allocated; every candidate of
		// this run uses the same digest.
		if o.image, err = runpod.ResolveImage(ctx, o.image); err != nil {
			return err
		}
		fmt.Fprintf(narration, "image: %s\n", o.image)
	}
	log := slog.New(slog.DiscardHandler)
	if o.verbose {
		log = slog.New(slog.NewTextHandler(stderr, nil))
	}
	offers, err := w.api.ListGPUTypes(ctx, rest.CatalogQuery{Cloud: cfg.Cloud, Count: 1, MinCUDAVersion: cfg.MinCUDAVersion})
	if err != nil {
		fmt.Fprintf(stderr, "provision: catalog unavailable, using static candidates: %v\n", err)
		offers = nil
	}
	// A misspelled GPU type would waste a create per candidate: refuse
	// before buying anything.
	if err := runpod.CheckGPUTypes(cfg, offers); err != nil {
		return err
	}
	plan := runpod.CandidatePlan(cfg, offers)
	if w.fake != nil {
		scenario(w)
	}
	tmpl.Image = o.image
	if !o.json {
		if st.Payload != nil {
			fmt.Fprintf(stdout, "CUDA proof in the create request: %v\n", st.Payload)
		}
		fmt.Fprintf(stdout, "plan (%d candidates, %d attempts allowed):\n", len(plan), cfg.MaxProvisionAttempts)
		for i, c := range plan {
			price := "static"
			if c.Live {
				price = fmt.Sprintf("$%.2f/h", c.Price)
			}
			fmt.Fprintf(stdout, "  %d. %-32s %-15s %s\n", i+1, c.GPUTypeID, c.Tier, price)
		}
	}
	deps := runpod.Deps{API: w.api, Registry: w.registry, PR: w.pr, Head: o.head, Log: log}
	res, perr := runpod.Provision(ctx, deps, cfg, plan, tmpl)
	if err := report(o, tmpl.Owner, res, getenv, stdout, narration); err != nil {
		return err
	}
	if perr != nil {
		return perr
	}
	if w.fake != nil || o.deleteAfter {
		if err := runpod.Delete(ctx, w.api, res.PodID); err != nil {
			return err
		}
		if !o.json {
			fmt.Fprintf(stdout, "deleted pod %s (confirmed)\n", res.PodID)
		}
	}
	if w.fake != nil && !o.json {
		total, rejected := 0.0, 0.0
		for _, e := range w.fake.Ledger() {
			total += e.Cost(time.Now())
			if e.PodID != res.PodID {
				rejected += e.BilledSeconds(time.Now())
			}
		}
		throttled := 0
		for _, r := range w.fake.Requests() {
			if r.Status == 429 {
				throttled++
			}
		}
		fmt.Fprintf(stdout, "simulated bill (time scaled ~100x down): USD %.6f, of which %.1f s on rejected candidates; %d API requests, %d answered 429; pods left running: %d\n",
			total, rejected, len(w.fake.Requests()), throttled, len(w.fake.Running()))
	}
	return nil
}

func loadConfig(o options) (runpod.Config, error) {
	if o.config == "" {
		return runpod.LoadConfig(runpod.ExampleConfig)
	}
	return runpod.LoadConfigFile(o.config)
}

// connect builds the real clients, or the simulation with a time scale
// that finishes in seconds.
func connect(ctx context.Context, o options, getenv func(string) string, cfg *runpod.Config) (world, error) {
	if o.simulate {
		fake := runpodtest.New(runpodtest.WithSchedule(300*time.Millisecond, 500*time.Millisecond))
		api, err := fake.NewClient()
		if err != nil {
			return world{}, err
		}
		reg := fake.NewRegistry()
		reg.SetProofTime(400 * time.Millisecond)
		cfg.StartupPoll, cfg.StartupTimeout = 100*time.Millisecond, 5*time.Second
		return world{api: api, registry: reg, fake: fake}, nil
	}
	if getenv("RUNPOD_API_KEY") == "" {
		return world{}, errors.New("provision: RUNPOD_API_KEY is not set (or use -simulate)")
	}
	if err := ghclient.RequireCredentials(getenv); err != nil {
		return world{}, fmt.Errorf("provision: minting JIT runner configs needs GitHub: %w", err)
	}
	switch {
	case o.repo == "" || o.runID == 0:
		return world{}, errors.New("provision: -repo and -run-id are required: the reaper relies on those ownership tags")
	}
	api, err := rest.ClientFromEnv(getenv)
	if err != nil {
		return world{}, err
	}
	gh, err := ghclient.New(ctx, getenv)
	if err != nil {
		return world{}, fmt.Errorf("provision: %w", err)
	}
	owner, name, err := cli.SplitRepo("provision", o.repo)
	if err != nil {
		return world{}, err
	}
	reg := &runpodgh.Registry{Client: gh, Owner: o.org}
	if o.org == "" {
		reg.Owner, reg.Repo = owner, name
	}
	w := world{api: api, registry: reg}
	if o.pr != 0 {
		w.pr = &runpodgh.PR{Client: gh, Owner: owner, Repo: name, Number: o.pr}
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

// scenario is the bundled simulation: the cheapest card runs out after the
// catalog read, the next host fails its CUDA proof, and a 429 with
// Retry-After pauses the client once.
func scenario(w world) {
	w.fake.SetStock("NVIDIA L4", 0)
	w.registry.(*runpodtest.Registry).FailProofOn("NVIDIA GeForce RTX 4090")
	w.fake.AddFault(runpodtest.Fault{Method: "GET", Path: "/v2/pods/*", Status: 429, RetryAfter: "1"})
}

func report(o options, owner runpod.Ownership, res runpod.Result, getenv func(string) string, stdout, narration io.Writer) error {
	gha := ghaction.FromEnv(getenv)
	if err := gha.AppendSummary("### RunPod provisioning\n\n" + res.Markdown()); err != nil {
		return err
	}
	var outputs [][2]string
	var retErr error
	if res.PodID != "" {
		outputs = append(outputs,
			[2]string{"pod_id", res.PodID}, [2]string{"runner_label", res.Label},
			[2]string{"gpu", res.GPUTypeID}, [2]string{"tier", res.Tier},
			[2]string{"gpu_cost_per_hr", strconv.FormatFloat(res.HourlyPrice, 'f', -1, 64)})
	}
	if len(res.Attempts) > 0 {
		// Cleanup's cost report carries what the rejected candidates cost,
		// and deletes a pod whose deletion was not confirmed; it gets this
		// even when no candidate was accepted.
		data, err := json.Marshal(res)
		if err != nil {
			return err
		}
		outputs = append(outputs, [2]string{"provision_result", string(data)})
	}
	if rec, ok := res.RetentionRecord(owner); ok {
		// The reaper spares a retained pod only while an artifact of this
		// name exists; the workflow uploads this file under it.
		// Without the file there is no record, and the reaper reclaims the
		// pods: that failure is reported after the outputs cleanup needs.
		data, _ := json.MarshalIndent(rec, "", "  ")
		if err := os.WriteFile(o.retentionFile, append(data, '\n'), 0o644); err != nil {
			retErr = fmt.Errorf("provision: retention record %s not written, so the reaper will reclaim the kept pods: %w", rec.Name(), err)
		} else {
			outputs = append(outputs, [2]string{"retention_record", rec.Name()}, [2]string{"retention_file", o.retentionFile})
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
	fmt.Fprintln(stdout, "attempts:")
	for _, a := range res.Attempts {
		price := "-"
		if a.HourlyPrice > 0 {
			price = fmt.Sprintf("$%.2f/h", a.HourlyPrice)
		}
		fmt.Fprintf(stdout, "  %d. %-20s %-32s %-8s %-13s %5.1fs  est. $%.6f  %s\n", a.N, a.Name, a.Candidate.GPUTypeID, price, a.Outcome, a.Seconds, a.EstimatedCost, cli.FirstLine(a.Reason, 90))
	}
	if res.PodID != "" {
		fmt.Fprintf(stdout, "accepted: pod %s on %s (tier %s) at $%.2f/h after %.1f s and %d attempts; runner label %s\n",
			res.PodID, res.GPUTypeID, res.Tier, res.HourlyPrice, res.StartupSeconds, len(res.Attempts), res.Label)
	}
	fmt.Fprintf(stdout, "rejected candidates cost an estimated USD %.6f\n", res.RejectedCost)
	return nil
}
