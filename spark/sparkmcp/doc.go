// Package sparkmcp serves the shared fleet's lease queue to local agents
// over the Model Context Protocol. Local agents use the same queue as CI:
// they request a lease through the shared sparkctl/MCP interface, wait for
// it to be active, and attach to the development environment assigned to
// that lease. Agents never bypass a queued reservation with direct
// automation SSH.
//
// The tools are the common requests:
//
//   - spark_request: "Test this model and work on integration" (a
//     one-host development lease; the controller prefers its configured
//     host unless one is named) and "Reserve both Sparks for development"
//     (topology pair: one atomic two-host lease).
//   - spark_start_service: "Start Deckard" (the resident service's start,
//     next after active work).
//   - spark_wait: blocks, for a bounded time (55 s unless the agent asks for
//     up to 600), until the lease is active or has ended; a lease still
//     queued is an answer, not an error, and the agent asks again.
//   - spark_status and spark_hosts: the lease's state, queue position and
//     pending reason; the hosts' sanitized state.
//   - spark_release: "I'm done with the Sparks" (release with the lease's
//     fencing token, "followed by host cleanup acknowledgement": the
//     answer says, for each host the lease held, whether it is clean,
//     still runs processes from the lease, or returns to the service).
//   - spark_cancel: cancels queued work only; an active lease is refused
//     (release it instead).
//
// An agent asks for development and service starts only: pull-request,
// CI and benchmark work comes from their own triggers, through the same
// queue. Every tool asks the controller; when it cannot be reached, or
// refuses, the tool fails with its reason and nothing starts (automation
// fails closed; there is no fallback to a host).
//
// Usage (sparkctl mcp serves this over stdio):
//
//	api, err := spark.NewAPIClient(addr, token, nil)
//	server := sparkmcp.NewServer(api, sparkmcp.Options{Owner: "agent:" + user})
//	err = server.Run(ctx, &mcp.StdioTransport{})
package sparkmcp
