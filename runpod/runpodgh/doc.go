// Package runpodgh is the GitHub side of package runpod: go-github v66
// adapters of the interfaces the paid lifecycle reads GitHub through.
//
//   - Registry (runpod.RunnerRegistry): single-use JIT runner configs for
//     an organization or a repository, runner lookups by exact name over
//     every page, and removal of a runner's registration.
//   - PR (runpod.PRState): whether the pull request is still open, at
//     which head.
//   - Runs (runpod.Runs): a workflow run's state, and its cancellation.
//   - Progress (runpod.Progress): the GPU job of one run attempt and the
//     step that runs its tests, also inside a called workflow.
//   - Retention (runpod.Retention): a run's unexpired artifact names, where
//     the debug-retention records are.
//   - Repo makes every adapter for one repository on one client, the
//     runner registry the organization's or the repository's own.
//
// ProvisionOutputs are what a provisioning step hands the jobs after it
// through GitHub Actions: the accepted pod and its runner label, and the
// whole result for cleanup.
//
// Each adapter takes a *github.Client, such as the one ghclient.New
// builds; its errors wrap go-github's (a *github.ErrorResponse, a
// *github.RateLimitError, ...).
package runpodgh
