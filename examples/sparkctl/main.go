// Command sparkctl is the command-line client of sparkd:
//
//	sparkctl request -class development [-topology single|pair] [-host spark-2] [-duration 2h]
//	sparkctl wait    ID      # blocks until the lease is active (or ends)
//	sparkctl status  ID      # state, queue position and pending reason
//	sparkctl release ID TOKEN  # then says whether each host it held is clean
//	sparkctl cancel  ID      # queued work only
//	sparkctl hosts
//	sparkctl [-owner NAME] mcp       # the same lease API for local agents: an MCP server on stdin/stdout
//	sparkctl [-host H] heartbeat   # the host agent's liveness report, with its GPU's process count
//	sparkctl [-host H] [-workdir DIR] [-min-free-gb 50] [-service-host] [-interconnect-cmd CMD] [-service-released-cmd CMD] preflight ID
//
// preflight runs on the leased host before a job starts (the managed
// runner's step): the lease must be active and hold this host (-host or
// SPARK_HOST, never inferred from the lease) with the current fencing
// token, nothing may be running on the GPU (nvidia-smi),
// the work directory needs its free space, a pair needs its interconnect
// check to pass, and the service host needs the resident service to have
// released it. Each of the last two is a shell command whose exit status 0
// means yes; without it the check fails closed. Host-specific settings come
// from the runner's environment (SPARK_SERVICE_HOST, SPARK_INTERCONNECT_CMD,
// SPARK_SERVICE_RELEASED_CMD), so the workflow need not know the host. Any
// refusal exits 1 naming the check.
//
// heartbeat is what a managed host runs every few seconds (a systemd timer,
// or a loop in its agent), well inside the controller's heartbeat timeout:
// it counts the compute processes on this host's GPU with nvidia-smi and
// reports them. When nvidia-smi fails it sends nothing and exits 1, so the
// host goes offline rather than look clean. The host is -host or
// SPARK_HOST.
//
// mcp serves the lease queue to a local agent over the Model Context
// Protocol on stdin and stdout (package sparkmcp): register it with the
// agent as a stdio server whose command is "sparkctl mcp". Its tools ask
// for development leases and service starts only, wait, release and
// cancel; a controller that cannot be reached fails every tool, so the
// agent uses no host.
//
// Every command but wait and mcp fails when the controller has not
// answered within a minute (the preflight within five): automation fails
// closed.
//
// The API address is -addr or SPARK_ADDR (default http://127.0.0.1:8765);
// the token is SPARK_TOKEN or the file named by -token-file or
// SPARK_TOKEN_FILE.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gpugate/gpugate/internal/cli"
	"github.com/gpugate/gpugate/internal/shell"
	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/sparkmcp"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// httpClient is the API's HTTP client: nil is spark.NewAPIClient's, whose
// limit allows a long poll. Tests set their own.
var httpClient *http.Client

// callTimeout bounds a command other than wait and mcp; preflightTimeout
// the preflight, whose two shell checks may take two minutes each.
const (
	callTimeout      = time.Minute
	preflightTimeout = 5 * time.Minute
)

// stdin is what sparkctl mcp reads its client's messages from.
var stdin io.Reader = os.Stdin

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sparkctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", or(getenv("SPARK_ADDR"), "http://127.0.0.1:8765"), "sparkd address")
	tokenFile := fs.String("token-file", getenv("SPARK_TOKEN_FILE"), "file holding the API token")
	class := fs.String("class", "development", "request: workload class")
	topology := fs.String("topology", "single", "request: single or pair")
	host := fs.String("host", "", "request: a specific host; heartbeat, preflight: the host this runs on (default SPARK_HOST)")
	duration := fs.Duration("duration", 0, "request: lease length (default and maximum: the class's configured length)")
	owner := fs.String("owner", getenv("USER"), "request: who asks")
	var pf preflightOptions
	fs.StringVar(&pf.workdir, "workdir", ".", "preflight: the job's work directory")
	fs.IntVar(&pf.minFreeGB, "min-free-gb", 50, "preflight: free space the job needs in -workdir, GiB")
	fs.BoolVar(&pf.serviceHost, "service-host", getenv("SPARK_SERVICE_HOST") == "true", "preflight: this host runs the resident service, which must have released it (default: SPARK_SERVICE_HOST=true)")
	fs.StringVar(&pf.interconnect, "interconnect-cmd", getenv("SPARK_INTERCONNECT_CMD"), "preflight, pair leases: a shell command that exits 0 when the link to the other host works (default SPARK_INTERCONNECT_CMD)")
	fs.StringVar(&pf.serviceReleased, "service-released-cmd", getenv("SPARK_SERVICE_RELEASED_CMD"), "preflight, with -service-host: a shell command that exits 0 when the service holds nothing on the GPU (default SPARK_SERVICE_RELEASED_CMD)")
	if err := cli.FlagsAndArgs(fs, args); err != nil {
		return cli.Status(err)
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fmt.Fprintln(stderr, "usage: sparkctl [flags] request|wait|status|release|cancel|hosts|heartbeat|preflight|mcp [ID] [TOKEN]")
		return 2
	}
	// How many arguments each command takes: one more or one fewer is a
	// command line refused before anything is sent.
	arity := map[string]int{"request": 0, "wait": 1, "status": 1, "release": 2, "cancel": 1, "hosts": 0, "heartbeat": 0, "preflight": 1, "mcp": 0}
	n, known := arity[rest[0]]
	switch {
	case !known:
		fmt.Fprintf(stderr, "sparkctl: unknown command %q: use request, wait, status, release, cancel, hosts, heartbeat, preflight or mcp\n", rest[0])
		return 2
	case len(rest)-1 != n:
		fmt.Fprintf(stderr, "sparkctl %s takes %d argument(s), got %d: %q\n", rest[0], n, len(rest)-1, rest[1:])
		return 2
	}
	token := getenv("SPARK_TOKEN")
	if token == "" && *tokenFile != "" {
		data, err := os.ReadFile(*tokenFile)
		if err != nil {
			fmt.Fprintln(stderr, "sparkctl:", err)
			return 2
		}
		token = strings.TrimSpace(string(data))
	}
	if token == "" {
		// Every command calls the controller's API, which refuses a
		// request without its token: say so before anything is sent
		// (an MCP server would otherwise start and fail every tool).
		fmt.Fprintln(stderr, "sparkctl: no API token: set SPARK_TOKEN, or SPARK_TOKEN_FILE (-token-file) to the file sparkd wrote it to")
		return 2
	}
	cl, err := spark.NewAPIClient(*addr, token, httpClient)
	if err != nil {
		fmt.Fprintln(stderr, "sparkctl:", err)
		return 2
	}
	print := func(v any) { out, _ := json.MarshalIndent(v, "", "  "); fmt.Fprintln(stdout, string(out)) }
	need := func(n int) bool {
		if len(rest) < n+1 {
			fmt.Fprintf(stderr, "sparkctl %s needs %d argument(s)\n", rest[0], n)
			return false
		}
		return true
	}
	// Only wait and mcp wait on purpose. Any other command bounds its
	// calls, so a controller that stopped answering fails it (closed) in
	// a minute, not at the client's long-poll limit.
	switch rest[0] {
	case "wait", "mcp":
	case "preflight":
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, preflightTimeout)
		defer cancel()
	default:
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, callTimeout)
		defer cancel()
	}
	switch rest[0] {
	case "request":
		var st spark.Status
		st, err = cl.Request(ctx, spark.LeaseRequest{Class: spark.Class(*class), Topology: spark.Topology(*topology), Host: *host,
			Owner: *owner, DurationSeconds: int(duration.Seconds())})
		if err == nil {
			print(st)
		}
	case "wait":
		if !need(1) {
			return 2
		}
		var st spark.Status
		wctx, cancel := context.WithTimeout(ctx, 24*time.Hour)
		defer cancel()
		st, err = cl.Wait(wctx, rest[1])
		if err == nil {
			print(st)
		}
	case "status":
		if !need(1) {
			return 2
		}
		var st spark.Status
		if st, err = cl.Status(ctx, rest[1]); err == nil {
			print(st)
		}
	case "release":
		if !need(2) {
			return 2
		}
		tok, perr := strconv.ParseInt(rest[2], 10, 64)
		if perr != nil {
			fmt.Fprintln(stderr, "sparkctl: TOKEN must be the lease's numeric fencing token")
			return 2
		}
		// Which hosts it held, for the cleanup acknowledgement after it.
		st, serr := cl.Status(ctx, rest[1])
		if err = cl.Release(ctx, rest[1], tok); err == nil {
			fmt.Fprintf(stdout, "released %s", rest[1])
			if hosts, herr := cl.Hosts(ctx); serr == nil && herr == nil {
				_, ack := sparkmcp.Acknowledge(st.Request.Hosts, hosts)
				fmt.Fprintf(stdout, ": %s", ack)
			}
			fmt.Fprintln(stdout)
		}
	case "cancel":
		if !need(1) {
			return 2
		}
		err = cl.Cancel(ctx, rest[1])
	case "preflight":
		if !need(1) {
			return 2
		}
		// The host is what this runner's machine says it is, never taken
		// from the lease: a job on another host must not pass as the
		// lease's.
		if pf.host = or(*host, getenv("SPARK_HOST")); pf.host == "" {
			fmt.Fprintln(stderr, "sparkctl preflight needs -host or SPARK_HOST: the managed host this job runs on, which the lease must hold (set it in the runner's environment, as for heartbeat)")
			return 2
		}
		if err = preflight(ctx, cl, rest[1], pf); err == nil {
			fmt.Fprintf(stdout, "preflight passed for lease %s\n", rest[1])
		}
	case "heartbeat":
		h := or(*host, getenv("SPARK_HOST"))
		if h == "" {
			fmt.Fprintln(stderr, "sparkctl heartbeat needs -host or SPARK_HOST: the managed host this runs on")
			return 2
		}
		var n int
		if n, err = heartbeat(ctx, cl, h, spark.NvidiaSMIApps{}); err == nil {
			fmt.Fprintf(stdout, "heartbeat for %s: %d GPU process(es)\n", h, n)
		}
	case "mcp":
		// stdout carries the protocol; anything else goes to stderr.
		server := sparkmcp.NewServer(cl, sparkmcp.Options{Owner: "agent:" + or(*owner, "unknown")})
		err = server.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopCloser{stdout}})
	case "hosts":
		var hosts []map[string]any
		if hosts, err = cl.Hosts(ctx); err == nil {
			print(hosts)
		}
	default:
		fmt.Fprintf(stderr, "sparkctl: unknown command %q\n", rest[0])
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "sparkctl:", err)
		return 1
	}
	return 0
}

// nopCloser is a writer the MCP transport may close without closing it.
type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// heartbeat reports host's liveness with the number of compute processes
// gpu lists. It sends nothing when they cannot be counted: absent is not
// zero, and a host that stops reporting goes offline, never idle.
func heartbeat(ctx context.Context, cl *spark.APIClient, host string, gpu spark.GPUProcesses) (int, error) {
	apps, err := gpu.ComputeApps(ctx)
	if err != nil {
		return 0, fmt.Errorf("no heartbeat sent for %s: its GPU processes cannot be counted (%w); it will go offline rather than look clean", host, err)
	}
	return len(apps), cl.Heartbeat(ctx, host, len(apps))
}

type preflightOptions struct {
	host, workdir, interconnect, serviceReleased string
	minFreeGB                                    int
	serviceHost                                  bool
}

// preflight runs spark.Preflight on this host for lease id, with the
// controller's fencing check over the API and the host's real checks.
func preflight(ctx context.Context, cl *spark.APIClient, id string, o preflightOptions) error {
	st, err := cl.Status(ctx, id)
	if err != nil {
		return err
	}
	r := st.Request
	if r.State != spark.Active {
		return fmt.Errorf("lease %s is %s, not active: nothing may start", id, r.State)
	}
	host := o.host
	if !slices.Contains(r.Hosts, host) {
		return fmt.Errorf("lease %s holds %s, not %s, where this runs", id, strings.Join(r.Hosts, " and "), host)
	}
	checks := spark.PreflightChecks{Token: cl, GPU: spark.NvidiaSMIApps{}, Disk: spark.StatfsDisk{}}
	if o.interconnect != "" {
		checks.Interconnect = shellCheck(o.interconnect)
	}
	if o.serviceReleased != "" {
		checks.Service = shellCheck(o.serviceReleased)
	}
	return spark.Preflight(ctx, checks, spark.PreflightRequest{Host: host, Token: r.Token, Topology: r.Topology,
		WorkDir: o.workdir, MinFree: uint64(max(o.minFreeGB, 0)) << 30, ServiceHost: o.serviceHost})
}

// shellCheck is a preflight check made of a shell command: exit status 0
// passes. It is both an interconnect and a service-released check.
type shellCheck string

func (c shellCheck) run(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := shell.Run(ctx, string(c))
	if err != nil {
		return fmt.Errorf("%q: %w: %s", string(c), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Check runs the command as the interconnect check.
func (c shellCheck) Check(ctx context.Context) error { return c.run(ctx) }

// Released runs the command as the service-released check.
func (c shellCheck) Released(ctx context.Context) error { return c.run(ctx) }
