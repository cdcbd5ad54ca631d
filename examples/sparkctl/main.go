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
	"cmp"
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
	"strconv"
	"syscall"
	"time"

	"github.com/gpugate/gpugate/internal/cli"
	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/agent"
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
	side                         agent.Flags // agent and preflight
}

// define registers the named flag of settings on fs.
func (s *settings) define(fs *flag.FlagSet, name string, getenv func(string) string) {
	switch name {
	case "class":
		fs.StringVar(&s.class, name, "development", "workload class")
	case "topology":
		fs.StringVar(&s.topology, name, "single", "single or pair")
	case "host":
		fs.StringVar(&s.host, name, "", "request: a specific host; heartbeat: the host this runs on (default SPARK_HOST)")
	case "duration":
		fs.DurationVar(&s.duration, name, 0, "lease length, e.g. 3h (default and maximum: the class's configured length)")
	case "owner":
		fs.StringVar(&s.owner, name, getenv("USER"), "who asks")
	case "agent":
		s.side.RegisterAgent(fs, getenv)
	case "preflight":
		s.side.RegisterPreflight(fs, getenv)
	}
}

// flagSet is a verb's flag set: -addr and -token-file, then its own.
func (s *settings) flagSet(name string, getenv func(string) string, stderr io.Writer, flags []string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&s.addr, "addr", cmp.Or(getenv("SPARK_ADDR"), "http://127.0.0.1:8765"), "sparkd address (default SPARK_ADDR)")
	fs.StringVar(&s.tokenFile, "token-file", getenv("SPARK_TOKEN_FILE"), "file holding the API token (default SPARK_TOKEN_FILE; SPARK_TOKEN wins)")
	for _, f := range flags {
		s.define(fs, f, getenv)
	}
	return fs
}

// verb is one subcommand: its flags (besides -addr and -token-file; agent
// and preflight stand for the host side's sets) and its positional
// arguments, exactly that many.
type verb struct {
	name    string
	flags   []string
	args    []string
	timeout time.Duration // its calls' bound; 0: none (it waits on purpose)
}

var verbs = []verb{
	{"request", []string{"class", "topology", "host", "duration", "owner"}, nil, callTimeout},
	{"wait", nil, []string{"ID"}, 24 * time.Hour},
	{"status", nil, []string{"ID"}, callTimeout},
	{"release", nil, []string{"ID", "TOKEN"}, callTimeout},
	{"cancel", nil, []string{"ID"}, callTimeout},
	{"hosts", nil, nil, callTimeout},
	{"heartbeat", []string{"host"}, nil, callTimeout},
	{"preflight", []string{"preflight"}, []string{"ID"}, preflightTimeout},
	{"mcp", []string{"owner"}, nil, 0},
	{"agent", []string{"agent"}, nil, 0},
	{"receipt", nil, []string{"ID", "FILE"}, callTimeout},
	{"clear-cleanup", nil, []string{"HOST", "LEASE"}, callTimeout},
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	var subs []cli.Subcommand
	// Flags before the verb (sparkctl -host H heartbeat) are the verb's
	// too: pre holds every verb's flags, to find the verb.
	pre := flag.NewFlagSet("sparkctl", flag.ContinueOnError)
	pre.SetOutput(stderr)
	for _, v := range verbs {
		usage := cli.Usage(new(settings).flagSet("", func(string) string { return "" }, io.Discard, v.flags), []string{"addr", "token-file"}, v.args...)
		subs = append(subs, cli.Subcommand{Name: v.name, Usage: usage, Run: func(args []string) error {
			var s settings
			fs := s.flagSet("sparkctl "+v.name, getenv, stderr, v.flags)
			if err := cli.Args(fs, args, v.args...); err != nil {
				return err
			}
			return s.do(ctx, v, fs, fs.Args(), getenv, stdout, stderr)
		}})
		new(settings).flagSet("", getenv, io.Discard, v.flags).VisitAll(func(f *flag.Flag) {
			if pre.Lookup(f.Name) == nil {
				pre.Var(f.Value, f.Name, f.Usage)
			}
		})
	}
	pre.Usage = func() { cli.Dispatch("sparkctl", stderr, []string{"-h"}, subs...) }
	args, err := cli.Hoist(pre, args)
	if err == nil {
		err = cli.Dispatch("sparkctl", stderr, args, subs...)
	}
	if code := cli.Status(err); code != 1 {
		return code
	}
	fmt.Fprintln(stderr, "sparkctl:", err)
	return 1
}

// do runs verb fs.Name() with its arguments.
func (s *settings) do(ctx context.Context, v verb, fs *flag.FlagSet, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	token, err := spark.ClientToken(getenv("SPARK_TOKEN"), s.tokenFile)
	if err != nil {
		return cli.Refuse(fs, "%v", err)
	}
	cl, err := spark.NewAPIClient(s.addr, token, httpClient)
	if err != nil {
		return cli.Refuse(fs, "-addr: %v", err)
	}
	if getenv("SPARK_TOKEN") == "" {
		cl.ReadTokenFrom(s.tokenFile) // a rotated token takes effect without a restart
	}
	// Only wait, mcp and agent wait on purpose. Any other command bounds
	// its calls, so a controller that stopped answering fails it (closed)
	// in a minute, not at the client's long-poll limit.
	if v.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, v.timeout)
		defer cancel()
	}
	show := func(x any, err error) error {
		if err == nil {
			out, _ := json.MarshalIndent(x, "", "  ")
			fmt.Fprintln(stdout, string(out))
		}
		return err
	}
	status := func(st spark.Status, err error) error { return show(statusOutput(st), err) }
	say := func(err error, format string, args ...any) error {
		if err == nil {
			fmt.Fprintf(stdout, format+"\n", args...)
		}
		return err
	}
	switch v.name {
	case "request":
		if s.duration < 0 {
			return cli.Refuse(fs, "-duration %s: want a positive lease length (or none for the class's)", s.duration)
		}
		return status(cl.Request(ctx, spark.LeaseRequest{Class: spark.Class(s.class), Topology: spark.Topology(s.topology), Host: s.host,
			Owner: s.owner, DurationSeconds: int(s.duration.Seconds())}))
	case "wait":
		return status(cl.Wait(ctx, args[0]))
	case "status":
		return status(cl.Status(ctx, args[0]))
	case "release":
		tok, perr := strconv.ParseInt(args[1], 10, 64)
		if perr != nil {
			return cli.Refuse(fs, "TOKEN %q must be the lease's numeric fencing token", args[1])
		}
		_, ack, err := sparkmcp.Release(ctx, cl, args[0], tok)
		return say(err, "released %s%s", args[0], map[bool]string{true: ": " + ack}[ack != ""])
	case "cancel":
		return cl.Cancel(ctx, args[0])
	case "preflight":
		pf, err := s.side.Preflight()
		if err != nil {
			return cli.Refuse(fs, "%v", err)
		}
		return say(agent.Preflight(ctx, cl, args[0], pf), "preflight passed for lease %s", args[0])
	case "heartbeat":
		h := cmp.Or(s.host, getenv("SPARK_HOST"))
		if h == "" {
			return cli.Refuse(fs, "needs -host or SPARK_HOST: the managed host this runs on")
		}
		n, err := agent.Heartbeat(ctx, cl, h, spark.NvidiaSMIApps{})
		return say(err, "heartbeat for %s: %d GPU process(es)", h, n)
	case "mcp":
		// stdout carries the protocol; anything else goes to stderr.
		server := sparkmcp.NewServer(cl, sparkmcp.Options{Owner: "agent:" + cmp.Or(s.owner, "unknown")})
		return sparkmcp.ServeStdio(ctx, server, stdin, stdout)
	case "agent":
		cfg, err := s.side.Config(cl, slog.New(slog.NewTextHandler(stderr, nil)))
		if err == nil {
			err = agent.Run(ctx, cfg)
		}
		if errors.Is(err, agent.ErrConfig) {
			return cli.Refuse(fs, "%v", err)
		}
		return err
	case "clear-cleanup":
		return say(cl.ClearCleanup(ctx, args[0], args[1]), "cleanup of %s after %s cleared: it takes work once a heartbeat shows its GPU clean", args[0], args[1])
	case "receipt":
		data, err := os.ReadFile(args[1])
		if err != nil {
			return cli.Refuse(fs, "FILE: %v", err)
		}
		digest, err := cl.UploadReceipt(ctx, args[0], data)
		return say(err, "evidence receipt of %s recorded: %s", args[0], digest)
	case "hosts":
		return show(cl.Hosts(ctx))
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
