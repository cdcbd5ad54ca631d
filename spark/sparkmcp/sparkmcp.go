package sparkmcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gpugate/gpugate/spark"
)

// Leases is the controller's lease API as an agent uses it; a
// *spark.APIClient is one.
type Leases interface {
	Request(ctx context.Context, lr spark.LeaseRequest) (spark.Status, error)
	Status(ctx context.Context, id string) (spark.Status, error)
	Wait(ctx context.Context, id string) (spark.Status, error)
	Release(ctx context.Context, id string, token int64) error
	Cancel(ctx context.Context, id string) error
	Hosts(ctx context.Context) ([]map[string]any, error)
}

var _ Leases = (*spark.APIClient)(nil)

// Options configure the server.
type Options struct {
	// Owner is recorded on every request as who asked (default "agent").
	Owner string
	// MaxWait bounds one spark_wait call (default and at most 10 minutes,
	// the controller's longest long poll).
	MaxWait time.Duration
	// DefaultWait is how long spark_wait blocks when the agent names no
	// timeout (default 55 s: inside the one-minute tool-call timeout many
	// MCP clients apply; the agent calls again).
	DefaultWait time.Duration
	// Version is reported to clients (default "dev").
	Version string
}

// maxLeaseMinutes bounds duration_minutes before it becomes seconds; the
// controller's class limits are far shorter.
const maxLeaseMinutes = 366 * 24 * 60

// maxWait is the longest one spark_wait call may block; defaultWait is
// what it blocks without a timeout_seconds.
const (
	maxWait     = 10 * time.Minute
	defaultWait = 55 * time.Second
)

// Lease is what the tools answer about a lease.
type Lease struct {
	ID       string   `json:"id"`
	Class    string   `json:"class"`
	Topology string   `json:"topology"`
	State    string   `json:"state" jsonschema:"queued, active, released, canceled, superseded, expired, failed or terminated"`
	Position int      `json:"position,omitempty" jsonschema:"1-based place in admission order while queued"`
	Pending  string   `json:"pending,omitempty" jsonschema:"why the lease is not active yet"`
	Hosts    []string `json:"hosts,omitempty" jsonschema:"the granted hosts, once active"`
	Token    int64    `json:"token,omitempty" jsonschema:"the lease's fencing token: spark_release needs it"`
	Expires  string   `json:"expires,omitempty" jsonschema:"when an active lease ends (RFC 3339)"`
	Reason   string   `json:"reason,omitempty" jsonschema:"why it ended"`
	Next     string   `json:"next" jsonschema:"what to do now"`
}

func leaseOf(st spark.Status) Lease {
	r := st.Request
	l := Lease{ID: r.ID, Class: string(r.Class), Topology: string(r.Topology), State: string(r.State), Position: st.Position,
		Pending: st.Pending, Hosts: r.Hosts, Token: r.Token, Reason: r.Reason}
	if !r.Expires.IsZero() {
		l.Expires = r.Expires.UTC().Format(time.RFC3339)
	}
	switch {
	case r.State == spark.Queued:
		l.Next = "call spark_wait with this id until the lease is active; do not reach the hosts before then"
	case r.Class == spark.ServiceStart && r.State == spark.Active:
		l.Next = fmt.Sprintf("the resident service is starting on %v: call spark_status until this request ends (released: it passed its health check and is online; failed: it did not)", r.Hosts)
	case r.Class == spark.ServiceStart && r.State == spark.Released:
		l.Next = "the resident service is online"
	case r.State == spark.Active:
		l.Next = fmt.Sprintf("attach to the development environment of %v; call spark_release with this id and token when done", r.Hosts)
	default:
		l.Next = "the lease has ended; request a new one to use a host again"
	}
	return l
}

// RequestInput asks for a development lease.
type RequestInput struct {
	Topology        string `json:"topology,omitempty" jsonschema:"single (one host, the default) or pair (both hosts, one atomic lease)"`
	Host            string `json:"host,omitempty" jsonschema:"a specific host for a single lease (default: the controller's preferred host)"`
	DurationMinutes int    `json:"duration_minutes,omitempty" jsonschema:"lease length in minutes (default and maximum: the development class's configured length)"`
}

// IDInput names a lease.
type IDInput struct {
	ID string `json:"id" jsonschema:"the lease id spark_request returned"`
}

// WaitInput names a lease and how long to wait.
type WaitInput struct {
	ID             string `json:"id" jsonschema:"the lease id spark_request returned"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"how long to wait at most, in seconds (default 55, at most 600; keep it under your client's tool-call timeout)"`
}

// ReleaseInput names a lease and its fencing token.
type ReleaseInput struct {
	ID    string `json:"id" jsonschema:"the active lease's id"`
	Token int64  `json:"token" jsonschema:"the lease's fencing token, from spark_wait or spark_status"`
}

// Done is the answer of spark_release and spark_cancel.
type Done struct {
	ID     string `json:"id"`
	Result string `json:"result"`
	// Hosts is the release's cleanup acknowledgement: each released
	// host's state just after the release.
	Hosts map[string]string `json:"hosts,omitempty" jsonschema:"each released host's state after the release: idle is clean; release-required means processes outlived the lease and must be cleaned first; restoring means the resident service is coming back"`
}

// Acknowledge says, for a release, what became of each host the lease
// held (the default "release request followed by host cleanup
// acknowledgement"): each held host's mode from hosts (the API's host
// list, read just after the release), and a sentence for people. Hosts it
// cannot find give no acknowledgement (nil).
func Acknowledge(held []string, hosts []map[string]any) (map[string]string, string) {
	ack := map[string]string{}
	var notes []string
	for _, h := range hosts {
		name, _ := h["name"].(string)
		if !slices.Contains(held, name) {
			continue
		}
		mode, _ := h["mode"].(string)
		ack[name] = mode
		switch spark.Mode(mode) {
		case spark.Idle:
			notes = append(notes, name+" is clean")
		case spark.ReleaseRequired:
			notes = append(notes, name+" still runs processes from this lease: it takes no work until they are cleaned up (stop what you started there)")
		case spark.Restoring, spark.ServiceRunning:
			notes = append(notes, name+" goes back to the resident service")
		case spark.Cleaning:
			notes = append(notes, name+" is being cleaned up by its host agent: it takes work once the agent acknowledges")
		default:
			notes = append(notes, name+" is "+mode)
		}
	}
	if len(notes) == 0 {
		return nil, "the hosts' state could not be read"
	}
	slices.Sort(notes)
	return ack, strings.Join(notes, "; ")
}

// ServeStdio serves s over the Model Context Protocol on r and w (an
// agent's stdio server: sparkctl mcp) until ctx ends or r does; closing
// the transport leaves w open.
func ServeStdio(ctx context.Context, s *mcp.Server, r io.Reader, w io.Writer) error {
	return s.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(r), Writer: nopCloser{w}})
}

// nopCloser is a writer the transport may close without closing it.
type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// Release releases lease id with its fencing token and then reads what
// became of each host it held (Acknowledge): the hosts' modes and a
// sentence for the person or agent that released it, "" when the hosts
// could not be read.
func Release(ctx context.Context, api Leases, id string, token int64) (map[string]string, string, error) {
	st, serr := api.Status(ctx, id) // which hosts it held, for the acknowledgement
	if err := api.Release(ctx, id, token); err != nil {
		return nil, "", err
	}
	hosts, err := api.Hosts(ctx)
	if serr != nil || err != nil {
		return nil, "", nil
	}
	held, ack := Acknowledge(st.Request.Hosts, hosts)
	return held, ack, nil
}

// HostsOutput is the answer of spark_hosts.
type HostsOutput struct {
	Hosts []map[string]any `json:"hosts" jsonschema:"each host's name, mode, whether it is online, draining and managed"`
}

// ErrInput is matched by a tool's refusal of its arguments.
var ErrInput = errors.New("sparkmcp: invalid arguments")

// NewServer returns an MCP server whose tools call api.
func NewServer(api Leases, o Options) *mcp.Server {
	if o.Owner == "" {
		o.Owner = spark.OwnerAgentTools
	}
	if o.MaxWait <= 0 || o.MaxWait > maxWait {
		o.MaxWait = maxWait
	}
	if o.DefaultWait <= 0 {
		o.DefaultWait = defaultWait
	}
	o.DefaultWait = min(o.DefaultWait, o.MaxWait)
	if o.Version == "" {
		o.Version = "dev"
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "spark", Title: "Shared GPU fleet leases", Version: o.Version}, &mcp.ServerOptions{
		Instructions: "Use these tools for every use of the shared GPU hosts: request a lease, wait until it is active, work only on the hosts it grants, " +
			"and release it when done. Never reach a host without an active lease, and never bypass the queue with direct SSH automation. " +
			"When a tool fails because the controller is unavailable, stop: no host may be used.",
	})
	request := func(ctx context.Context, lr spark.LeaseRequest) (Lease, error) {
		st, err := api.Request(ctx, lr)
		if err != nil {
			return Lease{}, explain("request", err)
		}
		return leaseOf(st), nil
	}
	mcp.AddTool(s, &mcp.Tool{Name: "spark_request", Description: "Request a development lease on the shared GPU fleet: one host, or both hosts as one atomic pair. " +
		"Development goes first in the queue but never stops active work. Returns the lease; call spark_wait until it is active."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in RequestInput) (*mcp.CallToolResult, Lease, error) {
			topology := spark.Topology(in.Topology)
			switch {
			case topology == "":
				topology = spark.Single
			case topology != spark.Single && topology != spark.Pair:
				return nil, Lease{}, fmt.Errorf("%w: topology %q: single or pair", ErrInput, in.Topology)
			}
			switch {
			case in.DurationMinutes < 0:
				return nil, Lease{}, fmt.Errorf("%w: duration_minutes %d is negative: omit it for the default length", ErrInput, in.DurationMinutes)
			case in.DurationMinutes > maxLeaseMinutes:
				// Checked before it is multiplied into seconds, which could wrap.
				return nil, Lease{}, fmt.Errorf("%w: duration_minutes %d is longer than any lease: omit it for the default length", ErrInput, in.DurationMinutes)
			}
			if topology == spark.Pair && in.Host != "" {
				return nil, Lease{}, fmt.Errorf("%w: a pair lease takes both hosts: omit host", ErrInput)
			}
			l, err := request(ctx, spark.LeaseRequest{Class: spark.Development, Topology: topology, Host: in.Host, Owner: o.Owner, DurationSeconds: in.DurationMinutes * 60})
			return nil, l, err
		})
	mcp.AddTool(s, &mcp.Tool{Name: "spark_start_service", Description: "Ask for the resident inference service to be started on its host, next after the active work there. Returns the request; spark_wait follows it."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, Lease, error) {
			l, err := request(ctx, spark.LeaseRequest{Class: spark.ServiceStart, Owner: o.Owner})
			return nil, l, err
		})
	mcp.AddTool(s, &mcp.Tool{Name: "spark_wait", Description: "Wait until a lease is active or has ended, for at most timeout_seconds (default 55, at most 600). A lease still queued when the time is up is returned as queued, with its position: call again."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in WaitInput) (*mcp.CallToolResult, Lease, error) {
			if err := needID(in.ID); err != nil {
				return nil, Lease{}, err
			}
			if in.TimeoutSeconds < 0 {
				return nil, Lease{}, fmt.Errorf("%w: timeout_seconds %d is negative", ErrInput, in.TimeoutSeconds)
			}
			wait := o.DefaultWait
			if in.TimeoutSeconds > 0 {
				wait = min(time.Duration(min(in.TimeoutSeconds, int(maxWait/time.Second)))*time.Second, o.MaxWait)
			}
			wctx, cancel := context.WithTimeout(ctx, wait)
			defer cancel()
			st, err := api.Wait(wctx, in.ID)
			if err != nil && wctx.Err() != nil && ctx.Err() == nil {
				// The bound passed: still queued is an answer.
				if st, err = api.Status(ctx, in.ID); err == nil {
					return nil, leaseOf(st), nil
				}
			}
			if err != nil {
				return nil, Lease{}, explain("wait for "+in.ID, err)
			}
			return nil, leaseOf(st), nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "spark_status", Description: "A lease's state, queue position, pending reason, hosts and fencing token."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in IDInput) (*mcp.CallToolResult, Lease, error) {
			if err := needID(in.ID); err != nil {
				return nil, Lease{}, err
			}
			st, err := api.Status(ctx, in.ID)
			if err != nil {
				return nil, Lease{}, explain("status of "+in.ID, err)
			}
			return nil, leaseOf(st), nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "spark_release", Description: "Release an active lease when done with its hosts. Needs the lease's fencing token. Answers with each host's state after the release: clean, still running processes from the lease (stop them), or back to the resident service."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in ReleaseInput) (*mcp.CallToolResult, Done, error) {
			if err := needID(in.ID); err != nil {
				return nil, Done{}, err
			}
			held, ack, err := Release(ctx, api, in.ID, in.Token)
			if err != nil {
				return nil, Done{}, explain("release "+in.ID, err)
			}
			d := Done{ID: in.ID, Result: "released; do not use its hosts again without a new lease", Hosts: held}
			if ack != "" {
				d.Result += "; " + ack
			}
			return nil, d, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "spark_cancel", Description: "Cancel a queued lease. An active lease is not cancelled: release it."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in IDInput) (*mcp.CallToolResult, Done, error) {
			if err := needID(in.ID); err != nil {
				return nil, Done{}, err
			}
			if err := api.Cancel(ctx, in.ID); err != nil {
				return nil, Done{}, explain("cancel "+in.ID, err)
			}
			return nil, Done{ID: in.ID, Result: "canceled while queued"}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "spark_hosts", Description: "The fleet's hosts: mode, online, draining and managed. Use it to explain a wait, never to pick a host to use without a lease."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, HostsOutput, error) {
			hosts, err := api.Hosts(ctx)
			if err != nil {
				return nil, HostsOutput{}, explain("list hosts", err)
			}
			return nil, HostsOutput{Hosts: hosts}, nil
		})
	return s
}

func needID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: id is required (spark_request returns it)", ErrInput)
	}
	return nil
}

// explain turns the controller's refusal into what an agent should do.
func explain(what string, err error) error {
	var hint string
	switch {
	case errors.Is(err, spark.ErrUnavailable):
		hint = "the controller is unavailable: no host may be used until it answers again (automation fails closed)"
	case errors.Is(err, spark.ErrActive):
		hint = "the lease is active: release it with its token instead"
	case errors.Is(err, spark.ErrStaleToken):
		hint = "the token is not the lease's current one, or the lease is no longer active: read it with spark_status"
	case errors.Is(err, spark.ErrNotFound):
		hint = "no such lease: use the id spark_request returned"
	case errors.Is(err, spark.ErrPairRefused):
		hint = "a pair is for a test that uses both hosts; request two single leases for independent work"
	case errors.Is(err, spark.ErrUnauthorized):
		hint = "the controller refused this client's token"
	}
	if hint == "" {
		return fmt.Errorf("sparkmcp: %s: %w", what, err)
	}
	return fmt.Errorf("sparkmcp: %s: %w; %s", what, err, hint)
}
