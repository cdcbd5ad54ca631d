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

// aclOf reports whether path has an ACL beyond its mode bits: an access
// ACL, which may let another user write it, or a default one, which
// passes that on to what is made in it later.
func aclOf(path string) (bool, error) {
	for _, name := range []string{"system.posix_acl_access", "system.posix_acl_default"} {
		n, err := syscall.Getxattr(path, name, nil)
		switch {
		case err == nil && n > 0:
			return true, nil
		case err == nil, errors.Is(err, syscall.ENODATA), errors.Is(err, syscall.ENOTSUP):
		default:
			return false, fmt.Errorf("read the ACL of %s: %w", path, err)
		}
	}
	return false, nil
}
