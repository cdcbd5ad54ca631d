package runpod

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gpugate/gpugate/internal/textlimit"
	"github.com/gpugate/gpugate/internal/wait"
	"github.com/gpugate/gpugate/runpod/rest"
)

// Progress reports how far the GPU job on the accepted pod has come.
// runpodgh.Progress is the go-github adapter.
type Progress interface {
	JobProgress(ctx context.Context) (JobProgress, error)
}

// JobProgress is the GPU job's state.
type JobProgress struct {
	TestsStarted bool   // the step that runs the tests has begun
	Completed    bool   // the job has finished
	Conclusion   string // when Completed
	// TestStepListed says the job lists a step named as the test step,
	// whatever its status. Once the job has completed every step is
	// listed, so a completed job without it points at a misnamed test
	// step, which the watchdog's message then says.
	TestStepListed bool

	// When each began and ended, where the source reports it (zero when
	// not, or not yet): the cost report's stage marks.
	JobStartedAt, TestsStartedAt, TestsEndedAt time.Time
}

// WatchDeps are the watchdog's outside world.
type WatchDeps struct {
	API      PodAPI
	Progress Progress
	PR       PRState // nil: a manual validation, never obsolete
	Head     string  // the authorized PR head SHA
	Runs     Runs    // to cancel the obsolete run after deleting the pod; nil: no cancellation
	RunID    int64   // the run to cancel
	Log      *slog.Logger
	Delete   func(ctx context.Context, api PodAPI, podID string) error // nil: Delete
}

// WatchOptions are the watchdog's limits.
type WatchOptions struct {
	SetupDeadline time.Duration // startedAt to tests started (900 s)
	Lifetime      time.Duration // total accepted-pod lifetime from startedAt (3,600 s)
	Poll          time.Duration // cadence: 10 s, at most six pod reads a minute
	StartGrace    time.Duration // how long start metadata may stay unreadable (60 s)
	// GitHubPoll is the cadence of the pull request and job-progress
	// reads (30 s; at most Poll). An Actions token has 1,000 requests an
	// hour per repository, shared by every job: two reads every 10 s for
	// the pod's hour would take most of them. A setup-deadline decision
	// reads the progress afresh first.
	GitHubPoll time.Duration
}

// DefaultWatchOptions holds the default numbers.
func DefaultWatchOptions() WatchOptions {
	return WatchOptions{SetupDeadline: 900 * time.Second, Lifetime: 3600 * time.Second, Poll: 10 * time.Second, StartGrace: 60 * time.Second,
		GitHubPoll: 30 * time.Second}
}

// ErrWatchOptions is matched by the error of watchdog limits that cannot
// be enforced (WatchOptions.Validate).
var ErrWatchOptions = errors.New("runpod: invalid watch options")

// Validate refuses limits the watchdog cannot enforce: Poll,
// SetupDeadline and Lifetime must each be positive (ErrWatchOptions). Watch
// checks them before its first read; a caller that buys a pod for Watch to
// follow checks them before buying it.
func (o WatchOptions) Validate() error {
	if o.Poll <= 0 || o.SetupDeadline <= 0 || o.Lifetime <= 0 {
		return fmt.Errorf("%w: WatchOptions needs positive Poll, SetupDeadline and Lifetime (got %s, %s, %s)", ErrWatchOptions, o.Poll, o.SetupDeadline, o.Lifetime)
	}
	return nil
}

// WatchOutcome is how a watch ended: the GPU job finished, a deadline
// passed, the work went obsolete, or the pod was lost. Every outcome but
// WatchCompleted and WatchGone deleted the pod.
type WatchOutcome string

// Watch outcomes.
const (
	WatchCompleted    WatchOutcome = "completed"             // the GPU job finished after its tests started: normal cleanup deletes
	WatchEarlyFinish  WatchOutcome = "finished-before-tests" // the job ended before its tests started: deleted
	WatchSetupTimeout WatchOutcome = "setup-timeout"         // tests did not start within the setup deadline: deleted
	WatchLifetime     WatchOutcome = "lifetime"              // the lifetime backstop passed: deleted
	WatchObsolete     WatchOutcome = "obsolete"              // the PR moved or closed: deleted, then the run canceled
	WatchUnreadable   WatchOutcome = "unreadable-start"      // start metadata could not be read: deleted
	WatchGone         WatchOutcome = "gone"                  // the pod was already deleted
)

// WatchResult says how the watch ended. Outcome is what to branch on and
// Conclusion whether the job passed; Reason is for people.
type WatchResult struct {
	Outcome WatchOutcome `json:"outcome"`
	Reason  string       `json:"reason"`
	// Conclusion is the GPU job's conclusion as GitHub reports it
	// ("success", "failure", "cancelled", ...) once the watch saw the job
	// finish (WatchCompleted, WatchEarlyFinish); "" when unknown.
	Conclusion   string     `json:"conclusion,omitempty"`
	Deleted      bool       `json:"deleted"`
	DeletedAt    *time.Time `json:"deleted_at,omitempty"`
	CostSoFar    float64    `json:"cost_so_far"` // from the pod's metadata at deletion: an estimate
	RunCanceled  bool       `json:"run_canceled,omitempty"`
	PodReads     int        `json:"pod_reads"`
	TestsStarted bool       `json:"tests_started"`
}

// ErrWatchdog is matched by Watch's error when it had to delete the pod
// (setup timeout, lifetime, early finish, unreadable start metadata).
var ErrWatchdog = errors.New("runpod: watchdog deleted the pod")

// Watch is the hosted lifecycle watchdog for an accepted pod. Until the
// tests start, a setup deadline runs from the pod's startedAt; progress-API
// failures never extend it. Once the tests start it is disarmed and
// monitoring continues until the GPU job completes, under a lifetime
// backstop from startedAt. A moved or closed pull request deletes the pod
// first and then cancels the run; unknown state is never obsolete. Early
// deletion logs the cost known from the pod's metadata before anything is
// cancelled.
func Watch(ctx context.Context, deps WatchDeps, podID string, opts WatchOptions) (WatchResult, error) {
	if deps.API == nil || deps.Progress == nil {
		return WatchResult{}, errors.New("runpod: Watch needs WatchDeps.API and WatchDeps.Progress")
	}
	if err := opts.Validate(); err != nil {
		return WatchResult{}, err
	}
	if deps.Delete == nil {
		deps.Delete = Delete
	}
	if deps.Log == nil {
		deps.Log = slog.New(slog.DiscardHandler)
	}
	w := watcher{deps: deps, podID: podID, opts: opts, begun: time.Now()}
	return w.run(ctx)
}

type watcher struct {
	deps     WatchDeps
	podID    string
	opts     WatchOptions
	begun    time.Time
	started  *time.Time
	cost     float64
	res      WatchResult
	githubAt time.Time // the last pull request and progress reads
	prog     JobProgress
	progErr  error
}

func (w *watcher) run(ctx context.Context) (WatchResult, error) {
	for {
		pod, err := w.deps.API.GetPod(ctx, w.podID)
		w.res.PodReads++
		switch {
		case errors.Is(err, rest.ErrNotFound):
			w.res.Outcome, w.res.Reason = WatchGone, "the pod is already deleted"
			return w.res, nil
		case err != nil:
			w.deps.Log.LogAttrs(ctx, slog.LevelWarn, "watch.pod_unknown", slog.String("pod", w.podID), slog.String("error", err.Error()))
		case pod.StartedAt == nil:
			// Unreadable start metadata: nothing bounds the pod.
			if time.Since(w.begun) >= w.opts.StartGrace || pod.Status.Final() || pod.Status == rest.StatusRunning {
				return w.kill(ctx, WatchUnreadable, "the accepted pod reports no startedAt: its deadlines cannot be enforced")
			}
		default:
			w.started, w.cost = pod.StartedAt, pod.Cost
		}
		if w.started == nil && time.Since(w.begun) >= w.opts.StartGrace {
			return w.kill(ctx, WatchUnreadable, fmt.Sprintf("the pod's start metadata was unreadable for %s", w.opts.StartGrace))
		}
		if w.githubAt.IsZero() || time.Since(w.githubAt) >= w.opts.GitHubPoll {
			w.githubAt = time.Now()
			if obsolete, why := w.obsolete(ctx); obsolete {
				return w.kill(ctx, WatchObsolete, why)
			}
			w.progress(ctx)
		}
		prog, perr := w.prog, w.progErr
		switch {
		case perr == nil && prog.Completed && !w.res.TestsStarted:
			w.res.Conclusion = prog.Conclusion
			why := "the GPU job finished (" + prog.Conclusion + ") before its tests started"
			if !prog.TestStepListed {
				why += "; it has no step named as the watchdog's test step, so if its tests did run, that setting names the wrong step"
			}
			return w.kill(ctx, WatchEarlyFinish, why)
		case perr == nil && prog.Completed:
			w.res.Conclusion = prog.Conclusion
			w.res.Outcome, w.res.Reason = WatchCompleted, "the GPU job completed ("+prog.Conclusion+"); normal cleanup deletes the pod"
			return w.res, nil
		}
		if w.started != nil {
			age := time.Since(*w.started)
			if !w.res.TestsStarted && age >= w.opts.SetupDeadline {
				// Deleting on a progress read up to GitHubPoll old could
				// kill tests that have just started: read it again.
				if w.progress(ctx); !w.res.TestsStarted {
					return w.kill(ctx, WatchSetupTimeout, fmt.Sprintf("tests did not start within %s of the pod's start", w.opts.SetupDeadline))
				}
			}
			if age >= w.opts.Lifetime {
				return w.kill(ctx, WatchLifetime, fmt.Sprintf("the pod outlived the %s lifetime backstop", w.opts.Lifetime))
			}
		}
		if err := wait.For(ctx, w.opts.Poll); err != nil {
			return w.res, fmt.Errorf("runpod: watch stopped: %w", err)
		}
	}
}

// githubCallTimeout bounds each GitHub read of the watchdog: a request
// that never answers is a failed read (unknown state), and the loop goes on
// enforcing the pod's deadlines.
const githubCallTimeout = 30 * time.Second

// progress reads the GPU job's progress into w.prog (w.progErr when
// unreadable) and notes when its tests have started.
func (w *watcher) progress(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, githubCallTimeout)
	defer cancel()
	w.prog, w.progErr = w.deps.Progress.JobProgress(ctx)
	if w.progErr != nil {
		w.deps.Log.LogAttrs(ctx, slog.LevelWarn, "watch.progress_unknown", slog.String("pod", w.podID), slog.String("error", w.progErr.Error()))
	} else if w.prog.TestsStarted && !w.res.TestsStarted {
		w.res.TestsStarted = true
		w.deps.Log.LogAttrs(ctx, slog.LevelInfo, "watch.tests_started", slog.String("pod", w.podID))
	}
}

func (w *watcher) obsolete(ctx context.Context) (bool, string) {
	if w.deps.PR == nil {
		return false, ""
	}
	ctx, cancel := context.WithTimeout(ctx, githubCallTimeout)
	defer cancel()
	pr, err := w.deps.PR.Current(ctx)
	switch {
	case err != nil:
		return false, ""
	case !pr.Open:
		return true, "the pull request was closed"
	case w.deps.Head != "" && pr.HeadSHA != w.deps.Head:
		return true, fmt.Sprintf("the pull request head moved to %s", textlimit.ShortSHA(pr.HeadSHA))
	}
	return false, ""
}

// kill deletes the pod (with a context that outlives the caller's), logs
// the cost already known, and only then cancels the run when obsolete.
func (w *watcher) kill(ctx context.Context, outcome WatchOutcome, reason string) (WatchResult, error) {
	w.res.Outcome, w.res.Reason = outcome, reason
	bg := context.WithoutCancel(ctx)
	if w.started != nil {
		w.res.CostSoFar = time.Since(*w.started).Hours() * w.cost
	}
	w.deps.Log.LogAttrs(bg, slog.LevelWarn, "watch.delete", slog.String("pod", w.podID), slog.String("outcome", string(outcome)),
		slog.String("reason", reason), slog.Float64("cost_so_far", w.res.CostSoFar))
	if err := w.deps.Delete(bg, w.deps.API, w.podID); err != nil {
		return w.res, fmt.Errorf("runpod: watchdog (%s): %w", reason, err)
	}
	t := time.Now()
	w.res.Deleted, w.res.DeletedAt = true, &t
	if outcome == WatchObsolete {
		if w.deps.Runs != nil && w.deps.RunID != 0 {
			cctx, cancel := context.WithTimeout(bg, githubCallTimeout)
			err := w.deps.Runs.Cancel(cctx, w.deps.RunID)
			cancel()
			if err != nil {
				return w.res, fmt.Errorf("%w: %s; pod %s deleted, but cancelling run %d failed: %w", ErrObsolete, reason, w.podID, w.deps.RunID, err)
			}
			w.res.RunCanceled = true
		}
		return w.res, fmt.Errorf("%w: %s; pod %s deleted", ErrObsolete, reason, w.podID)
	}
	return w.res, fmt.Errorf("%w %s: %s", ErrWatchdog, w.podID, reason)
}
