// Package agent is the host side of a spark fleet: what a managed host
// runs against the controller's API. Run is the host agent (sparkctl
// agent): it heartbeats, takes the runner config of a lease granted on its
// host over the API, runs the preflight, starts the official Actions
// runner for exactly that job as its child, and after the lease ends
// stops what is left of the job, removes its work directory, counts the
// GPU's processes and acknowledges the cleanup; on the resident service's
// host it runs the steps the controller orders. Heartbeat reports the host's
// liveness with its GPU's compute-process count, and sends nothing when
// that count is unknown (an unknown host goes offline, never idle);
// Preflight is the leased host's check before a job starts: the lease is
// active and holds this host, its fencing token is current with the
// controller, no competing GPU process runs, the work directory has room,
// a pair's link works and the resident service has released the GPU.
package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpugate/gpugate/internal/shell"
	"github.com/gpugate/gpugate/spark"
)

// ErrNotLeased marks a preflight for a lease that is not active or does
// not hold this host: nothing may start.
var ErrNotLeased = errors.New("agent: the lease does not allow a job on this host")

// Heartbeat reports host's liveness with the number of compute processes
// gpu lists, and returns that number. It sends nothing when they cannot be
// counted: absent is not zero, and a host that stops reporting goes
// offline, never idle.
func Heartbeat(ctx context.Context, cl *spark.APIClient, host string, gpu spark.GPUProcesses) (int, error) {
	apps, err := gpu.ComputeApps(ctx)
	if err != nil {
		return 0, fmt.Errorf("agent: no heartbeat sent for %s: its GPU processes cannot be counted (%w); it will go offline rather than look clean", host, err)
	}
	return len(apps), cl.Heartbeat(ctx, host, len(apps))
}

// PreflightOptions are the host's side of a preflight.
type PreflightOptions struct {
	// Host is the managed host this runs on, as the machine itself says
	// (never taken from the lease: a job on another host must not pass
	// as the lease's).
	Host    string
	WorkDir string // the job's work directory
	MinFree uint64 // bytes the job needs free in WorkDir
	// ServiceHost runs the service-released check here too (the
	// controller's fleet configuration decides it for its service host
	// whatever this says).
	ServiceHost bool
	// Interconnect, for a pair, and ServiceReleased are shell commands
	// that exit 0 when the link works and when the resident service holds
	// nothing on the GPU.
	Interconnect, ServiceReleased string
	// GPU and Disk default to nvidia-smi and statfs.
	GPU  spark.GPUProcesses
	Disk spark.DiskSpace
}

// Preflight runs spark.Preflight on this host for lease id, with the
// controller's fencing check over the API and the host's real checks.
func Preflight(ctx context.Context, cl *spark.APIClient, id string, o PreflightOptions) error {
	st, err := cl.Status(ctx, id)
	if err != nil {
		return err
	}
	r := st.Request
	if r.State != spark.Active {
		return fmt.Errorf("%w: lease %s is %s, not active", ErrNotLeased, id, r.State)
	}
	if !slices.Contains(r.Hosts, o.Host) {
		return fmt.Errorf("%w: lease %s holds %s, not %s, where this runs", ErrNotLeased, id, strings.Join(r.Hosts, " and "), o.Host)
	}
	checks := spark.PreflightChecks{Token: cl, GPU: o.GPU, Disk: o.Disk}
	if checks.GPU == nil {
		checks.GPU = spark.NvidiaSMIApps{}
	}
	if checks.Disk == nil {
		checks.Disk = spark.StatfsDisk{}
	}
	if o.Interconnect != "" {
		checks.Interconnect = ShellCheck(o.Interconnect)
	}
	if o.ServiceReleased != "" {
		checks.Service = ShellCheck(o.ServiceReleased)
	}
	return spark.Preflight(ctx, checks, spark.PreflightRequest{Host: o.Host, Token: r.Token, Topology: r.Topology,
		WorkDir: o.WorkDir, MinFree: o.MinFree, ServiceHost: o.ServiceHost})
}

// ShellCheck is a preflight check made of a shell command, bounded to two
// minutes: exit status 0 passes. It is both an interconnect and a
// service-released check.
type ShellCheck string

func (c ShellCheck) run(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := shell.Run(ctx, string(c))
	if err != nil {
		return fmt.Errorf("%q: %w: %s", string(c), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Check runs the command as the interconnect check.
func (c ShellCheck) Check(ctx context.Context) error { return c.run(ctx) }

// Released runs the command as the service-released check.
func (c ShellCheck) Released(ctx context.Context) error { return c.run(ctx) }
