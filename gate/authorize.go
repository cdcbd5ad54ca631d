package gate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gpugate/gpugate/internal/textlimit"
)

// Repo is the repository surface authorization and the local relay read.
type Repo interface {
	// Permission returns the user's role: admin, maintain, write, triage,
	// read or none.
	Permission(ctx context.Context, user string) (string, error)
	PullRequest(ctx context.Context, number int) (PullRequest, error)
	// ResolveRef resolves a branch, tag or SHA to a full commit SHA.
	ResolveRef(ctx context.Context, ref string) (string, error)
	// Comments lists every comment on a pull request.
	Comments(ctx context.Context, number int) ([]Comment, error)
}

// PullRequest is what the gate needs of a pull request.
type PullRequest struct {
	Number     int
	Open       bool
	HeadSHA    string
	MergeSHA   string // GitHub's test merge commit; empty while unknown or conflicting
	HeadRepoID int64
	BaseRepoID int64
	Labels     []string
	UpdatedAt  time.Time // when GitHub last changed it; zero when unknown
}

// Comment is one pull request comment.
type Comment struct {
	ID     int64
	Author string
	Body   string
}

// Sentinels for refusals before any spend.
var (
	ErrUnauthorized = errors.New("gate: actor not authorized")
	ErrFork         = errors.New("gate: fork pull requests are never run on paid hardware")
	ErrClosed       = errors.New("gate: pull request is not open")
	ErrHeadMoved    = errors.New("gate: pull request head moved")
	ErrNoMergeRef   = errors.New("gate: no test merge commit")
	ErrBadRequest   = errors.New("gate: invalid request")
	ErrEvidence     = errors.New("gate: local validation evidence refused")
	// ErrLocallyValidated: the pull request now carries the
	// local-validation label, so the paid path stops: nothing is bought
	// or published, and the local relay's gate stands.
	ErrLocallyValidated = errors.New("gate: the pull request was validated on a maintainer's GPU; the paid path stops")
)

var roles = []string{"none", "read", "triage", "write", "maintain", "admin"}

// RoleAtLeast reports whether role is at least min in GitHub's order
// none < read < triage < write < maintain < admin.
func RoleAtLeast(role, min string) bool {
	r, m := slices.Index(roles, role), slices.Index(roles, min)
	return r >= 0 && m >= 0 && r >= m
}

// AuthRequest is a request to validate: a pull request number, or a manual
// ref, never both.
type AuthRequest struct {
	Actor   string
	PR      int    // PR-number recovery or an automatic run
	Ref     string // manual revision dispatch (trusted post-merge validation)
	MinRole string // admin or maintain (default maintain)
	// LocalLabel marks a pull request validated on a maintainer's GPU
	// (default DefaultLocalLabel).
	LocalLabel string
	// ClassifiedHead is the head the classifier listed the changed files
	// at (changepolicy's Decision.HeadSHA). When set, a head that differs
	// is refused with ErrHeadMoved: the classification describes other
	// files, so classify again.
	ClassifiedHead string
}

// Authorization is what may be spent on: immutable SHAs, derived here,
// never taken from the caller.
type Authorization struct {
	Actor     string
	Role      string
	PR        int    // 0 for a manual revision
	HeadSHA   string // the authorized head, where the gate is published
	TestedRef string // the merge SHA (PR) or the resolved commit (manual)
	// LocalValidation: the pull request carries the local-validation label,
	// so the paid path is skipped (every paid job after authorization, and
	// the publication) and the local relay's gate stands.
	LocalValidation bool
	// LocalLabel is the local-validation label Recheck reads again.
	LocalLabel string
}

// Authorize runs the trust boundary before any spend: the actor's role, a
// same-repository open pull request (compared by repository ID), and
// immutable SHAs for the head and the tested merge ref (a manual ref is
// resolved to its commit).
func Authorize(ctx context.Context, repo Repo, req AuthRequest) (Authorization, error) {
	min := req.MinRole
	if min == "" {
		min = "maintain"
	}
	switch {
	case min != "maintain" && min != "admin":
		return Authorization{}, fmt.Errorf("%w: minimum role %q: use maintain or admin", ErrBadRequest, min)
	case (req.PR != 0) == (req.Ref != ""):
		return Authorization{}, fmt.Errorf("%w: give a pull request number or a manual ref, not both and not neither", ErrBadRequest)
	case req.Actor == "":
		return Authorization{}, fmt.Errorf("%w: no actor", ErrBadRequest)
	}
	role, err := repo.Permission(ctx, req.Actor)
	if err != nil {
		return Authorization{}, fmt.Errorf("gate: read %s's permission: %w", req.Actor, err)
	}
	if !RoleAtLeast(role, min) {
		return Authorization{}, fmt.Errorf("%w: %s has role %q; %s or higher is required", ErrUnauthorized, req.Actor, role, min)
	}
	a := Authorization{Actor: req.Actor, Role: role, PR: req.PR}
	if req.Ref != "" {
		sha, err := repo.ResolveRef(ctx, req.Ref)
		if err != nil {
			return Authorization{}, fmt.Errorf("gate: resolve %q: %w", req.Ref, err)
		}
		if !IsSHA(sha) {
			return Authorization{}, fmt.Errorf("%w: %q resolved to %q, not a commit SHA", ErrBadRequest, req.Ref, sha)
		}
		if err := classifiedAt(req.ClassifiedHead, sha); err != nil {
			return Authorization{}, err
		}
		a.HeadSHA, a.TestedRef = sha, sha
		return a, nil
	}
	pr, err := repo.PullRequest(ctx, req.PR)
	if err != nil {
		return Authorization{}, fmt.Errorf("gate: read PR #%d: %w", req.PR, err)
	}
	if err := checkPR(pr); err != nil {
		return Authorization{}, err
	}
	if err := classifiedAt(req.ClassifiedHead, pr.HeadSHA); err != nil {
		return Authorization{}, fmt.Errorf("%w (PR #%d)", err, req.PR)
	}
	a.HeadSHA, a.TestedRef = pr.HeadSHA, pr.MergeSHA
	a.LocalValidation, a.LocalLabel = !PaidPathAllowed(pr, req.LocalLabel), req.LocalLabel
	return a, nil
}

// classifiedAt refuses a head other than the one that was classified.
func classifiedAt(classified, head string) error {
	if classified != "" && classified != head {
		return fmt.Errorf("%w: the changed files were classified at %s, the head is now %s: classify again", ErrHeadMoved, textlimit.ShortSHA(classified), textlimit.ShortSHA(head))
	}
	return nil
}

func checkPR(pr PullRequest) error {
	switch {
	case !pr.Open:
		return fmt.Errorf("%w: #%d", ErrClosed, pr.Number)
	case pr.HeadRepoID == 0 || pr.HeadRepoID != pr.BaseRepoID:
		return fmt.Errorf("%w: #%d comes from repository %d, not %d", ErrFork, pr.Number, pr.HeadRepoID, pr.BaseRepoID)
	case !IsSHA(pr.HeadSHA):
		return fmt.Errorf("%w: #%d head %q is not a commit SHA", ErrBadRequest, pr.Number, pr.HeadSHA)
	case !IsSHA(pr.MergeSHA):
		return fmt.Errorf("%w: #%d has no test merge commit yet (or conflicts with its base); retry once GitHub computes it", ErrNoMergeRef, pr.Number)
	}
	return nil
}

// Recheck confirms, just before spending, that the pull request is still
// open, same-repository, at the authorized head, and without the
// local-validation label (ErrLocallyValidated: the label may have been
// added after authorization). A manual revision needs no recheck: it is
// immutable.
func Recheck(ctx context.Context, repo Repo, a Authorization) error {
	if a.PR == 0 {
		return nil
	}
	pr, err := repo.PullRequest(ctx, a.PR)
	if err != nil {
		return fmt.Errorf("gate: recheck PR #%d: %w", a.PR, err)
	}
	if err := checkPR(pr); err != nil {
		return err
	}
	if pr.HeadSHA != a.HeadSHA {
		return fmt.Errorf("%w: #%d was authorized at %s and is now at %s", ErrHeadMoved, a.PR, textlimit.ShortSHA(a.HeadSHA), textlimit.ShortSHA(pr.HeadSHA))
	}
	if !PaidPathAllowed(pr, a.LocalLabel) {
		return fmt.Errorf("%w: #%d carries %q", ErrLocallyValidated, a.PR, localLabel(a.LocalLabel))
	}
	return nil
}
