package spark

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// PreflightChecks are the runner-side checks before a job starts. Each is
// an interface with a real implementation where one is possible and a fake
// in sparktest.
type PreflightChecks struct {
	Token        TokenChecker    // the controller's fencing check
	GPU          GPUProcesses    // competing GPU processes
	Disk         DiskSpace       // free space in the work directory
	Interconnect Interconnect    // pair runs only; nil fails a pair
	Service      ServiceReleased // the service host only
}

// TokenChecker is the controller's side of a preflight: it confirms a
// lease's fencing token and says what it knows of the host. *Controller
// and *APIClient implement it.
type TokenChecker interface {
	CheckToken(ctx context.Context, host string, token int64) error
	HostState(ctx context.Context, host string) (HostState, error)
}

// HostState is what the controller knows of a host, for its preflight.
type HostState struct {
	Online  bool `json:"online"`  // a fresh heartbeat
	Service bool `json:"service"` // the fleet configuration puts the resident service here
	// Mode, Lease and Ended are what the host agent acts on: the active
	// lease it runs, or the ended one it cleans up after (Cleaning).
	Mode  Mode   `json:"mode"`
	Lease string `json:"lease,omitempty"`
	Ended string `json:"ended,omitempty"`
}

// GPUProcesses lists compute processes on the GPU.
type GPUProcesses interface {
	ComputeApps(ctx context.Context) ([]string, error)
}

// DiskSpace reports free bytes at a path.
type DiskSpace interface {
	Free(path string) (uint64, error)
}

// Interconnect checks the link between the hosts of a pair.
type Interconnect interface {
	Check(ctx context.Context) error
}

// ServiceReleased confirms the resident service holds nothing on this host.
type ServiceReleased interface {
	Released(ctx context.Context) error
}

// PreflightRequest is the job about to start.
type PreflightRequest struct {
	Host     string
	Token    int64
	Topology Topology
	WorkDir  string
	MinFree  uint64 // bytes
	// ServiceHost asks for the service-released check even where the
	// controller's fleet does not put the service (it is asked for
	// wherever the fleet does, whatever this says).
	ServiceHost bool
}

// PreflightError names the failed check.
type PreflightError struct {
	Check string
	Err   error
}

// Error names the preflight check that rejected the machine and why.
func (e *PreflightError) Error() string {
	return fmt.Sprintf("spark: preflight %s failed: %v", e.Check, e.Err)
}

// Unwrap returns the cause.
func (e *PreflightError) Unwrap() error { return e.Err }

// ErrPreflight is matched by every preflight refusal.
var ErrPreflight = errors.New("spark: preflight refused")

// Is matches ErrPreflight.
func (e *PreflightError) Is(target error) bool { return target == ErrPreflight }

// Preflight rejects a stale fencing token or unknown resource state, a
// competing GPU process, insufficient disk, a failed interconnect for a pair
// run, and a resident service that has not released the host. A missing
// check fails closed.
func Preflight(ctx context.Context, c PreflightChecks, r PreflightRequest) error {
	fail := func(check string, err error) error { return &PreflightError{check, err} }
	if c.Token == nil {
		return fail("fencing", errors.New("no fencing check is configured"))
	}
	if err := c.Token.CheckToken(ctx, r.Host, r.Token); err != nil {
		return fail("fencing", err)
	}
	// What the host is comes from the controller, never from the
	// runner's environment, which fails open when unset.
	st, err := c.Token.HostState(ctx, r.Host)
	if err != nil {
		return fail("host-state", err)
	}
	if !st.Online {
		return fail("host-online", fmt.Errorf("the controller sees %s offline (no fresh heartbeat): it admits nothing there", r.Host))
	}
	if c.GPU == nil {
		return fail("gpu-processes", errors.New("no GPU process check is configured"))
	}
	apps, err := c.GPU.ComputeApps(ctx)
	if err != nil {
		return fail("gpu-processes", fmt.Errorf("cannot tell what runs on the GPU: %w", err))
	}
	if len(apps) > 0 {
		return fail("gpu-processes", fmt.Errorf("competing GPU processes: %s", strings.Join(apps, ", ")))
	}
	if c.Disk == nil {
		return fail("disk", errors.New("no disk check is configured"))
	}
	free, err := c.Disk.Free(r.WorkDir)
	if err != nil {
		return fail("disk", err)
	}
	if free < r.MinFree {
		return fail("disk", fmt.Errorf("%s has %d MiB free, the job needs %d MiB", r.WorkDir, free>>20, r.MinFree>>20))
	}
	if r.Topology == Pair {
		if c.Interconnect == nil {
			return fail("interconnect", errors.New("a pair run needs an interconnect check"))
		}
		if err := c.Interconnect.Check(ctx); err != nil {
			return fail("interconnect", err)
		}
	}
	if r.ServiceHost || st.Service {
		if c.Service == nil {
			return fail("service-released", errors.New("no check that the resident service released the host"))
		}
		if err := c.Service.Released(ctx); err != nil {
			return fail("service-released", err)
		}
	}
	return nil
}

// NvidiaSMIApps lists compute processes with
// nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader.
type NvidiaSMIApps struct {
	// Path is the nvidia-smi to run (default: nvidia-smi on PATH).
	Path string
}

// ComputeApps runs nvidia-smi.
func (n NvidiaSMIApps) ComputeApps(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	path := n.Path
	if path == "" {
		path = "nvidia-smi"
	}
	out, err := exec.CommandContext(ctx, path, "--query-compute-apps=pid,process_name", "--format=csv,noheader").Output()
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi: %w", err)
	}
	return ParseComputeApps(out), nil
}

// ParseComputeApps reads nvidia-smi's compute-apps CSV.
func ParseComputeApps(out []byte) []string {
	var apps []string
	for _, line := range bytes.Split(out, []byte("\n")) {
		if s := strings.TrimSpace(string(line)); s != "" && !strings.HasPrefix(s, "No running") {
			apps = append(apps, s)
		}
	}
	return apps
}

// StatfsDisk reports free space with statfs(2) (Linux, macOS, FreeBSD;
// elsewhere Free fails, so the preflight fails closed).
type StatfsDisk struct{}
