package gate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gpugate/gpugate/internal/wait"
)

// Run is a workflow run.
type Run struct {
	ID         int64
	Status     string // queued, in_progress, completed
	Conclusion string
	URL        string
	CreatedAt  time.Time
}

// Workflows is the Actions surface recovery uses.
type Workflows interface {
	DefaultBranch(ctx context.Context) (string, error)
	// Dispatch fires workflow_dispatch on workflow at ref with inputs.
	Dispatch(ctx context.Context, workflow, ref string, inputs map[string]any) error
	// Runs lists the workflow's workflow_dispatch runs created at or after since.
	Runs(ctx context.Context, workflow string, since time.Time) ([]Run, error)
	Run(ctx context.Context, id int64) (Run, error)
}

// RecoverRequest asks to re-run the GPU gate for a pull request.
type RecoverRequest struct {
	Workflow string        // the GPU workflow file, e.g. runpod-gpu-test.yml
	PR       int           // the pull request; the workflow re-derives what to test
	Input    string        // the dispatch input carrying the PR number (default pr_number)
	Wait     bool          // follow the run to completion
	Poll     time.Duration // default 30 s
	Find     time.Duration // how long to look for the dispatched run (default 2 min)
}

// RecoverResult is the dispatched run.
type RecoverResult struct {
	Ref string // always the default branch
	Run Run
}

// Recover dispatches the GPU workflow at the default branch for a pull
// request number: there is no ref option, and the trusted workflow derives
// the tested revision and the check target itself. With Wait it follows the
// dispatched run to completion and reports its conclusion and link.
func Recover(ctx context.Context, wf Workflows, req RecoverRequest) (RecoverResult, error) {
	if req.PR <= 0 || req.Workflow == "" {
		return RecoverResult{}, fmt.Errorf("%w: recovery needs a workflow and a PR number", ErrBadRequest)
	}
	input := req.Input
	if input == "" {
		input = "pr_number"
	}
	poll, find := req.Poll, req.Find
	if poll <= 0 {
		poll = 30 * time.Second
	}
	if find <= 0 {
		find = 2 * time.Minute
	}
	ref, err := wf.DefaultBranch(ctx)
	if err != nil {
		return RecoverResult{}, fmt.Errorf("gate: read the default branch: %w", err)
	}
	since := time.Now().Add(-5 * time.Second)
	if err := wf.Dispatch(ctx, req.Workflow, ref, map[string]any{input: fmt.Sprint(req.PR)}); err != nil {
		return RecoverResult{}, fmt.Errorf("gate: dispatch %s at %s: %w", req.Workflow, ref, err)
	}
	res := RecoverResult{Ref: ref}
	if !req.Wait {
		return res, nil
	}
	fctx, cancel := context.WithTimeout(ctx, find)
	defer cancel()
	for {
		runs, err := wf.Runs(fctx, req.Workflow, since)
		if err == nil && len(runs) > 0 {
			res.Run = runs[0]
			for _, r := range runs[1:] {
				if r.CreatedAt.Before(res.Run.CreatedAt) {
					res.Run = r // the earliest after the dispatch is ours
				}
			}
			break
		}
		if err := wait.For(fctx, poll); err != nil {
			return res, fmt.Errorf("gate: the dispatched run did not appear within %s: %w", find, err)
		}
	}
	for res.Run.Status != "completed" {
		if err := wait.For(ctx, poll); err != nil {
			return res, fmt.Errorf("gate: following run %d: %w", res.Run.ID, err)
		}
		r, err := wf.Run(ctx, res.Run.ID)
		if err != nil {
			continue // transient: keep following until ctx ends
		}
		res.Run = r
	}
	if res.Run.Conclusion != "success" {
		return res, fmt.Errorf("%w: run %d concluded %s: %s", ErrRecoveryFailed, res.Run.ID, res.Run.Conclusion, res.Run.URL)
	}
	return res, nil
}

// ErrRecoveryFailed is matched when the recovered run did not succeed.
var ErrRecoveryFailed = errors.New("gate: recovery run failed")
