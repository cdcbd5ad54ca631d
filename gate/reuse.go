package gate

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gpugate/gpugate/internal/textlimit"
)

// Gate is one check run, as read from GitHub.
type Gate struct {
	ID          int64
	ExternalID  string
	Status      string // queued, in_progress, completed
	Conclusion  string // success, failure, ...
	CompletedAt time.Time
	URL         string
}

// Decision is whether the paid path can be skipped.
type Decision struct {
	Reuse  bool
	From   *Gate // the check reused, when Reuse
	Reason string
}

// Reuse decides, purely, whether the paid path can be skipped for
// testedRef: only when the newest completed gate for exactly that ref
// (ordered by completion time, then ID) is a successful paid or reused gate.
// A newer failure re-enables the paid path; another ref (a moved base makes
// another merge ref) never matches; legacy gates without the marker and
// local gates are never reused; in-progress gates are ignored.
func Reuse(gates []Gate, testedRef string) Decision {
	var mine []Gate
	for _, g := range gates {
		id, ok := ParseExternalID(g.ExternalID)
		if !ok || id.Ref != testedRef || id.Kind == KindLocal || g.Status != "completed" {
			continue
		}
		mine = append(mine, g)
	}
	if len(mine) == 0 {
		return Decision{Reason: fmt.Sprintf("run: no completed gate for tested ref %s", textlimit.ShortSHA(testedRef))}
	}
	newest := slices.MaxFunc(mine, func(a, b Gate) int {
		return cmp.Or(a.CompletedAt.Compare(b.CompletedAt), cmp.Compare(a.ID, b.ID))
	})
	id, _ := ParseExternalID(newest.ExternalID)
	if newest.Conclusion == "success" && (id.Kind == KindPaid || id.Kind == KindReused) {
		g := newest
		return Decision{Reuse: true, From: &g, Reason: fmt.Sprintf("reuse: %s gate %d passed for tested ref %s", id.Kind, g.ID, textlimit.ShortSHA(testedRef))}
	}
	return Decision{Reason: fmt.Sprintf("run: the newest gate for tested ref %s is %s (%s)", textlimit.ShortSHA(testedRef), id.Kind, newest.Conclusion)}
}

// Checks is the GitHub check-run surface the gate uses. GitHub is the
// go-github adapter; gatetest.Checks the fake.
type Checks interface {
	// ListGates lists every check run named name on the commit (filter=all,
	// every page).
	ListGates(ctx context.Context, sha, name string) ([]Gate, error)
	CreateGate(ctx context.Context, p Publication) (Gate, error)
	UpdateGate(ctx context.Context, id int64, p Publication) (Gate, error)
}

// LookupReuse lists the gates on the PR head and decides. It fails open
// toward validation: any API error, parse error or programming error
// answers "run", with the reason.
func LookupReuse(ctx context.Context, checks Checks, head, testedRef, checkName string) (d Decision) {
	defer func() {
		if r := recover(); r != nil {
			d = Decision{Reason: fmt.Sprintf("run: the reuse lookup failed (%v)", r)}
		}
	}()
	if !IsSHA(head) || !IsSHA(testedRef) {
		return Decision{Reason: fmt.Sprintf("run: head %q or tested ref %q is not a full commit SHA", head, testedRef)}
	}
	gates, err := checks.ListGates(ctx, head, checkName)
	if err != nil {
		return Decision{Reason: "run: the reuse lookup failed: " + err.Error()}
	}
	return Reuse(gates, testedRef)
}
