package fleet

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/dstack"
	"github.com/gpugate/gpugate/spark/sparkgh"
)

// Daemon is a fleet controller's process: it serves the authenticated API,
// the sanitized dashboard and, with GitHub, the webhook receiver; it
// reconciles at its cadence, and each round does the GitHub work (the
// checks, the sweep of runner configs whose lease ended, the hourly sweep
// of registered runners, the redelivery of missed webhook deliveries) and
// runs the schedules. Start builds one from a fleet file and Settings.
type Daemon struct {
	Controller *spark.Controller
	// API is the authenticated agent and CLI API (spark.NewAuthHandler),
	// served at /.
	API http.Handler
	// HostNames are the dashboard's display names of hosts.
	HostNames map[string]string
	// GitHub, when set, receives POST /github/webhook and is synced every
	// round; Schedules need it.
	GitHub *sparkgh.Integration
	// Deliveries is the App's webhook delivery log: with it, deliveries
	// missed or accepted but not processed are sent again (the latter
	// journalled in StateDir across restarts). Without it a missed
	// delivery stays missed.
	Deliveries sparkgh.DeliveryLog
	StateDir   string
	// Runners holds, in memory, the runner configs of leases whose first
	// host runs the host agent (HandOff), served to that agent once;
	// JITDir holds those of the other hosts as files (JITWriter). Each
	// round drops the configs whose lease is no longer active.
	Runners   *spark.RunnerConfigs
	JITDir    string
	Schedules []Schedule
	// Engine, when set, runs granted work as dstack runs (a CI lease a
	// task on exactly its hosts at its repository and commit, a
	// development lease a dev environment), ends each lease whose run
	// finished (a GitHub lane's check concluded from the run and its
	// evidence receipt) and stops each run once its lease ends; Suites
	// are the commands each suite runs. The controller stays the
	// admission authority: dstack only runs what it granted. With GitHub,
	// the integration's Config.Engine must name the engine too
	// (ErrEngine).
	Engine *dstack.Backend
	Suites map[string][]string
	// refused are the leases the engine refused to run (ErrInvalidLease):
	// said once, never submitted again. receiptFailures count the rounds
	// that failed to read a finished run's receipt (receiptTries).
	refused, receiptFailures map[string]int
	// Every is the admission cadence (default 2 s).
	Every time.Duration
	// BeforeRound, when set, runs at the start of each round (a simulated
	// fleet's heartbeats).
	BeforeRound func(context.Context)
	Log         *slog.Logger
	// DB and TokenFile are the database and the operator's token file
	// Start opened (for the operator's message).
	DB, TokenFile string
	closers       []func()
}

// Serve serves on ln until ctx ends, then shuts the server down (5 s for
// requests in flight) and stops the webhook receiver after it: a delivery
// answered 202 while the server shuts down is still queued, and what is
// queued or in flight when it stops is journalled for the redelivery.
func (d *Daemon) Serve(ctx context.Context, ln net.Listener) error {
	if d.Controller == nil || d.API == nil {
		return errors.New("fleet: a Daemon needs its Controller and API")
	}
	if len(d.Schedules) > 0 && d.GitHub == nil {
		return errors.New("fleet: schedules dispatch workflows through GitHub: give the Daemon its GitHub integration, or remove the schedules")
	}
	log := d.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	every := d.Every
	if every <= 0 {
		every = 2 * time.Second
	}
	c := d.Controller
	if err := d.checkEngine(); err != nil {
		return err
	}
	if d.Engine != nil {
		if err := d.verifyEnrollment(ctx); err != nil {
			return err
		}
	}
	h := http.NewServeMux()
	h.Handle("/", d.API)
	h.Handle("/dashboard.json", c.DashboardHandler(d.HostNames))
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRun()
	whDone := make(chan struct{})
	var missed *redeliveries
	if d.GitHub == nil {
		close(whDone)
	} else {
		gh := d.GitHub
		gh.SetController(c)
		wh := gh.NewWebhook(0)
		if d.Deliveries != nil {
			// What it accepted but could not process is sent again too,
			// after a restart as well.
			missed = newRedeliveries(d.Deliveries, time.Now(), log)
			missed.r.Unprocessed = wh
			journal := filepath.Join(d.StateDir, unprocessedFile)
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
		go RunSchedules(ctx, d.Schedules, func(ctx context.Context, s sparkgh.Scheduled) error {
			_, err := gh.Schedule(ctx, s)
			return err
		}, func(ctx context.Context, name string) (time.Time, bool, error) {
			return c.LastSubmitted(ctx, sparkgh.ScheduleOwner(name))
		}, log)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Error("serve", "error", err)
		}
	}()
	runners := &runnerSweep{}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if d.BeforeRound != nil {
			d.BeforeRound(ctx)
		}
		if err := c.Reconcile(ctx); err != nil {
			log.Error("reconcile", "error", err) // fails closed: nothing was admitted
		}
		if d.GitHub != nil {
			githubRound(ctx, d.GitHub, c, d.JITDir, missed, runners, log)
		}
		if d.Engine != nil {
			d.engineRound(ctx, log)
		}
		if d.Runners != nil {
			for _, id := range d.Runners.Sweep(ctx, c) {
				log.Info("sparkd.runner_config_dropped", "request", id, "why", "the lease ended")
			}
		}
		select {
		case <-ctx.Done():
			shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			srv.Shutdown(shut)
			stopRun()
			<-whDone
			return nil
		case <-tick.C:
		}
	}
}

// HandOff is the GitHub integration's JITConfigs for this daemon: the
// config of a lease whose first host runs the host agent (agents) is kept
// in memory (Runners) for that agent to take over the API, never written
// to the controller's disk; any other is written to JITDir (JITWriter).
func (d *Daemon) HandOff(agents map[string]bool) func(runner string, cfg sparkgh.Secret) error {
	files := JITWriter(d.JITDir)
	return func(runner string, cfg sparkgh.Secret) error {
		id, ok := sparkgh.RunnerRequest(runner)
		if !ok {
			return fmt.Errorf("fleet: runner %q names no lease", runner)
		}
		st, err := d.Controller.Status(context.Background(), id)
		if err != nil {
			return fmt.Errorf("fleet: hand the runner config of %s over: %w", id, err)
		}
		if hosts := st.Request.Hosts; len(hosts) > 0 && agents[hosts[0]] && d.Runners != nil {
			d.Runners.Put(id, runner, cfg)
			return nil
		}
		if d.JITDir == "" {
			return fmt.Errorf("fleet: lease %s runs on %v, which runs no host agent, and no JIT directory is set", id, st.Request.Hosts)
		}
		return files(runner, cfg)
	}
}

// jitSuffix names a runner's config in the JIT directory:
// <runner>.jitconfig.
const jitSuffix = ".jitconfig"

// JITWriter hands each JIT config to the host agent as
// DIR/<runner>.jitconfig, mode 0600; use it as
// sparkgh.Integration.JITConfigs. The file appears whole or not at all
// (written beside it, then renamed), so the agent never reads half a
// config; an error fails the grant, which releases the lease.
func JITWriter(dir string) func(runner string, cfg sparkgh.Secret) error {
	return func(runner string, cfg sparkgh.Secret) error {
		if runner == "" || runner != filepath.Base(runner) || strings.HasPrefix(runner, ".") {
			return fmt.Errorf("fleet: runner name %q cannot name a file in the JIT directory", runner)
		}
		if err := writeWhole(filepath.Join(dir, runner+jitSuffix), []byte(cfg.Reveal())); err != nil {
			return fmt.Errorf("fleet: JIT directory: %w", err)
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
	if jitDir != "" {
		sweepJIT(ctx, jitDir, c, log)
	}
	runners.tick(ctx, gh, time.Now(), log)
	missed.tick(ctx, time.Now())
}

// runnerSweepEvery is the cadence of the registered-runner sweep; the
// first runs at start, for leases that ended while the daemon was down.
const runnerSweepEvery = time.Hour

// runnerSweep runs sparkgh.Integration.SweepRegisteredRunners at its
// cadence from the daemon's loop.
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
			continue // not ours
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
