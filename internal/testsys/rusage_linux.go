//go:build linux

package testsys

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
)

// MaxRSS is this process's peak resident memory in bytes: VmHWM, the high
// water mark of its own address space, or -1 when it cannot be read.
// (getrusage's ru_maxrss is no use in a child: Linux carries it across
// execve, and Go's os/exec starts a child sharing the parent's memory, so
// a child reports its parent's peak.)
func MaxRSS() int64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range bytes.Split(status, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
			kb, err := strconv.ParseInt(string(bytes.TrimSuffix(bytes.TrimSpace(v), []byte(" kB"))), 10, 64)
			if err != nil {
				return -1
			}
			return kb << 10
		}
	}
	return -1
}

// CPUTime is this process's user and system CPU time so far.
func CPUTime() time.Duration { return rusageCPU(syscall.RUSAGE_SELF) }

// ChildrenCPUTime is the user and system CPU time of its waited-for
// children so far.
func ChildrenCPUTime() time.Duration { return rusageCPU(syscall.RUSAGE_CHILDREN) }

func rusageCPU(who int) time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(who, &ru) != nil {
		return -1
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// SyncFS writes every dirty page out (sync(2)), so that a timed phase
// does not pay for writing back what an earlier one left.
func SyncFS() { syscall.Sync() }
