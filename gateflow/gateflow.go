// Package gateflow composes the paid GPU gate for one change, the
// lifecycle gpugate's main job, the Action's steps and a library user run:
//
//	classify the diff → authorize → reuse check → candidate plan from the
//	catalog → re-check the pull request → provision with the CUDA proof →
//	hand the accepted runner to the test job → watchdog → cleanup with
//	confirmed deletion → gate publication → cost report
//
// Run takes every dependency as a value (Deps), so the same code runs
// against RunPod and GitHub or against in-process fakes. Its rules: only
// the head the classification listed is authorized; a change that needs no
// GPU publishes an explicit not-required success and buys nothing; a
// tested merge ref that already passed is reused and buys nothing; a pull
// request validated on a maintainer's GPU (the local-validation label, read
// again just before spending and before publishing) buys and publishes
// nothing; the pod is deleted, confirmed, before the gate is published; and
// the gate passes only when the watched job concluded success.
//
// It checks its Deps before anything is bought (ErrDeps: nothing bought or
// published), every wait honours the context, and from the first create on
// every pod it created is deleted, confirmed, or named in its error,
// whatever ends the run: a failure, a panic in a dependency, or a context
// that ended (the cleanup then runs under its own bounded context).
//
// Its GitHub steps (authorize, reuse, recheck, publish) are gate.Steps
// (Deps.Steps), the calls the Action's authorize, reuse and publish steps
// make one per process, so each rule lives in one place; provisioning is
// runpod.Provision, which reads the pull request again before every
// create, as the Action's provision step does.
package gateflow

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/gpugate/gpugate/changepolicy"
	"github.com/gpugate/gpugate/cost"
	"github.com/gpugate/gpugate/gate"
	"github.com/gpugate/gpugate/internal/cli"
	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/rest"
)

// ErrGateFailed marks a run whose GPU gate was published as failed: the
// job did not conclude success, or the watchdog stopped it.
var ErrGateFailed = errors.New("gateflow: the GPU gate failed")

// ErrDeps is matched by Run's error for Deps it cannot run with
// (*DepsError): it is returned before anything is bought or published.
var ErrDeps = errors.New("gateflow: incomplete Deps")

// DepsError names the Deps field Run cannot run without, or whose value it
// refuses. It matches ErrDeps and wraps the field's own validation error,
// when it has one (runpod.ErrInvalidConfig, runpod.ErrWatchOptions).
type DepsError struct {
	Field string // the Deps field, as Deps names it
	Why   string // what is wrong with it and what Run needs it for
	Err   error  // the field's own validation error, or nil
}

// Error names the field and says what is wrong with it.
func (e *DepsError) Error() string {
	msg := fmt.Sprintf("gateflow: Deps.%s %s", e.Field, e.Why)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg + "; nothing was bought or published"
}

// Unwrap returns the field's own validation error.
func (e *DepsError) Unwrap() error { return e.Err }

// Is reports whether target is ErrDeps.
func (e *DepsError) Is(target error) bool { return target == ErrDeps }

// Deps is everything one run of the gate touches. Repo and Checks are
// needed by every run; a run that buys a pod also needs API, Registry,
// Progress, StartJob, Image, Owner (repository and run ID), a valid Config
// and valid Watch limits, all checked before the catalog is read. PR and
// Runs are optional (nil PR: provisioning and the watchdog never see the
// pull request move or close, nor provisioning the label appear; nil Runs:
// an obsolete run is not cancelled).
type Deps struct {
	Policy *changepolicy.Policy
	Repo   gate.Repo
	Checks gate.Checks
	// LocalLabel is the local-validation label (default
	// gate.DefaultLocalLabel).
	LocalLabel string

	API      *rest.Client
	Registry runpod.RunnerRegistry
	Progress runpod.Progress
	PR       runpod.PRState
	Runs     runpod.Runs
	RunID    int64 // the workflow run the watchdog follows (0: none)
	Config   runpod.Config
	Image    string             // the runner image, pinned by digest
	Startup  runpod.PodTemplate // the CUDA proof's environment and startup command
	Watch    runpod.WatchOptions
	Owner    runpod.Ownership
	// StartJob hands the accepted runner to the GPU test job and returns
	// at once with a channel that delivers the job's marks when it ends (a
	// real job reports its own through the cost evidence: send empty
	// Marks; a nil channel has none). Run reads it for the cost report,
	// once the pod is deleted and the gate published, and stops waiting
	// when its context ends.
	StartJob func(runner string) <-chan cost.Marks
	Log      *slog.Logger

	// AfterCatalog, when set, runs between the catalog read and the first
	// create (a demonstration changes stock there).
	AfterCatalog func()
	// RealTime, when set, restates a time-compressed run's paid seconds
	// and dollars at real time (a demonstration); nil for a real run.
	RealTime Restater
}

// Restater restates a time-compressed run at real time.
type Restater interface {
	// Restate rewrites the attempts' seconds and estimated dollars.
	Restate(res *runpod.Result)
	// Notes are extra lines under an attempt of the table.
	Notes(a runpod.Attempt) []string
	// Report is the accepted pod's cost report at real time.
	Report(pod *rest.Pod, res runpod.Result) (cost.Report, error)
}

// Outcome is what one run did.
type Outcome struct {
	PR          int                `json:"pr"`
	Class       changepolicy.Class `json:"class"`
	GPURequired bool               `json:"gpu_required"`
	Gate        gate.Kind          `json:"gate,omitempty"` // the gate published; empty when none was
	// LocallyValidated: the pull request carries the local-validation
	// label, so the paid path stopped and the local relay's gate stands.
	LocallyValidated bool `json:"locally_validated,omitempty"`
	// Reason is why the paid path failed: provisioning's error or the
	// watchdog's reason for a gate published as failed, or why the run
	// stopped before publishing. Empty when the gate passed.
	Reason string         `json:"reason,omitempty"`
	Result *runpod.Result `json:"provision,omitempty"` // when provisioning ran
	Cost   *cost.Report   `json:"cost,omitempty"`      // when the accepted pod's record was read
}

// cleanupTimeout bounds the deletions of a run whose context has ended:
// each runpod.Delete is bounded by its own budget, this bounds them all.
const cleanupTimeout = 5 * time.Minute

// cleanupContext is ctx without its cancellation, bounded by
// cleanupTimeout: a cancelled or timed-out run still deletes its pods.
func cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
}

// Run runs the gate for one change listed at listing.HeadSHA, for actor on
// pull request pr. out receives, as it goes, the numbered steps a
// maintainer needs to see. Deps Run cannot run with are a *DepsError
// (ErrDeps), returned before anything is bought or published. A gate
// published as failed is ErrGateFailed, wrapping the watchdog's error when
// it had one (runpod.ErrWatchdog, runpod.ErrObsolete). A context that ends
// stops every wait: the pod is deleted under its own bounded context,
// nothing more is published, and the error wraps the context's. A pull
// request found carrying the local-validation label, whenever it is
// found, ends the run the same way: Outcome.LocallyValidated, no error,
// nothing published by the paid path, and every pod created deleted.
func Run(ctx context.Context, d Deps, listing changepolicy.Listing, actor string, pr int, out io.Writer) (_ Outcome, err error) {
	step := func(n int, name, format string, a ...any) {
		fmt.Fprintf(out, "%2d. %-18s %s\n", n, name, fmt.Sprintf(format, a...))
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if err := d.checkSteps(); err != nil {
		return Outcome{PR: pr}, err
	}
	dec, err := listing.Classify(d.Policy)
	if err != nil {
		return Outcome{PR: pr}, err
	}
	oc := Outcome{PR: pr, Class: dec.Class, GPURequired: dec.GPU}
	step(1, "classify", "%s; GPU gate required: %v (%s)", dec.Class, dec.GPU, dec.Reason)
	// The GitHub steps, each with its rule (gate.Steps): authorized for
	// the head the files were listed at or not at all, never paid twice
	// for one tested merge ref, rechecked just before spending, and the
	// label read again before every publication.
	steps := d.Steps()
	a, err := steps.Authorize(ctx, gate.AuthRequest{Actor: actor, PR: pr, ClassifiedHead: dec.HeadSHA})
	if err != nil {
		return oc, err
	}
	step(2, "authorize", "%s (%s) may spend on PR #%d: head %.7s, tested merge ref %.7s", a.Actor, a.Role, pr, a.HeadSHA, a.TestedRef)
	if a.LocalValidation {
		return locallyValidated(oc, step, 3, fmt.Errorf("%w: #%d", gate.ErrLocallyValidated, pr))
	}
	publish := func(r gate.Report) (gate.Gate, error) { return steps.Publish(ctx, a.PR, r, time.Now()) }
	if !dec.GPU {
		g, err := publish(gate.Report{HeadSHA: a.HeadSHA, ID: gate.ExternalID{Ref: a.TestedRef, Kind: gate.KindNotRequired},
			GPU: &gate.Classification{GPURequired: false, Reason: dec.Reason, HeadSHA: dec.HeadSHA}})
		if errors.Is(err, gate.ErrLocallyValidated) {
			return locallyValidated(oc, step, 3, err)
		}
		if err != nil {
			return oc, err
		}
		step(3, "publish", "%q: %s (%s) — no pod created", gate.DefaultCheckName, g.Conclusion, g.ExternalID)
		oc.Gate = gate.KindNotRequired
		return oc, nil
	}
	reuse := steps.Reuse(ctx, a)
	step(3, "reuse", "%s", reuse.Reason)
	if reuse.Reuse {
		g, err := publish(gate.Report{HeadSHA: a.HeadSHA, ID: gate.ExternalID{Ref: a.TestedRef, Kind: gate.KindReused}, ReusedFrom: reuse.From})
		if errors.Is(err, gate.ErrLocallyValidated) {
			return locallyValidated(oc, step, 4, err)
		}
		if err != nil {
			return oc, err
		}
		step(4, "publish", "%q: %s (%s) — no pod created", gate.DefaultCheckName, g.Conclusion, g.ExternalID)
		oc.Gate = gate.KindReused
		return oc, nil
	}
	// Everything the paid path needs, checked before anything is bought.
	if err := d.checkPaid(); err != nil {
		return oc, err
	}
	plan, err := d.plan(ctx, step)
	if err != nil {
		return oc, err
	}
	step(5, "image", "%s", d.Image)
	// Just before spending: still open, at the authorized head, and not
	// labelled for local validation since.
	if err := steps.Recheck(ctx, a); errors.Is(err, gate.ErrLocallyValidated) {
		return locallyValidated(oc, step, 6, err)
	} else if err != nil {
		return oc, err
	}
	tmpl := d.Startup
	tmpl.Image, tmpl.Owner, tmpl.Disk = d.Image, d.Owner, 40
	res, perr := runpod.Provision(ctx, runpod.Deps{API: d.API, Registry: d.Registry, PR: d.PR, Head: a.HeadSHA, LocalLabel: d.LocalLabel, Log: d.Log}, d.Config, plan, tmpl)
	// From here on every pod this run created is deleted, confirmed, or
	// named in the returned error, whatever ends the run: a failure, a
	// panic in a dependency, a context that ended.
	left := leftovers{accepted: res.PodID, live: res.LivePodID, names: slices.Clone(res.UnresolvedPodNames)}
	defer func() {
		if cerr := left.clean(ctx, d.API, out); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	if d.RealTime != nil {
		d.RealTime.Restate(&res)
	}
	oc.Result = &res
	d.attemptTable(out, res)
	if perr != nil {
		step(6, "provision", "failed: %v", perr)
		if ctx.Err() != nil {
			// Nothing is published with a context that has ended.
			stop := stopped(ctx, perr)
			oc.Reason = stop.Error()
			return oc, fmt.Errorf("gateflow: stopped before the gate was published: %w", stop)
		}
		_, err := publish(gate.Report{HeadSHA: a.HeadSHA, ID: gate.ExternalID{Ref: a.TestedRef, Kind: gate.KindFailed}, Details: "provisioning failed: " + perr.Error()})
		if errors.Is(err, gate.ErrLocallyValidated) {
			// The label was added while provisioning ran (which stops at
			// it, ErrObsolete): the same end as a label seen at Recheck.
			return locallyValidated(oc, step, 7, err)
		}
		oc.Reason = perr.Error()
		if err != nil {
			return oc, errors.Join(perr, err)
		}
		oc.Gate = gate.KindFailed
		return oc, perr
	}
	step(6, "provision", "accepted %s at $%.2f/h after %d attempts (%.1f s); runner label %s", res.GPUTypeID, res.HourlyPrice, len(res.Attempts), res.StartupSeconds, res.Label)
	marksCh := d.StartJob(res.Label)
	step(7, "hand over", "the GPU test job runs on %s", res.Label)
	wres, werr := runpod.Watch(ctx, runpod.WatchDeps{API: d.API, Progress: d.Progress, PR: d.PR, Head: a.HeadSHA, Runs: d.Runs, RunID: d.RunID, Log: d.Log}, res.PodID, d.Watch)
	switch {
	case werr != nil:
		step(8, "watchdog", "%v", werr)
	case d.RealTime != nil: // how often a compressed run polled says nothing about a real one
		step(8, "watchdog", "%s: %s", wres.Outcome, wres.Reason)
	default:
		step(8, "watchdog", "%s: %s (%d pod reads)", wres.Outcome, wres.Reason, wres.PodReads)
	}
	// Cleanup runs under its own bounded context: the caller's may have
	// ended. The billing record is read before deletion; the pod is gone
	// afterwards.
	cctx, cancel := cleanupContext(ctx)
	pod, gerr := runpod.RecordBeforeDelete(cctx, d.API, res.PodID)
	var deletedAt time.Time
	if wres.Deleted && wres.DeletedAt != nil {
		deletedAt = *wres.DeletedAt
	} else {
		derr := runpod.Delete(cctx, d.API, res.PodID)
		if derr != nil {
			cancel()
			left.accepted = "" // named in the error
			step(9, "cleanup", "deletion NOT confirmed: %v — the reaper will retry", derr)
			return oc, derr
		}
		deletedAt = time.Now()
	}
	cancel()
	left.accepted = ""
	step(9, "cleanup", "pod %s deleted (confirmed)", res.PodID)
	if ctx.Err() != nil {
		// Nothing is published with a context that has ended.
		stop := stopped(ctx, werr)
		oc.Reason = stop.Error()
		return oc, fmt.Errorf("gateflow: stopped before the gate was published (pod %s deleted): %w", res.PodID, stop)
	}
	passed := werr == nil && wres.Outcome == runpod.WatchCompleted && wres.Conclusion == "success"
	kind := gate.KindPaid
	var failure error // the run's error when the gate is published as failed
	report := gate.Report{HeadSHA: a.HeadSHA, ID: gate.ExternalID{Ref: a.TestedRef, Kind: kind},
		Paid: &gate.PaidEvidence{TestsPassed: passed, PodID: res.PodID},
		Ran:  []string{"CUDA smoke proof on " + res.GPUTypeID, "GPU test job"}, NotRun: []string{"nothing skipped"}}
	if !passed {
		kind, report.ID.Kind = gate.KindFailed, gate.KindFailed
		if werr != nil {
			oc.Reason, failure = cmp.Or(wres.Reason, werr.Error()), fmt.Errorf("%w: %w", ErrGateFailed, werr)
		} else {
			oc.Reason, failure = wres.Reason, fmt.Errorf("%w: %s", ErrGateFailed, wres.Reason)
		}
		report.Details = "The GPU test job did not pass: " + oc.Reason
	}
	g, err := publish(report)
	if errors.Is(err, gate.ErrLocallyValidated) {
		oc.Reason = ""
		return locallyValidated(oc, step, 10, err)
	}
	if err != nil {
		if failure != nil {
			return oc, errors.Join(err, failure)
		}
		return oc, err
	}
	oc.Gate = kind
	step(10, "publish", "%q: %s (%s)", gate.DefaultCheckName, g.Conclusion, g.ExternalID)
	if gerr != nil {
		step(11, "cost", "unknown: the pod record could not be read (%v)", gerr)
		return oc, failure
	}
	var rep cost.Report
	if d.RealTime != nil {
		rep, err = d.RealTime.Report(pod, res)
	} else {
		var marks cost.Marks
		if marksCh != nil {
			select {
			case marks = <-marksCh:
			case <-ctx.Done():
				step(11, "cost", "unknown: the GPU test job's marks never came (%v)", ctx.Err())
				return oc, errors.Join(failure, fmt.Errorf("gateflow: waiting for the GPU test job's marks: %w", ctx.Err()))
			}
		}
		rep, err = cost.NewReport(cost.PodRecordOf(pod), deletedAt, marks, cost.RejectedAttempts(res.Attempts))
	}
	if err != nil {
		return oc, errors.Join(failure, err)
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
	return oc, failure
}

// Steps are the gate's GitHub steps over d's repository and checks, with
// d's local-validation label: the same steps, and so the same rules, that
// the Action's authorize, reuse and publish steps run.
func (d Deps) Steps() gate.Steps {
	return gate.Steps{Repo: d.Repo, Checks: d.Checks, LocalLabel: d.LocalLabel}
}

// stopped is err, which ended a run whose context ctx has ended, made to
// match the context's error too.
func stopped(ctx context.Context, err error) error {
	if cerr := ctx.Err(); err == nil || !errors.Is(err, cerr) {
		return errors.Join(err, cerr)
	}
	return err
}

// checkSteps refuses Deps without what every run needs: the GitHub
// steps' repository and checks.
func (d Deps) checkSteps() error {
	switch {
	case d.Repo == nil:
		return &DepsError{Field: "Repo", Why: "is nil: the actor's role and the pull request are read through it"}
	case d.Checks == nil:
		return &DepsError{Field: "Checks", Why: "is nil: the gate is looked up and published through it"}
	}
	return nil
}

// checkPaid refuses Deps without what the paid path needs, before the
// catalog is read and anything is bought.
func (d Deps) checkPaid() error {
	switch {
	case d.API == nil:
		return &DepsError{Field: "API", Why: "is nil: the catalog is read and the pods are bought and deleted through it"}
	case d.Registry == nil:
		return &DepsError{Field: "Registry", Why: "is nil: each candidate's runner is registered through it"}
	case d.Progress == nil:
		return &DepsError{Field: "Progress", Why: "is nil: the watchdog follows the GPU test job through it"}
	case d.StartJob == nil:
		return &DepsError{Field: "StartJob", Why: "is nil: the accepted runner would be handed to no test job"}
	case d.Image == "":
		return &DepsError{Field: "Image", Why: "is empty: the pods need the runner image, pinned by digest"}
	case d.Owner.Repository == "" || d.Owner.RunID == 0:
		return &DepsError{Field: "Owner", Why: "needs Repository and RunID: the reaper relies on the pods' ownership tags"}
	}
	if err := d.Config.Validate(); err != nil {
		return &DepsError{Field: "Config", Why: "is invalid", Err: err}
	}
	if err := d.Watch.Validate(); err != nil {
		return &DepsError{Field: "Watch", Why: "is invalid: the watchdog could not bound the pod", Err: err}
	}
	return nil
}

// leftovers are the pods of a run not yet deleted nor named in its error:
// the accepted pod until its deletion is confirmed, a rejected candidate
// whose deletion provisioning could not confirm, and pods known only by
// name (creates whose outcome was unknown).
type leftovers struct {
	accepted, live string
	names          []string
}

// clean deletes every leftover under its own bounded context (ctx may have
// ended), saying so on out; a deletion it cannot confirm is in its error,
// naming the pod.
func (l *leftovers) clean(ctx context.Context, api runpod.PodAPI, out io.Writer) error {
	if l.accepted == "" && l.live == "" && len(l.names) == 0 {
		return nil
	}
	ctx, cancel := cleanupContext(ctx)
	defer cancel()
	var errs []error
	ids := []string{l.accepted}
	if l.live != l.accepted {
		ids = append(ids, l.live)
	}
	for _, id := range ids {
		if id == "" {
			continue
		}
		if err := runpod.Delete(ctx, api, id); err != nil {
			fmt.Fprintf(out, "    cleanup: pod %s: deletion NOT confirmed: %v — the reaper will retry\n", id, err)
			errs = append(errs, fmt.Errorf("gateflow: cleanup: %w", err))
		} else {
			fmt.Fprintf(out, "    cleanup: pod %s deleted (confirmed)\n", id)
		}
	}
	for _, name := range l.names {
		if err := runpod.DeleteByName(ctx, api, name); err != nil {
			fmt.Fprintf(out, "    cleanup: the pod named %q: NOT resolved: %v — the reaper will retry\n", name, err)
			errs = append(errs, fmt.Errorf("gateflow: cleanup: the pod named %q, whose create's outcome was unknown: %w", name, err))
		} else {
			fmt.Fprintf(out, "    cleanup: the pod named %q resolved by listing: none left running (confirmed)\n", name)
		}
	}
	*l = leftovers{}
	return errors.Join(errs...)
}

// locallyValidated ends a run whose pull request carries the
// local-validation label: nothing more is bought, and nothing published.
func locallyValidated(oc Outcome, step func(int, string, string, ...any), n int, why error) (Outcome, error) {
	what := "nothing bought or published"
	if oc.Result != nil && slices.ContainsFunc(oc.Result.Attempts, func(a runpod.Attempt) bool { return a.PodID != "" }) {
		what = "nothing more bought, nothing published"
	}
	step(n, "local validation", "%v — %s; the local relay's gate stands", why, what)
	oc.LocallyValidated = true
	return oc, nil
}

// plan reads the catalog (or falls back to the static tiers) and prints
// the candidate plan.
func (d Deps) plan(ctx context.Context, step func(int, string, string, ...any)) ([]runpod.Candidate, error) {
	plan, catalogErr, err := runpod.PlanFromCatalog(ctx, d.API, d.Config)
	if catalogErr != nil {
		step(4, "plan", "catalog unavailable, using the static tiers: %v", catalogErr)
	}
	if err != nil {
		return nil, err
	}
	if d.AfterCatalog != nil {
		d.AfterCatalog()
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
	return plan, nil
}

// attemptTable prints one line per provisioning attempt.
func (d Deps) attemptTable(out io.Writer, res runpod.Result) {
	for _, at := range res.Attempts {
		price := "   -   "
		if at.HourlyPrice > 0 {
			price = fmt.Sprintf("$%.2f/h", at.HourlyPrice)
		}
		fmt.Fprintf(out, "    attempt %d  %-32s %s  %-13s %5.1fs  est. $%.6f  %s\n", at.N, at.Candidate.GPUTypeID, price, at.Outcome, at.Seconds, at.EstimatedCost, cli.FirstLine(at.Reason, 80))
		if d.RealTime != nil {
			for _, n := range d.RealTime.Notes(at) {
				fmt.Fprintf(out, "               %s\n", n)
			}
		}
	}
}
