// Command sparkctl is the command-line client of sparkd:
//
//	sparkctl request [-class development] [-topology single|pair] [-host spark-2] [-duration 2h]
//	sparkctl wait    ID      # blocks until the lease is active (or ends)
//	sparkctl status  ID      # state, queue position and pending reason
//	sparkctl release ID TOKEN  # then says whether each host it held is clean
//	sparkctl cancel  ID      # queued work only
//	sparkctl hosts
//	sparkctl mcp [-owner NAME]       # the same lease API for local agents: an MCP server on stdin/stdout
//	sparkctl heartbeat [-host H]     # the host agent's liveness report, with its GPU's process count
//	sparkctl preflight [-host H] [-workdir DIR] [-min-free-gb 50] [-service-host] [-interconnect-cmd CMD] [-service-released-cmd CMD] ID
//
// Each verb takes its own flags after it, before its arguments; flags
// given before the verb (sparkctl -host H heartbeat) are the verb's too.
// A flag the verb does not take, or an argument too many or too few, is
// refused with exit status 2 before anything is sent.
//
// preflight runs on the leased host before a job starts (the managed
// runner's step): the lease must be active and hold this host (-host or
// SPARK_HOST, never inferred from the lease) with the current fencing
// token, nothing may be running on the GPU (nvidia-smi),
// the work directory needs its free space, a pair needs its interconnect
// check to pass, and the service host needs the resident service to have
// released it. Each of the last two is a shell command whose exit status 0
// means yes; without it the check fails closed. Whether this host is online
// and whether it is the resident service's host come from the controller
// (its fleet configuration), never from the environment: a host the
// controller sees offline is refused. The commands come from the runner's
// environment (SPARK_INTERCONNECT_CMD, SPARK_SERVICE_RELEASED_CMD), so the
// workflow need not know the host. Any refusal exits 1 naming the check.
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
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gpugate/gpugate/internal/cli"
	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/agent"
	"github.com/gpugate/gpugate/spark/fleet"
	"github.com/gpugate/gpugate/spark/sparkmcp"
)

func main() {
	// SIGTERM is how systemd stops the agent: it stops the job's runner
	// (its whole process group) before it exits, never orphaning it.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
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

// settings are the flags; each verb registers the ones it takes.
type settings struct {
	addr, tokenFile              string
	class, topology, host, owner string
	duration                     time.Duration
	pf                           agent.PreflightOptions
	minFreeGB                    int
	workRoot, runner, smi        string
	every                        time.Duration
	svc                          fleet.ShellService
}

// define registers the named flag of settings on fs.
func (s *settings) define(fs *flag.FlagSet, name string, getenv func(string) string) {
	switch name {
	case "class":
		fs.StringVar(&s.class, name, "development", "workload class")
	case "topology":
		fs.StringVar(&s.topology, name, "single", "single or pair")
	case "host":
		fs.StringVar(&s.host, name, "", "request: a specific host; heartbeat, preflight: the host this runs on (default SPARK_HOST)")
	case "duration":
		fs.DurationVar(&s.duration, name, 0, "lease length, e.g. 3h (default and maximum: the class's configured length)")
	case "owner":
		fs.StringVar(&s.owner, name, getenv("USER"), "who asks")
	case "workdir":
		fs.StringVar(&s.pf.WorkDir, name, ".", "the job's work directory")
	case "min-free-gb":
		fs.IntVar(&s.minFreeGB, name, 50, "free space the job needs in -workdir, GiB")
	case "service-host":
		fs.BoolVar(&s.pf.ServiceHost, name, getenv("SPARK_SERVICE_HOST") == "true", "run the service-released check here too (it runs on the controller's service host whatever this says; default: SPARK_SERVICE_HOST=true)")
	case "interconnect-cmd":
		fs.StringVar(&s.pf.Interconnect, name, getenv("SPARK_INTERCONNECT_CMD"), "pair leases: a shell command that exits 0 when the link to the other host works (default SPARK_INTERCONNECT_CMD)")
	case "service-released-cmd":
		fs.StringVar(&s.pf.ServiceReleased, name, getenv("SPARK_SERVICE_RELEASED_CMD"), "with -service-host: a shell command that exits 0 when the service holds nothing on the GPU (default SPARK_SERVICE_RELEASED_CMD)")
	case "work-root":
		fs.StringVar(&s.workRoot, name, "/var/lib/spark/work", "agent: each lease's work directory is created in it and removed when the lease ends")
	case "runner":
		fs.StringVar(&s.runner, name, "/opt/actions-runner/run.sh", "agent: the Actions runner's run.sh, started with the lease's one-job config")
	case "every":
		fs.DurationVar(&s.every, name, 10*time.Second, "agent: heartbeat and poll cadence")
	case "nvidia-smi":
		fs.StringVar(&s.smi, name, "nvidia-smi", "agent: the nvidia-smi that counts the GPU's processes")
	case "service-drain-cmd", "service-stop-cmd", "service-verify-cmd", "service-start-cmd", "service-healthy-cmd":
		dst := map[string]*string{"service-drain-cmd": &s.svc.DrainCmd, "service-stop-cmd": &s.svc.StopCmd, "service-verify-cmd": &s.svc.VerifyReleasedCmd,
			"service-start-cmd": &s.svc.StartCmd, "service-healthy-cmd": &s.svc.HealthyCmd}[name]
		fs.StringVar(dst, name, "", "agent on the resident service's host: the service's "+strings.TrimSuffix(strings.TrimPrefix(name, "service-"), "-cmd")+" command (all five, or none)")
	default:
		panic("sparkctl: no flag -" + name)
	}
}

// flagSet is a verb's flag set: -addr and -token-file, then its own.
func (s *settings) flagSet(name string, getenv func(string) string, stderr io.Writer, flags []string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&s.addr, "addr", or(getenv("SPARK_ADDR"), "http://127.0.0.1:8765"), "sparkd address (default SPARK_ADDR)")
	fs.StringVar(&s.tokenFile, "token-file", getenv("SPARK_TOKEN_FILE"), "file holding the API token (default SPARK_TOKEN_FILE; SPARK_TOKEN wins)")
	for _, f := range flags {
		s.define(fs, f, getenv)
	}
	return fs
}

// verb is one subcommand: its flags (besides -addr and -token-file) and
// its positional arguments, exactly that many.
type verb struct {
	name  string
	flags []string
	args  []string
}

var verbs = []verb{
	{"request", []string{"class", "topology", "host", "duration", "owner"}, nil},
	{"wait", nil, []string{"ID"}},
	{"status", nil, []string{"ID"}},
	{"release", nil, []string{"ID", "TOKEN"}},
	{"cancel", nil, []string{"ID"}},
	{"hosts", nil, nil},
	{"heartbeat", []string{"host"}, nil},
	{"preflight", []string{"host", "workdir", "min-free-gb", "service-host", "interconnect-cmd", "service-released-cmd"}, []string{"ID"}},
	{"mcp", []string{"owner"}, nil},
	{"agent", []string{"host", "work-root", "runner", "every", "nvidia-smi", "min-free-gb", "interconnect-cmd", "service-released-cmd",
		"service-drain-cmd", "service-stop-cmd", "service-verify-cmd", "service-start-cmd", "service-healthy-cmd"}, nil},
	{"receipt", nil, []string{"ID", "FILE"}},
}

func (v verb) usage() string {
	var parts []string
	for _, f := range v.flags {
		parts = append(parts, "[-"+f+" …]")
	}
	return strings.Join(append(parts, v.args...), " ")
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	var subs []cli.Subcommand
	for _, v := range verbs {
		subs = append(subs, cli.Subcommand{Name: v.name, Usage: v.usage(), Run: func(args []string) error {
			var s settings
			fs := s.flagSet("sparkctl "+v.name, getenv, stderr, v.flags)
			if err := cli.FlagsAndArgs(fs, args); err != nil {
				return err
			}
			if fs.NArg() != len(v.args) {
				want := "no arguments"
				if len(v.args) > 0 {
					want = strings.Join(v.args, " ")
				}
				return cli.Refuse(fs, "takes %s, got %q (flags go before the arguments)", want, fs.Args())
			}
			return s.do(ctx, fs, fs.Args(), getenv, stdout, stderr)
		}})
	}
	// Flags before the verb (sparkctl -host H heartbeat) are the verb's
	// too: parsed with every verb's flags, they find the verb, and then go
	// to it, which refuses one it does not take.
	var all settings
	pre := flag.NewFlagSet("sparkctl", flag.ContinueOnError)
	pre.SetOutput(stderr)
	pre.Usage = func() { cli.Dispatch("sparkctl", stderr, []string{"-h"}, subs...) }
	all.flagSet("sparkctl", getenv, stderr, nil).VisitAll(func(f *flag.Flag) { pre.Var(f.Value, f.Name, f.Usage) })
	seen := map[string]bool{}
	for _, v := range verbs {
		for _, f := range v.flags {
			if !seen[f] {
				seen[f] = true
				all.define(pre, f, getenv)
			}
		}
	}
	if err := cli.FlagsAndArgs(pre, args); err != nil {
		return cli.Status(err)
	}
	rest := pre.Args()
	before := args[:len(args)-len(rest)]
	if n := len(before); n > 0 && before[n-1] == "--" {
		before = before[:n-1]
	}
	if len(rest) > 0 {
		args = append(append([]string{rest[0]}, before...), rest[1:]...)
	} else {
		args = nil
	}
	err := cli.Dispatch("sparkctl", stderr, args, subs...)
	if code := cli.Status(err); code != 1 {
		return code
	}
	fmt.Fprintln(stderr, "sparkctl:", err)
	return 1
}

// do runs verb fs.Name() with its arguments.
func (s *settings) do(ctx context.Context, fs *flag.FlagSet, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cmd := strings.TrimPrefix(fs.Name(), "sparkctl ")
	token := getenv("SPARK_TOKEN")
	if token == "" && s.tokenFile != "" {
		data, err := os.ReadFile(s.tokenFile)
		if err != nil {
			return cli.Refuse(fs, "-token-file: %v", err)
		}
		token = strings.TrimSpace(string(data))
	}
	if token == "" {
		// Every command calls the controller's API, which refuses a
		// request without its token: say so before anything is sent
		// (an MCP server would otherwise start and fail every tool).
		return cli.Refuse(fs, "no API token: set SPARK_TOKEN, or SPARK_TOKEN_FILE (-token-file) to the file sparkd wrote it to")
	}
	cl, err := spark.NewAPIClient(s.addr, token, httpClient)
	if err != nil {
		return cli.Refuse(fs, "-addr: %v", err)
	}
	// Only wait and mcp wait on purpose. Any other command bounds its
	// calls, so a controller that stopped answering fails it (closed) in
	// a minute, not at the client's long-poll limit.
	switch cmd {
	case "wait", "mcp", "agent":
	case "preflight":
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, preflightTimeout)
		defer cancel()
	default:
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, callTimeout)
		defer cancel()
	}
	print := func(v any) { out, _ := json.MarshalIndent(v, "", "  "); fmt.Fprintln(stdout, string(out)) }
	switch cmd {
	case "request":
		if s.duration < 0 {
			return cli.Refuse(fs, "-duration %s: want a positive lease length (or none for the class's)", s.duration)
		}
		st, err := cl.Request(ctx, spark.LeaseRequest{Class: spark.Class(s.class), Topology: spark.Topology(s.topology), Host: s.host,
			Owner: s.owner, DurationSeconds: int(s.duration.Seconds())})
		if err != nil {
			return err
		}
		print(statusOutput(st))
	case "wait":
		wctx, cancel := context.WithTimeout(ctx, 24*time.Hour)
		defer cancel()
		st, err := cl.Wait(wctx, args[0])
		if err != nil {
			return err
		}
		print(statusOutput(st))
	case "status":
		st, err := cl.Status(ctx, args[0])
		if err != nil {
			return err
		}
		print(statusOutput(st))
	case "release":
		tok, perr := strconv.ParseInt(args[1], 10, 64)
		if perr != nil {
			return cli.Refuse(fs, "TOKEN %q must be the lease's numeric fencing token", args[1])
		}
		// Which hosts it held, for the cleanup acknowledgement after it.
		st, serr := cl.Status(ctx, args[0])
		if err := cl.Release(ctx, args[0], tok); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "released %s", args[0])
		if hosts, herr := cl.Hosts(ctx); serr == nil && herr == nil {
			_, ack := sparkmcp.Acknowledge(st.Request.Hosts, hosts)
			fmt.Fprintf(stdout, ": %s", ack)
		}
		fmt.Fprintln(stdout)
	case "cancel":
		return cl.Cancel(ctx, args[0])
	case "preflight":
		// The host is what this runner's machine says it is, never taken
		// from the lease: a job on another host must not pass as the
		// lease's.
		pf := s.pf
		pf.MinFree = uint64(max(s.minFreeGB, 0)) << 30
		if pf.Host = or(s.host, getenv("SPARK_HOST")); pf.Host == "" {
			return cli.Refuse(fs, "needs -host or SPARK_HOST: the managed host this job runs on, which the lease must hold (set it in the runner's environment, as for heartbeat)")
		}
		if err := agent.Preflight(ctx, cl, args[0], pf); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "preflight passed for lease %s\n", args[0])
	case "heartbeat":
		h := or(s.host, getenv("SPARK_HOST"))
		if h == "" {
			return cli.Refuse(fs, "needs -host or SPARK_HOST: the managed host this runs on")
		}
		n, err := agent.Heartbeat(ctx, cl, h, spark.NvidiaSMIApps{})
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "heartbeat for %s: %d GPU process(es)\n", h, n)
	case "mcp":
		// stdout carries the protocol; anything else goes to stderr.
		server := sparkmcp.NewServer(cl, sparkmcp.Options{Owner: "agent:" + or(s.owner, "unknown")})
		return server.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopCloser{stdout}})
	case "agent":
		return s.agent(ctx, fs, cl, getenv, stderr)
	case "receipt":
		data, err := os.ReadFile(args[1])
		if err != nil {
			return cli.Refuse(fs, "FILE: %v", err)
		}
		digest, err := cl.UploadReceipt(ctx, args[0], data)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "evidence receipt of %s recorded: %s\n", args[0], digest)
	case "hosts":
		hosts, err := cl.Hosts(ctx)
		if err != nil {
			return err
		}
		if hosts == nil {
			hosts = []map[string]any{} // none is [], not null
		}
		print(hosts)
	}
	return nil
}

// statusJSON is what request, wait and status print: the controller's
// status, with the lease length as a duration string ("3h0m0s"), never
// the nanoseconds a time.Duration encodes to.
type statusJSON struct {
	spark.Status
	Request requestJSON `json:"request"`
}

type requestJSON struct {
	spark.Request
	Duration string `json:"duration"`
}

func statusOutput(st spark.Status) statusJSON {
	return statusJSON{Status: st, Request: requestJSON{Request: st.Request, Duration: st.Request.Duration.String()}}
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

// agent runs the host agent (package spark/agent) until ctx ends.
func (s *settings) agent(ctx context.Context, fs *flag.FlagSet, cl *spark.APIClient, getenv func(string) string, stderr io.Writer) error {
	host := or(s.host, getenv("SPARK_HOST"))
	if host == "" {
		return cli.Refuse(fs, "needs -host or SPARK_HOST: the managed host this agent runs on")
	}
	cfg := agent.Config{Client: cl, Host: host, GPU: spark.NvidiaSMIApps{Path: s.smi}, WorkRoot: s.workRoot, RunnerCmd: s.runner,
		MinFree: uint64(max(s.minFreeGB, 0)) << 30, Interconnect: s.pf.Interconnect, ServiceReleased: s.pf.ServiceReleased, Every: s.every,
		Log: slog.New(slog.NewTextHandler(stderr, nil))}
	switch cmds := []string{s.svc.DrainCmd, s.svc.StopCmd, s.svc.VerifyReleasedCmd, s.svc.StartCmd, s.svc.HealthyCmd}; {
	case !slices.Contains(cmds, ""):
		svc := s.svc
		cfg.Service = &svc
	case slices.ContainsFunc(cmds, func(c string) bool { return c != "" }):
		return cli.Refuse(fs, "the resident service needs all five -service-*-cmd commands (drain, stop, verify, start, healthy), or none on a host without it")
	}
	err := agent.Run(ctx, cfg)
	if errors.Is(err, agent.ErrConfig) {
		return cli.Refuse(fs, "%v", err)
	}
	return err
}
