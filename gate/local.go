package gate

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpugate/gpugate/internal/textlimit"
	"github.com/gpugate/gpugate/internal/wait"
)

// DefaultLocalLabel marks a pull request validated on a maintainer's GPU.
const DefaultLocalLabel = "gpu-validated-locally"

// DefaultLocalWait bounds how long the PR-attached gate waits for the local
// relay's publication.
const DefaultLocalWait = 330 * time.Minute

// EvidenceMarker is the first line of a local-validation evidence comment
// for sha. It is bound to the commit: evidence for another SHA never counts.
func EvidenceMarker(sha string) string { return ExternalID{Ref: sha, Kind: KindLocal}.String() }

// LocalRequest asks the relay to publish a local gate.
type LocalRequest struct {
	Dispatcher string // who dispatched the relay workflow
	PR         int
	SHA        string // the head SHA being published
	Label      string // default DefaultLocalLabel
	MinRole    string // default maintain
}

// LocalEvidence is the local relay's verified evidence for one head: only
// VerifyLocalEvidence makes one that a KindLocal (or KindSkipped) report
// can carry.
type LocalEvidence struct {
	pr         int
	sha        string // the head it is evidence for
	dispatcher string
}

// PR is the pull request the evidence was verified on.
func (e LocalEvidence) PR() int { return e.pr }

// SHA is the head the evidence is for.
func (e LocalEvidence) SHA() string { return e.sha }

// Dispatcher is who posted the evidence and dispatched the relay.
func (e LocalEvidence) Dispatcher() string { return e.dispatcher }

// VerifyLocalEvidence checks everything the relay must before publishing
// local-gpu-gate:v1:<sha>: the dispatcher is a maintainer or admin; the PR
// is open, from this repository, labelled, and at exactly SHA; an evidence
// comment by the dispatcher has the marker for exactly SHA as its first
// line; and a second read of the PR shows nothing changed.
func VerifyLocalEvidence(ctx context.Context, repo Repo, req LocalRequest) (LocalEvidence, error) {
	label, min := req.Label, req.MinRole
	if label == "" {
		label = DefaultLocalLabel
	}
	if min == "" {
		min = "maintain"
	}
	if !IsSHA(req.SHA) || req.PR == 0 || req.Dispatcher == "" {
		return LocalEvidence{}, fmt.Errorf("%w: the relay needs a dispatcher, a PR number and a full head SHA", ErrBadRequest)
	}
	role, err := repo.Permission(ctx, req.Dispatcher)
	if err != nil {
		return LocalEvidence{}, fmt.Errorf("gate: read %s's permission: %w", req.Dispatcher, err)
	}
	if !RoleAtLeast(role, min) {
		return LocalEvidence{}, fmt.Errorf("%w: dispatcher %s has role %q; %s or higher is required", ErrUnauthorized, req.Dispatcher, role, min)
	}
	first, err := repo.PullRequest(ctx, req.PR)
	if err != nil {
		return LocalEvidence{}, fmt.Errorf("gate: read PR #%d: %w", req.PR, err)
	}
	if err := checkLabelled(first, req.SHA, label); err != nil {
		return LocalEvidence{}, err
	}
	comments, err := repo.Comments(ctx, req.PR)
	if err != nil {
		return LocalEvidence{}, fmt.Errorf("gate: read comments of PR #%d: %w", req.PR, err)
	}
	marker := EvidenceMarker(req.SHA)
	found := slices.ContainsFunc(comments, func(c Comment) bool {
		line, _, _ := strings.Cut(strings.ReplaceAll(c.Body, "\r\n", "\n"), "\n")
		return c.Author == req.Dispatcher && strings.TrimSpace(line) == marker
	})
	if !found {
		return LocalEvidence{}, fmt.Errorf("%w: no comment on #%d by %s whose first line is %q", ErrEvidence, req.PR, req.Dispatcher, marker)
	}
	second, err := repo.PullRequest(ctx, req.PR)
	if err != nil {
		return LocalEvidence{}, fmt.Errorf("gate: re-read PR #%d: %w", req.PR, err)
	}
	if err := checkLabelled(second, req.SHA, label); err != nil {
		return LocalEvidence{}, fmt.Errorf("%w (changed while verifying)", err)
	}
	return LocalEvidence{pr: req.PR, sha: req.SHA, dispatcher: req.Dispatcher}, nil
}

func checkLabelled(pr PullRequest, sha, label string) error {
	switch {
	case !pr.Open:
		return fmt.Errorf("%w: #%d", ErrClosed, pr.Number)
	case pr.HeadRepoID == 0 || pr.HeadRepoID != pr.BaseRepoID:
		return fmt.Errorf("%w: #%d", ErrFork, pr.Number)
	case !slices.Contains(pr.Labels, label):
		return fmt.Errorf("%w: #%d does not carry the %q label", ErrEvidence, pr.Number, label)
	case pr.HeadSHA != sha:
		return fmt.Errorf("%w: #%d is at %s, not %s", ErrHeadMoved, pr.Number, textlimit.ShortSHA(pr.HeadSHA), textlimit.ShortSHA(sha))
	}
	return nil
}

// PaidPathAllowed reports whether the paid path may publish for this PR:
// never for a PR carrying the local-validation label, so the paid workflow
// can never override the local publication. Authorize records it
// (Authorization.LocalValidation); PaidPathSkipped reads the label again
// later, since it can be added after authorization.
func PaidPathAllowed(pr PullRequest, label string) bool {
	return !slices.Contains(pr.Labels, localLabel(label))
}

// localLabel is label, or DefaultLocalLabel when it is empty.
func localLabel(label string) string {
	if label == "" {
		return DefaultLocalLabel
	}
	return label
}

// PaidPathSkipped re-reads the pull request just before a paid step
// (buying a pod, publishing the gate) and reports whether it now carries
// the local-validation label: the label may have been added after
// authorization, and the paid path must then stop and publish nothing.
// An unreadable pull request is an error, never a skip.
func PaidPathSkipped(ctx context.Context, repo Repo, number int, label string) (bool, error) {
	pr, err := repo.PullRequest(ctx, number)
	if err != nil {
		return false, fmt.Errorf("gate: re-read PR #%d for the local-validation label: %w", number, err)
	}
	return !PaidPathAllowed(pr, label), nil
}

// WaitLocal is the PR-attached gate for a labelled PR: it accepts only a
// successful local-gpu-gate:v1:<head> check and waits for one, polling,
// until timeout (DefaultLocalWait when 0).
func WaitLocal(ctx context.Context, checks Checks, head, checkName string, timeout, poll time.Duration) (Gate, error) {
	if timeout == 0 {
		timeout = DefaultLocalWait
	}
	if poll <= 0 {
		poll = time.Minute
	}
	if checkName == "" {
		checkName = DefaultCheckName
	}
	want := EvidenceMarker(head)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		gates, err := checks.ListGates(ctx, head, checkName)
		if err == nil {
			for _, g := range gates {
				if g.ExternalID == want && g.Status == "completed" {
					if g.Conclusion == "success" {
						return g, nil
					}
					return g, fmt.Errorf("gate: the local gate for %s concluded %s", textlimit.ShortSHA(head), g.Conclusion)
				}
			}
		}
		if err := wait.For(ctx, poll); err != nil {
			return Gate{}, fmt.Errorf("gate: no local gate %s within %s: %w", want, timeout, err)
		}
	}
}
