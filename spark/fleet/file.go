// Package fleet runs a spark fleet controller from its fleet file: Load
// reads the file (the hosts and admission settings, the resident
// service's commands, the alert command, the schedules that queue work at
// a branch's commit, the GitHub integration's settings, the execution
// engine), Start opens the database and builds the Daemon (the
// controller, its API credentials, the GitHub integration, the dstack
// engine, the MongoDB mirror), and Daemon.Serve serves the API and runs
// the rounds: admission, the GitHub work, the engine's runs, the
// schedules, and the journal of webhook deliveries accepted but not
// processed. sparkd is its flags.
//
// With engine: dstack the daemon runs each granted lease as a dstack run
// on exactly its hosts, and a GitHub lane (a label, a comment, the merge
// queue, a schedule) as a dstack task at its repository and commit
// instead of a one-job runner. When the run finishes the lease is
// released; a lane's check passes only when the run finished
// successfully and its evidence receipt (the last line of its output) is
// recorded, and fails naming the run and its termination reason
// otherwise, a run that disappeared included. While dstack cannot be
// read nothing is concluded.
//
// A fleet file is strict YAML (unknown keys are errors, one document, an
// empty file refused); fleet.example.yml, embedded as Example, is the
// template with the default values.
package fleet

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpugate/gpugate/internal/shell"
	"github.com/gpugate/gpugate/internal/strictyaml"
	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/dstack"
	"github.com/gpugate/gpugate/spark/sparkgh"
)

// Example is the default fleet as a fleet file: the template to copy.
//
//go:embed fleet.example.yml
var Example []byte

// ErrInvalid marks a fleet file a controller cannot run with; the error
// names the key to fix.
var ErrInvalid = errors.New("fleet: invalid fleet file")

// fleetFile is the -fleet YAML: the hosts, the admission settings and the
// resident service's commands.
type fileYAML struct {
	Hosts            []spark.HostConfig `yaml:"hosts"`
	PreferredHost    string             `yaml:"preferred_host"`
	PairTest         bool               `yaml:"pair_test"`
	PairMaxWait      time.Duration      `yaml:"pair_max_wait"`
	HeartbeatTimeout time.Duration      `yaml:"heartbeat_timeout"`
	CleanupTimeout   time.Duration      `yaml:"cleanup_timeout"`
	LendMinPriority  int                `yaml:"lend_min_priority"`
	RestoreAttempts  int                `yaml:"restore_attempts"`
	RestoreBackoff   time.Duration      `yaml:"restore_backoff"`
	Durations        map[string]string  `yaml:"durations"`
	Service          *ShellService      `yaml:"service"`
	GitHub           *githubSettings    `yaml:"github"`
	Schedules        []scheduleYAML     `yaml:"schedules"`
	// AlertCommand reaches an operator on each alert (a failed lend, a
	// failed restore of the resident service): a shell command run with
	// the alert in SPARK_ALERT_KIND, _HOST, _REQUEST, _DETAIL and _AT.
	AlertCommand string `yaml:"alert_command"`
	// MongoURI, when set, mirrors the sanitized state and the history into
	// MongoDB (docs/fleet.md). It may hold a password: it is never logged.
	MongoURI string `yaml:"mongo_uri"`
	// Engine is what runs granted work on the hosts: runner (the one-job
	// Actions runner the host agent starts, the default) or dstack.
	Engine string          `yaml:"engine"`
	Dstack *DstackSettings `yaml:"dstack"`
}

// DstackSettings are engine: dstack's: the dstack server, project and SSH
// fleet holding the managed hosts, and the commands each suite runs.
type DstackSettings struct {
	URL       string              `yaml:"url"`
	Project   string              `yaml:"project"`
	Fleet     string              `yaml:"fleet"`
	TokenFile string              `yaml:"token_file"` // read at start, never logged
	Hosts     map[string]string   `yaml:"hosts"`      // controller host -> dstack hostname (default: the same)
	RunPrefix string              `yaml:"run_prefix"`
	Image     string              `yaml:"image"`
	IDE       string              `yaml:"ide"` // a development lease's dev environment: vscode, cursor, windsurf, zed or none
	Suites    map[string][]string `yaml:"suites"`
	// Secrets maps a run's environment variable to a dstack project
	// secret (a private repository's clone credential): the run spec
	// holds only the reference.
	Secrets map[string]string `yaml:"secrets"`
}

// Backend builds the dstack backend of these settings, reading the
// token file; getting the commands of a suite is Suites.
func (d *DstackSettings) Backend() (*dstack.Backend, error) {
	data, err := os.ReadFile(d.TokenFile)
	if err != nil {
		return nil, fmt.Errorf("%w: dstack.token_file: %w", ErrInvalid, err)
	}
	c, err := dstack.NewClient(d.URL, strings.TrimSpace(string(data)), d.Project, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: dstack: %w", ErrInvalid, err)
	}
	b, err := dstack.NewBackend(c, dstack.Config{Fleet: d.Fleet, Hosts: d.Hosts, RunPrefix: d.RunPrefix, Image: d.Image, IDE: d.IDE, Secrets: d.Secrets})
	if err != nil {
		return nil, fmt.Errorf("%w: dstack: %w", ErrInvalid, err)
	}
	return b, nil
}

// githubSettings override the default GitHub integration (labels, commands,
// the runner labels the dispatched workflow's runs-on names, the check and
// the workflow file) for -webhook-secret-file.
type githubSettings struct {
	Labels        map[string]sparkgh.Lane `yaml:"labels"`
	CommandPrefix string                  `yaml:"command_prefix"`
	MinRole       string                  `yaml:"min_role"`
	CheckName     string                  `yaml:"check_name"`
	Workflow      string                  `yaml:"workflow"`
	RunnerLabels  []string                `yaml:"runner_labels"`
	HostNames     map[string]string       `yaml:"host_names"`
	MergeQueue    *sparkgh.MergeQueue     `yaml:"merge_queue"`
}

// File is a loaded fleet file: the controller's options and the GitHub
// integration's configuration (the defaults, with the file's overrides; the
// webhook secret is not part of it).
type File struct {
	Options   spark.Options
	GitHub    sparkgh.Config
	Schedules []Schedule
	// AlertCommand reaches an operator on each alert (Alerter).
	AlertCommand string
	// MongoURI, when set, is where the state is mirrored
	// (mongomirror.Start). It may hold a password: never log it.
	MongoURI string
	// Dstack, with engine: dstack, is where granted work runs (nil: the
	// host agents' runners).
	Dstack *DstackSettings
}

// ShellService is the fleet file's service: block, the resident
// service's five shell commands (spark.ShellService).
type ShellService = spark.ShellService

// Load parses a fleet file strictly (unknown keys are errors) into the
// controller's options and the GitHub integration's configuration. The
// service commands become the controller's ResidentService (a
// *ShellService); a fleet whose service host has no complete set of them
// is refused, since the service host could then never be lent or restored
// safely. Every error is ErrInvalid.
func Load(data []byte) (File, error) {
	var f fileYAML
	if err := strictyaml.Decode(data, &f); err != nil {
		if errors.Is(err, strictyaml.ErrEmpty) {
			return File{}, fmt.Errorf("%w: the file is empty; start from fleet.example.yml", ErrInvalid)
		}
		return File{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	opts, err := f.options()
	if err != nil {
		return File{}, err
	}
	gh, err := f.GitHub.config()
	if err != nil {
		return File{}, err
	}
	scheds, err := f.schedules()
	if err != nil {
		return File{}, err
	}
	switch {
	case f.Engine != "" && f.Engine != "runner" && f.Engine != "dstack":
		return File{}, fmt.Errorf("%w: engine %q: runner (the host agents' one-job runners) or dstack", ErrInvalid, f.Engine)
	case f.Engine == "dstack" && f.Dstack == nil:
		return File{}, fmt.Errorf("%w: engine: dstack needs its dstack: block (url, project, fleet, token_file, suites)", ErrInvalid)
	case f.Engine != "dstack" && f.Dstack != nil:
		return File{}, fmt.Errorf("%w: a dstack: block is given but engine is %q: set engine: dstack or remove it", ErrInvalid, cmp.Or(f.Engine, "runner"))
	case f.Dstack != nil:
		for _, k := range []struct{ key, v string }{{"url", f.Dstack.URL}, {"project", f.Dstack.Project}, {"fleet", f.Dstack.Fleet}, {"token_file", f.Dstack.TokenFile}} {
			if strings.TrimSpace(k.v) == "" {
				return File{}, fmt.Errorf("%w: dstack.%s is required with engine: dstack", ErrInvalid, k.key)
			}
		}
		for _, suite := range []string{"smoke", "performance"} {
			if len(f.Dstack.Suites[suite]) == 0 {
				return File{}, fmt.Errorf("%w: dstack.suites.%s: list the commands a %s lease runs", ErrInvalid, suite, suite)
			}
		}
		// A run's processes are the host's: only its agent confirms they
		// are gone before the host takes work again.
		if slices.ContainsFunc(f.Hosts, func(h spark.HostConfig) bool { return h.Managed && !h.Agent }) {
			return File{}, fmt.Errorf("%w: engine: dstack needs the host agent on every managed host (agent: true): its cleanup acknowledgement confirms a lease's run is gone", ErrInvalid)
		}
	}
	gh.Engine = f.Engine // with dstack, no runner is minted: the task runs the lane
	return File{Options: opts, GitHub: gh, Schedules: scheds, AlertCommand: strings.TrimSpace(f.AlertCommand), MongoURI: strings.TrimSpace(f.MongoURI),
		Dstack: f.Dstack}, nil
}

// Alerter runs the fleet file's alert command for each alert, in the
// background (the controller's loop must not wait on it), bounded to a
// minute, with the alert in SPARK_ALERT_KIND, _HOST, _REQUEST, _DETAIL and
// _AT. A failure is logged without the command or its output, which may
// carry a webhook address or a credential.
type Alerter struct {
	Command string
	Log     *slog.Logger
	wg      sync.WaitGroup
}

// Wait returns once every alert sent so far has been delivered or failed.
func (a *Alerter) Wait() { a.wg.Wait() }

// Send runs the command for e; use it as spark.Options.OnAlert.
func (a *Alerter) Send(e spark.Event) {
	a.wg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// Its output is not logged either: a failing curl can print the
		// address it was given.
		if _, err := shell.Run(ctx, a.Command, "SPARK_ALERT_KIND="+e.Kind, "SPARK_ALERT_HOST="+e.Host, "SPARK_ALERT_REQUEST="+e.Request,
			"SPARK_ALERT_DETAIL="+e.Detail, "SPARK_ALERT_AT="+e.At.UTC().Format(time.RFC3339)); err != nil {
			a.Log.Error("sparkd.alert_failed", "kind", e.Kind, "host", e.Host, "error", err.Error())
		}
	})
}

// config is the default GitHub integration with the file's overrides,
// validated as sparkgh.New will.
func (g *githubSettings) config() (sparkgh.Config, error) {
	c := sparkgh.DefaultConfig("")
	if g == nil {
		return c, nil
	}
	if len(g.Labels) > 0 {
		c.Labels = g.Labels
	}
	if len(g.RunnerLabels) > 0 {
		c.RunnerLabels = g.RunnerLabels
	}
	if g.HostNames != nil {
		c.HostNames = g.HostNames
	}
	c.CommandPrefix, c.MinRole, c.CheckName, c.Workflow = g.CommandPrefix, g.MinRole, g.CheckName, g.Workflow
	c.MergeQueue = g.MergeQueue
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("%w: github: %w", ErrInvalid, err)
	}
	return c, nil
}

// options validates the file's fleet into the controller's options.
func (f fileYAML) options() (spark.Options, error) {
	opts := spark.Options{
		Hosts: f.Hosts, PreferredHost: f.PreferredHost, PairTest: f.PairTest, HeartbeatTimeout: f.HeartbeatTimeout,
		LendMinPriority: f.LendMinPriority, RestoreAttempts: f.RestoreAttempts, RestoreBackoff: f.RestoreBackoff,
		PairMaxWait: f.PairMaxWait, CleanupTimeout: f.CleanupTimeout,
	}
	switch {
	case len(f.Hosts) == 0:
		return opts, fmt.Errorf("%w: hosts: list at least one host (name, managed, service)", ErrInvalid)
	case f.HeartbeatTimeout < 0 || f.RestoreBackoff < 0 || f.RestoreAttempts < 0 || f.LendMinPriority < 0 || f.PairMaxWait < 0 || f.CleanupTimeout < 0:
		return opts, fmt.Errorf("%w: heartbeat_timeout, restore_backoff, restore_attempts, lend_min_priority, pair_max_wait and cleanup_timeout cannot be negative", ErrInvalid)
	}
	if len(f.Durations) > 0 {
		known := spark.DefaultDurations()
		opts.Durations = map[spark.Class]time.Duration{}
		for class, v := range f.Durations {
			if _, ok := known[spark.Class(class)]; !ok {
				names := slices.Sorted(maps.Keys(known))
				return opts, fmt.Errorf("%w: durations: unknown class %q (the classes are %v)", ErrInvalid, class, names)
			}
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return opts, fmt.Errorf("%w: durations: %s: %q is not a positive duration such as 2h", ErrInvalid, class, v)
			}
			opts.Durations[spark.Class(class)] = d
		}
	}
	serviceHost, serviceAgent := "", false
	for _, h := range f.Hosts {
		if h.Service {
			if serviceHost != "" {
				return opts, fmt.Errorf("%w: hosts: %s and %s both run the resident service; one host does", ErrInvalid, serviceHost, h.Name)
			}
			serviceHost, serviceAgent = h.Name, h.Agent
		}
	}
	switch {
	case serviceAgent && f.Service != nil:
		return opts, fmt.Errorf("%w: host %s runs the host agent, which runs the resident service's commands on the host (sparkctl agent -service-*): remove service: here", ErrInvalid, serviceHost)
	case serviceAgent:
		opts.Service = spark.NewAgentService(serviceHost)
	case serviceHost != "" && f.Service == nil:
		return opts, fmt.Errorf("%w: host %s runs the resident service, so service: needs its drain, stop, verify_released, start and healthy commands", ErrInvalid, serviceHost)
	case serviceHost == "" && f.Service != nil:
		return opts, fmt.Errorf("%w: service: commands are given but no host has service: true", ErrInvalid)
	case f.Service != nil:
		for _, c := range []struct{ key, cmd string }{
			{"drain", f.Service.DrainCmd}, {"stop", f.Service.StopCmd}, {"verify_released", f.Service.VerifyReleasedCmd},
			{"start", f.Service.StartCmd}, {"healthy", f.Service.HealthyCmd},
		} {
			if strings.TrimSpace(c.cmd) == "" {
				return opts, fmt.Errorf("%w: service.%s is empty: every step of lending and restoring the service needs its command", ErrInvalid, c.key)
			}
		}
		opts.Service = f.Service
	}
	return opts, nil
}
