package gate_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpugate/gpugate/gate"
	"github.com/gpugate/gpugate/gate/gatetest"
)

var (
	head   = strings.Repeat("a", 40)
	merge  = strings.Repeat("b", 40)
	merge2 = strings.Repeat("c", 40)
	t0     = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
)

func g(id int64, ref string, kind gate.Kind, status, conclusion string, at time.Time) gate.Gate {
	return gate.Gate{ID: id, ExternalID: gate.ExternalID{Ref: ref, Kind: kind}.String(), Status: status, Conclusion: conclusion, CompletedAt: at}
}

func TestExternalID_FormatsAndParsesExactly(t *testing.T) {
	for _, id := range []gate.ExternalID{{merge, gate.KindPaid}, {merge, gate.KindReused}, {merge, gate.KindFailed}, {merge, gate.KindNotRequired}, {merge, gate.KindSkipped}, {head, gate.KindLocal}} {
		got, ok := gate.ParseExternalID(id.String())
		if !ok || got != id {
			t.Errorf("%s: parsed %+v, %v", id, got, ok)
		}
	}
	if got := (gate.ExternalID{Ref: head, Kind: gate.KindLocal}).String(); got != "local-gpu-gate:v1:"+head {
		t.Errorf("local form %q", got)
	}
	for _, bad := range []string{
		"", "runpod-gpu-gate:v1:" + merge, "runpod-gpu-gate:v1:" + merge + ":bogus", "runpod-gpu-gate:v1:" + merge + ":local",
		"runpod-gpu-gate:v2:" + merge + ":paid", "runpod-gpu-gate:v1:main:paid", "runpod-gpu-gate:v1:" + strings.ToUpper(merge) + ":paid",
		"runpod-gpu-gate:v1:" + merge + ":paid:extra", "local-gpu-gate:v1:abc", "local-gpu-gate:v1:" + head + ":paid", " runpod-gpu-gate:v1:" + merge + ":paid",
	} {
		if _, ok := gate.ParseExternalID(bad); ok {
			t.Errorf("accepted %q", bad)
		}
	}
}

func FuzzParseExternalID(f *testing.F) {
	f.Add("runpod-gpu-gate:v1:" + merge + ":paid")
	f.Add("local-gpu-gate:v1:" + head)
	f.Fuzz(func(t *testing.T, s string) {
		id, ok := gate.ParseExternalID(s)
		if ok && id.String() != s {
			t.Fatalf("%q parsed to %+v, which formats as %q", s, id, id.String())
		}
	})
}

func TestReuse_AfterAPaidSuccess(t *testing.T) {
	paid := g(1, merge, gate.KindPaid, "completed", "success", t0)
	d := gate.Reuse([]gate.Gate{paid}, merge)
	if !d.Reuse || d.From == nil || d.From.ID != 1 {
		t.Errorf("%+v", d)
	}
	// A reused success is itself reusable.
	d = gate.Reuse([]gate.Gate{paid, g(2, merge, gate.KindReused, "completed", "success", t0.Add(time.Hour))}, merge)
	if !d.Reuse || d.From.ID != 2 {
		t.Errorf("%+v", d)
	}
}

func TestReuse_NotAfterANewerFailure(t *testing.T) {
	gates := []gate.Gate{g(1, merge, gate.KindPaid, "completed", "success", t0), g(2, merge, gate.KindFailed, "completed", "failure", t0.Add(time.Minute))}
	if d := gate.Reuse(gates, merge); d.Reuse {
		t.Errorf("%+v", d)
	}
	// Same completion time: the higher ID is newer.
	gates[1].CompletedAt = t0
	if d := gate.Reuse(gates, merge); d.Reuse {
		t.Errorf("tie broken wrongly: %+v", d)
	}
}

func TestReuse_NeverAcrossAMovedBase(t *testing.T) {
	if d := gate.Reuse([]gate.Gate{g(1, merge, gate.KindPaid, "completed", "success", t0)}, merge2); d.Reuse {
		t.Errorf("%+v", d)
	}
}

func TestReuse_LegacyLocalAndInProgressGatesNeverReused(t *testing.T) {
	legacy := gate.Gate{ID: 1, ExternalID: "", Status: "completed", Conclusion: "success", CompletedAt: t0}
	local := g(2, merge, gate.KindLocal, "completed", "success", t0)
	running := g(3, merge, gate.KindPaid, "in_progress", "", time.Time{})
	for name, gs := range map[string][]gate.Gate{"legacy": {legacy}, "local": {local}, "in progress": {running}} {
		if d := gate.Reuse(gs, merge); d.Reuse {
			t.Errorf("%s: %+v", name, d)
		}
	}
	// An in-progress gate does not hide a completed success.
	if d := gate.Reuse([]gate.Gate{g(4, merge, gate.KindPaid, "completed", "success", t0), running}, merge); !d.Reuse {
		t.Errorf("%+v", d)
	}
}

func TestLookupReuse_AnAPIErrorAnswersRun(t *testing.T) {
	c := gatetest.NewChecks()
	c.Add(head, gate.DefaultCheckName, g(0, merge, gate.KindPaid, "completed", "success", t0))
	if d := gate.LookupReuse(context.Background(), c, head, merge, gate.DefaultCheckName); !d.Reuse {
		t.Fatalf("%+v", d)
	}
	c.Fail = true
	if d := gate.LookupReuse(context.Background(), c, head, merge, gate.DefaultCheckName); d.Reuse || !strings.HasPrefix(d.Reason, "run: ") {
		t.Errorf("API error: %+v", d)
	}
	c.Fail, c.Panic = false, true
	if d := gate.LookupReuse(context.Background(), c, head, merge, gate.DefaultCheckName); d.Reuse {
		t.Errorf("programming error: %+v", d)
	}
	if d := gate.LookupReuse(context.Background(), gatetest.NewChecks(), head, "main", gate.DefaultCheckName); d.Reuse {
		t.Errorf("bad ref: %+v", d)
	}
}

func TestPublish_TitlesAndNotRunListedSeparately(t *testing.T) {
	c := gatetest.NewChecks()
	from := c.Add(head, gate.DefaultCheckName, g(0, merge, gate.KindPaid, "completed", "success", t0))
	got, err := gate.Publish(context.Background(), nil, c, 0, "", gate.Report{HeadSHA: head, ID: gate.ExternalID{Ref: merge, Kind: gate.KindReused}, ReusedFrom: &from,
		Ran: []string{"cuda single-GPU partition"}, NotRun: []string{"two-device registration test"}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if got.Conclusion != "success" || got.ExternalID != "runpod-gpu-gate:v1:"+merge+":reused" {
		t.Errorf("%+v", got)
	}
	p, _ := gate.Build(gate.Report{HeadSHA: head, ID: gate.ExternalID{Ref: merge, Kind: gate.KindReused}, ReusedFrom: &from, NotRun: []string{"two-device registration test"}}, t0)
	if p.Title != "passed (reused)" || !strings.Contains(p.Summary, "[check 1](https://github.com/o/r/runs/1)") || !strings.Contains(p.Summary, "### NOT RUN") {
		t.Errorf("title %q summary:\n%s", p.Title, p.Summary)
	}
	for k, want := range map[gate.Kind]string{gate.KindPaid: "passed", gate.KindFailed: "failed", gate.KindSkipped: "skipped", gate.KindNotRequired: "not required"} {
		if gate.Title(k) != want {
			t.Errorf("Title(%s) = %q", k, gate.Title(k))
		}
	}
}

func TestPublish_NotRequiredOnlyWhenTheClassifierSaidSo(t *testing.T) {
	id := gate.ExternalID{Ref: merge, Kind: gate.KindNotRequired}
	for name, cls := range map[string]*gate.Classification{"no decision": nil, "GPU required": {GPURequired: true}} {
		if _, err := gate.Build(gate.Report{HeadSHA: head, ID: id, GPU: cls}, t0); !errors.Is(err, gate.ErrPublish) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	p, err := gate.Build(gate.Report{HeadSHA: head, ID: id, GPU: &gate.Classification{Reason: "docs-only change", HeadSHA: head}}, t0)
	if err != nil || p.Conclusion != "success" || !strings.Contains(p.Summary, "docs-only change") {
		t.Errorf("%+v %v", p, err)
	}
}

// No conclusion that satisfies a required check without evidence: branch
// protection counts success, neutral and skipped as passing, so every kind
// but failed needs the evidence Evidence names, and "not required" (or a
// classifier-backed "skipped") goes only to the exact head classified.
func TestPublish_NoPassingConclusionWithoutItsEvidence(t *testing.T) {
	local := localEvidence(t)
	other := strings.Repeat("b", 40)
	id := func(k gate.Kind) gate.ExternalID { return gate.ExternalID{Ref: merge, Kind: k} }
	tests := map[string]struct {
		r  gate.Report
		ok bool
	}{
		"skipped with nothing behind it":           {gate.Report{ID: id(gate.KindSkipped)}, false},
		"skipped on the classifier's word":         {gate.Report{ID: id(gate.KindSkipped), GPU: &gate.Classification{HeadSHA: head}}, true},
		"skipped on the relay's evidence":          {gate.Report{ID: id(gate.KindSkipped), Local: &local}, true},
		"skipped on a forged relay evidence":       {gate.Report{ID: id(gate.KindSkipped), Local: &gate.LocalEvidence{}}, false},
		"paid without a result":                    {gate.Report{ID: id(gate.KindPaid)}, false},
		"paid whose tests failed":                  {gate.Report{ID: id(gate.KindPaid), Paid: &gate.PaidEvidence{}}, false},
		"paid whose tests passed":                  {gate.Report{ID: id(gate.KindPaid), Paid: &gate.PaidEvidence{TestsPassed: true}}, true},
		"reused naming no check":                   {gate.Report{ID: id(gate.KindReused), ReusedFrom: &gate.Gate{}}, false},
		"not required for an older head":           {gate.Report{ID: id(gate.KindNotRequired), GPU: &gate.Classification{HeadSHA: other}}, false},
		"not required for no known head":           {gate.Report{ID: id(gate.KindNotRequired), GPU: &gate.Classification{}}, false},
		"not required for this head":               {gate.Report{ID: id(gate.KindNotRequired), GPU: &gate.Classification{HeadSHA: head}}, true},
		"local without the relay's evidence":       {gate.Report{ID: gate.ExternalID{Ref: head, Kind: gate.KindLocal}}, false},
		"local with the relay's evidence":          {gate.Report{ID: gate.ExternalID{Ref: head, Kind: gate.KindLocal}, Local: &local}, true},
		"failed needs nothing":                     {gate.Report{ID: id(gate.KindFailed)}, true},
		"paid with a classification of older head": {gate.Report{ID: id(gate.KindPaid), Paid: &gate.PaidEvidence{TestsPassed: true}, GPU: &gate.Classification{GPURequired: true, HeadSHA: other}}, false},
	}
	for name, tc := range tests {
		tc.r.HeadSHA = head
		_, err := gate.Build(tc.r, t0)
		if tc.ok && err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if !tc.ok && (!errors.Is(err, gate.ErrPublish) || !errors.Is(err, gate.ErrNoEvidence)) {
			t.Errorf("%s: err = %v, want ErrPublish and ErrNoEvidence", name, err)
		}
	}
}

// Local evidence cannot be pointed at another head: only
// VerifyLocalEvidence sets what it is for.
func TestLocalEvidence_CannotBeRetargeted(t *testing.T) {
	ev := localEvidence(t)
	other := strings.Repeat("e", 40)
	if _, err := gate.Build(gate.Report{HeadSHA: other, ID: gate.ExternalID{Ref: other, Kind: gate.KindLocal}, Local: &ev}, t0); !errors.Is(err, gate.ErrNoEvidence) {
		t.Fatalf("evidence for %s published on %s: err = %v", ev.SHA(), other, err)
	}
}

// A passing gate never completes a check on another head: a check ID
// names a check on whatever commit it was created on.
func TestPublish_NotRequiredNeverCompletesACheckOnAnotherHead(t *testing.T) {
	docsHead, codeHead := strings.Repeat("d", 40), strings.Repeat("c", 40)
	checks := gatetest.NewChecks()
	pending := checks.Add(codeHead, gate.DefaultCheckName, gate.Gate{Status: "in_progress"})
	_, err := gate.Publish(context.Background(), nil, checks, 0, "", gate.Report{HeadSHA: docsHead, ExistingID: pending.ID,
		ID:  gate.ExternalID{Ref: merge, Kind: gate.KindNotRequired},
		GPU: &gate.Classification{GPURequired: false, Reason: "docs only", HeadSHA: docsHead}}, t0)
	if !errors.Is(err, gate.ErrPublish) {
		t.Errorf("err = %v, want ErrPublish", err)
	}
	for _, g := range checks.Published(codeHead) {
		if g.Status != "in_progress" {
			t.Fatalf("the check on the unclassified head became %s %s", g.Status, g.Conclusion)
		}
	}
	mine := checks.Add(docsHead, gate.DefaultCheckName, gate.Gate{Status: "in_progress"})
	if _, err := gate.Publish(context.Background(), nil, checks, 0, "", gate.Report{HeadSHA: docsHead, ExistingID: mine.ID,
		ID:  gate.ExternalID{Ref: merge, Kind: gate.KindNotRequired},
		GPU: &gate.Classification{GPURequired: false, Reason: "docs only", HeadSHA: docsHead}}, t0); err != nil {
		t.Errorf("completing the check on its own head: %v", err)
	}
}

// localEvidence is the relay's verified evidence for head on PR 7.
func localEvidence(t *testing.T) gate.LocalEvidence {
	t.Helper()
	ev, err := gate.VerifyLocalEvidence(context.Background(), localRepo(), gate.LocalRequest{Dispatcher: "maint", PR: 7, SHA: head})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func TestPublish_RefusesBadInput(t *testing.T) {
	for name, r := range map[string]gate.Report{
		"short head":          {HeadSHA: "abc", ID: gate.ExternalID{Ref: merge, Kind: gate.KindPaid}},
		"branch as ref":       {HeadSHA: head, ID: gate.ExternalID{Ref: "main", Kind: gate.KindPaid}},
		"reused without from": {HeadSHA: head, ID: gate.ExternalID{Ref: merge, Kind: gate.KindReused}},
		"local for other sha": {HeadSHA: head, ID: gate.ExternalID{Ref: merge, Kind: gate.KindLocal}},
	} {
		if _, err := gate.Build(r, t0); !errors.Is(err, gate.ErrPublish) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

func TestPublish_SummaryTruncatedUnderGitHubsLimit(t *testing.T) {
	var many []string
	for range 20000 {
		many = append(many, "tests::a_rather_long_test_name_é")
	}
	p, err := gate.Build(gate.Report{HeadSHA: head, ID: gate.ExternalID{Ref: merge, Kind: gate.KindPaid}, Paid: &gate.PaidEvidence{TestsPassed: true}, Ran: many}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Summary) > gate.MaxSummary || !strings.Contains(p.Summary, "truncated") || !strings.HasPrefix(p.Summary, "**passed**") {
		t.Errorf("summary of %d bytes", len(p.Summary))
	}
	if !utf8Valid(p.Summary) {
		t.Error("truncation split a character")
	}
}

func TestPublish_CompletesAnInProgressGate(t *testing.T) {
	c := gatetest.NewChecks()
	running := c.Add(head, gate.DefaultCheckName, gate.Gate{Status: "in_progress"})
	got, err := gate.Publish(context.Background(), nil, c, 0, "", gate.Report{HeadSHA: head, ID: gate.ExternalID{Ref: merge, Kind: gate.KindFailed}, ExistingID: running.ID}, t0)
	if err != nil || got.ID != running.ID || got.Conclusion != "failure" || len(c.Published(head)) != 1 {
		t.Errorf("%+v %v", got, err)
	}
}

func repoWithPR() *gatetest.Repo {
	r := gatetest.NewRepo()
	r.Roles["maint"], r.Roles["dev"], r.Roles["boss"] = "maintain", "write", "admin"
	r.PRs[7] = gate.PullRequest{Number: 7, Open: true, HeadSHA: head, MergeSHA: merge, HeadRepoID: 1, BaseRepoID: 1, Labels: []string{"gpu"}}
	r.Refs["main"] = merge2
	return r
}

func TestAuthorize_DerivesImmutableSHAs(t *testing.T) {
	r := repoWithPR()
	a, err := gate.Authorize(context.Background(), r, gate.AuthRequest{Actor: "maint", PR: 7})
	want := gate.Authorization{Actor: "maint", Role: "maintain", PR: 7, HeadSHA: head, TestedRef: merge}
	if err != nil || !cmp.Equal(want, a) {
		t.Errorf("%+v %v", a, err)
	}
	a, err = gate.Authorize(context.Background(), r, gate.AuthRequest{Actor: "boss", Ref: "main", MinRole: "admin"})
	if err != nil || a.TestedRef != merge2 || a.HeadSHA != merge2 {
		t.Errorf("manual ref: %+v %v", a, err)
	}
}

// Classification is bound to the head it classified: a push between the
// classifier's listing and authorization is refused, so a code head never
// gets a gate built from an older docs-only listing.
func TestAuthorize_ARunClassifiedAtAnotherHeadIsRefused(t *testing.T) {
	r := repoWithPR()
	older := strings.Repeat("d", 40)
	if _, err := gate.Authorize(context.Background(), r, gate.AuthRequest{Actor: "maint", PR: 7, ClassifiedHead: older}); !errors.Is(err, gate.ErrHeadMoved) {
		t.Errorf("PR classified at an older head: err = %v, want ErrHeadMoved", err)
	}
	if _, err := gate.Authorize(context.Background(), r, gate.AuthRequest{Actor: "boss", Ref: "main", MinRole: "admin", ClassifiedHead: older}); !errors.Is(err, gate.ErrHeadMoved) {
		t.Errorf("manual ref classified at another commit: err = %v, want ErrHeadMoved", err)
	}
	if a, err := gate.Authorize(context.Background(), r, gate.AuthRequest{Actor: "maint", PR: 7, ClassifiedHead: head}); err != nil || a.HeadSHA != head {
		t.Errorf("classified at the head: %+v, %v", a, err)
	}
}

func TestAuthorize_RefusedBeforeSpend(t *testing.T) {
	tests := map[string]struct {
		mutate func(r *gatetest.Repo)
		req    gate.AuthRequest
		want   error
	}{
		"write role":           {nil, gate.AuthRequest{Actor: "dev", PR: 7}, gate.ErrUnauthorized},
		"maintain below admin": {nil, gate.AuthRequest{Actor: "maint", PR: 7, MinRole: "admin"}, gate.ErrUnauthorized},
		"stranger":             {nil, gate.AuthRequest{Actor: "who", PR: 7}, gate.ErrUnauthorized},
		"fork PR":              {func(r *gatetest.Repo) { p := r.PRs[7]; p.HeadRepoID = 2; r.PRs[7] = p }, gate.AuthRequest{Actor: "maint", PR: 7}, gate.ErrFork},
		"closed PR":            {func(r *gatetest.Repo) { p := r.PRs[7]; p.Open = false; r.PRs[7] = p }, gate.AuthRequest{Actor: "maint", PR: 7}, gate.ErrClosed},
		"no merge commit":      {func(r *gatetest.Repo) { p := r.PRs[7]; p.MergeSHA = ""; r.PRs[7] = p }, gate.AuthRequest{Actor: "maint", PR: 7}, gate.ErrNoMergeRef},
		"PR and ref combined":  {nil, gate.AuthRequest{Actor: "maint", PR: 7, Ref: "main"}, gate.ErrBadRequest},
		"neither":              {nil, gate.AuthRequest{Actor: "maint"}, gate.ErrBadRequest},
		"bad role setting":     {nil, gate.AuthRequest{Actor: "maint", PR: 7, MinRole: "write"}, gate.ErrBadRequest},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			r := repoWithPR()
			if tt.mutate != nil {
				tt.mutate(r)
			}
			if _, err := gate.Authorize(context.Background(), r, tt.req); !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}
	r := repoWithPR()
	r.Fail = true
	if _, err := gate.Authorize(context.Background(), r, gate.AuthRequest{Actor: "maint", PR: 7}); err == nil {
		t.Error("an API failure must refuse")
	}
}

func TestRecheck_AMovedHeadIsRefusedBeforeSpend(t *testing.T) {
	r := repoWithPR()
	a, err := gate.Authorize(context.Background(), r, gate.AuthRequest{Actor: "maint", PR: 7})
	if err != nil {
		t.Fatal(err)
	}
	if err := gate.Recheck(context.Background(), r, a); err != nil {
		t.Fatal(err)
	}
	p := r.PRs[7]
	p.HeadSHA = merge2
	r.PRs[7] = p
	if err := gate.Recheck(context.Background(), r, a); !errors.Is(err, gate.ErrHeadMoved) {
		t.Errorf("err = %v", err)
	}
	p.Open = false
	r.PRs[7] = p
	if err := gate.Recheck(context.Background(), r, a); !errors.Is(err, gate.ErrClosed) {
		t.Errorf("err = %v", err)
	}
}

func localRepo() *gatetest.Repo {
	r := repoWithPR()
	p := r.PRs[7]
	p.Labels = []string{gate.DefaultLocalLabel}
	r.PRs[7] = p
	r.Comment[7] = []gate.Comment{{ID: 1, Author: "maint", Body: gate.EvidenceMarker(head) + "\ncuda: 812 passed\npjrt: 44 passed"}}
	return r
}

func TestVerifyLocalEvidence_AcceptsTheDispatchersSHABoundComment(t *testing.T) {
	if _, err := gate.VerifyLocalEvidence(context.Background(), localRepo(), gate.LocalRequest{Dispatcher: "maint", PR: 7, SHA: head}); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyLocalEvidence_Refusals(t *testing.T) {
	tests := map[string]struct {
		mutate func(r *gatetest.Repo)
		req    gate.LocalRequest
		want   error
	}{
		"wrong SHA in comment": {func(r *gatetest.Repo) { r.Comment[7][0].Body = gate.EvidenceMarker(merge) }, gate.LocalRequest{}, gate.ErrEvidence},
		"wrong author":         {func(r *gatetest.Repo) { r.Comment[7][0].Author = "dev" }, gate.LocalRequest{}, gate.ErrEvidence},
		"marker off first line": {func(r *gatetest.Repo) {
			r.Comment[7][0].Body = "Ran locally:\n" + gate.EvidenceMarker(head)
		}, gate.LocalRequest{}, gate.ErrEvidence},
		"old free-text evidence":    {func(r *gatetest.Repo) { r.Comment[7][0].Body = "Local GPU validation: all passed" }, gate.LocalRequest{}, gate.ErrEvidence},
		"dispatcher not maintainer": {nil, gate.LocalRequest{Dispatcher: "dev"}, gate.ErrUnauthorized},
		"label missing":             {func(r *gatetest.Repo) { p := r.PRs[7]; p.Labels = nil; r.PRs[7] = p }, gate.LocalRequest{}, gate.ErrEvidence},
		"head is another SHA":       {nil, gate.LocalRequest{SHA: merge}, gate.ErrHeadMoved},
		"fork":                      {func(r *gatetest.Repo) { p := r.PRs[7]; p.HeadRepoID = 9; r.PRs[7] = p }, gate.LocalRequest{}, gate.ErrFork},
		"closed":                    {func(r *gatetest.Repo) { p := r.PRs[7]; p.Open = false; r.PRs[7] = p }, gate.LocalRequest{}, gate.ErrClosed},
		"moved during verification": {func(r *gatetest.Repo) {
			r.OnReread = func(p *gate.PullRequest) { p.HeadSHA = merge2 }
		}, gate.LocalRequest{}, gate.ErrHeadMoved},
		"label removed during verification": {func(r *gatetest.Repo) {
			r.OnReread = func(p *gate.PullRequest) { p.Labels = nil }
		}, gate.LocalRequest{}, gate.ErrEvidence},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			r := localRepo()
			if tt.mutate != nil {
				tt.mutate(r)
			}
			req := gate.LocalRequest{Dispatcher: "maint", PR: 7, SHA: head}
			if tt.req.Dispatcher != "" {
				req.Dispatcher = tt.req.Dispatcher
			}
			if tt.req.SHA != "" {
				req.SHA = tt.req.SHA
			}
			if _, err := gate.VerifyLocalEvidence(context.Background(), r, req); !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestLocalRelay_PaidPathPublishesNothingForALabelledPR(t *testing.T) {
	if gate.PaidPathAllowed(gate.PullRequest{Labels: []string{gate.DefaultLocalLabel}}, "") {
		t.Error("a labelled PR must not get a paid publication")
	}
	if !gate.PaidPathAllowed(gate.PullRequest{Labels: []string{"gpu"}}, "") {
		t.Error("an unlabelled PR takes the paid path")
	}
}

// "For a labelled PR authorize publishes local_gpu_validation, every
// RunPod job after it is skipped, and ci-gpu-gate publishes nothing (it
// re-reads the label, which may have been added after authorize)."
func TestLocalRelay_AuthorizeRecordsTheLabelAndTheLaterStepsReadItAgain(t *testing.T) {
	r := repoWithPR()
	a, err := gate.Authorize(context.Background(), r, gate.AuthRequest{Actor: "maint", PR: 7})
	if err != nil || a.LocalValidation {
		t.Fatalf("unlabelled: %+v %v", a, err)
	}
	// The label arrives after authorization: the later re-read sees it.
	p := r.PRs[7]
	p.Labels = append(p.Labels, gate.DefaultLocalLabel)
	r.PRs[7] = p
	if skip, err := gate.PaidPathSkipped(context.Background(), r, 7, ""); err != nil || !skip {
		t.Errorf("re-read after labelling: %v %v", skip, err)
	}
	a, err = gate.Authorize(context.Background(), r, gate.AuthRequest{Actor: "maint", PR: 7})
	if err != nil || !a.LocalValidation {
		t.Errorf("labelled: %+v %v", a, err)
	}
	// A configured label replaces the default.
	if a, _ := gate.Authorize(context.Background(), r, gate.AuthRequest{Actor: "maint", PR: 7, LocalLabel: "validated-on-my-gpu"}); a.LocalValidation {
		t.Error("the default label counted although another was configured")
	}
	if _, err := gate.PaidPathSkipped(context.Background(), r, 99, ""); err == nil {
		t.Error("an unreadable PR must be an error, never a skip")
	}
}

func TestWaitLocal_AcceptsOnlyTheLocalGateForTheHeadWithinTheBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := gatetest.NewChecks()
		c.Add(head, gate.DefaultCheckName, g(0, merge, gate.KindPaid, "completed", "success", t0)) // not accepted
		time.AfterFunc(2*time.Hour, func() {
			c.Add(head, gate.DefaultCheckName, gate.Gate{ExternalID: gate.EvidenceMarker(head), Status: "completed", Conclusion: "success"})
		})
		start := time.Now()
		got, err := gate.WaitLocal(context.Background(), c, head, "", 0, time.Minute)
		if err != nil || got.ExternalID != gate.EvidenceMarker(head) || time.Since(start) < 2*time.Hour {
			t.Errorf("%+v %v after %v", got, err, time.Since(start))
		}
		start = time.Now()
		if _, err := gate.WaitLocal(context.Background(), gatetest.NewChecks(), head, "", 0, time.Minute); err == nil || time.Since(start) != 330*time.Minute {
			t.Errorf("err %v after %v; want a timeout at 330 minutes", err, time.Since(start))
		}
	})
}

func TestRecover_DispatchesAtTheDefaultBranchAndFollowsTheRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wf := &gatetest.Workflows{Default: "main"}
		res, err := gate.Recover(context.Background(), wf, gate.RecoverRequest{Workflow: "runpod-gpu-test.yml", PR: 42, Wait: true})
		if err != nil || res.Ref != "main" || res.Run.Conclusion != "success" || res.Run.URL == "" {
			t.Fatalf("%+v %v", res, err)
		}
		want := []gatetest.Dispatch{{Workflow: "runpod-gpu-test.yml", Ref: "main", Inputs: map[string]any{"pr_number": "42"}}}
		if diff := cmp.Diff(want, wf.Dispatched); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		wf.Conclusion = "failure"
		if _, err := gate.Recover(context.Background(), wf, gate.RecoverRequest{Workflow: "runpod-gpu-test.yml", PR: 42, Wait: true}); !errors.Is(err, gate.ErrRecoveryFailed) {
			t.Errorf("err = %v", err)
		}
		if _, err := gate.Recover(context.Background(), wf, gate.RecoverRequest{Workflow: "x.yml"}); !errors.Is(err, gate.ErrBadRequest) {
			t.Errorf("no PR: err = %v", err)
		}
	})
}

// BenchmarkReuse decides over the gates on one PR head: 10 (a PR re-run a
// few times across two bases) and 1000 (100x).
func BenchmarkReuse(b *testing.B) {
	kinds := []gate.Kind{gate.KindPaid, gate.KindFailed, gate.KindReused, gate.KindLocal}
	for _, n := range []int{10, 1000} {
		gates := make([]gate.Gate, n)
		for i := range gates {
			ref := merge
			if i%3 == 0 {
				ref = merge2
			}
			conclusion := "success"
			if kinds[i%len(kinds)] == gate.KindFailed {
				conclusion = "failure"
			}
			gates[i] = g(int64(i+1), ref, kinds[i%len(kinds)], "completed", conclusion, t0.Add(time.Duration(i)*time.Minute))
		}
		b.Run(fmt.Sprintf("gates=%d", n), func(b *testing.B) {
			for b.Loop() {
				if d := gate.Reuse(gates, merge); d.Reason == "" {
					b.Fatal("no reason")
				}
			}
		})
	}
}

// The local-validation label can be added after authorization: the
// re-read just before spending stops the paid path, whatever the caller
// (a library caller of Recheck gets the rule, not only the commands).
func TestRecheck_ALabelAddedAfterAuthorizationStopsTheSpend(t *testing.T) {
	for name, label := range map[string]string{"the default label": "", "a custom label": "validated-on-my-gpu"} {
		t.Run(name, func(t *testing.T) {
			r := repoWithPR()
			a, err := gate.Authorize(context.Background(), r, gate.AuthRequest{Actor: "maint", PR: 7, LocalLabel: label})
			if err != nil || a.LocalValidation {
				t.Fatalf("%+v %v", a, err)
			}
			p := r.PRs[7]
			added := label
			if added == "" {
				added = gate.DefaultLocalLabel
			}
			p.Labels = append(p.Labels, added)
			r.PRs[7] = p
			if err := gate.Recheck(context.Background(), r, a); !errors.Is(err, gate.ErrLocallyValidated) {
				t.Errorf("err = %v, want ErrLocallyValidated", err)
			}
		})
	}
}

// Publish reads the pull request again: a label added after authorization
// means nothing is published, so the local relay's gate is never
// overridden; a manual revision is published at once.
func TestPublishPaid_ALabelAddedAfterAuthorizationPublishesNothing(t *testing.T) {
	ctx := context.Background()
	r := repoWithPR()
	checks := gatetest.NewChecks()
	head := r.PRs[7].HeadSHA
	report := gate.Report{HeadSHA: head, ID: gate.ExternalID{Ref: r.PRs[7].MergeSHA, Kind: gate.KindFailed}, Details: "provisioning failed"}
	if _, err := gate.Publish(ctx, r, checks, 7, "", report, time.Now()); err != nil {
		t.Fatal(err)
	}
	p := r.PRs[7]
	p.Labels = append(p.Labels, gate.DefaultLocalLabel)
	r.PRs[7] = p
	if _, err := gate.Publish(ctx, r, checks, 7, "", report, time.Now()); !errors.Is(err, gate.ErrLocallyValidated) {
		t.Errorf("err = %v, want ErrLocallyValidated", err)
	}
	if n := len(checks.Published(head)); n != 1 {
		t.Errorf("%d publications, want only the one before the label", n)
	}
	r.Fail = true // neither re-reads
	if _, err := gate.Publish(ctx, r, checks, 0, "", report, time.Now()); err != nil {
		t.Errorf("a manual revision: %v", err)
	}
}

// The publish API itself re-reads the local-validation label before a
// paid-path publication for a pull request: no caller can publish over
// the local relay's gate by skipping the re-read, whether it calls
// Publish or the Steps' Publish, names the label or not, and a caller
// without the repository to re-read it through publishes nothing.
func TestPublish_APaidPathGateForAPullRequestAlwaysReReadsTheLocalValidationLabel(t *testing.T) {
	ctx := context.Background()
	r := repoWithPR()
	p := r.PRs[7]
	p.Labels = append(p.Labels, gate.DefaultLocalLabel)
	r.PRs[7] = p
	checks := gatetest.NewChecks()
	from := checks.Add(head, gate.DefaultCheckName, g(0, merge, gate.KindPaid, "completed", "success", t0))
	for kind, report := range map[gate.Kind]gate.Report{
		gate.KindPaid:        {HeadSHA: head, ID: gate.ExternalID{Ref: merge, Kind: gate.KindPaid}, Paid: &gate.PaidEvidence{TestsPassed: true}},
		gate.KindReused:      {HeadSHA: head, ID: gate.ExternalID{Ref: merge, Kind: gate.KindReused}, ReusedFrom: &from},
		gate.KindFailed:      {HeadSHA: head, ID: gate.ExternalID{Ref: merge, Kind: gate.KindFailed}},
		gate.KindNotRequired: {HeadSHA: head, ID: gate.ExternalID{Ref: merge, Kind: gate.KindNotRequired}, GPU: &gate.Classification{HeadSHA: head}},
	} {
		t.Run(string(kind), func(t *testing.T) {
			if _, err := gate.Publish(ctx, r, checks, 7, "", report, t0); !errors.Is(err, gate.ErrLocallyValidated) {
				t.Errorf("Publish: err = %v, want ErrLocallyValidated", err)
			}
			steps := gate.Steps{Repo: r, Checks: checks}
			if _, err := steps.Publish(ctx, 7, report, t0); !errors.Is(err, gate.ErrLocallyValidated) {
				t.Errorf("Steps.Publish: err = %v, want ErrLocallyValidated", err)
			}
			if _, err := gate.Publish(ctx, nil, checks, 7, "", report, t0); !errors.Is(err, gate.ErrPublish) {
				t.Errorf("no repository to re-read the label: err = %v, want ErrPublish", err)
			}
		})
	}
	if n := len(checks.Published(head)); n != 1 {
		t.Errorf("%d gates on the labelled head, want only the earlier paid one", n)
	}
}

// The steps run each rule with their own label and check name: a label
// configured once stops the recheck and the publication, and the reuse
// lookup reads the configured check.
func TestSteps_TheConfiguredLabelAndCheckNameHoldInEveryStep(t *testing.T) {
	ctx := context.Background()
	const label, name = "validated-on-my-gpu", "GPU gate"
	r := repoWithPR()
	checks := gatetest.NewChecks()
	checks.Add(head, name, g(0, merge, gate.KindPaid, "completed", "success", t0))
	steps := gate.Steps{Repo: r, Checks: checks, CheckName: name, LocalLabel: label}
	a, err := steps.Authorize(ctx, gate.AuthRequest{Actor: "maint", PR: 7})
	if err != nil || a.LocalValidation || a.LocalLabel != label {
		t.Fatalf("%+v %v", a, err)
	}
	if d := steps.Reuse(ctx, a); !d.Reuse {
		t.Errorf("reuse of the %q check: %+v", name, d)
	}
	p := r.PRs[7]
	p.Labels = append(p.Labels, label)
	r.PRs[7] = p
	if err := steps.Recheck(ctx, gate.Authorization{PR: 7, HeadSHA: head}); !errors.Is(err, gate.ErrLocallyValidated) {
		t.Errorf("recheck: err = %v, want ErrLocallyValidated", err)
	}
	failed := gate.Report{HeadSHA: head, ID: gate.ExternalID{Ref: merge, Kind: gate.KindFailed}}
	if _, err := steps.Publish(ctx, 7, failed, t0); !errors.Is(err, gate.ErrLocallyValidated) {
		t.Errorf("publish: err = %v, want ErrLocallyValidated", err)
	}
	if n := len(checks.Published(head)); n != 1 {
		t.Errorf("%d gates, want only the earlier one", n)
	}
}

// The relay publishes the local gate only on verified evidence, on the
// head the evidence is for, under the configured check.
func TestSteps_RelayLocalPublishesOnlyOnVerifiedEvidence(t *testing.T) {
	ctx := context.Background()
	checks := gatetest.NewChecks()
	steps := gate.Steps{Repo: localRepo(), Checks: checks, CheckName: "GPU gate"}
	if _, err := steps.RelayLocal(ctx, gate.LocalRequest{Dispatcher: "dev", PR: 7, SHA: head}, t0); !errors.Is(err, gate.ErrUnauthorized) {
		t.Errorf("a dispatcher without the role: err = %v, want ErrUnauthorized", err)
	}
	got, err := steps.RelayLocal(ctx, gate.LocalRequest{Dispatcher: "maint", PR: 7, SHA: head}, t0)
	if err != nil || got.ExternalID != gate.EvidenceMarker(head) || got.Conclusion != "success" {
		t.Fatalf("%+v %v", got, err)
	}
	if gates := checks.Published(head); len(gates) != 1 {
		t.Errorf("published %v, want the one local gate", gates)
	}
}

// A Steps missing what a step needs returns a clear error, never panics:
// the error matches ErrMissing and names the step and the missing field,
// and nothing is read or published. Reuse, which fails open, answers "run"
// with that error as its reason.
func TestSteps_AStepMissingWhatItNeedsReturnsAClearErrorNeverPanics(t *testing.T) {
	ctx := context.Background()
	a := gate.Authorization{Actor: "maint", Role: "maintain", PR: 7, HeadSHA: head, TestedRef: merge}
	failed := gate.Report{HeadSHA: head, ID: gate.ExternalID{Ref: merge, Kind: gate.KindFailed}}
	checks := gatetest.NewChecks()
	cases := map[string]struct {
		steps        gate.Steps
		run          func(gate.Steps) error
		step, field  string
		publishedVia *gatetest.Checks
	}{
		"Authorize without Repo": {gate.Steps{}, func(s gate.Steps) error {
			_, err := s.Authorize(ctx, gate.AuthRequest{Actor: "maint", PR: 7})
			return err
		}, "Authorize", "Repo", nil},
		"Recheck without Repo": {gate.Steps{Checks: checks}, func(s gate.Steps) error { return s.Recheck(ctx, a) }, "Recheck", "Repo", checks},
		"Publish without Checks": {gate.Steps{Repo: repoWithPR()}, func(s gate.Steps) error {
			_, err := s.Publish(ctx, 7, failed, t0)
			return err
		}, "Publish", "Checks", nil},
		"Publish for a pull request without Repo": {gate.Steps{Checks: checks}, func(s gate.Steps) error {
			_, err := s.Publish(ctx, 7, failed, t0)
			return err
		}, "Publish", "Repo", checks},
		"RelayLocal without Repo": {gate.Steps{Checks: checks}, func(s gate.Steps) error {
			_, err := s.RelayLocal(ctx, gate.LocalRequest{Dispatcher: "maint", PR: 7, SHA: head}, t0)
			return err
		}, "RelayLocal", "Repo", checks},
		"RelayLocal without Checks": {gate.Steps{Repo: localRepo()}, func(s gate.Steps) error {
			_, err := s.RelayLocal(ctx, gate.LocalRequest{Dispatcher: "maint", PR: 7, SHA: head}, t0)
			return err
		}, "RelayLocal", "Checks", nil},
		"a zero Steps": {gate.Steps{}, func(s gate.Steps) error {
			_, err := s.Publish(ctx, 0, failed, t0)
			return err
		}, "Publish", "Checks", nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("panicked: %v", r)
					}
				}()
				err = tc.run(tc.steps)
			}()
			var me *gate.MissingError
			if !errors.Is(err, gate.ErrMissing) || !errors.As(err, &me) || me.Step != tc.step || me.Field != tc.field {
				t.Fatalf("err = %v, want a *MissingError for Steps.%s needing Steps.%s", err, tc.step, tc.field)
			}
			if !strings.Contains(err.Error(), "Steps."+tc.field) {
				t.Errorf("%q does not name Steps.%s", err, tc.field)
			}
			if tc.publishedVia != nil {
				if gates := tc.publishedVia.Published(head); len(gates) != 0 {
					t.Errorf("published %v", gates)
				}
			}
		})
	}
	d := gate.Steps{}.Reuse(ctx, a)
	if d.Reuse || !strings.HasPrefix(d.Reason, "run: ") || !strings.Contains(d.Reason, "Steps.Checks") {
		t.Errorf("reuse without Checks: %+v, want run, naming Steps.Checks", d)
	}
}
