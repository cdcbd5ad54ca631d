package runpod

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpugate/gpugate/gate"
	"github.com/gpugate/gpugate/internal/cli"
	"github.com/gpugate/gpugate/internal/textlimit"
	"github.com/gpugate/gpugate/internal/wait"
	"github.com/gpugate/gpugate/runpod/rest"
)

// RunnerRegistry mints single-use runner registrations and reports whether
// a runner is online. The go-github adapter is runpodgh.Registry;
// runpodtest.Registry is the fake.
type RunnerRegistry interface {
	// MintJIT returns a single-use JIT runner config for a runner with this
	// exact name and labels.
	MintJIT(ctx context.Context, name string, labels []string) (rest.Secret, error)
	// Runner looks a runner up by its exact name. found is false when no
	// runner has that name (yet).
	Runner(ctx context.Context, name string) (r Runner, found bool, err error)
	// Remove deletes the registration of the runner with this exact name.
	// No such runner is not an error: a one-job runner removes itself
	// after its job.
	Remove(ctx context.Context, name string) error
}

// Runner is one self-hosted runner registration.
type Runner struct {
	ID     int64 // GitHub's runner ID; 0 where unknown
	Name   string
	Online bool
	Busy   bool
	Labels []string
}

// PRState reports the state of the pull request whose work is being
// provisioned. An error is unknown state, and unknown is never obsolete.
type PRState interface {
	Current(ctx context.Context) (PR, error)
}

// PR is a pull request's state.
type PR struct {
	Open    bool
	HeadSHA string
	Labels  []string
}

// Ownership identifies the workflow run that owns a pod. Its tags go on
// every pod as environment variables, and the reaper reclaims only pods
// whose tags and name agree.
type Ownership struct {
	Repository string // owner/name
	Workflow   string // workflow path, e.g. .github/workflows/runpod-gpu-test.yml, or GITHUB_WORKFLOW_REF (see Tags)
	RunID      int64
	RunAttempt int
}

// Environment variables carrying ownership and attempt parameters.
const (
	TagRepository = "GPUGATE_REPOSITORY"
	TagWorkflow   = "GPUGATE_WORKFLOW"
	TagRunID      = "GPUGATE_RUN_ID"
	TagRunAttempt = "GPUGATE_RUN_ATTEMPT"
	EnvRunnerName = "GPUGATE_RUNNER_NAME" // also the runner's label
	EnvAttempt    = "GPUGATE_ATTEMPT"     // candidate number N of <prefix>-cN
	EnvGPUType    = "GPUGATE_GPU_TYPE"    // the requested GPU type
	EnvMinVRAMGB  = "GPUGATE_MIN_VRAM_GB" // for the on-pod CUDA proof
	EnvMinCUDA    = "GPUGATE_MIN_CUDA"    // the requested CUDA floor, for audit (RunPod enforces it at placement; the proof its tiers)
	EnvJITConfig  = "RUNNER_JIT_CONFIG"   // the single-use JIT config (secret)
)

// Prefix is the default runner prefix: gpugate-<run ID>-<run attempt>.
func (o Ownership) Prefix() string {
	return fmt.Sprintf("gpugate-%d-%d", o.RunID, o.RunAttempt)
}

// workflowPath reduces the ways GitHub names a workflow file to its path
// in the repository, .github/workflows/<file>: GITHUB_WORKFLOW_REF and
// some run objects say owner/repo/.github/workflows/<file>@<ref>, people
// say <file>. repo is the owner/repo the name carries ("" when none).
func workflowPath(name string) (path, repo string) {
	const dir = ".github/workflows/"
	i := strings.Index(name, dir)
	if i > 0 {
		repo, name = strings.TrimSuffix(name[:i], "/"), name[i:]
	}
	name, _, _ = strings.Cut(name, "@")
	if i < 0 && !strings.Contains(name, "/") && name != "" {
		name = dir + name
	}
	return name, repo
}

// Tags returns the ownership environment variables. The workflow is
// tagged as its path in the repository, .github/workflows/<file>,
// however it was given: a bare file name, or GITHUB_WORKFLOW_REF's
// owner/repo/.github/workflows/<file>@<ref>.
func (o Ownership) Tags() map[string]string {
	wf, _ := workflowPath(o.Workflow)
	return map[string]string{
		TagRepository: o.Repository,
		TagWorkflow:   wf,
		TagRunID:      strconv.FormatInt(o.RunID, 10),
		TagRunAttempt: strconv.Itoa(o.RunAttempt),
	}
}

// PodTemplate is what every candidate's pod is created from. Retries reuse
// it unchanged: nothing is rebuilt between candidates.
type PodTemplate struct {
	Image        string            // resolved to a digest before provisioning
	RunnerPrefix string            // label prefix; default Owner.Prefix()
	Owner        Ownership         // tags the reaper relies on
	Env          map[string]string // further non-secret parameters: the CUDA proof's (smoke.PodStartup.Env), whose tier table Provision checks the floors against
	Args         rest.Secret       // the startup command
	Disk         int               // container disk, GB
	Ports        []string

	// KeepFailed is a debug dispatch's keep_failed_pods: a candidate that
	// failed its startup (exited, lost its runtime, timed out) is kept for
	// inspection, still billing, instead of deleted, and listed in
	// Result.RetainedPods; publish Result.RetentionRecord so the reaper spares
	// it. A wrong GPU, an obsolete PR or a cancelled run still delete.
	KeepFailed bool
}

// Deps are Provision's outside world.
type Deps struct {
	API      PodAPI
	Registry RunnerRegistry
	PR       PRState // nil: a manual validation, never obsolete
	// LocalLabel marks a pull request validated on a maintainer's GPU
	// (default gate.DefaultLocalLabel): read again before every create,
	// since it can be added after authorization, it stops provisioning
	// before anything more is bought.
	LocalLabel string
	Head       string                                                    // the authorized PR head SHA the work is for
	Log        *slog.Logger                                              // nil discards
	Delete     func(ctx context.Context, api PodAPI, podID string) error // nil: Delete

	// KeyRefusal and ForbiddenGPU tell a 403 that refuses the API key
	// (provisioning stops) from one about a GPU type or its pool (only
	// that candidate is skipped); nil: DefaultKeyRefusalPattern and
	// DefaultForbiddenGPUPattern.
	KeyRefusal, ForbiddenGPU *regexp.Regexp
}

// Outcome is what became of one attempt.
type Outcome string

// Attempt outcomes.
const (
	OutcomeAccepted    Outcome = "accepted"
	OutcomeNoCapacity  Outcome = "no-capacity"  // nothing created
	OutcomeForbidden   Outcome = "forbidden"    // nothing created
	OutcomeRejected    Outcome = "rejected"     // a non-capacity 400: nothing created
	OutcomeCreateError Outcome = "create-error" // retries ran out: nothing created
	OutcomeGPUMismatch Outcome = "gpu-mismatch" // created on the wrong or no GPU, deleted
	OutcomeExited      Outcome = "exited"       // EXITED/ERROR/TERMINATED before the runner came online
	OutcomeLostRuntime Outcome = "lost-runtime" // runtime vanished after boot
	OutcomeTimeout     Outcome = "timeout"      // startup_timeout passed
	OutcomeGone        Outcome = "gone"         // the pod disappeared
	OutcomeObsolete    Outcome = "obsolete"     // the PR moved or closed
	OutcomeCanceled    Outcome = "canceled"     // the caller's context ended
	OutcomeKeyRefused  Outcome = "key-refused"  // a 401, or a 403 not about the GPU type: nothing created, provisioning stops
	OutcomeOverCeiling Outcome = "over-ceiling" // the created pod's own price is above max_hourly_price: deleted
)

// Attempt records one candidate.
type Attempt struct {
	N             int       `json:"n"`
	Name          string    `json:"name"` // runner name and label, <prefix>-cN
	Candidate     Candidate `json:"candidate"`
	PodID         string    `json:"pod_id,omitempty"`
	AssignedGPU   string    `json:"assigned_gpu,omitempty"`
	Outcome       Outcome   `json:"outcome"`
	Reason        string    `json:"reason,omitempty"`
	Seconds       float64   `json:"seconds"`            // create to acceptance or confirmed deletion
	HourlyPrice   float64   `json:"hourly_price"`       // the pod's cost, USD/hour
	EstimatedCost float64   `json:"estimated_cost"`     // Seconds at HourlyPrice: an estimate, not an invoice
	Retained      bool      `json:"retained,omitempty"` // kept for debugging (KeepFailed): still billing after Seconds
}

// settle records the attempt's paid seconds since its create (start) and
// their estimated cost at the pod's hourly price.
func (a *Attempt) settle(start time.Time) {
	a.Seconds = time.Since(start).Seconds()
	a.EstimatedCost = a.Seconds / 3600 * a.HourlyPrice
}

// created reports whether the attempt created a pod (and so paid).
func (a Attempt) created() bool { return a.PodID != "" }

// Result is what Provision did. It is filled in on failure too.
type Result struct {
	Pod            *rest.Pod `json:"-"`
	PodID          string    `json:"pod_id,omitempty"`
	Label          string    `json:"label,omitempty"` // the runner label the GPU job targets
	GPUTypeID      string    `json:"gpu_type_id,omitempty"`
	Tier           string    `json:"tier,omitempty"`
	HourlyPrice    float64   `json:"hourly_price,omitempty"`
	StartupSeconds float64   `json:"startup_seconds,omitempty"`
	Attempts       []Attempt `json:"attempts"`
	RejectedCost   float64   `json:"rejected_cost"`         // estimated paid cost of every rejected candidate
	LivePodID      string    `json:"live_pod_id,omitempty"` // the ID of a pod whose deletion was not confirmed; only ever an ID

	// UnresolvedPodNames name pods known only by their names: creates
	// whose outcome is unknown (a lost response, a 5xx) and whose pods
	// the listing did not show (it failed, or lagged behind the create).
	// Each may be running and billing. Cleanup resolves them by listing
	// (DeleteByName) before it claims anything.
	UnresolvedPodNames []string `json:"unresolved_pod_names,omitempty"`

	// Snapshot is the accepted pod's record as provisioning last saw it
	// (its environment left out): the cost report's fallback when the
	// read before deletion fails.
	Snapshot *rest.Pod `json:"pod_snapshot,omitempty"`
}

// RetainedPods lists the failed candidates kept for debugging
// (PodTemplate.KeepFailed), still billing, in attempt order.
func (r Result) RetainedPods() []string {
	var ids []string
	for _, a := range r.Attempts {
		if a.Retained {
			ids = append(ids, a.PodID)
		}
	}
	return ids
}

// RetentionRecord names the pods this run retained for debugging, for the
// artifact the reaper reads (ok is false when none was retained). Only a
// record naming a pod spares it, and only for a debug dispatch's run.
func (r Result) RetentionRecord(owner Ownership) (RetentionRecord, bool) {
	ids := r.RetainedPods()
	if len(ids) == 0 {
		return RetentionRecord{}, false
	}
	return RetentionRecord{RunID: owner.RunID, Attempt: owner.RunAttempt, PodIDs: ids}, true
}

// Provision buys the cheapest candidate that proves it can run CUDA: one
// pod at a time, in plan order, each with a fresh runner name and label
// <prefix>-cN and a single-use JIT config. It accepts only a RUNNING pod
// with runtime present whose own runner is online (the smoke proof runs
// before registration, so online means proven). A rejected or timed-out
// pod is deleted at once before the next candidate. Before anything is
// bought it refuses a template it cannot provision with (ErrTemplate) and
// floors of cfg that admit hosts the template's CUDA proof rejects
// (ErrFloor, Config.CheckFloors). See the package documentation for the
// stop rules.
func Provision(ctx context.Context, deps Deps, cfg Config, plan []Candidate, tmpl PodTemplate) (Result, error) {
	p := provisioner{deps: deps, cfg: cfg, tmpl: tmpl, log: deps.Log}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.deps.Delete == nil {
		p.deps.Delete = Delete
	}
	if err := p.check(plan); err != nil {
		return Result{}, err
	}
	if p.tmpl.RunnerPrefix == "" {
		p.tmpl.RunnerPrefix = tmpl.Owner.Prefix()
	}
	err := p.run(ctx, plan)
	return p.res, err
}

type provisioner struct {
	deps Deps
	cfg  Config
	tmpl PodTemplate
	log  *slog.Logger
	res  Result

	createSpent time.Duration // time spent in create calls so far (requests and their sleeps)
}

// Provisioning outcomes (see Provision).
var (
	// ErrExhausted: max_provision_attempts candidates (or the whole plan)
	// were tried and none was accepted.
	ErrExhausted = errors.New("runpod: provisioning attempts exhausted")
	// ErrKeyRefused: a create answered 401, or a 403 that is not about
	// the GPU type: the key itself is refused, so provisioning stops at
	// once rather than sending it to every candidate.
	ErrKeyRefused = errors.New("runpod: the API key was refused")
	// ErrCreateDeadline: the create requests of one provisioning, with
	// their pauses, used up Config.CreateDeadline.
	ErrCreateDeadline = errors.New("runpod: the create deadline is spent")
	// ErrStartupFailures: max_consecutive_startup_failures candidates in a
	// row were created but never came online; the provider is not
	// delivering runners.
	ErrStartupFailures = errors.New("runpod: consecutive startup failures")
	// ErrObsolete: the pull request moved or closed, so the work it asked
	// for is no longer wanted (Provision and Watch).
	ErrObsolete = errors.New("runpod: work is obsolete")
)

// ErrTemplate is returned by Provision, before anything is bought, for
// dependencies or a pod template it cannot provision with.
var ErrTemplate = errors.New("runpod: cannot provision with this template")

func (p *provisioner) check(plan []Candidate) error {
	switch {
	case p.deps.API == nil || p.deps.Registry == nil:
		return fmt.Errorf("%w: Provision needs Deps.API and Deps.Registry", ErrTemplate)
	case p.tmpl.Image == "":
		return fmt.Errorf("%w: Provision needs PodTemplate.Image", ErrTemplate)
	case p.tmpl.Owner.Repository == "" || p.tmpl.Owner.RunID == 0:
		return fmt.Errorf("%w: Provision needs PodTemplate.Owner (repository and run ID): the reaper relies on those tags", ErrTemplate)
	case len(plan) == 0:
		return fmt.Errorf("%w: the candidate plan is empty", ErrExhausted)
	}
	if err := p.cfg.Validate(); err != nil {
		return err
	}
	if err := checkProofFloors(p.cfg, p.tmpl); err != nil {
		return err
	}
	// Every attempt's request has the same variables: one that could never
	// be created stops here rather than at the first attempt.
	if err := p.request(1, plan[0], "", "").CheckEnv(); err != nil {
		return fmt.Errorf("%w: PodTemplate.Env: %w", ErrTemplate, err)
	}
	return nil
}

func (p *provisioner) run(ctx context.Context, plan []Candidate) error {
	budget := min(len(plan), p.cfg.MaxProvisionAttempts)
	consecutive := 0
	allRejected := true
	var lastRejection error
	for i := range budget {
		if obsolete, why := p.obsolete(ctx); obsolete {
			return fmt.Errorf("%w: %s; no pod was created for candidate %d", ErrObsolete, why, i+1)
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("runpod: provisioning stopped before candidate %d: %w", i+1, err)
		}
		a, err := p.attempt(ctx, i+1, plan[i])
		p.res.Attempts = append(p.res.Attempts, a)
		if a.Outcome != OutcomeAccepted && a.created() {
			p.res.RejectedCost += a.EstimatedCost
		}
		if a.Outcome != OutcomeRejected {
			allRejected = false
		} else {
			lastRejection = err
		}
		switch {
		case a.Outcome == OutcomeAccepted:
			return nil
		case errors.Is(err, ErrNotDeleted), errors.Is(err, rest.ErrInsufficientBalance), errors.Is(err, rest.ErrInvalidRequest),
			errors.Is(err, ErrObsolete), errors.Is(err, ErrKeyRefused), errors.Is(err, ErrCreateDeadline), a.Outcome == OutcomeCanceled:
			return err
		case a.Outcome == OutcomeOverCeiling:
			// A price, not a startup failure: the next candidate may be cheaper.
		case a.created():
			consecutive++
			if p.cfg.MaxConsecutiveStartupFailures > 0 && consecutive >= p.cfg.MaxConsecutiveStartupFailures {
				return fmt.Errorf("%w: %d candidates in a row were created but never came online; the provider is not delivering runners (USD %.4f spent on rejected candidates)",
					ErrStartupFailures, consecutive, p.res.RejectedCost)
			}
		}
	}
	if allRejected && lastRejection != nil {
		return fmt.Errorf("runpod: every candidate refused the request with a 400, so the request itself is wrong: %w", lastRejection)
	}
	return fmt.Errorf("%w: %d attempt(s) of %d allowed, none accepted (USD %.4f spent on rejected candidates)", ErrExhausted, budget, p.cfg.MaxProvisionAttempts, p.res.RejectedCost)
}

// obsolete checks the pull request; unknown state is never obsolete.
func (p *provisioner) obsolete(ctx context.Context) (bool, string) {
	if p.deps.PR == nil {
		return false, ""
	}
	pr, err := p.deps.PR.Current(ctx)
	switch {
	case err != nil:
		p.log.LogAttrs(ctx, slog.LevelWarn, "provision.pr_state_unknown", slog.String("error", err.Error()))
		return false, ""
	case !pr.Open:
		return true, "the pull request was closed"
	case p.deps.Head != "" && pr.HeadSHA != p.deps.Head:
		return true, fmt.Sprintf("the pull request head moved from %s to %s", textlimit.ShortSHA(p.deps.Head), textlimit.ShortSHA(pr.HeadSHA))
	case slices.Contains(pr.Labels, cmp.Or(p.deps.LocalLabel, gate.DefaultLocalLabel)):
		return true, fmt.Sprintf("the pull request carries %q: it was validated on a maintainer's GPU", cmp.Or(p.deps.LocalLabel, gate.DefaultLocalLabel))
	}
	return false, ""
}

func (p *provisioner) request(n int, c Candidate, name string, jit rest.Secret) rest.CreatePodRequest {
	env := map[string]string{}
	maps.Copy(env, p.tmpl.Env)
	maps.Copy(env, p.tmpl.Owner.Tags())
	env[EnvRunnerName] = name
	env[EnvAttempt] = strconv.Itoa(n)
	env[EnvGPUType] = c.GPUTypeID
	env[EnvMinVRAMGB] = strconv.Itoa(p.cfg.MinVRAMGB)
	env[EnvMinCUDA] = p.cfg.MinCUDAVersion
	return rest.CreatePodRequest{
		Name:      name,
		Image:     p.tmpl.Image,
		Env:       env,
		SecretEnv: map[string]rest.Secret{EnvJITConfig: jit},
		Args:      p.tmpl.Args,
		Disk:      p.tmpl.Disk,
		Cloud:     p.cfg.Cloud,
		Ports:     p.tmpl.Ports,
		GPU:       rest.GPURequest{ID: c.GPUTypeID, Count: 1, MinCUDAVersion: p.cfg.MinCUDAVersion},
	}
}

func (p *provisioner) event(ctx context.Context, level slog.Level, msg string, a Attempt, extra ...slog.Attr) {
	attrs := []slog.Attr{
		slog.Int("attempt", a.N), slog.String("name", a.Name), slog.String("gpu", a.Candidate.GPUTypeID),
		slog.String("tier", a.Candidate.Tier),
	}
	if a.PodID != "" {
		attrs = append(attrs, slog.String("pod", a.PodID), slog.Float64("cost_per_hr", a.HourlyPrice))
	}
	p.log.LogAttrs(ctx, level, msg, append(attrs, extra...)...)
}

// attempt runs one candidate to acceptance or to a confirmed deletion.
func (p *provisioner) attempt(ctx context.Context, n int, c Candidate) (Attempt, error) {
	name := fmt.Sprintf("%s-c%d", p.tmpl.RunnerPrefix, n)
	a := Attempt{N: n, Name: name, Candidate: c}
	jit, err := p.deps.Registry.MintJIT(ctx, name, []string{name})
	if err != nil {
		a.Outcome, a.Reason = OutcomeCreateError, "minting the JIT runner config failed: "+err.Error()
		p.event(ctx, slog.LevelWarn, "provision.jit_failed", a, slog.String("error", err.Error()))
		if ctx.Err() != nil {
			a.Outcome = OutcomeCanceled
		}
		return a, fmt.Errorf("runpod: attempt %d: mint JIT config: %w", n, err)
	}
	a, err = p.launch(ctx, a, jit)
	if a.Outcome != OutcomeAccepted && !a.Retained {
		p.deregister(ctx, a)
	}
	return a, err
}

// deregisterTimeout bounds the removal of a rejected attempt's runner.
const deregisterTimeout = 30 * time.Second

// deregister removes the runner registration a rejected attempt minted,
// so no offline registration is left behind (GitHub would drop it only a
// day later). It is best effort: a failure is logged, and the runner's
// label is the attempt's own, so no job can land on it.
func (p *provisioner) deregister(ctx context.Context, a Attempt) {
	if ctx.Err() != nil {
		// A cancelled step has seconds before it is killed: they belong
		// to the pod's deletion and the result, not to this tidying.
		p.event(ctx, slog.LevelInfo, "provision.runner_left", a, slog.String("why", "provisioning was cancelled; its label is this attempt's own, and GitHub drops it a day after it was last online"))
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deregisterTimeout)
	defer cancel()
	if err := p.deps.Registry.Remove(rctx, a.Name); err != nil {
		p.event(ctx, slog.LevelWarn, "provision.runner_remove_failed", a, slog.String("error", err.Error()),
			slog.String("hint", "its label is this attempt's own, so it takes no job; GitHub drops it a day after it was last online"))
		return
	}
	p.event(ctx, slog.LevelInfo, "provision.runner_removed", a)
}

// launch creates the attempt's pod with its minted runner config and watches
// it to acceptance or to a confirmed deletion.
func (p *provisioner) launch(ctx context.Context, a Attempt, jit rest.Secret) (Attempt, error) {
	n, c, name := a.N, a.Candidate, a.Name
	left := p.cfg.CreateDeadline - p.createSpent
	if left <= 0 {
		a.Outcome, a.Reason = OutcomeCreateError, "the create deadline was spent before this candidate"
		return a, fmt.Errorf("%w: the create requests and their pauses of this provisioning took %s, the whole create_deadline %s; nothing more is requested (candidate %d)",
			ErrCreateDeadline, p.createSpent.Round(time.Millisecond), p.cfg.CreateDeadline, n)
	}
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, left)
	pod, err := p.deps.API.CreatePod(cctx, p.request(n, c, name, jit))
	cancel()
	p.createSpent += time.Since(start)
	if errors.Is(err, rest.ErrCreateUnknown) {
		return p.sweep(ctx, a, start, err)
	}
	if err != nil {
		a.Reason = err.Error()
		switch {
		case errors.Is(err, rest.ErrNoCapacity):
			a.Outcome = OutcomeNoCapacity
		case keyRefused(err, c.GPUTypeID, p.deps.KeyRefusal, p.deps.ForbiddenGPU):
			a.Outcome = OutcomeKeyRefused
			err = fmt.Errorf("%w: attempt %d: %w; no other candidate is asked with the same key: check RUNPOD_API_KEY (its value, its expiry, its permissions)", ErrKeyRefused, n, err)
		case errors.Is(err, rest.ErrForbidden):
			a.Outcome = OutcomeForbidden
		case errors.Is(err, rest.ErrRejected):
			a.Outcome = OutcomeRejected
		case ctx.Err() != nil:
			a.Outcome = OutcomeCanceled
		default:
			a.Outcome = OutcomeCreateError
		}
		p.event(ctx, slog.LevelWarn, "provision.create_failed", a, slog.String("outcome", string(a.Outcome)), slog.String("error", err.Error()))
		return a, err
	}
	a.PodID, a.HourlyPrice = pod.ID, pod.Cost
	if pod.GPU != nil {
		a.AssignedGPU = pod.GPU.ID
	}
	p.event(ctx, slog.LevelInfo, "provision.create", a)
	if pod.GPU == nil || pod.GPU.ID == "" || !p.inTier(c.Tier, pod.GPU.ID) {
		return p.reject(ctx, a, start, OutcomeGPUMismatch, fmt.Sprintf("the pod was assigned GPU %q, outside tier %s", a.AssignedGPU, c.Tier))
	}
	if over, why := p.overCeiling(a.HourlyPrice); over {
		return p.reject(ctx, a, start, OutcomeOverCeiling, why)
	}
	return p.watch(ctx, a, start)
}

// overCeiling checks the pod's own hourly price against max_hourly_price.
// The ceiling is a spending rule, not only a catalog filter: with the
// catalog down the candidates are unpriced, and the created pod's cost is
// the first price known.
func (p *provisioner) overCeiling(price float64) (bool, string) {
	if p.cfg.MaxHourlyPrice > 0 && price > p.cfg.MaxHourlyPrice {
		return true, fmt.Sprintf("the pod costs USD %.4f/hour, above max_hourly_price %.4f", price, p.cfg.MaxHourlyPrice)
	}
	return false, ""
}

// DefaultKeyRefusalPattern recognises a 403 that refuses the API key
// itself (its permissions, its account): checked first, so a refusal that
// mentions a pool of keys is not taken for a GPU's.
var DefaultKeyRefusalPattern = regexp.MustCompile(`(?i)\bapi[ _-]?keys?\b|\btokens?\b|unauthori[sz]ed|\bcredential|\baccount (is |has been )?(suspended|disabled|locked|banned|restricted)|\bpermissions? (for|of) (this|the|your) (key|account)`)

// DefaultForbiddenGPUPattern recognises a 403 about the requested GPU type
// or its pool, which skips only that candidate. A 403 that matches neither
// it nor the candidate's GPU name refuses the key (the OpenAPI example is
// "access denied").
var DefaultForbiddenGPUPattern = regexp.MustCompile(`(?i)\bgpu[ _-]?types?\b|\bthis gpu\b|\b(gpu|machine|instance|node) pools?\b|\brequested pool\b|\b(machine|instance) types?\b|\bdata ?cent(er|re)s?\b|\b(secure|community) cloud\b`)

// keyRefused reports whether a create error refuses the API key rather
// than the candidate: a 401, or a 403 whose text refuses the key
// (keyPattern), or names neither the GPU (its ID, or the ID without its
// vendor words) nor a GPU pool (gpuPattern). Sending that key to every
// other candidate would only repeat the refusal.
func keyRefused(err error, gpuID string, keyPattern, gpuPattern *regexp.Regexp) bool {
	if errors.Is(err, rest.ErrUnauthorized) {
		return true
	}
	var ae *rest.APIError
	if !errors.Is(err, rest.ErrForbidden) || !errors.As(err, &ae) {
		return false
	}
	if keyPattern == nil {
		keyPattern = DefaultKeyRefusalPattern
	}
	if gpuPattern == nil {
		gpuPattern = DefaultForbiddenGPUPattern
	}
	text := ae.Title + " " + ae.Detail + " " + strings.Join(ae.Errors, " ")
	if keyPattern.MatchString(text) {
		return true
	}
	lower := strings.ToLower(text)
	for _, name := range []string{gpuID, strings.TrimPrefix(gpuID, "NVIDIA "), strings.TrimPrefix(gpuID, "NVIDIA GeForce "), strings.TrimPrefix(gpuID, "AMD ")} {
		if len(name) >= 3 && strings.Contains(lower, strings.ToLower(name)) {
			return false
		}
	}
	return !gpuPattern.MatchString(text)
}

func (p *provisioner) inTier(tier, gpu string) bool {
	for _, t := range p.cfg.Tiers {
		if t.Name == tier {
			return slices.Contains(t.GPUTypes, gpu)
		}
	}
	return false
}

// watch polls the pod and, after a RUNNING observation, the registry, every
// startup_poll until acceptance, rejection or startup_timeout.
func (p *provisioner) watch(ctx context.Context, a Attempt, start time.Time) (Attempt, error) {
	deadline := start.Add(p.cfg.StartupTimeout)
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	sawRuntime := false
	for {
		if obsolete, why := p.obsolete(wctx); obsolete {
			a, err := p.reject(ctx, a, start, OutcomeObsolete, why)
			if err == nil {
				err = fmt.Errorf("%w: %s", ErrObsolete, why)
			}
			return a, err
		}
		pod, err := p.deps.API.GetPod(wctx, a.PodID)
		switch {
		case errors.Is(err, rest.ErrNotFound):
			return p.reject(ctx, a, start, OutcomeGone, "the pod disappeared before its runner came online")
		case err != nil:
			// Unknown: never dead, never healthy. Keep polling.
			p.event(ctx, slog.LevelWarn, "provision.observe_unknown", a, slog.String("error", err.Error()))
		case pod.Status.Final():
			return p.reject(ctx, a, start, OutcomeExited, fmt.Sprintf("the pod is %s before its runner came online", pod.Status))
		case pod.Status == rest.StatusRunning && pod.Runtime == nil && sawRuntime:
			return p.reject(ctx, a, start, OutcomeLostRuntime, "the pod lost its runtime after boot")
		case pod.Status == rest.StatusRunning && pod.Runtime != nil:
			sawRuntime = true
			if pod.Cost > 0 {
				a.HourlyPrice = pod.Cost
			}
			if over, why := p.overCeiling(a.HourlyPrice); over {
				return p.reject(ctx, a, start, OutcomeOverCeiling, why)
			}
			r, found, err := p.deps.Registry.Runner(wctx, a.Name)
			if err != nil {
				p.event(ctx, slog.LevelWarn, "provision.registry_unknown", a, slog.String("error", err.Error()))
			} else if found && r.Online && slices.Contains(r.Labels, a.Name) {
				if p.cfg.MaxHourlyPrice > 0 && a.HourlyPrice <= 0 && a.Candidate.Price <= 0 {
					return p.reject(ctx, a, start, OutcomeOverCeiling, fmt.Sprintf("neither the catalog nor the pod reported its price, so max_hourly_price %.4f cannot be held", p.cfg.MaxHourlyPrice))
				}
				return p.accept(ctx, a, start, pod), nil
			}
		}
		if ctx.Err() != nil {
			return p.reject(ctx, a, start, OutcomeCanceled, "the caller stopped provisioning: "+ctx.Err().Error())
		}
		pause := min(p.cfg.StartupPoll, time.Until(deadline))
		if pause <= 0 || wait.For(wctx, pause) != nil {
			if ctx.Err() != nil {
				return p.reject(ctx, a, start, OutcomeCanceled, "the caller stopped provisioning: "+ctx.Err().Error())
			}
			return p.reject(ctx, a, start, OutcomeTimeout, fmt.Sprintf("no online runner within startup_timeout %s", p.cfg.StartupTimeout))
		}
	}
}

func (p *provisioner) accept(ctx context.Context, a Attempt, start time.Time, pod *rest.Pod) Attempt {
	a.Outcome = OutcomeAccepted
	a.settle(start)
	p.res.Pod, p.res.PodID, p.res.Label = pod, pod.ID, a.Name
	p.res.GPUTypeID, p.res.Tier, p.res.HourlyPrice = a.AssignedGPU, a.Candidate.Tier, a.HourlyPrice
	p.res.StartupSeconds = a.Seconds
	snap := *pod
	snap.Env = nil
	p.res.Snapshot = &snap
	p.event(ctx, slog.LevelInfo, "provision.accept", a, slog.Float64("startup_seconds", a.Seconds),
		slog.Float64("rejected_cost", p.res.RejectedCost))
	return a
}

// reject deletes the pod (with a context that outlives the caller's, so a
// cancelled job still cleans up) and records the attempt.
func (p *provisioner) reject(ctx context.Context, a Attempt, start time.Time, outcome Outcome, reason string) (Attempt, error) {
	a.Outcome, a.Reason = outcome, reason
	p.event(ctx, slog.LevelWarn, "provision.reject", a, slog.String("outcome", string(outcome)), slog.String("reason", reason))
	if p.tmpl.KeepFailed && (outcome == OutcomeExited || outcome == OutcomeLostRuntime || outcome == OutcomeTimeout) {
		// A genuine startup failure on a debug dispatch: kept, billing.
		a.settle(start)
		a.Retained = true
		p.event(ctx, slog.LevelWarn, "provision.retain", a, slog.String("reason", "keep_failed_pods: kept for inspection and still billing; delete it when done"))
		return a, nil
	}
	err := p.deps.Delete(context.WithoutCancel(ctx), p.deps.API, a.PodID)
	a.settle(start)
	if err != nil {
		p.res.LivePodID = a.PodID
		p.event(ctx, slog.LevelError, "provision.delete_failed", a, slog.String("error", err.Error()))
		return a, fmt.Errorf("runpod: attempt %d: rejected pod %s could not be deleted, so no further pod is created: %w", a.N, a.PodID, err)
	}
	p.event(ctx, slog.LevelInfo, "provision.delete", a, slog.Float64("seconds", a.Seconds), slog.Float64("estimated_cost", a.EstimatedCost))
	if outcome == OutcomeCanceled {
		return a, fmt.Errorf("runpod: attempt %d: %s", a.N, reason)
	}
	return a, nil
}

// sweep finds and deletes the pod of a create whose outcome is unknown. If
// that cannot be confirmed, nothing more is created.
func (p *provisioner) sweep(ctx context.Context, a Attempt, start time.Time, createErr error) (Attempt, error) {
	a.Outcome, a.Reason = OutcomeCreateError, createErr.Error()
	p.event(ctx, slog.LevelWarn, "provision.create_unknown", a, slog.String("error", createErr.Error()))
	pods, attempts, err := listNamed(context.WithoutCancel(ctx), p.deps.API, a.Name)
	if err != nil {
		// Known only by name: never an ID to delete (a DELETE of the name
		// answers 404, which would "confirm" a pod that is still billing).
		p.res.UnresolvedPodNames = append(p.res.UnresolvedPodNames, a.Name)
		return a, &DeleteError{Name: a.Name, Attempts: attempts, Err: err}
	}
	if len(pods) == 0 {
		// Most likely nothing was created; but a listing may lag behind a
		// create, so the name stays for cleanup to resolve, later.
		p.res.UnresolvedPodNames = append(p.res.UnresolvedPodNames, a.Name)
		p.event(ctx, slog.LevelWarn, "provision.create_unresolved", a, slog.String("why", "the listing shows no pod of this name; cleanup looks again"))
		return a, nil
	}
	// A create retried after a lost response (the first listing did not
	// show the pod yet) may have made two: every one of them goes.
	for _, extra := range pods[1:] {
		if err := p.deps.Delete(context.WithoutCancel(ctx), p.deps.API, extra.ID); err != nil {
			p.res.LivePodID = extra.ID
			p.event(ctx, slog.LevelError, "provision.delete_failed", a, slog.String("pod", extra.ID), slog.String("error", err.Error()))
			a.PodID, a.HourlyPrice = pods[0].ID, pods[0].Cost
			if _, rerr := p.reject(ctx, a, start, OutcomeCreateError, "the create's response was lost; its pods were found by name"); rerr != nil {
				return a, errors.Join(err, rerr)
			}
			return a, fmt.Errorf("runpod: attempt %d: a second pod %s of the lost create could not be deleted, so no further pod is created: %w", a.N, extra.ID, err)
		}
		p.event(ctx, slog.LevelInfo, "provision.delete", a, slog.String("pod", extra.ID), slog.String("why", "a second pod of the lost create"))
	}
	a.PodID, a.HourlyPrice = pods[0].ID, pods[0].Cost
	return p.reject(ctx, a, start, OutcomeCreateError, "the create's response was lost; its pod was found by name")
}

// Markdown renders the attempt table and the accepted pod for a job
// summary.
func (r Result) Markdown() string {
	var b strings.Builder
	b.WriteString("| # | runner | GPU | tier | price/h | outcome | seconds | est. cost | reason |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, a := range r.Attempts {
		price := "-"
		if a.HourlyPrice > 0 {
			price = fmt.Sprintf("$%.2f", a.HourlyPrice)
		} else if a.Candidate.Live {
			price = fmt.Sprintf("$%.2f (list)", a.Candidate.Price)
		}
		fmt.Fprintf(&b, "| %d | `%s` | %s | %s | %s | %s | %.0f | $%.4f | %s |\n", a.N, a.Name, cell(a.Candidate.GPUTypeID), cell(a.Candidate.Tier),
			price, a.Outcome, a.Seconds, a.EstimatedCost, cell(a.Reason))
	}
	b.WriteString("\n")
	if r.PodID != "" {
		fmt.Fprintf(&b, "**Accepted:** pod `%s` on %s (tier %s) at $%.2f/h after %.0f s and %d attempt(s); runner label `%s`.\n",
			r.PodID, cell(r.GPUTypeID), cell(r.Tier), r.HourlyPrice, r.StartupSeconds, len(r.Attempts), r.Label)
	} else {
		b.WriteString("**No pod accepted.**\n")
	}
	fmt.Fprintf(&b, "\nRejected candidates cost an estimated $%.4f (create to confirmed deletion at the pod's hourly price; an estimate, not an invoice).\n", r.RejectedCost)
	if r.LivePodID != "" {
		fmt.Fprintf(&b, "\n**Pod `%s` may still be running: its deletion was not confirmed. Delete it by hand.**\n", r.LivePodID)
	}
	if len(r.UnresolvedPodNames) > 0 {
		fmt.Fprintf(&b, "\n**Pods named `%s` may be running: their creates' outcomes are unknown and the listing did not show them. Cleanup looks each up by name and deletes it; if that fails too, delete it by hand.**\n", strings.Join(r.UnresolvedPodNames, "`, `"))
	}
	if ids := r.RetainedPods(); len(ids) > 0 {
		fmt.Fprintf(&b, "\n**Kept for debugging (keep_failed_pods), still billing:** `%s`. Delete each when done; the reaper spares them only while this run's retention record exists.\n", strings.Join(ids, "`, `"))
	}
	return b.String()
}

// Text renders the attempts and the outcome for a log, one line each:
// every attempt with its runner, GPU, price, outcome, seconds, estimated
// cost and the first line of its reason; the accepted pod, if any; and
// what the rejected candidates cost.
func (r Result) Text() string {
	var b strings.Builder
	b.WriteString("attempts:\n")
	for _, a := range r.Attempts {
		price := "-"
		if a.HourlyPrice > 0 {
			price = fmt.Sprintf("$%.2f/h", a.HourlyPrice)
		}
		fmt.Fprintf(&b, "  %d. %-20s %-32s %-8s %-13s %5.1fs  est. $%.6f  %s\n", a.N, a.Name, a.Candidate.GPUTypeID, price, a.Outcome, a.Seconds, a.EstimatedCost, cli.FirstLine(a.Reason, 90))
	}
	if r.PodID != "" {
		fmt.Fprintf(&b, "accepted: pod %s on %s (tier %s) at $%.2f/h after %.1f s and %d attempts; runner label %s\n",
			r.PodID, r.GPUTypeID, r.Tier, r.HourlyPrice, r.StartupSeconds, len(r.Attempts), r.Label)
	}
	fmt.Fprintf(&b, "rejected candidates cost an estimated USD %.6f\n", r.RejectedCost)
	return b.String()
}

func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
