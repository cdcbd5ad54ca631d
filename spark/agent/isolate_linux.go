package agent

import (
	"errors"
	"fmt"
	"os/exec"
	"syscall"
)

// isolate starts cmd, a job's runner as a user of its own, in PID and IPC
// namespaces of its own: when the runner ends or is killed, the kernel
// kills every process of the job with it, which no process of the job can
// escape or stop (it cannot kill the agent's killer, nor leave the
// namespace by forking), and its System V and POSIX IPC objects go with
// the namespace. Needs root (the agent's, when it has a runner user).
func isolate(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC
}

// aclOf reports whether path has an access ACL beyond its mode bits,
// which may let another user write it.
func aclOf(path string) (bool, error) {
	n, err := syscall.Getxattr(path, "system.posix_acl_access", nil)
	switch {
	case err == nil:
		return n > 0, nil
	case errors.Is(err, syscall.ENODATA), errors.Is(err, syscall.ENOTSUP):
		return false, nil
	}
	return false, fmt.Errorf("read the ACL of %s: %w", path, err)
}
