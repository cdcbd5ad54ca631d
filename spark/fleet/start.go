package fleet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gpugate/gpugate/ghclient"
	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/mongomirror"
	"github.com/gpugate/gpugate/spark/sparkgh"
	"github.com/gpugate/gpugate/spark/sqlitestore"
)

// Settings are what a fleet controller's process takes besides its fleet
// file: where its state lives, its API credentials and its GitHub side.
// They are sparkd's flags.
type Settings struct {
	// DB is the fleet's SQLite database; Init creates it when no file is
	// there (a new fleet: an empty or foreign file is never taken for
	// one). Empty: a new database in a new temporary directory.
	DB   string
	Init bool
	// OperatorTokenFile holds an operator's API token in plain text, read
	// once at Start. Empty, with no TokensFile, a fresh one is written
	// beside DB (spark.OperatorToken): the quick start's. Empty with a
	// TokensFile, there is none: the operators are that file's operator
	// lines, whose tokens are rotated and revoked without a restart.
	OperatorTokenFile string
	// TokensFile, when set, holds the hashed tokens of hosts, agents and
	// operators (spark.TokenFile), read again when it changes; a change
	// that does not parse is logged and alerted.
	TokensFile string
	// WebhookSecretFile enables the GitHub integration (POST
	// /github/webhook), authenticated as the GitHub App (ghclient.NewApp's
	// variables) or with GITHUB_TOKEN; Org and RunnerGroup are where its
	// one-job runners are registered, JITDir where the configs of hosts
	// without the host agent are written.
	WebhookSecretFile string
	Org               string
	RunnerGroup       int64
	JITDir            string
	Every             time.Duration // the admission cadence (default 2 s)
	Getenv            func(string) string
	Log               *slog.Logger
}

// ErrSettings marks Settings a fleet controller cannot run with, or a
// credential file it cannot read; the error names which.
var ErrSettings = errors.New("fleet: invalid settings")

// Start opens the fleet's database and builds the Daemon of fleet file f:
// its controller (with the alert command, the GitHub integration, the
// dstack engine the file names), the authenticated API over the token
// file and the operator's plain token (Settings.OperatorTokenFile: none
// when only the token file is given; Daemon.TokenFile is then empty), and
// the MongoDB mirror. Close releases what
// it opened. Settings it cannot run with are ErrSettings, a fleet file
// whose engine or mirror cannot start ErrInvalid; both are found before
// the daemon serves.
func Start(ctx context.Context, f File, s Settings) (d *Daemon, err error) {
	log := cmp.Or(s.Log, slog.New(slog.DiscardHandler))
	getenv := s.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if len(f.Schedules) > 0 && s.WebhookSecretFile == "" {
		return nil, fmt.Errorf("%w: the fleet's schedules dispatch workflows through GitHub: give -webhook-secret-file, -github-org and -jit-dir, or remove schedules", ErrSettings)
	}
	if s.DB == "" {
		dir, err := os.MkdirTemp("", "sparkd-")
		if err != nil {
			return nil, fmt.Errorf("fleet: %w", err)
		}
		s.DB, s.Init = filepath.Join(dir, "spark.db"), true
	}
	var creds spark.AnyOf
	tokenFile := ""
	if s.OperatorTokenFile != "" || s.TokensFile == "" {
		var token string
		if token, tokenFile, err = spark.OperatorToken(s.OperatorTokenFile, filepath.Dir(s.DB)); err != nil {
			return nil, err
		}
		creds = append(creds, spark.Tokens{token: {Role: spark.RoleOperator, Name: spark.OwnerOperator}})
	}
	store, err := openStore(s.DB, s.Init)
	if err != nil {
		return nil, err
	}
	d = &Daemon{HostNames: f.GitHub.HostNames, StateDir: filepath.Dir(s.DB), JITDir: s.JITDir, Runners: spark.NewRunnerConfigs(),
		Schedules: f.Schedules, Every: s.Every, Log: log, DB: s.DB, TokenFile: tokenFile}
	d.closers = append(d.closers, func() { store.Close() })
	opened := d
	defer func() {
		if err != nil {
			opened.Close() // what it opened before it failed
		}
	}()
	if f.Dstack != nil {
		if d.Engine, err = f.Dstack.Backend(); err != nil {
			return nil, err
		}
		d.Suites = f.Dstack.Suites
	}
	opts := f.Options
	opts.Log = log
	if f.AlertCommand != "" {
		alerts := &Alerter{Command: f.AlertCommand, Log: log}
		d.closers = append(d.closers, alerts.Wait) // an alert in flight is sent before the process exits
		opts.OnAlert = alerts.Send
	}
	if s.WebhookSecretFile != "" {
		if d.GitHub, err = d.github(ctx, f, s, getenv); err != nil {
			return nil, err
		}
		opts.OnGrant = d.GitHub.OnGrant
	}
	if d.Controller, err = spark.New(store, opts); err != nil {
		return nil, err
	}
	if s.TokensFile != "" {
		tf, err := spark.LoadTokenFile(s.TokensFile, spark.ReportRejected(func(err error) {
			log.Error("sparkd.tokens_rejected", "error", err)
			if opts.OnAlert != nil {
				opts.OnAlert(spark.Event{At: time.Now(), Kind: "token-file-rejected", Alert: true,
					Detail: "a change of the token file does not parse: until it does, only the tokens whose lines stand unchanged work (sparkd's log says which line)"})
			}
		}))
		if err != nil {
			return nil, fmt.Errorf("%w: -tokens: %w", ErrSettings, err)
		}
		creds = append(creds, tf)
	}
	hostAPI := []spark.HandlerOption{spark.WithRunnerConfigs(d.Runners)}
	if svc, ok := opts.Service.(*spark.AgentService); ok {
		hostAPI = append(hostAPI, spark.WithAgentService(svc))
	}
	if d.API, err = spark.NewAuthHandler(d.Controller, creds, hostAPI...); err != nil {
		return nil, err
	}
	if f.MongoURI != "" {
		stop, err := mongomirror.Start(ctx, d.Controller, f.MongoURI, mongomirror.Options{Names: f.GitHub.HostNames, Log: log})
		if err != nil {
			return nil, fmt.Errorf("%w: %w (the fleet file's mongo_uri)", ErrInvalid, err)
		}
		d.closers = append(d.closers, stop)
	}
	return d, nil
}

// Close releases what Start opened, in reverse: the mirror, the alerts in
// flight, the database.
func (d *Daemon) Close() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i]()
	}
	d.closers = nil
}

// github builds the GitHub integration: the fleet file's labels and
// commands, the webhook secret, and the App's credentials (or
// GITHUB_TOKEN). Only the App can read and redeliver its webhook
// deliveries; with GITHUB_TOKEN, a delivery missed stays missed.
func (d *Daemon) github(ctx context.Context, f File, s Settings, getenv func(string) string) (*sparkgh.Integration, error) {
	data, err := os.ReadFile(s.WebhookSecretFile)
	if err != nil {
		return nil, fmt.Errorf("%w: webhook secret: %w", ErrSettings, err)
	}
	client, err := ghclient.New(ctx, getenv)
	if err != nil {
		return nil, fmt.Errorf("%w: -webhook-secret-file: %w", ErrSettings, err)
	}
	cfg := f.GitHub
	cfg.WebhookSecret = sparkgh.Secret(strings.TrimSpace(string(data)))
	in, err := sparkgh.New(cfg, nil, &sparkgh.GitHubAPI{Client: client, Org: s.Org, RunnerGroupID: s.RunnerGroup}, d.Log)
	if err != nil {
		return nil, err
	}
	// Hosts running the host agent take their runner configs over the
	// API; the others collect them from JITDir.
	agents := map[string]bool{}
	for _, h := range f.Options.Hosts {
		agents[h.Name] = h.Agent
	}
	in.JITConfigs = d.HandOff(agents)
	if app, err := ghclient.NewApp(ctx, getenv); err == nil {
		d.Deliveries = sparkgh.AppDeliveries{Client: app}
	} else {
		d.Log.Warn("sparkd.no_redelivery", "why", err.Error())
	}
	return in, nil
}

// openStore opens the fleet's database, creating it only with create and
// only where no file is.
func openStore(path string, create bool) (*sqlitestore.Store, error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) && create {
		return sqlitestore.Create(path)
	}
	return sqlitestore.Open(path)
}

// NeedsRunnerSettings names the settings a GitHub integration needs to
// mint one-job runners for f's hosts: the organization, and JITDir when
// a managed host runs no host agent. With the dstack engine, none: a
// dstack task runs each lane.
func (f File) NeedsRunnerSettings() []string {
	if f.Dstack != nil {
		return nil
	}
	need := []string{"github-org"}
	if slices.ContainsFunc(f.Options.Hosts, func(h spark.HostConfig) bool { return h.Managed && !h.Agent }) {
		need = append(need, "jit-dir")
	}
	return need
}
