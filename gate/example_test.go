package gate_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gpugate/gpugate/gate"
	"github.com/gpugate/gpugate/gate/gatetest"
)

func ExampleReuse() {
	merge := strings.Repeat("b", 40)
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	gates := []gate.Gate{
		{ID: 1, ExternalID: gate.ExternalID{Ref: merge, Kind: gate.KindPaid}.String(), Status: "completed", Conclusion: "success", CompletedAt: at},
		{ID: 2, ExternalID: "", Status: "completed", Conclusion: "success", CompletedAt: at.Add(time.Hour)}, // legacy: ignored
	}
	d := gate.Reuse(gates, merge)
	fmt.Println(d.Reuse, d.From.ID)

	gates = append(gates, gate.Gate{ID: 3, ExternalID: gate.ExternalID{Ref: merge, Kind: gate.KindFailed}.String(), Status: "completed", Conclusion: "failure", CompletedAt: at.Add(2 * time.Hour)})
	fmt.Println(gate.Reuse(gates, merge).Reuse)
	// Output:
	// true 1
	// false
}

func ExampleParseExternalID() {
	id, ok := gate.ParseExternalID("runpod-gpu-gate:v1:" + strings.Repeat("b", 40) + ":reused")
	fmt.Println(ok, id.Kind)
	_, ok = gate.ParseExternalID("runpod-gpu-gate:v1:main:paid")
	fmt.Println(ok)
	// Output:
	// true reused
	// false
}

// The gate's GitHub steps for one pull request: authorized for the head
// the classifier listed, a tested merge ref that already passed is
// reused, and the reused gate is published after the label is read
// again.
func ExampleSteps() {
	const head, merge = "7fc2a91c3b5e4d6f8a9b0c1d2e3f405162738495", "9a1b2c3d4e5f60718293a4b5c6d7e8f901234567"
	ctx := context.Background()
	repo, checks := gatetest.NewRepo(), gatetest.NewChecks()
	repo.Roles["maintainer"] = "maintain"
	repo.PRs[43] = gate.PullRequest{Number: 43, Open: true, HeadSHA: head, MergeSHA: merge, HeadRepoID: 1, BaseRepoID: 1}
	checks.Add(head, gate.DefaultCheckName, gate.Gate{ExternalID: gate.ExternalID{Ref: merge, Kind: gate.KindPaid}.String(), Status: "completed", Conclusion: "success"})

	steps := gate.Steps{Repo: repo, Checks: checks}
	a, err := steps.Authorize(ctx, gate.AuthRequest{Actor: "maintainer", PR: 43, ClassifiedHead: head})
	if err != nil {
		panic(err)
	}
	d := steps.Reuse(ctx, a)
	fmt.Println(d.Reason)
	g, err := steps.Publish(ctx, a.PR, gate.Report{HeadSHA: a.HeadSHA, ID: gate.ExternalID{Ref: a.TestedRef, Kind: gate.KindReused}, ReusedFrom: d.From}, time.Now())
	fmt.Println(g.Conclusion, g.ExternalID, err)
	// Output:
	// reuse: paid gate 1 passed for tested ref 9a1b2c3
	// success runpod-gpu-gate:v1:9a1b2c3d4e5f60718293a4b5c6d7e8f901234567:reused <nil>
}
