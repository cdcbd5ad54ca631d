// Package changepolicy decides from a change's file list which CI lanes must
// run, so that a docs-only change never pays for a GPU while required checks
// never silently disappear.
//
// A change has one primary Class and independent lane flags:
//
//   - Code: Rust (or any) sources, manifests, build configuration, paths no
//     rule knows, and the empty diff. Every lane runs, the paid GPU gate
//     included.
//   - DocsOnly: only documentation and repository prose. The docs lane runs;
//     compiled-code lanes and the GPU gate are explicit successful no-ops.
//   - CIOnly: only known workflow and CI-helper paths (and possibly docs).
//     CI-helper tests and workflow lint run. The GPU gate is required only
//     when a changed path is device control (it can change what the paid
//     pod executes or whether it can); hosted-only paths of the paid lane
//     never require it. The policy file itself is always device control,
//     because a diff there can turn the paid lane off.
//
// Code overrides (such as docs/tutorial-code/**) win over docs and ci globs.
// Renames and copies classify both paths; deletions count. Named lanes (a
// macOS lane, say) run for code and for any change that touches one of their
// triggers. Decision.Jobs lists every configured required job, each either
// Run with its profile or an explicit NoOp with the reason, and
// Decision.Files records the rule that matched every path.
//
// A classification failure is a validation failure: bad input is an error,
// never a cheaper class, and FromPullRequest withholds a partial file list
// (ErrIncomplete) rather than let it be classified.
//
// Unknown paths fail safe, but a misspelt glob need not: a device-control
// pattern that matches nothing lets a change to what the pod runs skip the
// GPU gate. Policy.Unmatched, over TrackedFiles, names every code,
// device-control, hosted-only and lane-trigger glob that matches no file
// of the repository; run it in CI whenever the policy or a CI path changes.
//
// This implements the "Change policy" and "macOS support gate" sections of
// the change-aware CI seed. Usage:
//
//	p, err := changepolicy.LoadFile(".github/gpugate/policy.yml")
//	...
//	changes, err := changepolicy.FromGitDiff(ctx, ".", "origin/main", "HEAD")
//	...
//	d, err := changepolicy.Classify(p, changes)
//	if d.GPU { /* run the paid gate */ }
package changepolicy
