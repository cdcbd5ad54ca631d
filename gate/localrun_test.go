package gate_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpugate/gpugate/gate"
	"github.com/gpugate/gpugate/gate/gatetest"
)

// labelled is a repository whose PR #7 carries the local-validation label
// at head, with maint a maintainer posting as maint.
func labelled() *gatetest.Repo {
	r := repoWithPR()
	p := r.PRs[7]
	p.Labels = []string{gate.DefaultLocalLabel}
	r.PRs[7] = p
	r.Roles["maint"], r.Login = "maintain", "maint"
	return r
}

// The evidence a passing local run posts is exactly what the relay
// verifies, and the relay is dispatched on the default branch with the
// PR and the SHA.
func TestRunLocal_ThePostedEvidenceIsWhatTheRelayVerifies(t *testing.T) {
	r, wf := labelled(), &gatetest.Workflows{Default: "trunk"}
	ran := 0
	res, err := gate.RunLocal(context.Background(), r, r, wf, gate.LocalRun{PR: 7, Head: head, LaneName: "make gpu-test",
		Lane: func(context.Context) error { ran++; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if ran != 1 || res.Ref != "trunk" {
		t.Errorf("the lane ran %d times; dispatched on %q", ran, res.Ref)
	}
	want := []gatetest.Dispatch{{Workflow: gate.DefaultRelayWorkflow, Ref: "trunk", Inputs: map[string]any{"pr": "7", "sha": head}}}
	if d := cmp.Diff(want, wf.Dispatched); d != "" {
		t.Errorf("dispatches (-want +got):\n%s", d)
	}
	if _, err := gate.VerifyLocalEvidence(context.Background(), r, gate.LocalRequest{Dispatcher: "maint", PR: 7, SHA: head}); err != nil {
		t.Errorf("the relay refuses what the local run posted: %v", err)
	}
}

// A local run vouches only for the PR's head: when HEAD is another
// commit, when a push lands during the lane, when the lane fails, or when
// the PR is not labelled, nothing is posted and nothing is dispatched.
func TestRunLocal_RefusesAnythingButAPassingLaneAtThePRsHead(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate  func(r *gatetest.Repo)
		head    string
		lane    error
		want    error
		laneRan bool
	}{
		"HEAD is not the PR's head": {head: merge, want: gate.ErrHeadMoved},
		"a push during the lane": {mutate: func(r *gatetest.Repo) {
			r.OnReread = func(p *gate.PullRequest) { p.HeadSHA = merge2 }
		}, want: gate.ErrHeadMoved, laneRan: true},
		"the lane fails": {lane: errors.New("3 tests failed"), want: gate.ErrLaneFailed, laneRan: true},
		"no label":       {mutate: func(r *gatetest.Repo) { p := r.PRs[7]; p.Labels = nil; r.PRs[7] = p }, want: gate.ErrEvidence},
		"a fork's PR":    {mutate: func(r *gatetest.Repo) { p := r.PRs[7]; p.HeadRepoID = 99; r.PRs[7] = p }, want: gate.ErrFork},
		"a closed PR":    {mutate: func(r *gatetest.Repo) { p := r.PRs[7]; p.Open = false; r.PRs[7] = p }, want: gate.ErrClosed},
		"not a full SHA": {head: "abc123", want: gate.ErrBadRequest},
	} {
		t.Run(name, func(t *testing.T) {
			r, wf := labelled(), &gatetest.Workflows{}
			if tc.mutate != nil {
				tc.mutate(r)
			}
			h := head
			if tc.head != "" {
				h = tc.head
			}
			ran := false
			_, err := gate.RunLocal(context.Background(), r, r, wf, gate.LocalRun{PR: 7, Head: h, LaneName: "make gpu-test",
				Lane: func(context.Context) error { ran = true; return tc.lane }})
			if !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
			if ran != tc.laneRan {
				t.Errorf("the lane ran: %v, want %v", ran, tc.laneRan)
			}
			if len(r.Comment[7]) != 0 || len(wf.Dispatched) != 0 {
				t.Errorf("posted %d comments and dispatched %v after a refusal", len(r.Comment[7]), wf.Dispatched)
			}
		})
	}
}
