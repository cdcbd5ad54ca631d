// Package runpod buys GPU time from RunPod's REST v2 API without ever paying
// twice or leaving a pod behind.
//
// It implements candidate selection, the request policy and the shared
// cleanup; ExampleProvision runs the whole loop against the in-process fake
// of RunPod's API (runpodtest):
//
//   - Client: the v2 catalog and pod operations, following the published
//     OpenAPI document. Errors are *APIError values parsed from RFC 9457
//     problem bodies and mapped onto the create retry table: 422 is never
//     retried (ErrInvalidRequest); a 400 whose detail says no instances are
//     available is ErrNoCapacity, any other 400 ErrRejected (try the next
//     candidate); 402 is ErrInsufficientBalance (stop everything); 403 is
//     ErrForbidden (skip the candidate when it is about the GPU type or its
//     pool; a 401, or a 403 that refuses the key, stops provisioning with
//     ErrKeyRefused); 408, 429, 5xx, transport failures and malformed
//     responses are transient (ErrTransient). A create gets one short
//     retry (DefaultCreateRetryPolicy), and after a failure that may have
//     created the pod it is never sent again: the pod is looked up by name,
//     and when it is not found the outcome is ErrCreateUnknown. The client
//     never follows a redirect (ErrRedirect), and an error body is scrubbed
//     of every secret the request carried, in any encoding, before it is
//     parsed or cut. A create whose
//     environment a pod cannot have (over MaxPodEnv, RunPod's 50
//     variables, or a variable both plain and secret) is refused before
//     it is sent (ErrInvalidRequest).
//   - RetryPolicy: bounded, jittered exponential backoff
//     (cenkalti/backoff/v4) inside one deadline shared by a call and its
//     retries (60 s). Retry-After, in seconds or as an HTTP date, is a
//     minimum even above the backoff cap, up to what one header may impose
//     (DefaultMaxRetryAfter, WithMaxRetryAfter). A process-local cooldown is
//     shared by every call of a client, so a 429 on one call pauses the
//     others (but never a pod's first DELETE), and a pause longer than the
//     caller's remaining deadline ends the call at once with ErrDeadline.
//   - CandidatePlan: the pure attempt order (cheapest reviewed live offers,
//     one reserved static slot per tier, the rest interleaved by tier).
//   - CheckGPUTypes: the configured GPU type IDs against the live catalog,
//     before anything is bought; a misspelled type is ErrUnknownGPUType.
//   - Provision: the bounded provision loop ("Bounded provision loop",
//     "Cost containment in the startup window"). One pod at a time, in plan
//     order, each with a fresh runner name and label <prefix>-cN, a
//     single-use JIT config (a Secret in the pod's environment), ownership
//     tags and gpu.minCudaVersion. It accepts only a RUNNING pod with its
//     runtime whose own runner is online (the on-pod CUDA proof runs before
//     registration). EXITED/ERROR/TERMINATED, lost runtime, a GPU outside
//     the candidate's tier and startup_timeout reject, and the pod is
//     deleted at once, and its runner registration removed
//     (RunnerRegistry.Remove). Capacity misses cost nothing and do not count toward
//     the early stop; 402 stops everything; max_provision_attempts ends in
//     ErrExhausted and max_consecutive_startup_failures in
//     ErrStartupFailures; a deletion that cannot be confirmed stops all
//     creation; a moved or closed pull request ends in ErrObsolete. Every
//     create and pause of one provisioning shares create_deadline (60 s,
//     ErrCreateDeadline). max_hourly_price holds against the created pod's
//     own cost (OutcomeOverCeiling), and a pod of unknown price is never
//     accepted under a ceiling. A create whose pod the listing did not
//     show is named in Result.UnresolvedPodNames, never in an ID field;
//     DeleteByName resolves it. Result.Snapshot keeps the accepted pod's
//     record for the cost report.
//     Missing dependencies and a template whose pods could never be
//     created are ErrTemplate, before anything is bought.
//   - Delete: the bounded, idempotent cleanup helper (five attempts within
//     180 s, 404 confirms, a GET after a lost response); RecordBeforeDelete
//     reads the billing record first as one GET, two seconds to connect
//     and five in all.
//
// ClientFromEnv builds the client from RUNPOD_API_KEY, and from
// RUNPOD_API_URL when the calls go through a proxy (https, or plain http
// only on loopback: the key travels there).
//
// Credentials, the JIT runner config and the startup command are Secrets:
// they never reach a log, an error or an encoded value.
//
// Usage:
//
//	c, err := runpod.ClientFromEnv(os.Getenv) // RUNPOD_API_KEY (and RUNPOD_API_URL for a proxy)
//	cfg, err := runpod.LoadConfigFile("runpod.yml")
//	offers, err := c.ListGPUTypes(ctx, runpod.CatalogQuery{Cloud: cfg.Cloud, Count: 1, MinCUDAVersion: cfg.MinCUDAVersion})
//	if err != nil {
//		offers = nil // the catalog failed: static candidates only
//	}
//	if err := runpod.CheckGPUTypes(cfg, offers); err != nil {
//		return err // a configured type RunPod does not offer
//	}
//	plan := runpod.CandidatePlan(cfg, offers)
//	...
//	defer runpod.Delete(context.WithoutCancel(ctx), c, pod.ID)
package runpod
