// Package gate is the required GPU check that branch protection sees: it
// must be impossible to satisfy without real validation, and cheap when
// validation already happened.
//
// One paid pod per tested merge ref; local GPU validation instead of
// provisioning; and the trust boundary, recovery and required-job rules:
//
//   - ExternalID: every gate records what it validated,
//     runpod-gpu-gate:v1:<tested ref>:<kind> (paid, reused, failed,
//     not-required, skipped) or local-gpu-gate:v1:<sha>.
//   - Reuse: pure. The paid path is skipped only when the newest completed
//     gate for exactly this tested ref is a successful paid or reused gate.
//     LookupReuse lists every gate on the head and fails open toward
//     validation.
//   - Publish: creates or completes the gate with a title a person
//     understands and a summary that lists what did NOT run separately.
//     Branch protection counts success, neutral and skipped as passing, so
//     every kind but failed carries its evidence or is refused
//     (ErrNoEvidence; Evidence names it): paid the run's passed tests,
//     reused the check it reuses, not-required the trusted classifier's
//     decision for exactly this head, local the relay's verified evidence,
//     skipped either of the last two. For a pull request it first reads
//     the local-validation label again, and publishes nothing on the paid
//     path while the label is there (ErrLocallyValidated).
//   - Authorize and Recheck: the actor's role, fork rejection (by repository
//     ID), an open PR, and immutable head and merge SHAs, rechecked just
//     before spending. With AuthRequest.ClassifiedHead, a head that moved
//     since the classifier listed its files is refused (ErrHeadMoved).
//   - VerifyLocalEvidence and WaitLocal: the local GPU relay, bound to one
//     commit by a first-line marker in the dispatcher's comment.
//   - Recover: re-runs the GPU workflow at the default branch for a PR
//     number; the workflow derives what to test itself.
//   - Steps: the lifecycle's GitHub steps for one repository (authorize,
//     reuse, recheck, publish, the local relay), each bound to its rule,
//     which gateflow.Run composes and the Action's step commands run one
//     at a time.
//
// GitHub is the go-github adapter for every surface; gatetest has fakes.
//
// Usage:
//
//	steps := gate.Steps{Repo: gh, Checks: gh}
//	a, err := steps.Authorize(ctx, gate.AuthRequest{Actor: actor, PR: n, ClassifiedHead: listedAt})
//	if d := steps.Reuse(ctx, a); d.Reuse {
//		steps.Publish(ctx, a.PR, gate.Report{HeadSHA: a.HeadSHA, ID: gate.ExternalID{Ref: a.TestedRef, Kind: gate.KindReused}, ReusedFrom: d.From}, time.Now())
//		return
//	}
//	if err := steps.Recheck(ctx, a); err != nil { ... } // then spend
package gate
