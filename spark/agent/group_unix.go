//go:build unix

package agent

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// newGroup starts cmd in a process group of its own.
func newGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// killGroup kills cmd's whole process group: what the job started too.
func killGroup(cmd *exec.Cmd) { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }

// asUser makes cmd run as the runner's user r, which owns dir.
func asUser(cmd *exec.Cmd, dir string, r runnerIDs) error {
	if err := os.Chown(dir, int(r.uid), int(r.gid)); err != nil {
		return fmt.Errorf("agent: give the work directory to runner user %d: %w", r.uid, err)
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: r.uid, Gid: r.gid}
	return nil
}

// lookupUser is user name's IDs.
func lookupUser(name string) (uid, gid uint32, err error) {
	u, err := user.Lookup(name)
	if err != nil {
		return 0, 0, fmt.Errorf("%w: runner user %q: %w", ErrConfig, name, err)
	}
	id, err1 := strconv.ParseUint(u.Uid, 10, 32)
	g, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("%w: runner user %q has IDs %s:%s, not numbers", ErrConfig, name, u.Uid, u.Gid)
	}
	return uint32(id), uint32(g), nil
}

// claimHost makes this process the host's one agent: it holds an
// exclusive lock on workRoot/.agent.lock (a second agent for the host
// fails to start) and returns the agent's ID, kept in workRoot/.agent-id
// so that a restarted agent is the same agent to the controller.
func claimHost(workRoot, host string) (id string, unlock func(), err error) {
	lock, err := os.OpenFile(filepath.Join(workRoot, ".agent.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", nil, fmt.Errorf("%w: the agent's lock: %w", ErrConfig, err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return "", nil, fmt.Errorf("%w: another agent runs on this host (it holds %s): run one agent per host", ErrConfig, lock.Name())
	}
	id, err = agentID(workRoot, host)
	if err != nil {
		lock.Close()
		return "", nil, err
	}
	return id, func() { lock.Close() }, nil
}

// killUser kills every process of user uid: a shell running as uid sends
// SIGKILL to every process it may signal (kill -1: that user's, but
// itself), again until none is left, at most 100 times (a zombie no one
// reaps still counts as signalled).
func killUser(uid, gid uint32) {
	cmd := exec.Command("/bin/sh", "-c", `n=0; while kill -9 -1 2>/dev/null; do n=$((n+1)); [ "$n" -lt 100 ] || exit 1; done`)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	_ = cmd.Run()
}
