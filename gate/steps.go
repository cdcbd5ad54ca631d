package gate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Steps are the gate lifecycle's GitHub steps for one repository, each
// bound to the safety rule it never runs without, in the order a gate runs
// them:
//
//  1. Authorize: the actor's role, a same-repository open pull request and
//     immutable SHAs, for exactly the head the classifier listed
//     (AuthRequest.ClassifiedHead); a pull request carrying the
//     local-validation label is the local relay's
//     (Authorization.LocalValidation), and the paid path stops there.
//  2. Reuse: a tested merge ref whose gate already passed is never paid
//     for twice; the lookup fails open toward validation.
//  3. Recheck: just before spending, the pull request is still open, at
//     the authorized head and without the label.
//  4. Publish: the label is read again before any paid-path publication,
//     so the paid path never overrides the local relay's gate.
//
// RelayLocal is the local relay's one step: evidence verified, then the
// local gate published. gateflow.Run composes the steps for one change in
// one process; the Action's authorize, reuse and publish steps run one
// each, handing the authorized head and tested ref on through their
// outputs. A zero CheckName is DefaultCheckName and a zero LocalLabel is
// DefaultLocalLabel. A step whose Steps lack what it needs (Authorize,
// Recheck and RelayLocal read Repo; Publish and RelayLocal publish through
// Checks, and Publish for a pull request re-reads it through Repo) reads
// and publishes nothing and returns a *MissingError; Reuse, which fails
// open, answers "run" with that error as its reason.
type Steps struct {
	Repo       Repo   // read to authorize, and again before spending and before publishing
	Checks     Checks // where the gates are looked up and published
	CheckName  string // the required check's name
	LocalLabel string // the label of a pull request validated on a maintainer's GPU
}

// ErrMissing is matched by the error of a step whose Steps lack a field
// the step needs (*MissingError): the step read and published nothing.
var ErrMissing = errors.New("gate: a step's dependency is missing")

// MissingError names the Steps field a step needs and was not given. It
// matches ErrMissing.
type MissingError struct {
	Step  string // the step: Authorize, Reuse, Recheck, Publish or RelayLocal
	Field string // the Steps field it needs: Repo or Checks
	Why   string // what the step needs it for
}

// Error names the step, the field it needs and why.
func (e *MissingError) Error() string {
	return fmt.Sprintf("gate: Steps.%s needs Steps.%s (%s); nothing was read or published", e.Step, e.Field, e.Why)
}

// Is reports whether target is ErrMissing.
func (e *MissingError) Is(target error) bool { return target == ErrMissing }

// needRepo and needChecks refuse a step whose Steps lack Repo or Checks.
func (s Steps) needRepo(step, why string) error {
	if s.Repo == nil {
		return &MissingError{Step: step, Field: "Repo", Why: why}
	}
	return nil
}

func (s Steps) needChecks(step, why string) error {
	if s.Checks == nil {
		return &MissingError{Step: step, Field: "Checks", Why: why}
	}
	return nil
}

// checkName is the required check's name.
func (s Steps) checkName() string { return cmp.Or(s.CheckName, DefaultCheckName) }

// Authorize is the trust boundary before any spend (Authorize), with the
// steps' local-validation label unless req names one. It needs Repo.
func (s Steps) Authorize(ctx context.Context, req AuthRequest) (Authorization, error) {
	if err := s.needRepo("Authorize", "the actor's role and the pull request are read through it"); err != nil {
		return Authorization{}, err
	}
	req.LocalLabel = cmp.Or(req.LocalLabel, s.LocalLabel)
	return Authorize(ctx, s.Repo, req)
}

// Reuse decides from the gates on a's head whether a's tested merge ref
// already passed (LookupReuse): it fails open, answering "run" with the
// reason on any error, a missing Checks included.
func (s Steps) Reuse(ctx context.Context, a Authorization) Decision {
	if err := s.needChecks("Reuse", "the gates are looked up in it"); err != nil {
		return Decision{Reason: "run: " + err.Error()}
	}
	return LookupReuse(ctx, s.Checks, a.HeadSHA, a.TestedRef, s.checkName())
}

// Recheck confirms just before spending that a's pull request is still
// open, at the authorized head and without the local-validation label
// (Recheck; ErrLocallyValidated when the label was added since). It needs
// Repo.
func (s Steps) Recheck(ctx context.Context, a Authorization) error {
	if err := s.needRepo("Recheck", "the pull request is read again through it"); err != nil {
		return err
	}
	a.LocalLabel = cmp.Or(a.LocalLabel, s.LocalLabel)
	return Recheck(ctx, s.Repo, a)
}

// Publish publishes r, under the steps' check name unless r names one,
// for pull request pr (0: a manual revision): a paid-path report for a
// pull request that now carries the local-validation label publishes
// nothing and is ErrLocallyValidated (Publish). It needs Checks, and Repo
// for a paid-path report on a pull request.
func (s Steps) Publish(ctx context.Context, pr int, r Report, now time.Time) (Gate, error) {
	if err := s.needChecks("Publish", "the gate is published through it"); err != nil {
		return Gate{}, err
	}
	if pr != 0 && r.ID.Kind != KindLocal {
		if err := s.needRepo("Publish", "the pull request's local-validation label is read again through it"); err != nil {
			return Gate{}, err
		}
	}
	r.CheckName = cmp.Or(r.CheckName, s.checkName())
	return Publish(ctx, s.Repo, s.Checks, pr, s.LocalLabel, r, now)
}

// RelayLocal is the local relay's step: it verifies the evidence for
// req.SHA on req.PR (VerifyLocalEvidence, with the steps' label unless req
// names one) and only then publishes local-gpu-gate:v1:<sha> on that
// head, saying who posted the evidence where. It needs Repo and Checks.
func (s Steps) RelayLocal(ctx context.Context, req LocalRequest, now time.Time) (Gate, error) {
	if err := s.needRepo("RelayLocal", "the evidence is verified through it"); err != nil {
		return Gate{}, err
	}
	if err := s.needChecks("RelayLocal", "the local gate is published through it"); err != nil {
		return Gate{}, err
	}
	req.Label = cmp.Or(req.Label, s.LocalLabel)
	ev, err := VerifyLocalEvidence(ctx, s.Repo, req)
	if err != nil {
		return Gate{}, err
	}
	return s.Publish(ctx, req.PR, Report{HeadSHA: req.SHA, ID: ExternalID{Ref: req.SHA, Kind: KindLocal}, Local: &ev,
		Details: fmt.Sprintf("Validated on a maintainer's GPU; evidence posted on #%d by %s.", req.PR, req.Dispatcher)}, now)
}

// PublishInputs are the publish step's inputs as a workflow hands them on
// from earlier steps' outputs: all text, named (in each field's comment)
// as the Action names them. Report turns them into the Report whose
// evidence Build checks.
type PublishInputs struct {
	HeadSHA        string // head-sha: the authorize step's head_sha
	TestedRef      string // tested-ref: the authorize step's tested_ref
	Kind           string // kind: paid, reused, failed, not-required, local or skipped
	ReusedFromID   int64  // reused-from-id: the reuse step's from_id
	ReusedFromURL  string // reused-from-url: the reuse step's from_url
	GPURequired    string // gpu-required: the classify step's gpu output, true or false (empty: not given)
	Reason         string // reason: the classify step's reason
	ClassifiedHead string // classified-head: the classify step's head_sha
	TestsPassed    string // tests-passed: the GPU test job's result, true or false (empty: not given)
	Ran            string // ran: what ran, comma-separated
	NotRun         string // not-run: what did NOT run, comma-separated (the partition-select step's not_run)
}

// InputError is a step input outside its closed set of values. It matches
// ErrBadRequest.
type InputError struct {
	Input string   // the input's name, as the Action names it (the command's flag)
	Value string   // what was given
	Want  []string // the values it takes
}

// Error says which input took which value, and the values it takes.
func (e *InputError) Error() string {
	return fmt.Sprintf("gate: %s %q: want %s", e.Input, e.Value, strings.Join(e.Want, ", "))
}

// Is reports whether target is ErrBadRequest.
func (e *InputError) Is(target error) bool { return target == ErrBadRequest }

// Report is the report the inputs ask for, the evidence each input gives
// attached: reused-from-id names the check reused, gpu-required (with
// reason and classified-head) is the classifier's decision for the head it
// classified, tests-passed the paid run's own result; ran and not-run are
// split on commas, blanks dropped. It checks the inputs, not the evidence
// (Build does): tests-passed, gpu-required or kind outside its values is
// an *InputError, before anything is read or published.
func (in PublishInputs) Report() (Report, error) {
	for _, b := range []struct{ input, v string }{{"tests-passed", in.TestsPassed}, {"gpu-required", in.GPURequired}} {
		if b.v != "" && b.v != "true" && b.v != "false" {
			return Report{}, &InputError{Input: b.input, Value: b.v, Want: []string{"true", "false"}}
		}
	}
	kinds := []string{string(KindPaid), string(KindReused), string(KindFailed), string(KindNotRequired), string(KindLocal), string(KindSkipped)}
	if !slices.Contains(kinds, in.Kind) {
		return Report{}, &InputError{Input: "kind", Value: in.Kind, Want: kinds}
	}
	r := Report{HeadSHA: in.HeadSHA, ID: ExternalID{Ref: in.TestedRef, Kind: Kind(in.Kind)}, Ran: splitList(in.Ran), NotRun: splitList(in.NotRun)}
	if in.ReusedFromID != 0 {
		r.ReusedFrom = &Gate{ID: in.ReusedFromID, URL: in.ReusedFromURL}
	}
	if in.GPURequired != "" {
		r.GPU = &Classification{GPURequired: in.GPURequired == "true", Reason: in.Reason, HeadSHA: in.ClassifiedHead}
	}
	if in.TestsPassed != "" {
		r.Paid = &PaidEvidence{TestsPassed: in.TestsPassed == "true"}
	}
	return r, nil
}

// splitList is a comma-separated list's items, spaces trimmed, blanks
// dropped.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
