package agent

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// LeaseProcesses finds the processes of a lease's job that still run on
// the host. The agent stops the runner's whole process group first; this
// finds what left the group (a daemon, a setsid child) so that no process
// of the lease survives its cleanup.
type LeaseProcesses interface {
	Of(lease string) ([]int, error)
}

// ErrProcesses means the processes of a lease could not be listed, or
// some could not be stopped: the cleanup is not acknowledged, and the
// host takes no work until it is (or an operator clears it).
var ErrProcesses = errors.New("agent: processes of the lease remain")

// ProcEnviron is LeaseProcesses read from Linux's /proc (Root, default
// "/proc"): every process whose environment holds SPARK_LEASE=<lease>,
// which the agent gives the runner and every process it starts
// inherits, or SPARK_LEASE_ID=<lease>, which every process of the lease's
// dstack run carries (a run's container processes are the host's too). A process that clears its environment and leaves the runner's
// process group escapes it: run the runner as a user of its own to
// contain those too. Processes the agent may not read are not the job's
// (the job runs as the agent's user).
type ProcEnviron struct{ Root string }

// Of lists lease's processes.
func (p ProcEnviron) Of(lease string) ([]int, error) {
	root := p.Root
	if root == "" {
		root = "/proc"
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("%w: list processes in %s: %w", ErrProcesses, root, err)
	}
	markers := [][]byte{[]byte("SPARK_LEASE=" + lease + "\x00"), []byte("SPARK_LEASE_ID=" + lease + "\x00")}
	self := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile(filepath.Join(root, e.Name(), "environ"))
		if err != nil {
			continue // gone already, or another user's
		}
		for _, m := range markers {
			if bytes.HasPrefix(env, m) || bytes.Contains(env, append([]byte{0}, m...)) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids, nil
}

// stopLease stops every process of lease that procs finds and reports
// ErrProcesses when any remains.
func stopLease(procs LeaseProcesses, lease string) error {
	pids, err := procs.Of(lease)
	if err != nil {
		return err
	}
	for _, pid := range pids {
		if p, err := os.FindProcess(pid); err == nil {
			_ = p.Signal(syscall.SIGKILL)
		}
	}
	if len(pids) == 0 {
		return nil
	}
	left, err := procs.Of(lease)
	if err != nil {
		return err
	}
	if len(left) > 0 {
		return fmt.Errorf("%w: %d process(es) of lease %s still run after SIGKILL (pids %v): stop them, or the host stays out of service", ErrProcesses, len(left), lease, left)
	}
	return nil
}

// noProcesses finds none: where there is no /proc, the runner's process
// group is all the agent stops.
type noProcesses struct{}

func (noProcesses) Of(string) ([]int, error) { return nil, nil }
