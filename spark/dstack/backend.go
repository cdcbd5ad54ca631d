package dstack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/gpugate/gpugate/spark"
)

// Backend sentinels.
var (
	// ErrNotEnrolled: a managed host is not an idle or busy instance of
	// the backend's dstack SSH fleet (missing, pending, provisioning,
	// terminating, terminated or unreachable), or the fleet itself is
	// missing or not an SSH fleet. The error names each host and what to
	// fix.
	ErrNotEnrolled = errors.New("dstack: host not enrolled in the dstack fleet")
	// ErrNotCluster: a pair needs a multi-node task, which dstack places
	// only in a fleet with placement: cluster.
	ErrNotCluster = errors.New("dstack: a pair needs a fleet with placement: cluster")
	// ErrInvalidLease: the LeaseWork cannot become a dstack run; the error
	// says which field.
	ErrInvalidLease = errors.New("dstack: the lease cannot run on dstack")
	// ErrConflict: a run with the lease's run name exists but is not this
	// lease's run in this backend's fleet.
	ErrConflict = errors.New("dstack: the run name is taken by another run")
)

// Environment variables every run of this backend carries. The lease ID is
// how Sweep tells which lease a run belongs to.
const (
	EnvLeaseID  = "SPARK_LEASE_ID"
	EnvClass    = "SPARK_CLASS"
	EnvHosts    = "SPARK_HOSTS"    // the leased hosts, comma-separated, as the controller names them
	EnvTopology = "SPARK_TOPOLOGY" // single or pair, what the entry point's topology argument is
	EnvSuite    = "SPARK_SUITE"
	EnvRepo     = "SPARK_REPO" // owner/name of the repository under test
	EnvSHA      = "SPARK_SHA"  // the commit under test
)

// DefaultRunPrefix starts every run name of a backend whose Config names
// no prefix.
const DefaultRunPrefix = "spark-"

// Config is one fleet's dstack backend.
type Config struct {
	// Fleet is the dstack SSH fleet (in the client's project) that holds
	// the managed hosts. A fleet that runs pairs needs placement: cluster;
	// blocks: 1 (the default) keeps each host whole.
	Fleet string
	// Hosts maps a controller host name to the hostname its dstack
	// instance has (the host as the fleet's ssh_config.hosts lists it). A
	// host not named here is its own hostname.
	Hosts map[string]string
	// RunPrefix starts the name of every run this backend submits, and is
	// how Sweep tells this backend's runs from others in the project
	// (default DefaultRunPrefix): lowercase letters, digits and dashes,
	// starting with a letter, at most 16 characters.
	RunPrefix string
	// Image is the container image runs use; empty, dstack's default.
	Image string
	// IDE is the IDE a development lease's dev environment installs:
	// vscode, cursor, windsurf or zed; empty, SSH only.
	IDE string
	// SSHKeyPub is the public key that may attach to dev environments;
	// empty, the dstack user's own key.
	SSHKeyPub string
	// Env is added to every run's environment. It is stored in the run
	// spec, which dstack shows to project members: never put a secret
	// here.
	Env map[string]string
	// Secrets maps an environment variable of every run to a secret of
	// the dstack project (dstack secret set NAME VALUE), which dstack
	// puts there when the run starts: the run spec holds only the
	// reference, ${{ secrets.NAME }}. A private repository's read-only
	// clone credential goes here.
	Secrets map[string]string
	// Abort stops runs without dstack's graceful shutdown.
	Abort bool
}

// Backend runs granted leases on dstack: the controller's execution engine
// for one fleet. The controller stays the admission authority: a run is
// submitted only for a lease the controller granted, pinned to exactly
// the leased hosts, and stopped once the lease ends; dstack never places
// work of its own choosing.
type Backend struct {
	c   *Client
	cfg Config
}

var prefixRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,15}$`)

// runNameRE is dstack's rule for resource names
// (core/services/__init__.py).
var runNameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{1,40}$`)

var envNameRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// secretNameRE is dstack's rule for secret names
// (server/services/secrets.py).
var secretNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,200}$`)

var ides = []string{"", "vscode", "cursor", "windsurf", "zed"}

// NewBackend returns the backend for cfg, calling dstack through c.
func NewBackend(c *Client, cfg Config) (*Backend, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: a Backend needs its Client", ErrConfig)
	}
	if cfg.RunPrefix == "" {
		cfg.RunPrefix = DefaultRunPrefix
	}
	switch {
	case cfg.Fleet == "":
		return nil, fmt.Errorf("%w: fleet: name the dstack SSH fleet that holds the managed hosts", ErrConfig)
	case !prefixRE.MatchString(cfg.RunPrefix):
		return nil, fmt.Errorf("%w: run_prefix %q: use lowercase letters, digits and dashes, starting with a letter, at most 16 characters", ErrConfig, cfg.RunPrefix)
	case !slices.Contains(ides, cfg.IDE):
		return nil, fmt.Errorf("%w: ide %q: use vscode, cursor, windsurf or zed, or leave it empty for SSH only", ErrConfig, cfg.IDE)
	}
	for k := range cfg.Env {
		if !envNameRE.MatchString(k) || strings.HasPrefix(k, "SPARK_") {
			return nil, fmt.Errorf("%w: env %q: names are letters, digits and underscores, and SPARK_ is the backend's own", ErrConfig, k)
		}
	}
	for k, name := range cfg.Secrets {
		switch _, dup := cfg.Env[k]; {
		case !envNameRE.MatchString(k) || strings.HasPrefix(k, "SPARK_"):
			return nil, fmt.Errorf("%w: secrets %q: names are letters, digits and underscores, and SPARK_ is the backend's own", ErrConfig, k)
		case dup:
			return nil, fmt.Errorf("%w: %s is in both env and secrets: keep one", ErrConfig, k)
		case !secretNameRE.MatchString(name):
			return nil, fmt.Errorf("%w: secrets.%s: %q is not a dstack secret name (letters, digits, - and _, at most 200)", ErrConfig, k, name)
		}
	}
	for host, hn := range cfg.Hosts {
		if host == "" || strings.TrimSpace(hn) == "" {
			return nil, fmt.Errorf("%w: hosts: map each controller host name to its dstack instance's hostname", ErrConfig)
		}
	}
	return &Backend{c: c, cfg: cfg}, nil
}

// RunName is the run name of a lease: the prefix and the lease ID when
// that is a valid dstack name, else the prefix and a hash of the ID. It
// is the same on every call, so a restarted controller finds the run it
// submitted before instead of submitting another.
func (b *Backend) RunName(leaseID string) string {
	if name := b.cfg.RunPrefix + leaseID; runNameRE.MatchString(name) && !strings.HasSuffix(name, "-") {
		return name
	}
	sum := sha256.Sum256([]byte(leaseID))
	return b.cfg.RunPrefix + "h" + hex.EncodeToString(sum[:])[:16]
}

func (b *Backend) hostname(host string) string {
	if hn, ok := b.cfg.Hosts[host]; ok {
		return strings.TrimSpace(hn)
	}
	return host
}

// VerifyEnrollment checks that every host is an instance of the backend's
// dstack SSH fleet that reports idle or busy (and is reachable). Anything
// else is ErrNotEnrolled naming each such host, or the fleet.
func (b *Backend) VerifyEnrollment(ctx context.Context, hosts []string) error {
	f, err := b.fleet(ctx)
	if err != nil {
		return err
	}
	return b.enrolled(f, hosts)
}

func (b *Backend) fleet(ctx context.Context) (Fleet, error) {
	f, err := b.c.GetFleet(ctx, b.cfg.Fleet)
	switch {
	case errors.Is(err, ErrNotFound):
		return f, fmt.Errorf("%w: project %s has no fleet %q; apply the SSH fleet with the managed hosts: %w", ErrNotEnrolled, b.c.Project(), b.cfg.Fleet, err)
	case err != nil:
		return f, fmt.Errorf("dstack: fleet %s: %w", b.cfg.Fleet, err)
	case !f.SSH:
		return f, fmt.Errorf("%w: fleet %s is not an SSH fleet (no ssh_config): the managed hosts must be enrolled through ssh_config.hosts", ErrNotEnrolled, f.Name)
	}
	return f, nil
}

func (b *Backend) enrolled(f Fleet, hosts []string) error {
	var problems []string
	for _, host := range hosts {
		hn := b.hostname(host)
		var found []Instance
		for _, in := range f.Instances {
			if hn != "" && strings.EqualFold(in.Hostname, hn) {
				found = append(found, in)
			}
		}
		ok := slices.ContainsFunc(found, func(in Instance) bool { return in.Status.Available() && !in.Unreachable })
		switch {
		case ok:
		case len(found) == 0:
			problems = append(problems, fmt.Sprintf("host %s (hostname %q) is not an instance of fleet %s: add it to the fleet's ssh_config.hosts and apply the fleet", host, hn, f.Name))
		default:
			var states []string
			for _, in := range found {
				st := string(in.Status)
				if in.Unreachable {
					st += ", unreachable"
				}
				states = append(states, fmt.Sprintf("instance %s is %s", in.Name, st))
			}
			problems = append(problems, fmt.Sprintf("host %s (hostname %q): %s; it must be idle or busy and reachable: wait for it to finish provisioning, check its SSH access, or re-apply the fleet", host, hn, strings.Join(states, "; ")))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrNotEnrolled, strings.Join(problems, "; "))
	}
	return nil
}

// LeaseWork is a granted lease as the backend runs it.
type LeaseWork struct {
	LeaseID  string
	Class    spark.Class
	Hosts    []string // the leased hosts, as the controller names them
	Topology spark.Topology
	// Commands are a CI lease's shell commands (the suite), run in the
	// task's container with the environment below; for a development
	// lease, commands run when the dev environment starts (optional).
	Commands []string
	Suite    string
	// Repo (owner/name) and SHA are the commit a CI lease tests: the run
	// gets them as SPARK_REPO and SPARK_SHA, and its commands check it
	// out.
	Repo, SHA string
	// Duration, when set, is the lease's length: dstack stops the run
	// itself once it has run this long, even if the controller is down.
	Duration time.Duration
}

// WorkFor is the LeaseWork of a granted request, with the commands its
// suite runs.
func WorkFor(r spark.Request, commands []string) LeaseWork {
	w := LeaseWork{LeaseID: r.ID, Class: r.Class, Hosts: slices.Clone(r.Hosts), Topology: r.Topology,
		Commands: slices.Clone(commands), Suite: r.Suite, Duration: r.Duration}
	if r.PR != nil {
		w.Repo, w.SHA = r.PR.Repo, r.PR.SHA
	}
	return w
}

// Start runs a granted lease: a development lease as a dev environment on
// its host, any other (CI) lease as a task on exactly the leased hosts,
// a pair as one two-node task. The run's name derives from the lease ID
// (RunName): when that run exists already, finished or not, Start
// returns its name and submits nothing, so a retried or restarted Start
// never runs a lease twice. The leased hosts must be enrolled
// (ErrNotEnrolled) and a pair's fleet a cluster (ErrNotCluster).
func (b *Backend) Start(ctx context.Context, lease LeaseWork) (string, error) {
	spec, err := b.spec(lease)
	if err != nil {
		return "", err
	}
	name := spec.RunName
	if found, err := b.existing(ctx, name, lease.LeaseID); err != nil {
		return "", err
	} else if found {
		return name, nil
	}
	f, err := b.fleet(ctx)
	if err != nil {
		return "", err
	}
	if err := b.enrolled(f, lease.Hosts); err != nil {
		return "", fmt.Errorf("dstack: lease %s: %w", lease.LeaseID, err)
	}
	if lease.Topology == spark.Pair && f.Placement != "cluster" {
		return "", fmt.Errorf("%w: lease %s is a pair, and fleet %s has placement %q; set placement: cluster in the fleet and re-apply it", ErrNotCluster, lease.LeaseID, f.Name, f.Placement)
	}
	if _, err := b.c.ApplyRun(ctx, spec); err != nil {
		// The apply may have taken effect with its answer lost, or a
		// concurrent Start may have won: the run that exists is the
		// answer.
		found, gerr := b.existing(ctx, name, lease.LeaseID)
		switch {
		case found:
			return name, nil
		case gerr != nil:
			// Whether the run exists is unknown: the next Start finds out.
			return "", fmt.Errorf("dstack: lease %s: submit run %s: %w; then: %w", lease.LeaseID, name, err, gerr)
		}
		return "", fmt.Errorf("dstack: lease %s: submit run %s: %w", lease.LeaseID, name, err)
	}
	return name, nil
}

// existing reports whether the run named name exists and is leaseID's
// run in this backend's fleet (ErrConflict when it is someone else's).
func (b *Backend) existing(ctx context.Context, name, leaseID string) (bool, error) {
	r, err := b.c.GetRun(ctx, name)
	switch {
	case errors.Is(err, ErrNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("dstack: lease %s: look up run %s: %w", leaseID, name, err)
	case r.Env[EnvLeaseID] != leaseID || !slices.Contains(r.Fleets, b.cfg.Fleet):
		return false, fmt.Errorf("%w: run %s exists but is not lease %s's run in fleet %s; stop and delete it, or change run_prefix", ErrConflict, name, leaseID, b.cfg.Fleet)
	}
	return true, nil
}

// spec is the run spec of a lease.
func (b *Backend) spec(w LeaseWork) (RunSpec, error) {
	bad := func(format string, args ...any) (RunSpec, error) {
		return RunSpec{}, fmt.Errorf("%w: lease %s: %s", ErrInvalidLease, w.LeaseID, fmt.Sprintf(format, args...))
	}
	want := map[spark.Topology]int{spark.Single: 1, spark.Pair: 2}[w.Topology]
	switch {
	case w.LeaseID == "":
		return bad("no lease ID")
	case want == 0:
		return bad("topology %q is neither single nor pair", w.Topology)
	case len(w.Hosts) != want || slices.Contains(w.Hosts, "") || (want == 2 && w.Hosts[0] == w.Hosts[1]):
		return bad("a %s lease needs %d distinct hosts, it has %q", w.Topology, want, w.Hosts)
	case w.Class == "":
		return bad("no class")
	case w.Class == spark.ServiceStart:
		return bad("the resident service is started by the fleet's service commands, not as a dstack run")
	case w.Duration < 0:
		return bad("negative duration")
	}
	hostnames := make([]InstanceSelector, 0, len(w.Hosts))
	for _, h := range w.Hosts {
		hostnames = append(hostnames, InstanceSelector{Hostname: b.hostname(h)})
	}
	env := map[string]string{}
	for k, v := range b.cfg.Env {
		env[k] = v
	}
	for k, name := range b.cfg.Secrets {
		env[k] = "${{ secrets." + name + " }}"
	}
	env[EnvLeaseID], env[EnvClass], env[EnvHosts], env[EnvTopology] = w.LeaseID, string(w.Class), strings.Join(w.Hosts, ","), string(w.Topology)
	if w.Suite != "" {
		env[EnvSuite] = w.Suite
	}
	name := b.RunName(w.LeaseID)
	conf := RunConfiguration{
		Name: name, Image: b.cfg.Image, Env: env, Fleets: []string{b.cfg.Fleet},
		Instances: hostnames, CreationPolicy: "reuse", MaxDuration: int((w.Duration + time.Second - 1) / time.Second),
	}
	if w.Class == spark.Development {
		if w.Topology != spark.Single {
			return bad("a dev environment runs on one host; a development lease must be single")
		}
		conf.Type, conf.IDE, conf.Init = "dev-environment", b.cfg.IDE, slices.Clone(w.Commands)
	} else {
		if len(w.Commands) == 0 {
			return bad("a CI lease needs the commands of its suite")
		}
		if w.Repo == "" || w.SHA == "" {
			return bad("a CI lease needs the repository and commit it tests")
		}
		env[EnvRepo], env[EnvSHA] = w.Repo, w.SHA
		conf.Type, conf.Commands, conf.Nodes = "task", slices.Clone(w.Commands), want
	}
	return RunSpec{RunName: name, Configuration: conf, SSHKeyPub: b.cfg.SSHKeyPub}, nil
}

// Stop stops the run runName (a lease's release). A run that is already
// finished or gone is success; a name that is not this backend's is
// ErrInvalidLease.
func (b *Backend) Stop(ctx context.Context, runName string) error {
	if !strings.HasPrefix(runName, b.cfg.RunPrefix) {
		return fmt.Errorf("%w: run %q does not start with run_prefix %q: not this backend's run", ErrInvalidLease, runName, b.cfg.RunPrefix)
	}
	if err := b.c.StopRuns(ctx, []string{runName}, b.cfg.Abort); err != nil {
		return fmt.Errorf("dstack: stop run %s: %w", runName, err)
	}
	return nil
}

// Sweep stops every unfinished run of this backend (its prefix, its
// fleet, a lease ID) whose lease active reports ended, so that a release
// stops its run even when the controller restarted in between. It
// returns the runs it stopped. A run whose lease active cannot judge is
// left for the next sweep and named in the error; so is each run a stop
// failed for.
func (b *Backend) Sweep(ctx context.Context, active func(leaseID string) (bool, error)) ([]string, error) {
	runs, err := b.c.ListRuns(ctx, true)
	if err != nil {
		return nil, fmt.Errorf("dstack: sweep: list runs: %w", err)
	}
	var stop []string
	var errs []error
	for _, r := range runs {
		lease, ok := r.Env[EnvLeaseID]
		if !ok || r.Status.Finished() || r.Status == RunTerminating || !slices.Contains(r.Fleets, b.cfg.Fleet) ||
			!strings.HasPrefix(r.Name, b.cfg.RunPrefix) || b.RunName(lease) != r.Name {
			continue // not this backend's, or already stopping
		}
		on, err := active(lease)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("dstack: sweep: run %s: is lease %s active: %w", r.Name, lease, err))
		case !on:
			stop = append(stop, r.Name)
		}
	}
	if len(stop) > 0 {
		if err := b.c.StopRuns(ctx, stop, b.cfg.Abort); err != nil {
			errs = append(errs, fmt.Errorf("dstack: sweep: stop runs %s: %w", strings.Join(stop, ", "), err))
			stop = nil
		}
	}
	return stop, errors.Join(errs...)
}
