package gate_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpugate/gpugate/gate"
	"github.com/gpugate/gpugate/gate/gatetest"
)

// The publish step's inputs give each kind its evidence: the check
// reused, the classifier's decision for the head it classified, the paid
// run's own result; an input outside its values is refused, naming it,
// before anything is read.
func TestPublishInputs_EachInputGivesItsEvidenceAndAValueOutsideItsSetIsRefused(t *testing.T) {
	tests := map[string]struct {
		in    gate.PublishInputs
		want  gate.Report
		input string // the refused input, "" when accepted
	}{
		"reused": {in: gate.PublishInputs{HeadSHA: head, TestedRef: merge, Kind: "reused", ReusedFromID: 11, ReusedFromURL: "https://x/11", NotRun: " a, ,b "},
			want: gate.Report{HeadSHA: head, ID: gate.ExternalID{Ref: merge, Kind: gate.KindReused}, ReusedFrom: &gate.Gate{ID: 11, URL: "https://x/11"}, NotRun: []string{"a", "b"}}},
		"not required": {in: gate.PublishInputs{HeadSHA: head, TestedRef: merge, Kind: "not-required", GPURequired: "false", Reason: "docs only", ClassifiedHead: head},
			want: gate.Report{HeadSHA: head, ID: gate.ExternalID{Ref: merge, Kind: gate.KindNotRequired}, GPU: &gate.Classification{Reason: "docs only", HeadSHA: head}}},
		"paid": {in: gate.PublishInputs{HeadSHA: head, TestedRef: merge, Kind: "paid", TestsPassed: "true", Ran: "smoke,tests"},
			want: gate.Report{HeadSHA: head, ID: gate.ExternalID{Ref: merge, Kind: gate.KindPaid}, Paid: &gate.PaidEvidence{TestsPassed: true}, Ran: []string{"smoke", "tests"}}},
		"an unknown kind":           {in: gate.PublishInputs{Kind: "bogus"}, input: "kind"},
		"tests-passed not a bool":   {in: gate.PublishInputs{Kind: "paid", TestsPassed: "maybe"}, input: "tests-passed"},
		"gpu-required not a bool":   {in: gate.PublishInputs{Kind: "not-required", GPURequired: "no"}, input: "gpu-required"},
		"tests-passed before kinds": {in: gate.PublishInputs{Kind: "bogus", TestsPassed: "maybe"}, input: "tests-passed"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := tc.in.Report()
			if tc.input != "" {
				var ie *gate.InputError
				if !errors.As(err, &ie) || ie.Input != tc.input || !errors.Is(err, gate.ErrBadRequest) {
					t.Errorf("err = %v, want an InputError for %s matching ErrBadRequest", err, tc.input)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if _, err := gate.Build(got, t0); err != nil {
				t.Errorf("the report carries its evidence, yet: %v", err)
			}
		})
	}
}

// What one step outputs is what the next takes: authorize's head and
// tested ref, reuse's check, and recover's nothing when nothing was
// dispatched.
func TestOutputs_EachStepHandsOnWhatTheNextTakes(t *testing.T) {
	a := gate.Authorization{Actor: "maint", Role: "maintain", PR: 7, HeadSHA: head, TestedRef: merge, LocalValidation: true}
	want := [][2]string{{"head_sha", head}, {"tested_ref", merge}, {"pr", "7"}, {"role", "maintain"}, {"local_gpu_validation", "true"}}
	if diff := cmp.Diff(want, a.Outputs()); diff != "" {
		t.Errorf("authorize (-want +got):\n%s", diff)
	}
	d := gate.Decision{Reuse: true, From: &gate.Gate{ID: 11, URL: "https://x/11"}, Reason: "reuse"}
	want = [][2]string{{"reuse", "true"}, {"reason", "reuse"}, {"from_id", "11"}, {"from_url", "https://x/11"}}
	if diff := cmp.Diff(want, d.Outputs()); diff != "" {
		t.Errorf("reuse (-want +got):\n%s", diff)
	}
	if got := (gate.Decision{Reason: "run"}).Outputs(); len(got) != 2 {
		t.Errorf("no reuse: %v, want reuse and reason only", got)
	}
	if got := (gate.RecoverResult{}).Outputs(); got != nil {
		t.Errorf("nothing dispatched: %v, want no outputs", got)
	}
	want = [][2]string{{"ref", "main"}, {"run_id", "5"}, {"conclusion", "success"}, {"url", "https://x/5"}}
	if diff := cmp.Diff(want, (gate.RecoverResult{Ref: "main", Run: gate.Run{ID: 5, Conclusion: "success", URL: "https://x/5"}}).Outputs()); diff != "" {
		t.Errorf("recover (-want +got):\n%s", diff)
	}
}

// A local run in a checkout runs the lane at the checkout's clean HEAD
// without credentials, and a dirty checkout runs nothing and posts
// nothing.
func TestRunLocalCheckout_TheLaneRunsOnlyAtACleanHEAD(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, args := range [][]string{{"init", "-q"}, {"config", "user.email", "m@example.com"}, {"config", "user.name", "m"}, {"commit", "-q", "--allow-empty", "-m", "c"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	out, err := exec.Command("git", "-C", dir, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	sha := strings.TrimSpace(string(out))
	r, wf := labelled(), &gatetest.Workflows{Default: "main"}
	p := r.PRs[7]
	p.HeadSHA = sha
	r.PRs[7] = p
	t.Setenv("GITHUB_TOKEN", "ghs_secret")
	run := gate.LocalRun{PR: 7, LaneName: `test -z "$GITHUB_TOKEN" && touch lane.ran`}
	res, err := gate.RunLocalCheckout(ctx, r, r, wf, dir, run, os.Stderr)
	if err != nil || res.Head != sha || len(r.Comment[7]) != 1 {
		t.Fatalf("%+v %v, %d comments", res, err, len(r.Comment[7]))
	}
	if _, err := os.Stat(filepath.Join(dir, "lane.ran")); err != nil {
		t.Errorf("the lane did not run, or saw GITHUB_TOKEN: %v", err)
	}
	// lane.ran is now an untracked file: the checkout is not HEAD.
	if _, err := gate.RunLocalCheckout(ctx, r, r, wf, dir, run, os.Stderr); !errors.Is(err, gate.ErrDirty) || len(r.Comment[7]) != 1 {
		t.Errorf("a dirty checkout: err = %v, %d comments; want ErrDirty and nothing more posted", err, len(r.Comment[7]))
	}
}
