package gate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpugate/gpugate/internal/textlimit"
)

// MaxSummary is GitHub's limit on a check run's output summary.
const MaxSummary = 65535

// Publication is a gate check run to create or complete.
type Publication struct {
	Name        string // check name; default DefaultCheckName
	HeadSHA     string // the authorized PR head SHA
	ID          ExternalID
	Status      string // completed (default) or in_progress
	Conclusion  string // set from the kind when empty
	Title       string
	Summary     string
	DetailsURL  string
	CompletedAt time.Time
}

// Report is what a completed gate says.
type Report struct {
	HeadSHA    string
	CheckName  string // default DefaultCheckName
	ID         ExternalID
	ReusedFrom *Gate           // for KindReused: the check reused
	GPU        *Classification // for KindNotRequired (and KindSkipped): the classifier's decision for HeadSHA
	Paid       *PaidEvidence   // for KindPaid: the paid run's own result
	Local      *LocalEvidence  // for KindLocal (and KindSkipped): the relay's verified evidence, from VerifyLocalEvidence
	Ran        []string        // what ran
	NotRun     []string        // what did NOT run, listed separately, never as passed
	Details    string          // further Markdown
	DetailsURL string
	ExistingID int64 // an in-progress gate to complete instead of creating one
}

// Classification is the trusted classifier's decision about the GPU lane,
// for the head whose changed files it classified (changepolicy's
// Decision.HeadSHA). It is evidence for that head only.
type Classification struct {
	GPURequired bool
	Reason      string
	HeadSHA     string // the head the classified files were listed at
}

// PaidEvidence is a paid run's own result.
type PaidEvidence struct {
	TestsPassed bool   // the GPU test job concluded success
	PodID       string // the accepted pod (optional, for the record)
}

// ErrPublish is matched by Publish's refusals.
var ErrPublish = errors.New("gate: refusing to publish")

// ErrNoEvidence is matched (with ErrPublish) when a report's kind would
// publish a conclusion that satisfies a required check (success, neutral
// and skipped all do) without the evidence that kind needs (Evidence).
var ErrNoEvidence = errors.New("gate: no evidence for the conclusion")

// Evidence says what a publication of kind k must carry: every kind but
// KindFailed publishes a conclusion that satisfies a required check.
func Evidence(k Kind) string {
	switch k {
	case KindPaid:
		return "the paid run's result with its tests passed (Report.Paid)"
	case KindReused:
		return "the check it reuses (Report.ReusedFrom)"
	case KindNotRequired:
		return "the trusted classifier's decision that GPU validation is unnecessary, for this head (Report.GPU)"
	case KindSkipped:
		return "the trusted classifier's decision for this head (Report.GPU) or the local relay's verified evidence (Report.Local)"
	case KindLocal:
		return "the local relay's verified evidence for this head (Report.Local, from VerifyLocalEvidence)"
	case KindFailed:
		return "nothing: a failure satisfies no required check"
	}
	return "an unknown kind is never published"
}

// hasEvidence reports whether r carries what its kind needs.
func hasEvidence(r Report) bool {
	notRequired := r.GPU != nil && !r.GPU.GPURequired && r.GPU.HeadSHA == r.HeadSHA
	local := r.Local != nil && r.Local.sha != "" && r.Local.sha == r.HeadSHA
	switch r.ID.Kind {
	case KindPaid:
		return r.Paid != nil && r.Paid.TestsPassed
	case KindReused:
		return r.ReusedFrom != nil && r.ReusedFrom.ID != 0
	case KindNotRequired:
		return notRequired
	case KindSkipped:
		return notRequired || local
	case KindLocal:
		return local
	case KindFailed:
		return true
	}
	return false
}

// Title is the title a person sees for a kind.
func Title(k Kind) string {
	switch k {
	case KindPaid:
		return "passed"
	case KindReused:
		return "passed (reused)"
	case KindNotRequired:
		return "not required"
	case KindFailed:
		return "failed"
	case KindSkipped:
		return "skipped"
	case KindLocal:
		return "passed (local GPU validation)"
	}
	return string(k)
}

func conclusion(k Kind) string {
	switch k {
	case KindFailed:
		return "failure"
	case KindSkipped:
		return "skipped"
	}
	return "success"
}

// Build turns a report into a publication, checking it: the head is a full
// SHA, and the report carries the evidence its kind needs (Evidence): a
// reused gate names its source, "paid" carries passed tests, "not
// required" only the classifier's decision for this exact head, "local"
// the relay's verified evidence for it.
func Build(r Report, now time.Time) (Publication, error) {
	_, validID := ParseExternalID(r.ID.String())
	switch {
	case !IsSHA(r.HeadSHA):
		return Publication{}, fmt.Errorf("%w: head %q is not a full commit SHA", ErrPublish, r.HeadSHA)
	case !validID:
		return Publication{}, fmt.Errorf("%w: external ID %q is not a gate ID (tested ref must be a full commit SHA)", ErrPublish, r.ID.String())
	case r.ID.Kind == KindLocal && r.ID.Ref != r.HeadSHA:
		return Publication{}, fmt.Errorf("%w: a local gate must be for the head it is published on", ErrPublish)
	case r.GPU != nil && r.GPU.HeadSHA != "" && r.GPU.HeadSHA != r.HeadSHA:
		return Publication{}, fmt.Errorf("%w: %w: the classification is for head %s, not %s: the head moved after it was classified; classify again", ErrPublish, ErrNoEvidence, textlimit.ShortSHA(r.GPU.HeadSHA), textlimit.ShortSHA(r.HeadSHA))
	case !hasEvidence(r):
		return Publication{}, fmt.Errorf("%w: %w: a %s gate on %s needs %s", ErrPublish, ErrNoEvidence, r.ID.Kind, textlimit.ShortSHA(r.HeadSHA), Evidence(r.ID.Kind))
	}
	name := r.CheckName
	if name == "" {
		name = DefaultCheckName
	}
	return Publication{
		Name: name, HeadSHA: r.HeadSHA, ID: r.ID, Status: "completed", Conclusion: conclusion(r.ID.Kind),
		Title: Title(r.ID.Kind), Summary: summary(r), DetailsURL: r.DetailsURL, CompletedAt: now,
	}, nil
}

func summary(r Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**%s** for tested ref `%s` (`%s`).\n\n", Title(r.ID.Kind), r.ID.Ref, r.ID.String())
	switch {
	case r.ReusedFrom != nil:
		link := fmt.Sprintf("check %d", r.ReusedFrom.ID)
		if r.ReusedFrom.URL != "" {
			link = fmt.Sprintf("[check %d](%s)", r.ReusedFrom.ID, r.ReusedFrom.URL)
		}
		fmt.Fprintf(&b, "The paid validation of this exact merge ref already passed: %s. No pod was created.\n\n", link)
	case r.GPU != nil && r.ID.Kind == KindNotRequired:
		fmt.Fprintf(&b, "GPU validation is not required: %s\n\n", r.GPU.Reason)
	}
	if len(r.Ran) > 0 {
		b.WriteString("### Ran\n")
		for _, s := range r.Ran {
			fmt.Fprintf(&b, "- %s\n", s)
		}
		b.WriteString("\n")
	}
	if len(r.NotRun) > 0 {
		b.WriteString("### NOT RUN\nThese were not executed; they are not passes.\n")
		for _, s := range r.NotRun {
			fmt.Fprintf(&b, "- %s\n", s)
		}
		b.WriteString("\n")
	}
	if r.Details != "" {
		b.WriteString(r.Details)
		b.WriteString("\n")
	}
	return Truncate(b.String(), MaxSummary)
}

// Truncate shortens s to at most max bytes on a rune boundary, saying so.
func Truncate(s string, max int) string {
	return textlimit.Cut(s, max, "\n\n… (truncated: GitHub limits a check summary to 65,535 characters)\n")
}

// Publish creates the gate check run on the report's head, or completes
// the in-progress one named by ExistingID, for pull request pr (0: a
// manual revision, which has no pull request). A paid-path publication
// (any kind but KindLocal) for a pull request first reads the pull request
// again through repo: while it carries the local-validation label (label;
// DefaultLocalLabel when empty), nothing is published and the error is
// ErrLocallyValidated, since the label may have been added after
// authorization and the local relay's gate must never be overridden. An
// unreadable pull request, or no repo to read it through, publishes
// nothing either. A local gate carries the relay's evidence, which
// VerifyLocalEvidence already verified on the labelled pull request.
func Publish(ctx context.Context, repo Repo, checks Checks, pr int, label string, r Report, now time.Time) (Gate, error) {
	if pr != 0 && r.ID.Kind != KindLocal {
		if repo == nil {
			return Gate{}, fmt.Errorf("%w: a gate for PR #%d needs the repository to re-read its local-validation label: pass the Repo", ErrPublish, pr)
		}
		skip, err := PaidPathSkipped(ctx, repo, pr, label)
		if err != nil {
			return Gate{}, err
		}
		if skip {
			return Gate{}, fmt.Errorf("%w: #%d carries %q: its local validation stands, so the paid path publishes nothing", ErrLocallyValidated, pr, localLabel(label))
		}
	}
	return publish(ctx, checks, r, now)
}

// publish creates or completes the gate check run, without reading the
// pull request: only Publish, after its label re-read, calls it.
func publish(ctx context.Context, checks Checks, r Report, now time.Time) (Gate, error) {
	p, err := Build(r, now)
	if err != nil {
		return Gate{}, err
	}
	if r.ExistingID != 0 {
		// Only a check on the head the report is for may be completed: a
		// check ID names a check on whatever commit it was created on.
		gates, err := checks.ListGates(ctx, p.HeadSHA, p.Name)
		if err != nil {
			return Gate{}, fmt.Errorf("gate: find check %d on %s before completing it: %w", r.ExistingID, textlimit.ShortSHA(p.HeadSHA), err)
		}
		if !slices.ContainsFunc(gates, func(g Gate) bool { return g.ID == r.ExistingID }) {
			return Gate{}, fmt.Errorf("%w: check %d is not a %q check on head %s, the head this report is for: nothing is completed", ErrPublish, r.ExistingID, p.Name, textlimit.ShortSHA(p.HeadSHA))
		}
		g, err := checks.UpdateGate(ctx, r.ExistingID, p)
		if err != nil {
			return Gate{}, fmt.Errorf("gate: complete check %d: %w", r.ExistingID, err)
		}
		return g, nil
	}
	g, err := checks.CreateGate(ctx, p)
	if err != nil {
		return Gate{}, fmt.Errorf("gate: publish %s on %s: %w", p.Name, textlimit.ShortSHA(p.HeadSHA), err)
	}
	return g, nil
}
