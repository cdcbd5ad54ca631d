// Package econ simulates a month of GPU-gate runs to compare the economics
// of gpugate's paid lifecycle with its own ablations, the policies of the
// tools an adopter would pick instead (SkyPilot's failover, dstack's
// offers) and an oracle lower bound: dollars per validated merge ref, paid
// runs per ref, dollars wasted on rejected candidates and red gates.
//
// Each run replays the real planning (runpod.CandidatePlan), provisioning
// (runpod.Provision, with its CUDA proof and early stop), reuse
// (gate.LookupReuse and gate.Publish), watchdog (runpod.Watch) and cleanup
// (runpod.Delete) against a fresh in-process fake RunPod. The failure
// model is drawn per (seed, ref, try), so every policy faces the same
// world; paid seconds come from a duration model, not the wall clock, so a
// seed gives the same figures every time.
package econ

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/gpugate/gpugate/gate"
	"github.com/gpugate/gpugate/gate/gatetest"
	"github.com/gpugate/gpugate/internal/strictyaml"
	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/rest"
	"github.com/gpugate/gpugate/runpod/runpodtest"
)

// FailureModel is what can go wrong in one run. The defaults
// (DefaultModel) are rates observed on a real project's GPU CI.
type FailureModel struct {
	StockOut        map[string]float64 `yaml:"stock_out"`          // per GPU type: sold out between the catalog read and the create
	ProofFail       map[string]float64 `yaml:"proof_fail"`         // per GPU type: the host cannot run the project's CUDA
	Outage          float64            `yaml:"outage"`             // the provider refuses every create (5xx) for the whole run
	NotDelivering   float64            `yaml:"not_delivering"`     // every created pod dies before its runner comes online
	MaxTriesPerRef  int                `yaml:"max_tries_per_ref"`  // a failed gate is re-run at most this often
	FailedJobSecond float64            `yaml:"failed_job_seconds"` // without the proof, a broken host fails the job after this long (setup and the whole test run: nextest reports every failure)
}

// LoadModel overlays a YAML file on the default model (no path: the
// default). Unknown keys and rates outside [0, 1] are ErrModel.
func LoadModel(path string) (FailureModel, error) {
	m := DefaultModel()
	if path == "" {
		return m, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return m, fmt.Errorf("%w: %w", ErrModel, err)
	}
	return ParseModel(path, data)
}

// ParseModel overlays YAML on the default model; path names it in errors.
func ParseModel(path string, data []byte) (FailureModel, error) {
	m := DefaultModel()
	if err := strictyaml.Decode(data, &m); err != nil && !errors.Is(err, strictyaml.ErrEmpty) {
		return m, fmt.Errorf("%w %s: %w", ErrModel, path, err)
	}
	rates := map[string]float64{"outage": m.Outage, "not_delivering": m.NotDelivering}
	for g, r := range m.StockOut {
		rates["stock_out."+g] = r
	}
	for g, r := range m.ProofFail {
		rates["proof_fail."+g] = r
	}
	for k, r := range rates {
		if !(r >= 0 && r <= 1) { // NaN too
			return m, fmt.Errorf("%w %s: %s = %g: a rate is between 0 and 1", ErrModel, path, k, r)
		}
	}
	if !(m.FailedJobSecond >= 0) {
		return m, fmt.Errorf("%w %s: failed_job_seconds = %g: want a non-negative duration", ErrModel, path, m.FailedJobSecond)
	}
	if m.MaxTriesPerRef < 1 {
		return m, fmt.Errorf("%w %s: max_tries_per_ref must be at least 1", ErrModel, path)
	}
	return m, nil
}

// durations is the paid-time model (seconds).
type durations struct {
	Boot, Proof, Setup, Tests, Cleanup float64
}

// DefaultModel is the failure model of a real project's GPU CI.
func DefaultModel() FailureModel {
	return FailureModel{
		StockOut:        map[string]float64{"NVIDIA L4": 0.30, "NVIDIA GeForce RTX 4090": 0.15, "NVIDIA L40S": 0.08, "NVIDIA RTX 6000 Ada Generation": 0.10, "NVIDIA A100-SXM4-80GB": 0.05},
		ProofFail:       map[string]float64{"NVIDIA GeForce RTX 4090": 0.20, "NVIDIA L4": 0.08, "NVIDIA L40S": 0.03, "NVIDIA RTX 6000 Ada Generation": 0.03, "NVIDIA A100-SXM4-80GB": 0.02},
		Outage:          0.03,
		NotDelivering:   0.04,
		MaxTriesPerRef:  3,
		FailedJobSecond: model.Setup + model.Tests,
	}
}

// runnerImage is the pinned runner image the simulated pods start; the
// fake ignores it, Provision requires a digest.
const runnerImage = "ghcr.io/actions/actions-runner:2.323.0@sha256:831a2607a2618e4b79d9323b4c72330f3861768a061c2b92a845e9d214d80e5b"

var model = durations{Boot: 80, Proof: 35, Setup: 120, Tests: 600, Cleanup: 20}

// Policy is gpugate, one of its ablations, or the policy of a tool an
// adopter would pick instead.
type Policy struct {
	Name    string
	Premium bool // only the premium and A100 tiers
	NoReuse bool
	NoStop  bool // no early stop after consecutive startup failures
	NoProof bool // the runner registers without proving CUDA
	// Cheapest orders every allowed type by price, cheapest first, with no
	// tier reserving a slot (types without a live price last).
	Cheapest bool
	// Attempts bounds the creates of one provisioning: -1 every
	// candidate once, 0 the configuration's max_provision_attempts.
	Attempts int
	// Passes is how often the whole candidate list is tried when no pod
	// came up (0 or 1: once).
	Passes int
	Source string // where the policy's parameters come from
}

// Policies are the simulated policies, in the table's order: gpugate,
// its ablations, then the peers'.
func Policies() []Policy { return slices.Clone(policies) }

var policies = []Policy{
	{Name: "gpugate"},
	{Name: "always premium tier", Premium: true},
	{Name: "no gate reuse", NoReuse: true},
	{Name: "no early stop", NoStop: true},
	{Name: "no smoke proof", NoProof: true},
	// SkyPilot's auto-failover: the cheapest choice first, then the next
	// best on a capacity or quota failure, each once; --retry-until-up is
	// off by default, so one pass. A task's setup runs on whatever came up
	// (no proof before the job), and nothing knows a merge ref was tested.
	{Name: "SkyPilot-like", NoProof: true, NoReuse: true, NoStop: true, Cheapest: true, Attempts: -1, Passes: 1,
		Source: "docs.skypilot.co/en/stable/examples/auto-failover.html (auto-failover; retry_until_up off by default)"},
	// dstack: offers in price order, at most DSTACK_SERVER_MAX_OFFERS_TRIED
	// (25) per job, the next offer on a provisioning error, and
	// retry on_events [no-capacity] trying the offers again; no CUDA proof
	// before the job, no gate reuse.
	{Name: "dstack-like", NoProof: true, NoReuse: true, NoStop: true, Cheapest: true, Attempts: 25, Passes: 2,
		Source: "dstackai/dstack PR #2387 (DSTACK_SERVER_MAX_OFFERS_TRIED, 25), PR #2443 (next offer on error), docs: retry on_events no-capacity"},
}

// runWorld is one run's draw.
type runWorld struct {
	stockOut, proofFail map[string]bool
	outage, dead        bool
}

func draw(seed int64, ref, try int, m FailureModel, gpus []string) runWorld {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%d/%d", seed, ref, try)
	r := rand.New(rand.NewPCG(h.Sum64(), uint64(seed)))
	w := runWorld{stockOut: map[string]bool{}, proofFail: map[string]bool{}}
	for _, g := range gpus { // a fixed order: the draw must not depend on map iteration
		w.stockOut[g] = r.Float64() < m.StockOut[g]
		w.proofFail[g] = r.Float64() < m.ProofFail[g]
	}
	w.outage = r.Float64() < m.Outage
	w.dead = r.Float64() < m.NotDelivering
	return w
}

// tally is one policy's month.
type tally struct {
	PaidRuns, Validated, Failed int
	Dollars, Wasted, Seconds    float64
}

// Report is a simulated month: the table's rows.
type Report struct {
	MergeRefs          int     `json:"merge_refs"`
	RunsPerUpstreamRun float64 `json:"runs_per_upstream_run"`
	Seed               int64   `json:"seed"`
	Policies           []Row   `json:"policies"` // the baselines and gpugate, then the oracle lower bound
}

// Row is one policy's month.
type Row struct {
	Name              string  `json:"name"`
	PaidRunsPerRef    float64 `json:"paid_runs_per_ref"`
	USDPerValidated   float64 `json:"usd_per_validated"`
	USDWasted         float64 `json:"usd_wasted"` // paid time on rejected candidates
	PaidSecondsPerRun float64 `json:"paid_seconds_per_run"`
	Validated         int     `json:"validated"`
	FailedGates       int     `json:"failed_gates"`
	Source            string  `json:"source,omitempty"` // a peer policy's documentation
}

// Options are a simulated month's parameters.
type Options struct {
	MergeRefs          int          // tested merge refs in the month
	RunsPerUpstreamRun float64      // GPU-gate runs started per upstream CI run before reuse, at least 1
	Seed               int64        // the failure model's draw
	Model              FailureModel // LoadModel's; the zero value is DefaultModel
}

// ErrOptions marks Options a month cannot be simulated with; ErrModel a
// failure model that is not one.
var (
	ErrOptions = errors.New("econ: invalid simulation options")
	ErrModel   = errors.New("econ: invalid failure model")
)

// Simulate runs the month for every policy, prints the table to out and
// returns its rows.
func Simulate(ctx context.Context, o Options, out io.Writer) (*Report, error) {
	if o.MergeRefs <= 0 || o.RunsPerUpstreamRun < 1 {
		return nil, fmt.Errorf("%w: the merge refs must be positive and the runs per upstream run at least 1 (got %d, %g)", ErrOptions, o.MergeRefs, o.RunsPerUpstreamRun)
	}
	base, _, gpus, err := simConfig()
	if err != nil {
		return nil, err
	}
	m := o.Model
	if m.MaxTriesPerRef == 0 && m.StockOut == nil && m.ProofFail == nil && m.Outage == 0 && m.NotDelivering == 0 && m.FailedJobSecond == 0 {
		m = DefaultModel()
	}
	if m.MaxTriesPerRef < 1 {
		return nil, fmt.Errorf("%w: max_tries_per_ref must be at least 1", ErrModel)
	}
	results := make([]tally, len(policies))
	var wg sync.WaitGroup
	errs := make([]error, len(policies))
	for i, p := range policies {
		wg.Go(func() { results[i], errs[i] = simulatePolicy(ctx, o, base, m, gpus, p) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	oracle := oracleBound(o, base, m, gpus)
	fmt.Fprintf(out, "simulated month: %d tested merge refs, %.1f GPU-gate runs started per upstream CI run, seed %d\n", o.MergeRefs, o.RunsPerUpstreamRun, o.Seed)
	fmt.Fprintf(out, "failure model: stock-outs and CUDA-proof failures per GPU type, provider outage %.0f%% of runs, provider not delivering runners %.0f%% of runs, up to %d tries per ref\n",
		m.Outage*100, m.NotDelivering*100, m.MaxTriesPerRef)
	fmt.Fprintf(out, "paid-time model: boot %.0f s, proof %.0f s, job setup %.0f s, tests %.0f s, cleanup %.0f s\n\n", model.Boot, model.Proof, model.Setup, model.Tests, model.Cleanup)
	fmt.Fprintf(out, "%-20s %13s %12s %9s %11s %10s %13s\n", "policy", "paid runs/ref", "$/validated", "$ wasted", "paid s/run", "validated", "failed gates")
	doc := &Report{MergeRefs: o.MergeRefs, RunsPerUpstreamRun: o.RunsPerUpstreamRun, Seed: o.Seed}
	row := func(name, source string, t tally) {
		r := Row{Name: name, Source: source, PaidRunsPerRef: ratio(float64(t.PaidRuns), float64(o.MergeRefs)), USDPerValidated: ratio(t.Dollars, float64(t.Validated)),
			USDWasted: t.Wasted, PaidSecondsPerRun: ratio(t.Seconds, float64(t.PaidRuns)), Validated: t.Validated, FailedGates: t.Failed}
		doc.Policies = append(doc.Policies, r)
		fmt.Fprintf(out, "%-20s %13.2f %12.4f %9.4f %11.0f %6d/%-3d %13d\n", r.Name, r.PaidRunsPerRef, r.USDPerValidated, r.USDWasted, r.PaidSecondsPerRun, r.Validated, o.MergeRefs, r.FailedGates)
	}
	for i, p := range policies {
		row(p.Name, p.Source, results[i])
	}
	row("oracle lower bound", "", oracle)
	fmt.Fprintln(out, "\n$ wasted: paid time on rejected candidates. failed gates: red checks a maintainer saw before a re-run.")
	for _, p := range policies {
		if p.Source != "" {
			fmt.Fprintf(out, "%s: %s\n", p.Name, p.Source)
		}
	}
	return doc, nil
}

// simConfig is the bundled configuration, the failure model and the GPU
// types in a fixed order.
func simConfig() (runpod.Config, FailureModel, []string, error) {
	base, err := runpod.LoadConfig(runpod.ExampleConfig)
	if err != nil {
		return runpod.Config{}, FailureModel{}, nil, err
	}
	var gpus []string
	for _, t := range base.Tiers {
		gpus = append(gpus, t.GPUTypes...)
	}
	return base, DefaultModel(), gpus, nil
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func deliveries(seed int64, ref int, per float64) int {
	n := int(per)
	h := fnv.New64a()
	fmt.Fprintf(h, "deliveries/%d/%d", seed, ref)
	if rand.New(rand.NewPCG(h.Sum64(), 7)).Float64() < per-float64(n) {
		n++
	}
	return n
}

// simulatePolicy runs the month for one policy.
func simulatePolicy(ctx context.Context, o Options, base runpod.Config, m FailureModel, gpus []string, p Policy) (tally, error) {
	cfg := base
	cfg.StartupPoll, cfg.StartupTimeout = time.Millisecond, 10*time.Second
	if p.Premium {
		cfg.Tiers = slices.DeleteFunc(slices.Clone(cfg.Tiers), func(t runpod.Tier) bool { return t.Name == "cost-preferred" })
	}
	if p.NoStop {
		cfg.MaxConsecutiveStartupFailures = 0
	}
	checks := gatetest.NewChecks()
	var t tally
	for ref := range o.MergeRefs {
		head := fmt.Sprintf("%040x", 2*ref+1)
		merge := fmt.Sprintf("%040x", 2*ref+2)
		validated := false
		try := 0
		for range deliveries(o.Seed, ref, o.RunsPerUpstreamRun) {
			if !p.NoReuse {
				if d := gate.LookupReuse(ctx, checks, head, merge, gate.DefaultCheckName); d.Reuse {
					continue
				}
			}
			ok, err := oneRun(ctx, o, cfg, m, gpus, p, ref, try, &t)
			if err != nil {
				return t, err
			}
			try++
			kind := gate.KindFailed
			if ok {
				kind, validated = gate.KindPaid, true
			}
			// A simulated head has no pull request whose label to re-read.
			if _, err := gate.Publish(ctx, nil, checks, 0, "", gate.Report{HeadSHA: head, ID: gate.ExternalID{Ref: merge, Kind: kind}, Paid: &gate.PaidEvidence{TestsPassed: ok}}, time.Unix(int64(ref), 0)); err != nil {
				return t, err
			}
		}
		// A failed gate is re-run by a maintainer, up to the limit.
		for !validated && try < m.MaxTriesPerRef {
			ok, err := oneRun(ctx, o, cfg, m, gpus, p, ref, try, &t)
			if err != nil {
				return t, err
			}
			try++
			validated = ok
		}
		if validated {
			t.Validated++
		}
	}
	return t, nil
}

// oneRun provisions, watches and cleans up one gate run on a fresh fake.
func oneRun(ctx context.Context, o Options, cfg runpod.Config, m FailureModel, gpus []string, p Policy, ref, try int, t *tally) (bool, error) {
	w := draw(o.Seed, ref, try, m, gpus)
	fake := runpodtest.New(runpodtest.WithSchedule(time.Millisecond, time.Millisecond))
	api, err := fake.NewClient(rest.WithRetryPolicy(rest.RetryPolicy{Deadline: 5 * time.Second, MaxAttempts: 2, RequestTimeout: 5 * time.Second,
		InitialInterval: time.Millisecond, MaxInterval: time.Millisecond, Multiplier: 1}))
	if err != nil {
		return false, err
	}
	reg := fake.NewRegistry()
	reg.SetProofTime(time.Millisecond)
	for _, g := range gpus {
		if w.stockOut[g] {
			fake.SetStock(g, 0)
		}
		if (w.proofFail[g] && !p.NoProof) || w.dead {
			reg.FailProofOn(g)
		}
	}
	if w.outage {
		fake.AddFault(runpodtest.Fault{Method: "POST", Path: "/v2/pods", Status: 503, Times: 1000})
	}
	plan, _, err := runpod.PlanFromCatalog(ctx, api, cfg) // an unreadable catalog plans the static tiers
	if err != nil {
		return false, err
	}
	if p.Cheapest {
		plan = slices.Clone(plan)
		slices.SortStableFunc(plan, func(a, b runpod.Candidate) int {
			switch {
			case a.Price == b.Price:
				return 0
			case a.Price == 0: // no live price: after every priced offer
				return 1
			case b.Price == 0:
				return -1
			case a.Price < b.Price:
				return -1
			}
			return 1
		})
	}
	switch {
	case p.Attempts < 0:
		cfg.MaxProvisionAttempts = len(plan)
	case p.Attempts > 0:
		cfg.MaxProvisionAttempts = p.Attempts
	}
	tmpl := runpod.PodTemplate{Image: runnerImage, RunnerPrefix: fmt.Sprintf("sim-%d-%d", ref, try),
		Owner: runpod.Ownership{Repository: "example/gpu-project", Workflow: "runpod-gpu-test.yml", RunID: int64(ref + 1), RunAttempt: try + 1}}
	res, _ := runpod.Provision(ctx, runpod.Deps{API: api, Registry: reg, Log: slog.New(slog.DiscardHandler)}, cfg, plan, tmpl)
	attempts := res.Attempts
	for pass := 2; pass <= p.Passes && res.PodID == ""; pass++ {
		tmpl.RunnerPrefix = fmt.Sprintf("sim-%d-%d-p%d", ref, try, pass)
		res, _ = runpod.Provision(ctx, runpod.Deps{API: api, Registry: reg, Log: slog.New(slog.DiscardHandler)}, cfg, plan, tmpl)
		attempts = append(attempts, res.Attempts...)
	}
	paid := false
	for _, a := range attempts {
		if a.PodID == "" {
			continue
		}
		paid = true
		var secs float64
		switch a.Outcome {
		case runpod.OutcomeAccepted:
			continue
		case runpod.OutcomeExited:
			secs = model.Boot + model.Proof
		default:
			secs = model.Boot
		}
		t.Seconds += secs
		t.Dollars += secs * a.HourlyPrice / 3600
		t.Wasted += secs * a.HourlyPrice / 3600
	}
	if paid {
		t.PaidRuns++
	}
	if res.PodID == "" {
		t.Failed++
		return false, nil
	}
	// The accepted runner takes the GPU job. Without the proof a broken
	// host is only found by the job, which fails.
	broken := p.NoProof && w.proofFail[res.GPUTypeID]
	prog := &runpodtest.Progress{}
	conclusion := "success"
	if broken {
		conclusion = "failure"
	}
	prog.Set(runpod.JobProgress{TestsStarted: true, Completed: true, Conclusion: conclusion})
	wres, werr := runpod.Watch(ctx, runpod.WatchDeps{API: api, Progress: prog, Log: slog.New(slog.DiscardHandler)}, res.PodID,
		runpod.WatchOptions{SetupDeadline: 5 * time.Second, Lifetime: 10 * time.Second, Poll: time.Millisecond, StartGrace: time.Second})
	if !wres.Deleted {
		if err := runpod.Delete(ctx, api, res.PodID); err != nil {
			return false, fmt.Errorf("econ: simulation cleanup of %s: %w", res.PodID, err)
		}
	}
	if n := len(fake.Running()); n != 0 {
		return false, fmt.Errorf("econ: simulation left %d pods running", n)
	}
	secs := model.Boot + model.Proof + model.Setup + model.Tests + model.Cleanup
	if broken {
		secs = model.Boot + model.Proof + m.FailedJobSecond + model.Cleanup
	}
	t.Seconds += secs
	t.Dollars += secs * res.HourlyPrice / 3600
	ok := werr == nil && !broken
	if !ok {
		t.Failed++
	}
	return ok, nil
}

// oracleBound is the cheapest compatible in-stock GPU for each ref, first
// try, no waste, one run.
func oracleBound(o Options, base runpod.Config, m FailureModel, gpus []string) tally {
	prices := map[string]float64{}
	for _, g := range runpodtest.DefaultGPUs() {
		prices[g.ID] = g.SecurePrice
	}
	var t tally
	for ref := range o.MergeRefs {
		w := draw(o.Seed, ref, 0, m, gpus)
		best := 0.0
		for _, g := range gpus {
			if w.stockOut[g] || w.proofFail[g] || prices[g] == 0 || (base.MaxHourlyPrice > 0 && prices[g] > base.MaxHourlyPrice) {
				continue
			}
			if best == 0 || prices[g] < best {
				best = prices[g]
			}
		}
		if best == 0 {
			continue
		}
		secs := model.Boot + model.Proof + model.Setup + model.Tests + model.Cleanup
		t.PaidRuns++
		t.Validated++
		t.Seconds += secs
		t.Dollars += secs * best / 3600
	}
	return t
}
