// Command sparkd runs the shared-fleet controller and its agent/CLI API.
//
//	sparkd [-addr 127.0.0.1:8765] [-db spark.db [-init]] [-token-file FILE] [-tokens FILE] [-fleet fleet.yml]
//	       [-webhook-secret-file FILE -github-org ORG -runner-group ID -jit-dir DIR]
//	sparkd backup -db spark.db -file backup.db     # online, consistent
//	sparkd restore -db spark.db -file backup.db    # sparkd stopped
//	sparkd token -tokens FILE -role host|agent|operator -name NAME
//
// With no flags it starts on an embedded default: a SQLite file in a
// temporary directory, the default two hosts simulated (heartbeats and a
// resident service on spark-1), and a fresh API token written to a file
// readable only by you. sparkctl talks to it.
//
// -tokens is the hashed token file of hosts, agents and operators, read
// again when it changes. With it and no -token-file, sparkd generates no
// operator token: the operators are its operator lines (sparkd token
// -role operator), rotated and revoked without a restart. -token-file is
// an operator's token in plain text, read once at start.
//
// -fleet runs a real fleet (package spark/fleet: fleet.example.yml there
// is the template, with the default values): nothing is simulated, and
// each managed host reports its own heartbeats (sparkctl heartbeat).
//
// Routes: /v1/... is the bearer-authenticated agent and CLI API;
// GET /dashboard.json is the sanitized, read-only dashboard mirror (no
// addresses, users, commands, tokens or credentials can be carried by its
// types, so it needs no token); POST /github/webhook receives GitHub
// deliveries when -webhook-secret-file is set. It then authenticates as
// the GitHub App (GITHUB_APP_ID, GITHUB_APP_INSTALLATION_ID and
// GITHUB_APP_PRIVATE_KEY_FILE), or with GITHUB_TOKEN for a short run;
// either must write checks, dispatch workflows and mint JIT runners. Each
// minted JIT config is written 0600 to -jit-dir as <runner>.jitconfig,
// whole or not at all, for the host agent, and never logged.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/gpugate/gpugate/internal/cli"
	"github.com/gpugate/gpugate/spark/fleet"
)

func main() {
	// SIGTERM is how systemd stops a service: the server shuts down and the
	// database closes instead of the process dying mid-write.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stderr, nil)
	stop()
	os.Exit(code)
}

// run serves until ctx ends. ready, when set, receives the address and the
// operator's token file ("" when there is none: -tokens without
// -token-file) once the API listens.
func run(ctx context.Context, args []string, stderr io.Writer, ready chan<- [2]string) int {
	// Serving is the default: sparkd [flags] is sparkd serve [flags].
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return serve(ctx, args, stderr, ready)
	}
	sub := func(name, usage string, run func([]string) int) cli.Subcommand {
		return cli.Subcommand{Name: name, Usage: usage, Run: func(args []string) error {
			if code := run(args); code != 0 {
				return exitError(code)
			}
			return nil
		}}
	}
	err := cli.Dispatch("sparkd", stderr, args,
		sub("serve", "[flags] (the default)", func(args []string) int { return serve(ctx, args, stderr, ready) }),
		sub("backup", "-db spark.db -file backup.db (online, consistent)", func(args []string) int { return database(ctx, "backup", args, stderr) }),
		sub("restore", "-db spark.db -file backup.db (sparkd stopped)", func(args []string) int { return database(ctx, "restore", args, stderr) }),
		sub("token", "-tokens FILE -role host|agent|operator -name NAME", func(args []string) int { return mintToken(args, os.Stdout, stderr) }))
	var code exitError
	if errors.As(err, &code) {
		return int(code)
	}
	return cli.Status(err)
}

// exitError carries a subcommand's exit status through cli.Dispatch.
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// serve runs the controller until ctx ends.
func serve(ctx context.Context, args []string, stderr io.Writer, ready chan<- [2]string) int {
	fs := flag.NewFlagSet("sparkd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: sparkd [flags]   (serves the fleet; or sparkd backup|restore -db FILE -file FILE; sparkd token -tokens FILE -role host|agent|operator -name NAME)")
		fs.PrintDefaults()
	}
	addr := fs.String("addr", "127.0.0.1:8765", "listen address")
	dbPath := fs.String("db", "", "the fleet's SQLite database (default: a new one in a new temporary directory)")
	initDB := fs.Bool("init", false, "create the -db database when it does not exist: a new fleet (an empty or foreign file is never taken for one)")
	tokenFile := fs.String("token-file", "", "an operator's API token in plain text, read once at start (default: generated beside the database, unless -tokens is given)")
	tokensFile := fs.String("tokens", "", "hashed API tokens of hosts, agents and operators, one \"role name sha256:<hex>\" per line (sparkd token adds one); read again when it changes; without -token-file its operator lines are the only operators")
	simulate := fs.Bool("simulate", true, "simulate the default two hosts' heartbeats (without -fleet)")
	fleetFile := fs.String("fleet", "", "the fleet (YAML; see spark/fleet/fleet.example.yml): real hosts that heartbeat themselves, and the resident service's commands")
	every := fs.Duration("reconcile", 2*time.Second, "admission cadence")
	whSecretFile := fs.String("webhook-secret-file", "", "GitHub webhook secret file; enables POST /github/webhook")
	org := fs.String("github-org", "", "organization whose runner group receives one-job JIT runners")
	group := fs.Int64("runner-group", 1, "runner group ID for JIT runners")
	jitDir := fs.String("jit-dir", "", "directory receiving minted JIT configs (0600) for hosts without the host agent (agent: true hosts take theirs over the API)")
	if exit, ok := cli.Parse(fs, args); !ok {
		return exit
	}
	f := fleet.Simulated()
	if *fleetFile == "" && !*simulate {
		fmt.Fprintln(stderr, "sparkd: without -fleet sparkd plays the simulated default fleet; for real hosts give -fleet (start from spark/fleet/fleet.example.yml)")
		return 2
	}
	if *fleetFile != "" {
		explicit := false
		fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "simulate" })
		if explicit && *simulate {
			fmt.Fprintln(stderr, "sparkd: -simulate plays the default hosts; a -fleet's hosts report their own heartbeats (sparkctl heartbeat)")
			return 2
		}
		*simulate = false
		data, err := os.ReadFile(*fleetFile)
		if err != nil {
			fmt.Fprintln(stderr, "sparkd: -fleet:", err)
			return 2
		}
		if f, err = fleet.Load(data); err != nil {
			fmt.Fprintf(stderr, "%v (%s)\n", err, *fleetFile)
			return 2
		}
	}
	if *whSecretFile != "" {
		if err := cli.Require(fs, f.NeedsRunnerSettings()...); err != nil {
			return cli.Status(err) // where JIT runners are minted and how the hosts collect them
		}
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	d, err := fleet.Start(ctx, f, fleet.Settings{DB: *dbPath, Init: *initDB, OperatorTokenFile: *tokenFile, TokensFile: *tokensFile,
		WebhookSecretFile: *whSecretFile, Org: *org, RunnerGroup: *group, JITDir: *jitDir, Every: *every, Log: log})
	if err != nil {
		fmt.Fprintln(stderr, "sparkd:", err)
		if errors.Is(err, fleet.ErrSettings) || errors.Is(err, fleet.ErrInvalid) {
			return 2
		}
		return 1
	}
	defer d.Close()
	if *simulate {
		d.SimulateHeartbeats()
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(stderr, "sparkd:", err)
		return 1
	}
	if d.TokenFile != "" {
		fmt.Fprintf(stderr, "sparkd: listening on http://%s (database %s); the API token is in %s\n", ln.Addr(), d.DB, d.TokenFile)
	} else {
		fmt.Fprintf(stderr, "sparkd: listening on http://%s (database %s); no operator token was generated: operators use the operator lines of %s (sparkd token -role operator adds one)\n", ln.Addr(), d.DB, *tokensFile)
	}
	if ready != nil {
		ready <- [2]string{"http://" + ln.Addr().String(), d.TokenFile}
	}
	if err := d.Serve(ctx, ln); err != nil {
		fmt.Fprintln(stderr, "sparkd:", err)
		return 1
	}
	return 0
}
