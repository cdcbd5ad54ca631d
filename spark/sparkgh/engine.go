package sparkgh

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/gpugate/gpugate/internal/textlimit"
	"github.com/gpugate/gpugate/spark"
)

// ErrNotActive is returned by EngineRunning and EngineFinished for a
// request that is not an active lease of the integration's (it ended, or
// the integration did not queue it): there is nothing to report on.
var ErrNotActive = errors.New("sparkgh: not an active lease of the GitHub integration")

// RunnerEngine is Config.Engine's default: a one-job JIT runner and the
// dispatched workflow run each granted lane.
const RunnerEngine = "runner"

// runsOwnRunner reports whether granted lanes run on the integration's
// one-job runners (Config.Engine "" or RunnerEngine).
func (c Config) runsOwnRunner() bool { return c.Engine == "" || c.Engine == RunnerEngine }

// Engine is what runs the integration's granted lanes: RunnerEngine, or
// the execution engine Config.Engine names.
func (in *Integration) Engine() string {
	if in.cfg.runsOwnRunner() {
		return RunnerEngine
	}
	return in.cfg.Engine
}

// Target is the repository (owner/name) and commit a request the
// integration queued runs: a pull request's head, or the commit its merge
// group or schedule named. ok is false for any other request.
func Target(r spark.Request) (repo, sha string, ok bool) {
	repo, sha = r.Annotations[keyRepo], commitOf(r)
	return repo, sha, repo != "" && sha != ""
}

// EngineRun is how an execution engine's run of a granted lane ended.
type EngineRun struct {
	// Name is the run's name in the engine (a dstack run's); the check
	// names it. Empty when no run was made (the engine refused the lane).
	Name string
	// Succeeded: the run finished successfully (for dstack: done, all
	// jobs done, on the leased hosts). Nothing else passes.
	Succeeded bool
	// Why says how a run that did not succeed ended (its status and
	// termination reason); the check shows it.
	Why string
	// URL is the run's page; the check links it when it is https.
	URL string
}

// maxWhy bounds how an engine run ended, as the check shows it.
const maxWhy = 500

// active is request id when it is an active lease the integration queued.
func (in *Integration) active(ctx context.Context, id string) (spark.Request, error) {
	st, err := in.ctrl.Status(ctx, id)
	if err != nil {
		return spark.Request{}, err
	}
	r := st.Request
	if _, _, ok := Target(r); !ok || r.State != spark.Active {
		return r, fmt.Errorf("%w: request %s is %s", ErrNotActive, id, r.State)
	}
	return r, nil
}

// EngineRunning reports that the engine's run of request id is running
// its suite: the check shows "Spark test running — exact SHA".
func (in *Integration) EngineRunning(ctx context.Context, id string) error {
	r, err := in.active(ctx, id)
	if err != nil || r.Annotations[keyPhase] == phaseRunning {
		return err
	}
	return in.ctrl.Annotate(ctx, id, keyPhase, phaseRunning)
}

// EngineFinished concludes request id from how the engine's run of it
// ended, releases the lease and refreshes the checks. Its check passes
// only when run.Succeeded and the lease's evidence receipt is recorded
// (spark.Controller.RecordReceipt, before this call): "Spark test passed —
// evidence receipt recorded", naming the digest and linking the run. A
// run that succeeded without a receipt, or did not succeed, fails the
// check, naming the run and how it ended.
func (in *Integration) EngineFinished(ctx context.Context, id string, run EngineRun) error {
	r, err := in.active(ctx, id)
	if err != nil {
		return err
	}
	phase := phasePassed
	if !run.Succeeded {
		why := strings.Join(strings.Fields(run.Why), " ")
		if why == "" {
			why = "it did not finish successfully"
		}
		if run.Name != "" {
			why = fmt.Sprintf("run %s ended %s", run.Name, why)
		}
		phase = textlimit.Cut(why, maxWhy, "…")
	}
	if strings.HasPrefix(run.URL, "https://") {
		if err := in.ctrl.Annotate(ctx, id, keyJobURL, run.URL); err != nil {
			return err
		}
	}
	if err := in.ctrl.Annotate(ctx, id, keyPhase, phase); err != nil {
		return err
	}
	if err := in.ctrl.Release(ctx, id, r.Token); err != nil {
		return err
	}
	in.log.Info("sparkgh.engine_finished", "request", id, "run", run.Name, "succeeded", run.Succeeded)
	return in.Sync(ctx)
}
