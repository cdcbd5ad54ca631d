package gate

import (
	"context"
	"errors"
	"fmt"
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
	GPU        *Classification // for KindNotRequired: the classifier's decision
	Ran        []string        // what ran
	NotRun     []string        // what did NOT run, listed separately, never as passed
	Details    string          // further Markdown
	DetailsURL string
	ExistingID int64 // an in-progress gate to complete instead of creating one
}

// Classification is the trusted classifier's decision about the GPU lane.
type Classification struct {
	GPURequired bool
	Reason      string
}

// ErrPublish is matched by Publish's refusals.
var ErrPublish = errors.New("gate: refusing to publish")

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
// SHA, a reused gate names its source, and "not required" is published only
// when the classifier said GPU validation is unnecessary.
func Build(r Report, now time.Time) (Publication, error) {
	_, validID := ParseExternalID(r.ID.String())
	switch {
	case !IsSHA(r.HeadSHA):
		return Publication{}, fmt.Errorf("%w: head %q is not a full commit SHA", ErrPublish, r.HeadSHA)
	case !validID:
		return Publication{}, fmt.Errorf("%w: external ID %q is not a gate ID (tested ref must be a full commit SHA)", ErrPublish, r.ID.String())
	case r.ID.Kind == KindReused && r.ReusedFrom == nil:
		return Publication{}, fmt.Errorf("%w: a reused gate must name the check it reuses", ErrPublish)
	case r.ID.Kind == KindNotRequired && (r.GPU == nil || r.GPU.GPURequired):
		return Publication{}, fmt.Errorf("%w: \"not required\" needs the trusted classifier's decision that GPU validation is unnecessary", ErrPublish)
	case r.ID.Kind == KindLocal && r.ID.Ref != r.HeadSHA:
		return Publication{}, fmt.Errorf("%w: a local gate must be for the head it is published on", ErrPublish)
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

// Publish creates the gate check run on the authorized head, or completes
// the in-progress one named by ExistingID.
func Publish(ctx context.Context, checks Checks, r Report, now time.Time) (Gate, error) {
	p, err := Build(r, now)
	if err != nil {
		return Gate{}, err
	}
	if r.ExistingID != 0 {
		g, err := checks.UpdateGate(ctx, r.ExistingID, p)
		if err != nil {
			return Gate{}, fmt.Errorf("gate: complete check %d: %w", r.ExistingID, err)
		}
		return g, nil
	}
	g, err := checks.CreateGate(ctx, p)
	if err != nil {
		return Gate{}, fmt.Errorf("gate: publish %s on %s: %w", p.Name, short(p.HeadSHA), err)
	}
	return g, nil
}
