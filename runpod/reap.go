package runpod

import (
	"context"
	"errors"
	"fmt"
	"github.com/gpugate/gpugate/runpod/rest"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// RunInfo is the workflow run that owns a pod.
type RunInfo struct {
	ID          int64
	Repository  string    // owner/name
	Workflow    string    // workflow path, e.g. .github/workflows/runpod-gpu-test.yml
	Event       string    // e.g. workflow_run, workflow_dispatch
	Status      string    // queued, in_progress, completed
	Attempt     int       // the run's latest attempt
	CompletedAt time.Time // when Status is completed
}

// Runs looks up and cancels workflow runs. runpodgh.Runs is the go-github
// adapter.
type Runs interface {
	Run(ctx context.Context, runID int64) (RunInfo, error)
	Cancel(ctx context.Context, runID int64) error
}

// Retention lists the debug-retention records (artifact names) of a run.
// runpodgh.Retention is the go-github adapter.
type Retention interface {
	Records(ctx context.Context, runID int64) ([]string, error)
}

// ReapDeps are the reaper's outside world.
type ReapDeps struct {
	API       PodAPI
	Runs      Runs
	Retention Retention                                                 // nil: no pod is ever retained
	Log       *slog.Logger                                              // nil discards
	Delete    func(ctx context.Context, api PodAPI, podID string) error // nil: Delete
}

// ReapPolicy says which pods are ours and when they are reclaimed.
type ReapPolicy struct {
	Repository     string                 // owner/name the pods must be tagged with
	Workflow       string                 // the GPU workflow: its path, a bare file name, or a GITHUB_WORKFLOW_REF (reduced as Ownership.Tags does)
	CompletedGrace time.Duration          // reclaim this long after the run completed (5 min)
	Lifetime       time.Duration          // lifetime backstop from the pod's start (2 h)
	Execute        bool                   // false (the default): dry run
	CancelRuns     bool                   // after a confirmed deletion, cancel the owning run when still active
	Prefix         func(Ownership) string // the name prefix of an identity; nil: Ownership.Prefix
}

// DefaultReapPolicy holds the default numbers for a repository and workflow.
func DefaultReapPolicy(repository, workflow string) ReapPolicy {
	return ReapPolicy{Repository: repository, Workflow: workflow, CompletedGrace: 5 * time.Minute, Lifetime: 2 * time.Hour}
}

// Reap rules, in ReapDecision.Rule.
const (
	RuleUntagged   = "untagged"      // no ownership tags, or a name that does not agree: never touched
	RuleForeign    = "foreign"       // another repository or workflow: never touched
	RuleCompleted  = "run-completed" // the run completed at least CompletedGrace ago
	RuleSuperseded = "superseded"    // a newer attempt of the run exists
	RuleLifetime   = "lifetime"      // alive longer than the backstop
	RuleActive     = "active"        // none applies: keep
	RuleRetained   = "retained"      // a retention record names it: keep
	RuleUnknown    = "unknown"       // an API failure: untouched this sweep
)

// Reap actions.
const (
	ActionNone        = "none"
	ActionWouldDelete = "would-delete" // dry run
	ActionDeleted     = "deleted"
	ActionFailed      = "delete-failed"
)

// ReapDecision is one pod's decision. It never carries the pod's
// environment values or any credential.
type ReapDecision struct {
	PodID         string         `json:"pod_id"`
	Name          string         `json:"name"`
	Identity      *Ownership     `json:"identity,omitempty"`
	Status        rest.PodStatus `json:"status"`
	Rule          string         `json:"rule"`
	Reason        string         `json:"reason"`
	Action        string         `json:"action"`
	AgeSeconds    float64        `json:"age_seconds"`
	AgeFrom       string         `json:"age_from,omitempty"` // startedAt, or createdAt for a pod stuck before start
	RunStatus     string         `json:"run_status,omitempty"`
	DeletedAt     *time.Time     `json:"deleted_at,omitempty"`
	EstimatedCost *float64       `json:"estimated_cost,omitempty"` // from startedAt only; absent when unknown
	Canceled      bool           `json:"run_cancel_requested,omitempty"`
	Error         string         `json:"error,omitempty"`
}

// Reap sweeps the account's pods once. It lists every pod before deciding
// anything, considers only pods tagged by the provisioner for the policy's
// repository and workflow whose name agrees with the tags, and reclaims a
// pod when its run completed CompletedGrace ago, its attempt was
// superseded, or it outlived the Lifetime backstop. Decisions use now;
// deletions (policy.Execute) are bounded by Delete. Any API error leaves the
// affected pod untouched and is returned, joined, after the sweep has done
// what it safely could.
func Reap(ctx context.Context, deps ReapDeps, policy ReapPolicy, now time.Time) ([]ReapDecision, error) {
	if deps.API == nil || deps.Runs == nil {
		return nil, errors.New("runpod: Reap needs ReapDeps.API and ReapDeps.Runs")
	}
	if policy.Repository == "" || policy.Workflow == "" {
		return nil, errors.New("runpod: ReapPolicy needs Repository and Workflow")
	}
	if policy.Prefix == nil {
		policy.Prefix = Ownership.Prefix
	}
	policy.Workflow, _ = workflowPath(policy.Workflow) // once, not per pod
	del := deps.Delete
	if del == nil {
		del = Delete
	}
	log := deps.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pods, err := deps.API.ListPods(ctx)
	if err != nil {
		return nil, fmt.Errorf("runpod: reap: list pods (no decision made): %w", err)
	}
	r := reaper{deps: deps, policy: policy, now: now, runs: map[int64]runResult{}, retained: map[int64]retainedResult{}}
	var errs []error
	decisions := make([]ReapDecision, 0, len(pods))
	for _, pod := range pods {
		d, err := r.decide(ctx, pod)
		if err != nil {
			errs = append(errs, err)
		}
		if policy.Execute && (d.Rule == RuleCompleted || d.Rule == RuleSuperseded || d.Rule == RuleLifetime) {
			if err := del(ctx, deps.API, pod.ID); err != nil {
				d.Action, d.Error = ActionFailed, err.Error()
				errs = append(errs, err)
			} else {
				t := time.Now()
				d.Action, d.DeletedAt = ActionDeleted, &t
				if policy.CancelRuns && d.Rule == RuleLifetime && d.RunStatus != "completed" {
					// Never a newer attempt: lifetime applies to the run's
					// latest attempt here (an older one is superseded).
					if err := deps.Runs.Cancel(ctx, d.Identity.RunID); err != nil {
						errs = append(errs, fmt.Errorf("runpod: reap: cancel run %d after deleting %s: %w", d.Identity.RunID, pod.ID, err))
					} else {
						d.Canceled = true
					}
				}
			}
		}
		attrs := []slog.Attr{slog.String("pod", d.PodID), slog.String("name", d.Name), slog.String("rule", d.Rule), slog.String("action", d.Action), slog.Float64("age_seconds", d.AgeSeconds)}
		if d.EstimatedCost != nil {
			attrs = append(attrs, slog.Float64("estimated_cost", *d.EstimatedCost))
		}
		log.LogAttrs(ctx, slog.LevelInfo, "reap.decision", attrs...)
		decisions = append(decisions, d)
	}
	return decisions, errors.Join(errs...)
}

type runResult struct {
	info RunInfo
	err  error
}

type retainedResult struct {
	names []string
	err   error
}

type reaper struct {
	deps     ReapDeps
	policy   ReapPolicy
	now      time.Time
	runs     map[int64]runResult
	retained map[int64]retainedResult
}

// identity reads and checks a pod's ownership tags.
func (r *reaper) identity(pod rest.Pod) (*Ownership, string) {
	repo, wf := pod.Env[TagRepository], pod.Env[TagWorkflow]
	runID, err1 := strconv.ParseInt(pod.Env[TagRunID], 10, 64)
	attempt, err2 := strconv.Atoi(pod.Env[TagRunAttempt])
	if repo == "" || wf == "" || err1 != nil || err2 != nil || runID <= 0 || attempt <= 0 {
		return nil, "the pod carries no complete ownership tags"
	}
	o := &Ownership{Repository: repo, Workflow: wf, RunID: runID, RunAttempt: attempt}
	if !nameAgrees(pod.Name, r.policy.Prefix(*o)) {
		return o, fmt.Sprintf("the name %q does not agree with the tagged identity (want %s-cN)", pod.Name, r.policy.Prefix(*o))
	}
	return o, ""
}

// ours reports whether workflow, named any way GitHub names it
// (workflowPath), is the policy's workflow (reduced by Reap) in
// repository repo.
func (r *reaper) ours(repo, workflow string) bool {
	got, in := workflowPath(workflow)
	return got == r.policy.Workflow && (in == "" || in == repo)
}

func nameAgrees(name, prefix string) bool {
	n, ok := strings.CutPrefix(name, prefix+"-c")
	if !ok || n == "" {
		return false
	}
	_, err := strconv.Atoi(n)
	return err == nil
}

func (r *reaper) decide(ctx context.Context, pod rest.Pod) (ReapDecision, error) {
	d := ReapDecision{PodID: pod.ID, Name: pod.Name, Status: pod.Status, Action: ActionNone}
	age, from := r.age(pod)
	d.AgeSeconds, d.AgeFrom = age.Seconds(), from
	if pod.StartedAt != nil && pod.Cost > 0 {
		cost := r.now.Sub(*pod.StartedAt).Hours() * pod.Cost
		d.EstimatedCost = &cost
	}
	id, why := r.identity(pod)
	if why != "" {
		d.Rule, d.Reason = RuleUntagged, why
		return d, nil
	}
	d.Identity = id
	if id.Repository != r.policy.Repository || !r.ours(id.Repository, id.Workflow) {
		d.Rule, d.Reason = RuleForeign, fmt.Sprintf("tagged for %s %s", id.Repository, id.Workflow)
		return d, nil
	}
	run, err := r.run(ctx, id.RunID)
	if err != nil {
		d.Rule, d.Reason, d.Error = RuleUnknown, "the owning run could not be read", err.Error()
		return d, fmt.Errorf("runpod: reap: pod %s: read run %d: %w", pod.ID, id.RunID, err)
	}
	d.RunStatus = run.Status
	if run.Repository != r.policy.Repository || !r.ours(run.Repository, run.Workflow) {
		d.Rule, d.Reason = RuleForeign, fmt.Sprintf("run %d belongs to %s %s, not the configured GPU workflow", run.ID, run.Repository, run.Workflow)
		return d, nil
	}
	switch {
	case run.Attempt > id.RunAttempt:
		d.Rule, d.Reason = RuleSuperseded, fmt.Sprintf("attempt %d was superseded by attempt %d", id.RunAttempt, run.Attempt)
	case run.Status == "completed" && !run.CompletedAt.IsZero() && r.now.Sub(run.CompletedAt) >= r.policy.CompletedGrace:
		d.Rule, d.Reason = RuleCompleted, fmt.Sprintf("run %d completed %s ago", run.ID, r.now.Sub(run.CompletedAt).Round(time.Second))
	case age > r.policy.Lifetime:
		d.Rule, d.Reason = RuleLifetime, fmt.Sprintf("alive %s (from %s), past the %s backstop", age.Round(time.Second), from, r.policy.Lifetime)
	default:
		d.Rule, d.Reason = RuleActive, "the run is active and the pod within its lifetime"
		return d, nil
	}
	// Debug retention: only a record naming this pod exempts it, and only
	// for a debug dispatch.
	if run.Event == "workflow_dispatch" && r.deps.Retention != nil {
		names, err := r.records(ctx, id.RunID)
		if err != nil {
			d.Rule, d.Reason, d.Error = RuleUnknown, "the retention records of a debug dispatch could not be read", err.Error()
			return d, fmt.Errorf("runpod: reap: pod %s: read retention records of run %d: %w", pod.ID, id.RunID, err)
		}
		for _, name := range names {
			if rec, ok := ParseRetentionRecord(name); ok && rec.RunID == id.RunID && rec.Attempt == id.RunAttempt && slices.Contains(rec.PodIDs, pod.ID) {
				d.Rule, d.Reason = RuleRetained, "retained for debugging by record "+name
				return d, nil
			}
		}
	}
	d.Action = ActionWouldDelete
	return d, nil
}

// age is the pod's orphan age: from startedAt, or from createdAt for a pod
// stuck before start (never used for cost).
func (r *reaper) age(pod rest.Pod) (time.Duration, string) {
	if pod.StartedAt != nil {
		return r.now.Sub(*pod.StartedAt), "startedAt"
	}
	if !pod.CreatedAt.IsZero() {
		return r.now.Sub(pod.CreatedAt), "createdAt"
	}
	return 0, ""
}

func (r *reaper) run(ctx context.Context, id int64) (RunInfo, error) {
	if res, ok := r.runs[id]; ok {
		return res.info, res.err
	}
	info, err := r.deps.Runs.Run(ctx, id)
	r.runs[id] = runResult{info, err}
	return info, err
}

func (r *reaper) records(ctx context.Context, runID int64) ([]string, error) {
	if res, ok := r.retained[runID]; ok {
		return res.names, res.err
	}
	names, err := r.deps.Retention.Records(ctx, runID)
	r.retained[runID] = retainedResult{names, err}
	return names, err
}

// RetentionPrefix starts every debug-retention record name.
const RetentionPrefix = "runpod-debug-retained-"

// RetentionRecord is a parsed retention record name:
// runpod-debug-retained-<run>-<attempt>-<comma-separated pod IDs>.
type RetentionRecord struct {
	RunID   int64    `json:"run_id"`
	Attempt int      `json:"attempt"`
	PodIDs  []string `json:"pod_ids"`
}

var podIDPattern = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// Name formats the record's artifact name,
// runpod-debug-retained-<run>-<attempt>-<comma-separated pod IDs>.
func (r RetentionRecord) Name() string {
	return fmt.Sprintf("%s%d-%d-%s", RetentionPrefix, r.RunID, r.Attempt, strings.Join(r.PodIDs, ","))
}

// ParseRetentionRecord parses a record name; ok is false for anything that
// is not exactly one.
func ParseRetentionRecord(name string) (RetentionRecord, bool) {
	rest, ok := strings.CutPrefix(name, RetentionPrefix)
	if !ok {
		return RetentionRecord{}, false
	}
	parts := strings.SplitN(rest, "-", 3)
	if len(parts) != 3 {
		return RetentionRecord{}, false
	}
	run, err1 := strconv.ParseInt(parts[0], 10, 64)
	attempt, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil || run <= 0 || attempt <= 0 || parts[0][0] == '+' || parts[1][0] == '+' {
		return RetentionRecord{}, false
	}
	ids := strings.Split(parts[2], ",")
	for _, id := range ids {
		if !podIDPattern.MatchString(id) {
			return RetentionRecord{}, false
		}
	}
	return RetentionRecord{RunID: run, Attempt: attempt, PodIDs: ids}, true
}
