package agent

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gpugate/gpugate/spark"
)

// ErrLeftovers means files of the runner's user remain after a lease:
// the cleanup is not acknowledged, and the host takes no work until they
// are gone (or an operator clears it).
var ErrLeftovers = errors.New("agent: files of the runner's user outlive the lease")

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
// dstack run carries (a run's container processes are the host's too). A
// process that clears its environment and leaves the runner's process
// group escapes it: with a runner user of its own, ProcUser finds those
// too. Processes the agent may not read are skipped (run the agent as
// root to read them all).
type ProcEnviron struct{ Root string }

// Of lists lease's processes.
func (p ProcEnviron) Of(lease string) ([]int, error) {
	markers := [][]byte{[]byte("SPARK_LEASE=" + lease + "\x00"), []byte("SPARK_LEASE_ID=" + lease + "\x00")}
	return scanEnviron(p.Root, func(env []byte) bool {
		return slices.ContainsFunc(markers, func(m []byte) bool { return hasVar(env, m) })
	})
}

// hasVar reports whether env (a NUL-separated environment) has a
// variable starting with prefix ("NAME=..." or more).
func hasVar(env, prefix []byte) bool {
	return bytes.HasPrefix(env, prefix) || bytes.Contains(env, append([]byte{0}, prefix...))
}

// scanEnviron lists the processes in root (default "/proc"), but this
// one, whose environment (NUL-separated) match accepts.
func scanEnviron(root string, match func(env []byte) bool) ([]int, error) {
	root = cmp.Or(root, "/proc")
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("%w: list processes in %s: %w", ErrProcesses, root, err)
	}
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
		if match(env) {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// workProcs finds every process of any lease whose runner this host's
// agent started in a directory under workRoot (its SPARK_WORK_DIR): what
// an agent that was killed left running.
type workProcs struct{ root, workRoot string }

func (w workProcs) Of(string) ([]int, error) {
	marker := []byte("SPARK_WORK_DIR=" + filepath.Clean(w.workRoot) + string(filepath.Separator))
	return scanEnviron(w.root, func(env []byte) bool { return hasVar(env, marker) })
}

// stopLease stops every process of lease that procs finds and reports
// ErrProcesses when any remains.
func stopLease(procs LeaseProcesses, lease string) error {
	// What can be killed in one step is, first: a process that forks and
	// exits faster than /proc is read is never caught by its PID.
	if k, ok := procs.(allKiller); ok {
		k.killAll()
	}
	// A killed process takes a moment to exit, and one caught mid-exec
	// may show no environment: look until two looks 50 ms apart find
	// none, killing what each finds, and after 20 looks say what
	// survived. A killed process counts until no thread of it runs (its
	// environment goes before it has ended), and only while its PID is
	// still that process's (the same start time): one that took the PID
	// since is never signalled.
	killed := map[int]string{} // PID: start time
	for try, quiet := 0, 0; quiet < 2; try++ {
		pids, err := procs.Of(lease)
		if err != nil {
			return err
		}
		for pid, start := range killed {
			task := filepath.Join("/proc", strconv.Itoa(pid), "task")
			if !slices.Contains(pids, pid) && startTime(pid) == start && liveThread(task) {
				pids = append(pids, pid)
			}
		}
		if try >= 20 && len(pids) > 0 {
			return fmt.Errorf("%w: %d process(es) of lease %s still run after %d looks and SIGKILL (pids %v): stop them, or the host stays out of service", ErrProcesses, len(pids), lease, try+1, pids)
		}
		quiet++
		for _, pid := range pids {
			quiet = 0
			if _, ok := killed[pid]; !ok {
				killed[pid] = startTime(pid)
			}
			if p, err := os.FindProcess(pid); err == nil {
				_ = p.Signal(syscall.SIGKILL)
			}
		}
		if quiet < 2 {
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// startTime is pid's start time (field 22 of /proc/<pid>/stat), which
// tells a process from one that took its PID later; "" when unknown.
func startTime(pid int) string {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return ""
	}
	// After the command, in parentheses, which may hold spaces and ")".
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return ""
	}
	if f := strings.Fields(string(stat[end+1:])); len(f) > 19 {
		return f[19]
	}
	return ""
}

// allKiller is LeaseProcesses that can also stop every process it finds
// in one step.
type allKiller interface{ killAll() }

// ProcUser is LeaseProcesses read from Linux's /proc (Root, default
// "/proc"): every process whose real user is UID, the runner's user,
// which runs nothing but jobs, whatever lease it names or environment it
// kept. A zombie (ended, not yet reaped) is not running, unless one of
// its threads is. At cleanup it first kills them all in one step.
type ProcUser struct {
	Root     string
	UID, GID uint32 // the user, and the group its killing helper runs as
}

// Of lists the user's processes.
func (p ProcUser) Of(string) ([]int, error) {
	root := cmp.Or(p.Root, "/proc")
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("%w: list processes in %s: %w", ErrProcesses, root, err)
	}
	want := strconv.FormatUint(uint64(p.UID), 10)
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		status, err := os.ReadFile(filepath.Join(root, e.Name(), "status"))
		if err != nil {
			continue // gone already
		}
		ended, mine := false, false
		for _, line := range strings.Split(string(status), "\n") {
			if rest, ok := strings.CutPrefix(line, "State:"); ok {
				st := strings.TrimSpace(rest)
				ended = strings.HasPrefix(st, "Z") || strings.HasPrefix(st, "X") // a zombie runs nothing
			}
			if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
				f := strings.Fields(rest)
				mine = len(f) > 0 && f[0] == want
			}
		}
		if mine && (!ended || liveThread(filepath.Join(root, e.Name(), "task"))) {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// liveThread reports whether a thread in task (a /proc/<pid>/task
// directory) is not a zombie: a process whose main thread exited alone
// runs on in its other threads.
func liveThread(task string) bool {
	threads, _ := os.ReadDir(task)
	for _, th := range threads {
		status, err := os.ReadFile(filepath.Join(task, th.Name(), "status"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(status), "\n") {
			if rest, ok := strings.CutPrefix(line, "State:"); ok {
				if st := strings.TrimSpace(rest); !strings.HasPrefix(st, "Z") && !strings.HasPrefix(st, "X") {
					return true
				}
			}
		}
	}
	return false
}

// killAll kills every process of the user in one step: a helper running
// as the user signals them all (kill -1), again until none is left.
func (p ProcUser) killAll() { killUser(p.UID, p.GID) }

// AnyOf is every process any of its LeaseProcesses finds.
type AnyOf []LeaseProcesses

func (a AnyOf) killAll() {
	for _, p := range a {
		if k, ok := p.(allKiller); ok {
			k.killAll()
		}
	}
}

// Of lists them, each once.
func (a AnyOf) Of(lease string) ([]int, error) {
	seen := map[int]bool{}
	var pids []int
	for _, p := range a {
		found, err := p.Of(lease)
		if err != nil {
			return nil, err
		}
		for _, pid := range found {
			if !seen[pid] {
				seen[pid] = true
				pids = append(pids, pid)
			}
		}
	}
	return pids, nil
}

// noProcesses finds none: where there is no /proc, the runner's process
// group is all the agent stops.
type noProcesses struct{}

func (noProcesses) Of(string) ([]int, error) { return nil, nil }

// agentID is the ID of host's agent on this machine, kept in
// workRoot/.agent-id as "HOST MACHINE-ID ID": it is made anew when there
// is none, or when the file names another host or machine (a disk image
// cloned from another host's: two machines with one ID could both take a
// lease's config).
func agentID(workRoot, host string) (string, error) {
	path := filepath.Join(workRoot, ".agent-id")
	machine := "unknown"
	if data, err := os.ReadFile("/etc/machine-id"); err == nil && len(bytes.TrimSpace(data)) > 0 {
		machine = string(bytes.TrimSpace(data))
	}
	if data, err := os.ReadFile(path); err == nil {
		if f := strings.Fields(string(data)); len(f) == 3 && f[0] == host && f[1] == machine {
			return f[2], nil
		}
	}
	id := spark.NewToken()[:16]
	if err := os.WriteFile(path, []byte(host+" "+machine+" "+id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("%w: the agent's ID: %w", ErrConfig, err)
	}
	return id, nil
}

// shorten keeps a path short enough to read in an error: a hostile job's
// tree can be thousands of levels deep.
func shorten(path string) string {
	const most = 160
	if len(path) <= most {
		return path
	}
	return path[:most/2] + "…" + path[len(path)-most/2:]
}
