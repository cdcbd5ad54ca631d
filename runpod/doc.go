// Package runpod buys GPU time from RunPod for one CI job without ever
// paying twice or leaving a pod behind: the paid lifecycle from the
// reviewed configuration to the confirmed deletion. It talks to RunPod
// through PodAPI, which the REST v2 client (package runpod/rest)
// implements, and to GitHub through small interfaces whose go-github
// adapters are package runpod/runpodgh; runpodtest fakes both sides, and
// ExampleProvision runs the whole loop against it.
//
//   - Config: what provisioning may buy (LoadConfig, LoadConfigFile,
//     DefaultConfig, ExampleConfig): reviewed GPU tiers, floors, attempt
//     budgets and the price ceiling. Config.CheckFloors refuses floors
//     that admit hosts the on-pod CUDA proof rejects (ErrFloor).
//   - CandidatePlan: the pure attempt order (cheapest reviewed live offers,
//     one reserved static slot per tier, the rest interleaved by tier).
//   - CheckGPUTypes: the configured GPU type IDs against the live catalog,
//     before anything is bought; a misspelled type is ErrUnknownGPUType.
//   - PlanFromCatalog: the catalog read, CheckGPUTypes and CandidatePlan in
//     one call; a catalog that cannot be read falls back to the static
//     candidates and says why. PlanText renders a plan for a log.
//   - ResolveImage: the runner image pinned to its digest, so that every
//     candidate runs the same image (ErrImage stops before any GPU).
//   - Provision: the bounded provision loop. One pod at a time, in plan
//     order, each with a fresh runner name and label <prefix>-cN, a
//     single-use JIT config (a secret in the pod's environment), ownership
//     tags and gpu.minCudaVersion. It accepts only a RUNNING pod with its
//     runtime whose own runner is online (the on-pod CUDA proof runs before
//     registration). EXITED/ERROR/TERMINATED, lost runtime, a GPU outside
//     the candidate's tier and startup_timeout reject, and the pod is
//     deleted at once, and its runner registration removed
//     (RunnerRegistry.Remove). Capacity misses cost nothing and do not
//     count toward the early stop; 402 stops everything; a 401, or a 403
//     that refuses the key rather than the GPU type, stops with
//     ErrKeyRefused; max_provision_attempts ends in ErrExhausted and
//     max_consecutive_startup_failures in ErrStartupFailures; a deletion
//     that cannot be confirmed stops all creation; a moved or closed pull
//     request ends in ErrObsolete. Every create and pause of one
//     provisioning shares create_deadline (60 s, ErrCreateDeadline).
//     max_hourly_price holds against the created pod's own cost
//     (OutcomeOverCeiling), and a pod of unknown price is never accepted
//     under a ceiling. A create whose pod the listing did not show is
//     named in Result.UnresolvedPodNames, never in an ID field;
//     DeleteByName resolves it. Result.Snapshot keeps the accepted pod's
//     record for the cost report. Result.Markdown renders the attempts
//     for a job summary, Result.Text for a log. Missing dependencies and a
//     template whose pods could never be created are ErrTemplate, and
//     floors below the template's CUDA proof ErrFloor, before anything is
//     bought.
//   - Watch: the watchdog of the accepted pod. A setup deadline runs from
//     the pod's start until the tests start, a lifetime backstop after;
//     a moved or closed pull request deletes the pod, then cancels the
//     run. WatchResult says how it ended (WatchOutcome) and the GPU job's
//     conclusion.
//   - Delete: the bounded, idempotent cleanup helper (five attempts within
//     180 s, 404 confirms, a GET after a lost response); RecordBeforeDelete
//     reads the billing record first as one GET, two seconds to connect
//     and five in all; a deletion that is not confirmed is a *DeleteError
//     naming the pod (ErrNotDeleted).
//   - Reap: the orphan reaper. It reclaims only pods whose ownership tags
//     (Ownership.Tags) and name agree and whose run completed, was
//     superseded or outlived the backstop; a debug run's RetentionRecord
//     spares the pods it names.
//
// The JIT runner config and the startup command are secrets (rest.Secret):
// they never reach a log, an error or an encoded value.
//
// Usage:
//
//	c, err := rest.ClientFromEnv(os.Getenv) // RUNPOD_API_KEY (and RUNPOD_API_URL for a proxy)
//	cfg, err := runpod.LoadConfigFile("runpod.yml")
//	plan, catalogErr, err := runpod.PlanFromCatalog(ctx, c, cfg)
//	if err != nil {
//		return err // a configured type RunPod does not offer
//	}
//	if catalogErr != nil {
//		log.Print(catalogErr) // the catalog failed: static candidates only
//	}
//	res, err := runpod.Provision(ctx, runpod.Deps{API: c, Registry: registry}, cfg, plan, tmpl)
//	...
//	defer runpod.Delete(context.WithoutCancel(ctx), c, res.PodID)
package runpod
