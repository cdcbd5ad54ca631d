package gate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/gpugate/gpugate/internal/textlimit"
)

// DefaultRelayWorkflow is the workflow that publishes a local gate once a
// maintainer posted the evidence (examples/workflows/local-gpu-relay.yml).
const DefaultRelayWorkflow = "local-gpu-relay.yml"

// ErrLaneFailed is returned when the GPU lane failed on the maintainer's
// machine: no evidence was posted and no relay dispatched.
var ErrLaneFailed = errors.New("gate: the local GPU lane failed")

// Commenter posts a comment on a pull request as the caller.
type Commenter interface {
	PostComment(ctx context.Context, number int, body string) error
}

// LocalRun is a maintainer's run of the GPU lane on their own GPU, to
// stand in for the paid pod.
type LocalRun struct {
	PR   int
	Head string // the commit the lane runs at: the checkout's HEAD
	// Lane runs the configured GPU lane at Head; an error fails the run.
	Lane func(ctx context.Context) error
	// LaneName says in the evidence what ran (the lane's command).
	LaneName string
	Label    string // the local-validation label (default DefaultLocalLabel)
	Workflow string // the relay workflow (default DefaultRelayWorkflow)
}

// LocalRunResult is what RunLocal did.
type LocalRunResult struct {
	Head    string        // the commit the lane ran at
	Comment string        // the evidence comment it posted
	Ref     string        // the branch the relay was dispatched on
	Took    time.Duration // how long the lane ran
}

// RunLocal runs the GPU lane on a maintainer's machine and hands its
// evidence to the relay, which publishes the required gate. It refuses
// unless the pull request is open, from this repository, labelled for
// local validation and at exactly run.Head (ErrHeadMoved when the PR's
// head is another commit: the lane would vouch for code that is not the
// PR's), both before the lane and again after it; it posts the evidence
// comment (its first line EvidenceMarker(run.Head)) only when the lane
// passed; and it dispatches the relay workflow on the default branch
// with the PR and the SHA. Nothing is posted when anything fails.
func RunLocal(ctx context.Context, repo Repo, comments Commenter, wf Workflows, run LocalRun) (LocalRunResult, error) {
	label, workflow := run.Label, run.Workflow
	if label == "" {
		label = DefaultLocalLabel
	}
	if workflow == "" {
		workflow = DefaultRelayWorkflow
	}
	if run.PR <= 0 || !IsSHA(run.Head) || run.Lane == nil {
		return LocalRunResult{}, fmt.Errorf("%w: a local run needs the pull request, the full SHA of the checked-out commit and a lane", ErrBadRequest)
	}
	check := func(when string) error {
		pr, err := repo.PullRequest(ctx, run.PR)
		if err != nil {
			return fmt.Errorf("gate: read PR #%d %s: %w", run.PR, when, err)
		}
		if err := checkLabelled(pr, run.Head, label); err != nil {
			return fmt.Errorf("%w %s: run the lane at the PR's head, with the %q label on the PR", err, when, label)
		}
		return nil
	}
	if err := check("before the lane"); err != nil {
		return LocalRunResult{}, err
	}
	start := time.Now()
	if err := run.Lane(ctx); err != nil {
		return LocalRunResult{}, fmt.Errorf("%w at %s: %w", ErrLaneFailed, textlimit.ShortSHA(run.Head), err)
	}
	took := time.Since(start)
	if err := check("after the lane"); err != nil {
		return LocalRunResult{}, err
	}
	ref, err := wf.DefaultBranch(ctx)
	if err != nil {
		return LocalRunResult{}, err
	}
	body := fmt.Sprintf("%s\n\nThe GPU lane (`%s`) passed on a maintainer's GPU at %s in %s. The %s workflow verifies this comment and publishes the required gate for this commit only.",
		EvidenceMarker(run.Head), run.LaneName, run.Head, took.Round(time.Second), workflow)
	if err := comments.PostComment(ctx, run.PR, body); err != nil {
		return LocalRunResult{}, fmt.Errorf("gate: post the evidence on #%d: %w", run.PR, err)
	}
	if err := wf.Dispatch(ctx, workflow, ref, map[string]any{"pr": strconv.Itoa(run.PR), "sha": run.Head}); err != nil {
		return LocalRunResult{Comment: body}, fmt.Errorf("%w; the evidence is posted: dispatch %s on %s by hand with pr=%d sha=%s", err, workflow, ref, run.PR, run.Head)
	}
	return LocalRunResult{Head: run.Head, Comment: body, Ref: ref, Took: took}, nil
}
