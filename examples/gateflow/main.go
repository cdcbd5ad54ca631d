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
// that schedule (realtime.go), so it prints the same on every run.
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
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/gpugate/gpugate/changepolicy"
	"github.com/gpugate/gpugate/cost"
	"github.com/gpugate/gpugate/gate"
	"github.com/gpugate/gpugate/gate/gatetest"
	"github.com/gpugate/gpugate/gateflow/econ"
	"github.com/gpugate/gpugate/internal/cli"
	"github.com/gpugate/gpugate/internal/ghaction"
	"github.com/gpugate/gpugate/internal/podstartup"
	"github.com/gpugate/gpugate/internal/stepsignal"
	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/rest"
	"github.com/gpugate/gpugate/runpod/runpodtest"
)

//go:embed example.diff
var exampleDiff []byte

//go:embed docs-only.diff
var docsOnlyDiff []byte

// pinnedImage is the runner image of the demonstration, pinned by digest as
// ResolveImage would pin it.
const pinnedImage = "ghcr.io/actions/actions-runner:2.323.0@sha256:831a2607a2618e4b79d9323b4c72330f3861768a061c2b92a845e9d214d80e5b"

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
		doc, err = document(demo(ctx, narration))
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

// world is everything one lifecycle touches.
type world struct {
	policy   *changepolicy.Policy
	repo     gate.Repo
	checks   gate.Checks
	api      *rest.Client
	registry runpod.RunnerRegistry
	progress runpod.Progress
	pr       runpod.PRState
	runs     runpod.Runs
	runID    int64
	cfg      runpod.Config
	image    string
	startup  runpod.PodTemplate // the CUDA proof's environment and startup command
	watch    runpod.WatchOptions
	owner    runpod.Ownership
	// startJob, in the simulation, plays the GPU test job once the runner
	// is handed over; it returns the job's marks when it ends.
	startJob func(runner string) <-chan cost.Marks
	// afterCatalog, in the demonstration, changes stock between the
	// catalog read and the first create.
	afterCatalog func()
	// realTime, in the demonstration, restates the compressed run's paid
	// seconds and dollars at real time (nil: a real run's own figures).
	realTime *realTime
	log      *slog.Logger
}

// outcome is what one lifecycle did.
type outcome struct {
	PR          int                `json:"pr"`
	Class       changepolicy.Class `json:"class"`
	GPURequired bool               `json:"gpu_required"`
	Gate        gate.Kind          `json:"gate,omitempty"`
	Result      *runpod.Result     `json:"provision,omitempty"` // when provisioning ran
	Cost        *cost.Report       `json:"cost,omitempty"`      // when the accepted pod's record was read
}

// lifecycle runs the gate for one change. out receives what a maintainer
// needs to see as it goes.
func lifecycle(ctx context.Context, w world, listing changepolicy.Listing, actor string, pr int, out io.Writer) (outcome, error) {
	step := func(n int, name, format string, a ...any) {
		fmt.Fprintf(out, "%2d. %-18s %s\n", n, name, fmt.Sprintf(format, a...))
	}
	dec, err := listing.Classify(w.policy)
	if err != nil {
		return outcome{PR: pr}, err
	}
	oc := outcome{PR: pr, Class: dec.Class, GPURequired: dec.GPU}
	step(1, "classify", "%s; GPU gate required: %v (%s)", dec.Class, dec.GPU, dec.Reason)
	// Authorized for the head the files were listed at, or not at all.
	a, err := gate.Authorize(ctx, w.repo, gate.AuthRequest{Actor: actor, PR: pr, ClassifiedHead: dec.HeadSHA})
	if err != nil {
		return oc, err
	}
	step(2, "authorize", "%s (%s) may spend on PR #%d: head %.7s, tested merge ref %.7s", a.Actor, a.Role, pr, a.HeadSHA, a.TestedRef)
	if !dec.GPU {
		g, err := gate.Publish(ctx, w.checks, gate.Report{HeadSHA: a.HeadSHA, ID: gate.ExternalID{Ref: a.TestedRef, Kind: gate.KindNotRequired},
			GPU: &gate.Classification{GPURequired: false, Reason: dec.Reason, HeadSHA: dec.HeadSHA}}, time.Now())
		if err != nil {
			return oc, err
		}
		step(3, "publish", "%q: %s (%s) — no pod created", gate.DefaultCheckName, g.Conclusion, g.ExternalID)
		oc.Gate = gate.KindNotRequired
		return oc, nil
	}
	d := gate.LookupReuse(ctx, w.checks, a.HeadSHA, a.TestedRef, gate.DefaultCheckName)
	step(3, "reuse", "%s", d.Reason)
	if d.Reuse {
		g, err := gate.Publish(ctx, w.checks, gate.Report{HeadSHA: a.HeadSHA, ID: gate.ExternalID{Ref: a.TestedRef, Kind: gate.KindReused}, ReusedFrom: d.From}, time.Now())
		if err != nil {
			return oc, err
		}
		step(4, "publish", "%q: %s (%s) — no pod created", gate.DefaultCheckName, g.Conclusion, g.ExternalID)
		oc.Gate = gate.KindReused
		return oc, nil
	}
	offers, err := w.api.ListGPUTypes(ctx, rest.CatalogQuery{Cloud: w.cfg.Cloud, Count: 1, MinCUDAVersion: w.cfg.MinCUDAVersion})
	if err != nil {
		step(4, "plan", "catalog unavailable, using the static tiers: %v", err)
	}
	if err := runpod.CheckGPUTypes(w.cfg, offers); err != nil {
		return oc, err
	}
	plan := runpod.CandidatePlan(w.cfg, offers)
	if w.afterCatalog != nil {
		w.afterCatalog()
	}
	var names []string
	for _, c := range plan {
		p := "static"
		if c.Live {
			p = fmt.Sprintf("$%.2f/h", c.Price)
		}
		names = append(names, fmt.Sprintf("%s (%s, %s)", c.GPUTypeID, c.Tier, p))
	}
	step(4, "plan", "%d candidates: %s", len(plan), strings.Join(names, ", "))
	step(5, "image", "%s", w.image)
	if err := gate.Recheck(ctx, w.repo, a); err != nil {
		return oc, err
	}
	tmpl := w.startup
	tmpl.Image, tmpl.Owner, tmpl.Disk = w.image, w.owner, 40
	res, perr := runpod.Provision(ctx, runpod.Deps{API: w.api, Registry: w.registry, PR: w.pr, Head: a.HeadSHA, Log: w.log}, w.cfg, plan, tmpl)
	if w.realTime != nil {
		w.realTime.restate(&res)
	}
	oc.Result = &res
	for _, at := range res.Attempts {
		price := "   -   "
		if at.HourlyPrice > 0 {
			price = fmt.Sprintf("$%.2f/h", at.HourlyPrice)
		}
		fmt.Fprintf(out, "    attempt %d  %-32s %s  %-13s %5.1fs  est. $%.6f  %s\n", at.N, at.Candidate.GPUTypeID, price, at.Outcome, at.Seconds, at.EstimatedCost, cli.FirstLine(at.Reason, 80))
		if w.realTime != nil {
			for _, n := range w.realTime.notes(at) {
				fmt.Fprintf(out, "               %s\n", n)
			}
		}
	}
	if perr != nil {
		step(6, "provision", "failed: %v", perr)
		oc.Gate = gate.KindFailed
		return oc, publishFailed(ctx, w, a, "provisioning failed: "+perr.Error(), perr)
	}
	step(6, "provision", "accepted %s at $%.2f/h after %d attempts (%.1f s); runner label %s", res.GPUTypeID, res.HourlyPrice, len(res.Attempts), res.StartupSeconds, res.Label)
	marksCh := w.startJob(res.Label)
	step(7, "hand over", "the GPU test job runs on %s", res.Label)
	wres, werr := runpod.Watch(ctx, runpod.WatchDeps{API: w.api, Progress: w.progress, PR: w.pr, Head: a.HeadSHA, Runs: w.runs, RunID: w.runID, Log: w.log}, res.PodID, w.watch)
	switch {
	case werr != nil:
		step(8, "watchdog", "%v", werr)
	case w.realTime != nil: // how often a compressed run polled says nothing about a real one
		step(8, "watchdog", "%s: %s", wres.Outcome, wres.Reason)
	default:
		step(8, "watchdog", "%s: %s (%d pod reads)", wres.Outcome, wres.Reason, wres.PodReads)
	}
	marks := <-marksCh
	// Read the billing record before deletion; the pod is gone afterwards.
	pod, gerr := runpod.RecordBeforeDelete(ctx, w.api, res.PodID)
	var deletedAt time.Time
	if wres.Deleted && wres.DeletedAt != nil {
		deletedAt = *wres.DeletedAt
	} else {
		if err := runpod.Delete(ctx, w.api, res.PodID); err != nil {
			step(9, "cleanup", "deletion NOT confirmed: %v — the reaper will retry", err)
			return oc, err
		}
		deletedAt = time.Now()
	}
	step(9, "cleanup", "pod %s deleted (confirmed)", res.PodID)
	passed := werr == nil && wres.Outcome == runpod.WatchCompleted && wres.Conclusion == "success"
	kind := gate.KindPaid
	if !passed {
		kind = gate.KindFailed
	}
	g, err := gate.Publish(ctx, w.checks, gate.Report{HeadSHA: a.HeadSHA, ID: gate.ExternalID{Ref: a.TestedRef, Kind: kind},
		Paid: &gate.PaidEvidence{TestsPassed: passed, PodID: res.PodID},
		Ran:  []string{"CUDA smoke proof on " + res.GPUTypeID, "GPU test job"}, NotRun: []string{"nothing skipped"}}, time.Now())
	if err != nil {
		return oc, err
	}
	oc.Gate = kind
	step(10, "publish", "%q: %s (%s)", gate.DefaultCheckName, g.Conclusion, g.ExternalID)
	if gerr != nil {
		step(11, "cost", "unknown: the pod record could not be read (%v)", gerr)
		return oc, nil
	}
	var rep cost.Report
	if w.realTime != nil {
		rep, err = w.realTime.report(pod, res)
	} else {
		rep, err = cost.NewReport(cost.PodRecordOf(pod), deletedAt, marks, cost.RejectedAttempts(res.Attempts))
	}
	if err != nil {
		return oc, err
	}
	rep.TestedRef, rep.GateKind, rep.PodID, rep.GPUTypeID = a.TestedRef, string(kind), pod.ID, res.GPUTypeID
	oc.Cost = &rep
	step(11, "cost", "accepted pod: %.1f paid s, $%.6f; rejected candidates: $%.6f", rep.Window.Seconds, rep.Window.Cost, rep.RejectedCost())
	for _, s := range rep.Stages {
		if s.Seconds != nil && s.Cost != nil {
			fmt.Fprintf(out, "    %-22s %6.1f s  $%.6f\n", s.Name, *s.Seconds, *s.Cost)
		} else {
			fmt.Fprintf(out, "    %-22s unknown\n", s.Name)
		}
	}
	if !passed {
		return oc, fmt.Errorf("gateflow: the GPU gate failed: %s", wres.Reason)
	}
	return oc, nil
}

func publishFailed(ctx context.Context, w world, a gate.Authorization, why string, cause error) error {
	if _, err := gate.Publish(ctx, w.checks, gate.Report{HeadSHA: a.HeadSHA, ID: gate.ExternalID{Ref: a.TestedRef, Kind: gate.KindFailed}, Details: why}, time.Now()); err != nil {
		return errors.Join(cause, err)
	}
	return cause
}

// demoDoc is what -json prints for the embedded demonstration.
type demoDoc struct {
	Runs []outcome `json:"runs"`
	// PodCreates counts the create requests of each run, in order.
	PodCreates []int `json:"pod_creates"`
	// USD is what every pod cost, the rejected candidates included, at
	// real time: the run was TimeScale times faster, its money was not.
	USD         float64 `json:"usd"`
	TimeScale   int     `json:"time_scale"`
	Throttled   int     `json:"throttled_answers"` // 429s the client rode out
	PodsRunning int     `json:"pods_running"`      // after the last run: zero
}

// demo is the embedded demonstration.
func demo(ctx context.Context, out io.Writer) (*demoDoc, error) {
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
	w := world{
		startup: startup,
		policy:  policy, repo: repo, checks: gatetest.NewChecks(), api: api, registry: reg, progress: progress,
		pr: runpodtest.NewPR(head1), cfg: cfg, image: pinnedImage, log: slog.New(slog.DiscardHandler),
		owner: runpod.Ownership{Repository: "example/gpu-project", Workflow: ".github/workflows/runpod-gpu-test.yml", RunID: 1, RunAttempt: 1},
		watch: runpod.WatchOptions{SetupDeadline: 10 * time.Second, Lifetime: 30 * time.Second, Poll: 100 * time.Millisecond, StartGrace: 2 * time.Second},
		startJob: func(string) <-chan cost.Marks {
			return playJob(progress, compressed(rt.setup), compressed(rt.tests), "success")
		},
		afterCatalog: func() { fake.SetStock("NVIDIA L4", 0) },
		realTime:     rt,
	}
	fmt.Fprintln(out, "== PR #42: a CUDA kernel change (first run of its tested merge ref)")
	doc := &demoDoc{}
	first, err := lifecycle(ctx, w, changepolicy.Listing{Changes: code, HeadSHA: head1}, "maintainer", 42, out)
	doc.Runs = append(doc.Runs, first)
	if err != nil {
		return doc, err
	}
	created := fake.Count("POST", "/v2/pods")
	fmt.Fprintln(out, "\n== PR #42 again: a duplicate delivery for the same tested merge ref")
	second, err := lifecycle(ctx, w, changepolicy.Listing{Changes: code, HeadSHA: head1}, "maintainer", 42, out)
	doc.Runs = append(doc.Runs, second)
	if err != nil {
		return doc, err
	}
	again := fake.Count("POST", "/v2/pods") - created
	fmt.Fprintln(out, "\n== PR #43: a docs-only change")
	w.pr = runpodtest.NewPR(head2)
	third, err := lifecycle(ctx, w, changepolicy.Listing{Changes: docs, HeadSHA: head2}, "maintainer", 43, out)
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
	doc.PodCreates, doc.USD, doc.TimeScale, doc.Throttled, doc.PodsRunning = []int{created, again, docsCreated}, usd, timeScale, throttled, len(fake.Running())
	if n := len(fake.Running()); n != 0 || again != 0 || docsCreated != 0 {
		return doc, fmt.Errorf("gateflow: invariant broken: %d pods running, %d created on reuse, %d for docs", n, again, docsCreated)
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
