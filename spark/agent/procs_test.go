//go:build unix

package agent_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/agent"
)

// alive reports whether pid runs (a zombie has ended).
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}

// A process of the job that left the runner's process group (setsid, a
// daemon) is stopped at cleanup too: the agent acknowledges only once no
// process of the lease remains.
func TestCleanup_NoProcessOfTheLeaseSurvivesItsCleanup(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("lease processes are found through Linux's /proc")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, ops, hostCl, lease := leasedHost(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "escaped")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	runner := filepath.Join(dir, "run.sh")
	os.WriteFile(runner, []byte("#!/bin/sh\nsetsid sleep 300 </dev/null >/dev/null 2>&1 &\necho $! > \"$FAKE_ESCAPED\"\nexec sleep 300\n"), 0o755)

	events := make(chan agent.Event, 64)
	var escaped atomic.Int64
	cleanedWhileAlive := make(chan bool, 1)
	go agent.Run(ctx, agent.Config{Client: hostCl, Host: "spark-2", GPU: gpu{}, Disk: disk(1 << 40),
		WorkRoot: filepath.Join(dir, "work"), RunnerCmd: runner, RunnerEnv: []string{"FAKE_ESCAPED=" + fifo},
		Every: 10 * time.Millisecond, OnEvent: func(e agent.Event) {
			if e.Kind == "cleaned" && e.Err == nil {
				cleanedWhileAlive <- alive(int(escaped.Load()))
			}
			events <- e
		}})
	data, err := os.ReadFile(fifo) // blocks until the runner started its escapee
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || !alive(pid) {
		t.Fatalf("the escapee %q is not running: %v", data, err)
	}
	escaped.Store(int64(pid))
	defer syscall.Kill(pid, syscall.SIGKILL)
	st, _ := ops.Status(ctx, lease)
	if err := ops.Release(ctx, lease, st.Request.Token); err != nil {
		t.Fatal(err)
	}
	if <-cleanedWhileAlive {
		t.Errorf("the cleanup was acknowledged while process %d of the lease still ran", pid)
	}
	if alive(pid) {
		t.Errorf("process %d of the lease survived its cleanup", pid)
	}
	if hs, _ := c.HostState(ctx, "spark-2"); hs.Mode != spark.Idle {
		t.Errorf("after the acknowledged cleanup the host is %s", hs.Mode)
	}
}

// A lease's processes are those whose environment holds exactly its
// SPARK_LEASE entry, first or later; another lease whose ID starts the
// same is not it.
func TestProcEnviron_FindsTheLeasesProcessesOnly(t *testing.T) {
	root := t.TempDir()
	for pid, env := range map[string]string{
		"101":  "SPARK_LEASE=r7\x00HOME=/root\x00",
		"102":  "PATH=/bin\x00SPARK_LEASE=r7\x00",
		"103":  "SPARK_LEASE=r70\x00",
		"104":  "XSPARK_LEASE=r7\x00",
		"105":  "",
		"self": "SPARK_LEASE=r7\x00",
	} {
		os.MkdirAll(filepath.Join(root, pid), 0o755)
		os.WriteFile(filepath.Join(root, pid, "environ"), []byte(env), 0o600)
	}
	got, err := agent.ProcEnviron{Root: root}.Of("r7")
	slices.Sort(got)
	if err != nil || !slices.Equal(got, []int{101, 102}) {
		t.Errorf("lease r7's processes: %v %v, want [101 102]", got, err)
	}
	if _, err := (agent.ProcEnviron{Root: filepath.Join(root, "missing")}).Of("r7"); !errors.Is(err, agent.ErrProcesses) {
		t.Errorf("an unreadable process list: %v, want ErrProcesses", err)
	}
}
