// Command sparkd runs the shared-fleet controller and its agent/CLI API.
//
//	sparkd [-addr 127.0.0.1:8765] [-db spark.db [-init]] [-token-file FILE] [-fleet fleet.yml | -simulate=false]
//	sparkd backup -db spark.db -file backup.db     # online, consistent
//	sparkd restore -db spark.db -file backup.db    # sparkd stopped
//	       [-webhook-secret-file FILE -github-org ORG -runner-group ID -jit-dir DIR]
//
// With no flags it starts on an embedded default: a SQLite file in a
// temporary directory, the default two hosts simulated (heartbeats and a
// resident service on spark-1), and a fresh API token written to a file
// readable only by you. sparkctl talks to it.
//
// -fleet runs a real fleet: its hosts, admission settings and the resident
// service's commands come from the YAML file (fleet.example.yml is the
// template, with the default values), nothing is simulated, and each
// managed host reports its own heartbeats (sparkctl heartbeat). Its
// schedules queue benchmark, merge-ci or background-ci work at a branch's
// commit, daily or at an interval, dispatched like a pull request's once
// granted (they need the GitHub integration below).
//
// Routes: /v1/... is the bearer-authenticated agent and CLI API;
// GET /dashboard.json is the sanitized, read-only dashboard mirror (no
// addresses, users, commands, tokens or credentials can be carried by its
// types, so it needs no token); POST /github/webhook receives GitHub
// deliveries when -webhook-secret-file is set. It then authenticates as
// the GitHub App (GITHUB_APP_ID, GITHUB_APP_INSTALLATION_ID and
// GITHUB_APP_PRIVATE_KEY_FILE; it mints a fresh installation token before
// each one expires), or with GITHUB_TOKEN for a short run; either must
// write checks, dispatch workflows and mint JIT runners. Each minted JIT
// config is written 0600 to -jit-dir as
// <runner>.jitconfig, whole or not at all, for the host agent, and never
// logged; if it cannot be written the grant fails and the lease is
// released).
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gpugate/gpugate/ghclient"
	"github.com/gpugate/gpugate/internal/cli"
	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/sparkgh"
	"github.com/gpugate/gpugate/spark/sparktest"
	"github.com/gpugate/gpugate/spark/sqlitestore"
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
// token file once the API listens.
func run(ctx context.Context, args []string, stderr io.Writer, ready chan<- [2]string) int {
	if len(args) > 0 && (args[0] == "backup" || args[0] == "restore") {
		return database(ctx, args[0], args[1:], stderr)
	}
	if len(args) > 0 && args[0] == "token" {
		return mintToken(args[1:], os.Stdout, stderr)
	}
	fs := flag.NewFlagSet("sparkd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: sparkd [flags]   (serves the fleet; or sparkd backup|restore -db FILE -file FILE; sparkd token -tokens FILE -role host|agent|operator -name NAME)")
		fs.PrintDefaults()
	}
	addr := fs.String("addr", "127.0.0.1:8765", "listen address")
	dbPath := fs.String("db", "", "the fleet's SQLite database (default: a new one in a new temporary directory)")
	initDB := fs.Bool("init", false, "create the -db database when it does not exist: a new fleet (an empty or foreign file is never taken for one)")
	tokenFile := fs.String("token-file", "", "the operator's API token file (default: generated beside the database)")
	tokensFile := fs.String("tokens", "", "hashed API tokens of hosts, agents and operators, one \"role name sha256:<hex>\" per line (sparkd token adds one); read again when it changes")
	simulate := fs.Bool("simulate", true, "simulate the default two hosts' heartbeats (without -fleet)")
	fleetFile := fs.String("fleet", "", "the fleet (YAML; see fleet.example.yml): real hosts that heartbeat themselves, and the resident service's commands")
	every := fs.Duration("reconcile", 2*time.Second, "admission cadence")
	whSecretFile := fs.String("webhook-secret-file", "", "GitHub webhook secret file; enables POST /github/webhook")
	org := fs.String("github-org", "", "organization whose runner group receives one-job JIT runners")
	group := fs.Int64("runner-group", 1, "runner group ID for JIT runners")
	jitDir := fs.String("jit-dir", "", "directory receiving minted JIT configs (0600) for the host agent")
	if exit, ok := cli.Parse(fs, args); !ok {
		return exit
	}
	if *whSecretFile != "" {
		if err := cli.Require(fs, "github-org", "jit-dir"); err != nil {
			return cli.Status(err) // -webhook-secret-file needs where JIT runners are minted and where the host agent collects them
		}
	}
	opts, ghConfig := spark.DefaultOptions(), sparkgh.DefaultConfig("")
	var scheds []schedule
	alertCmd, mongoURI := "", ""
	opts.Service = &sparktest.Service{} // the default simulated resident service
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
		f, err := loadFleet(data)
		if err != nil {
			fmt.Fprintf(stderr, "%v (%s)\n", err, *fleetFile)
			return 2
		}
		opts, ghConfig, scheds, alertCmd, mongoURI = f.opts, f.github, f.schedules, f.alertCmd, f.mongoURI
		if len(scheds) > 0 && *whSecretFile == "" {
			fmt.Fprintf(stderr, "sparkd: the fleet's schedules dispatch workflows through GitHub: give -webhook-secret-file, -github-org and -jit-dir, or remove schedules (%s)\n", *fleetFile)
			return 2
		}
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if *dbPath == "" {
		dir, err := os.MkdirTemp("", "sparkd-")
		if err != nil {
			fmt.Fprintln(stderr, "sparkd:", err)
			return 1
		}
		*dbPath = filepath.Join(dir, "spark.db")
		*initDB = true
	}
	token, file, err := loadToken(*tokenFile, filepath.Dir(*dbPath))
	if err != nil {
		fmt.Fprintln(stderr, "sparkd:", err)
		return 1
	}
	store, err := openStore(*dbPath, *initDB)
	if err != nil {
		fmt.Fprintln(stderr, "sparkd:", err)
		return 1
	}
	defer store.Close()
	opts.Log = log
	if alertCmd != "" {
		alerts := &alerter{cmd: alertCmd, log: log}
		defer alerts.wg.Wait() // an alert in flight is sent before sparkd exits
		opts.OnAlert = alerts.send
	}
	var gh *sparkgh.Integration
	var missed *redeliveries
	if *whSecretFile != "" {
		if gh, err = github(ctx, ghConfig, *whSecretFile, *org, *group, *jitDir, log); err != nil {
			fmt.Fprintln(stderr, "sparkd:", err)
			return 1
		}
		opts.OnGrant = gh.OnGrant
		// Only the App itself can read and redeliver its webhook
		// deliveries; with GITHUB_TOKEN, a delivery sparkd missed stays
		// missed.
		if app, err := ghclient.NewApp(ctx, os.Getenv); err == nil {
			missed = newRedeliveries(sparkgh.AppDeliveries{Client: app}, time.Now(), log)
		} else {
			log.Warn("sparkd.no_redelivery", "why", err.Error())
		}
	}
	c, err := spark.New(store, opts)
	if err != nil {
		fmt.Fprintln(stderr, "sparkd:", err)
		return 1
	}
	if len(token) < 16 {
		fmt.Fprintf(stderr, "sparkd: the API token in %s is shorter than 16 characters\n", file)
		return 1
	}
	creds := spark.Credentials(spark.Tokens{token: {Role: spark.RoleOperator, Name: "operator"}})
	if *tokensFile != "" {
		tf, err := spark.LoadTokenFile(*tokensFile)
		if err != nil {
			fmt.Fprintln(stderr, "sparkd: -tokens:", err)
			return 2
		}
		creds = spark.AnyOf{creds, tf}
	}
	api, err := spark.NewAuthHandler(c, creds)
	if err != nil {
		fmt.Fprintln(stderr, "sparkd:", err)
		return 1
	}
	if mongoURI != "" {
		stopMirror, err := startMirror(ctx, c, mongoURI, ghConfig.HostNames, log)
		if err != nil {
			fmt.Fprintf(stderr, "sparkd: %v (the fleet file's mongo_uri)\n", err)
			return 2
		}
		defer stopMirror()
	}
	h := http.NewServeMux()
	h.Handle("/", api)
	h.Handle("/dashboard.json", c.DashboardHandler(ghConfig.HostNames))
	// The receiver stops after the server: a delivery answered 202 while
	// the server shuts down is still queued, and what is queued or in
	// flight when it stops is journalled for the redelivery.
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRun()
	whDone := make(chan struct{})
	if gh == nil {
		close(whDone)
	}
	if gh != nil {
		gh.SetController(c)
		wh := gh.NewWebhook(0)
		if missed != nil {
			// What it accepted but could not process is sent again too,
			// after a restart as well.
			missed.r.Unprocessed = wh
			journal := filepath.Join(filepath.Dir(*dbPath), unprocessedFile)
			if m, err := loadUnprocessed(journal); err != nil {
				log.Error("sparkd.unprocessed", "file", journal, "error", err, "why", "deliveries an earlier run could not process are not redelivered")
			} else {
				wh.Restore(m)
			}
			wh.Journal = func(m map[string]time.Time) error { return saveUnprocessed(journal, m) }
		}
		go func() { wh.Run(runCtx); close(whDone) }()
		log.Info("sparkd.webhook", "path", "/github/webhook", "events", strings.Join(gh.Events(), ","), "hint", "subscribe the App to these events")
		h.Handle("POST /github/webhook", wh)
		go runSchedules(ctx, scheds, func(ctx context.Context, s sparkgh.Scheduled) error {
			_, err := gh.Schedule(ctx, s)
			return err
		}, func(ctx context.Context, name string) (time.Time, bool, error) {
			return c.LastSubmitted(ctx, sparkgh.ScheduleOwner(name))
		}, log)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(stderr, "sparkd:", err)
		return 1
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Error("serve", "error", err)
		}
	}()
	fmt.Fprintf(stderr, "sparkd: listening on http://%s (database %s); the API token is in %s\n", ln.Addr(), *dbPath, file)
	if ready != nil {
		ready <- [2]string{"http://" + ln.Addr().String(), file}
	}
	runners := &runnerSweep{}
	tick := time.NewTicker(*every)
	defer tick.Stop()
	for {
		if *simulate {
			for _, host := range []string{"spark-1", "spark-2"} {
				if err := c.Heartbeat(ctx, spark.HostReport{Host: host}); err != nil {
					log.Error("heartbeat", "host", host, "error", err)
				}
			}
		}
		if err := c.Reconcile(ctx); err != nil {
			log.Error("reconcile", "error", err) // fails closed: nothing was admitted
		}
		if gh != nil {
			githubRound(ctx, gh, c, *jitDir, missed, runners, log)
		}
		select {
		case <-ctx.Done():
			shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			srv.Shutdown(shut)
			stopRun()
			<-whDone
			return 0
		case <-tick.C:
		}
	}
}

// github builds the GitHub integration from cfg (the default labels and
// commands, or the fleet file's), the webhook secret file and the App's
// credentials (or GITHUB_TOKEN).
// openStore opens the fleet's database, creating it only with -init and
// only where no file is.
func openStore(path string, create bool) (*sqlitestore.Store, error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) && create {
		return sqlitestore.Create(path)
	}
	return sqlitestore.Open(path)
}

// database runs sparkd backup (a consistent copy of the live database,
// while sparkd serves) and sparkd restore (the controller stopped: the
// backup replaces the database, its epoch advanced so that no fencing
// token is reissued).
func database(ctx context.Context, cmd string, args []string, stderr io.Writer) int {
	fl := flag.NewFlagSet("sparkd "+cmd, flag.ContinueOnError)
	fl.SetOutput(stderr)
	db := fl.String("db", "", "the fleet's SQLite database (required)")
	file := fl.String("file", "", "the backup file: written by backup (must not exist), read by restore (required)")
	if exit, ok := cli.Parse(fl, args); !ok {
		return exit
	}
	if err := cli.Require(fl, "db", "file"); err != nil {
		return cli.Status(err)
	}
	if cmd == "restore" {
		if err := sqlitestore.Restore(*file, *db); err != nil {
			fmt.Fprintln(stderr, "sparkd restore:", err)
			return 1
		}
		fmt.Fprintf(stderr, "restored %s from %s; its epoch advanced, so fencing tokens continue above every one issued before\n", *db, *file)
		return 0
	}
	store, err := sqlitestore.Open(*db)
	if err != nil {
		fmt.Fprintln(stderr, "sparkd backup:", err)
		return 1
	}
	defer store.Close()
	if err := store.Backup(ctx, *file); err != nil {
		fmt.Fprintln(stderr, "sparkd backup:", err)
		return 1
	}
	fmt.Fprintf(stderr, "backed up %s to %s\n", *db, *file)
	return 0
}

func github(ctx context.Context, cfg sparkgh.Config, secretFile, org string, group int64, jitDir string, log *slog.Logger) (*sparkgh.Integration, error) {
	if org == "" || jitDir == "" {
		return nil, errors.New("-webhook-secret-file needs -github-org (where JIT runners are minted) and -jit-dir (where the host agent collects them)")
	}
	data, err := os.ReadFile(secretFile)
	if err != nil {
		return nil, fmt.Errorf("webhook secret: %w", err)
	}
	client, err := ghclient.New(ctx, os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("-webhook-secret-file: %w", err)
	}
	cfg.WebhookSecret = sparkgh.Secret(strings.TrimSpace(string(data)))
	in, err := sparkgh.New(cfg, nil,
		&sparkgh.GitHubAPI{Client: client, Org: org, RunnerGroupID: group}, log)
	if err != nil {
		return nil, err
	}
	in.JITConfigs = jitWriter(jitDir)
	return in, nil
}

// jitSuffix names a runner's config in -jit-dir: <runner>.jitconfig.
const jitSuffix = ".jitconfig"

// jitWriter hands each JIT config to the host agent as
// DIR/<runner>.jitconfig, mode 0600. The file appears whole or not at all
// (written beside it, then renamed), so the agent never reads half a
// config; an error fails the grant, which releases the lease.
func jitWriter(dir string) func(runner string, cfg sparkgh.Secret) error {
	return func(runner string, cfg sparkgh.Secret) error {
		if runner == "" || runner != filepath.Base(runner) || strings.HasPrefix(runner, ".") {
			return fmt.Errorf("sparkd: runner name %q cannot name a file in -jit-dir", runner)
		}
		if err := writeWhole(filepath.Join(dir, runner+jitSuffix), []byte(cfg.Reveal())); err != nil {
			return fmt.Errorf("sparkd: -jit-dir: %w", err)
		}
		return nil
	}
}

// writeWhole writes path, mode 0600, whole or not at all: beside it, then
// renamed over it.
func writeWhole(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*") // mode 0600
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// githubRoundTimeout bounds one round's GitHub work.
const githubRoundTimeout = time.Minute

// githubRound is one admission round's GitHub work: the checks, the
// runner-config sweep and the redeliveries. It is bounded: a GitHub
// request that never answers must not stop the admission loop, which
// expires leases and marks silent hosts offline.
func githubRound(ctx context.Context, gh *sparkgh.Integration, c *spark.Controller, jitDir string, missed *redeliveries, runners *runnerSweep, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, githubRoundTimeout)
	defer cancel()
	if err := gh.Sync(ctx); err != nil {
		log.Error("github sync", "error", err)
	}
	sweepJIT(ctx, jitDir, c, log)
	runners.tick(ctx, gh, time.Now(), log)
	missed.tick(ctx, time.Now())
}

// runnerSweepEvery is the cadence of the registered-runner sweep; the
// first runs at start, for leases that ended while sparkd was down.
const runnerSweepEvery = time.Hour

// runnerSweep runs sparkgh.Integration.SweepRegisteredRunners at its
// cadence from sparkd's loop.
type runnerSweep struct{ next time.Time }

func (s *runnerSweep) tick(ctx context.Context, gh *sparkgh.Integration, now time.Time, log *slog.Logger) {
	if s == nil || now.Before(s.next) {
		return
	}
	s.next = now.Add(runnerSweepEvery)
	if _, err := gh.SweepRegisteredRunners(ctx); err != nil {
		log.Error("sparkd.runner_sweep", "error", err, "why", "runners of ended leases may stay registered until the next sweep")
	}
}

// sweepJIT removes each runner config in dir whose lease is no longer
// active (released, expired, failed, or unknown to the controller): the
// host agent never started that runner, and started later it would come
// online on a host no lease holds. A controller that cannot answer leaves
// the file for the next sweep.
func sweepJIT(ctx context.Context, dir string, c *spark.Controller, log *slog.Logger) {
	paths, _ := filepath.Glob(filepath.Join(dir, "*"+jitSuffix))
	for _, p := range paths {
		runner := strings.TrimSuffix(filepath.Base(p), jitSuffix)
		id, ok := sparkgh.RunnerRequest(runner)
		if !ok {
			continue // not sparkd's
		}
		st, err := c.Status(ctx, id)
		switch {
		case errors.Is(err, spark.ErrNotFound):
		case err != nil:
			continue
		case st.Request.State == spark.Active:
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			log.Error("sparkd.jit_revoke_failed", "runner", runner, "error", err)
			continue
		}
		log.Warn("sparkd.jit_revoked", "runner", runner, "request", id, "why", "the lease is no longer active and its runner never started")
	}
}

// loadToken reads the token file, or creates one (0600) with a fresh
// random token. The token itself is never printed.
func loadToken(path, dir string) (string, string, error) {
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return "", "", err
		}
		return strings.TrimSpace(string(data)), path, nil
	}
	var b [24]byte
	rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	path = filepath.Join(dir, "api-token")
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return "", "", err
	}
	return token, path, nil
}
