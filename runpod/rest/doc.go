// Package rest is the client of RunPod's REST v2 API: the GPU catalog and
// the pod operations (create, get, list, delete), following RunPod's
// published OpenAPI document (testdata/openapi-v2.json). It decides
// nothing about what to buy; package runpod does, through its PodAPI,
// which *Client implements.
//
//   - Client: NewClient with options (WithAPIKey, WithBaseURL, ...), or
//     ClientFromEnv from RUNPOD_API_KEY, and RUNPOD_API_URL when the calls
//     go through a proxy (https, or plain http only on loopback: the key
//     travels there). The client never follows a redirect (ErrRedirect),
//     and an error body is scrubbed of every secret the request carried,
//     in any encoding, before it is parsed or cut.
//   - Errors: an HTTP failure is an *APIError parsed from the RFC 9457
//     problem body and mapped onto the create retry table: 422 is never
//     retried (ErrInvalidRequest); a 400 whose detail says no instances are
//     available is ErrNoCapacity, any other 400 ErrRejected; 401 is
//     ErrUnauthorized, 402 ErrInsufficientBalance, 403 ErrForbidden, 404
//     ErrNotFound, 409 ErrConflict; 408, 429, 5xx, transport failures and
//     malformed responses are transient (ErrTransient). A response that
//     does not parse is ErrMalformed: unknown state, never "container
//     died", never "healthy".
//   - CreatePod: one short retry (DefaultCreateRetryPolicy), and after a
//     failure that may have created the pod (Ambiguous) it is never sent
//     again: the pod is looked up by its name, and when it is not found the
//     outcome is ErrCreateUnknown. A create whose environment a pod cannot
//     have (over MaxPodEnv, RunPod's 50 variables, or a variable both plain
//     and secret) is refused before it is sent (ErrInvalidRequest).
//   - RetryPolicy: bounded, jittered exponential backoff
//     (cenkalti/backoff/v4) inside one deadline shared by a call and its
//     retries (60 s). Retry-After, in seconds or as an HTTP date, is a
//     minimum even above the backoff cap, up to what one header may impose
//     (DefaultMaxRetryAfter, WithMaxRetryAfter). A process-local cooldown
//     is shared by every call of a client, so a 429 on one call pauses the
//     others (but never a pod's first DELETE), and a pause longer than the
//     caller's remaining deadline ends the call at once with ErrDeadline.
//
// Credentials, the JIT runner config and the startup command are Secrets:
// they never reach a log, an error or an encoded value, and a Pod's
// environment (PodEnv) prints, logs and encodes its keys only.
package rest
