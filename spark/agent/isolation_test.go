//go:build unix

package agent_test

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/agent"
)

// The runner's user's processes are found by their real user, whatever
// environment they kept; AnyOf lists each process once.
func TestProcUser_FindsEveryProcessOfTheRunnersUser(t *testing.T) {
	root := t.TempDir()
	for pid, status := range map[string]string{
		"201": "Name:\tsleep\nUid:\t1001\t1001\t1001\t1001\n",
		"202": "Name:\tsh\nUid:\t0\t1001\t0\t0\n", // effective 1001, real root: not the runner's
		"203": "Name:\tsh\nUid:\t1001\t0\t0\t0\n",
		"204": "Name:\tbash\nUid:\t10010\t10010\t10010\t10010\n",
		"205": "Name:\tsleep\nState:\tZ (zombie)\nUid:\t1001\t1001\t1001\t1001\n", // ended, not reaped
	} {
		os.MkdirAll(filepath.Join(root, pid), 0o755)
		os.WriteFile(filepath.Join(root, pid, "status"), []byte(status), 0o600)
	}
	os.WriteFile(filepath.Join(root, "203", "environ"), []byte("SPARK_LEASE=r1\x00"), 0o600)
	got, err := agent.AnyOf{agent.ProcEnviron{Root: root}, agent.ProcUser{Root: root, UID: 1001}}.Of("r1")
	slices.Sort(got)
	if err != nil || !slices.Equal(got, []int{201, 203}) {
		t.Errorf("the runner user's and the lease's processes: %v %v, want [201 203]", got, err)
	}
}

// One agent per host: a second agent with the host's work root does not
// start, and its ID survives a restart, so a restarted agent takes its
// lease's runner config again.
func TestAgent_OneAgentPerHostAndTheSameAgentAfterARestart(t *testing.T) {
	_, _, host, lease := leasedHost(t)
	dir := t.TempDir()
	runner, fifo := fifoRunner(t, dir)
	cfg := agent.Config{Client: host, Host: "spark-2", GPU: gpu{}, Disk: disk(1 << 40), WorkRoot: filepath.Join(dir, "work"),
		RunnerCmd: runner, Every: 10 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- agent.Run(ctx, cfg) }()
	if _, err := os.ReadFile(fifo); err != nil { // its runner started
		t.Fatal(err)
	}
	if err := agent.Run(context.Background(), cfg); !errors.Is(err, agent.ErrConfig) {
		t.Errorf("a second agent on the host's work root: %v, want ErrConfig", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	restarted := make(chan agent.Event, 16)
	cfg.OnEvent = func(e agent.Event) {
		if e.Kind == "runner-started" || e.Kind == "runner-config" {
			restarted <- e
		}
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	go agent.Run(ctx2, cfg)
	if _, err := os.ReadFile(fifo); err != nil {
		t.Fatal(err)
	}
	if e := <-restarted; e.Kind != "runner-started" || e.Err != nil || e.Lease != lease {
		t.Errorf("the restarted agent: %s %v for %s, want its lease's runner started again", e.Kind, e.Err, e.Lease)
	}
}

// With a runner user of its own, every process of that user is stopped
// at cleanup, one that cleared its environment and left the runner's
// process group too, and none runs into the next lease; the runner's own
// work folder is removed. (Root only: the agent switches users.)
func TestCleanup_NothingOfTheRunnersUserOutlivesTheLease(t *testing.T) {
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("switching the runner's user needs root on Linux")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, ops, host, lease := leasedHost(t)
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755) // the runner's user walks to its runner
	os.Chmod(dir, 0o755)
	pidFile := filepath.Join(dir, "escaped")
	runnerDir := filepath.Join(dir, "actions-runner")
	os.MkdirAll(filepath.Join(runnerDir, "_work", "repo"), 0o755)
	runner := filepath.Join(runnerDir, "run.sh")
	// The escapee: a new session, an empty environment.
	os.WriteFile(runner, []byte("#!/bin/sh\nsetsid env -i /bin/sh -c 'echo $$ > \"$0\"; exec sleep 300' "+pidFile+" </dev/null >/dev/null 2>&1 &\nexec sleep 300\n"), 0o755)
	os.WriteFile(pidFile, nil, 0o600)
	os.Chmod(pidFile, 0o666) // the escapee, as the runner's user, writes its PID
	events := make(chan agent.Event, 1024)
	next := func() agent.Event {
		t.Helper()
		select {
		case e := <-events:
			return e
		case <-ctx.Done():
			t.Fatalf("no agent event: %v", ctx.Err())
			return agent.Event{}
		}
	}
	go agent.Run(ctx, agent.Config{Client: host, Host: "spark-2", GPU: gpu{}, Disk: disk(1 << 40), WorkRoot: filepath.Join(dir, "work"),
		RunnerCmd: runner, RunnerUser: "nobody", Every: 10 * time.Millisecond, OnEvent: func(e agent.Event) { events <- e }})
	var pid int
	for pid == 0 {
		e := next()
		if e.Kind == "runner-started" && e.Err != nil || e.Kind == "preflight-failed" {
			t.Fatalf("%s: %v", e.Kind, e.Err)
		}
		if data, _ := os.ReadFile(pidFile); len(strings.TrimSpace(string(data))) > 0 {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(data)))
		}
	}
	defer syscall.Kill(pid, syscall.SIGKILL)
	st, _ := ops.Status(ctx, lease)
	if err := ops.Release(ctx, lease, st.Request.Token); err != nil {
		t.Fatal(err)
	}
	for {
		e := next()
		if e.Kind == "cleaned" && e.Err == nil {
			break
		}
	}
	if alive(pid) {
		t.Errorf("process %d of the runner's user, with no environment and a session of its own, outlived the cleanup", pid)
	}
	if _, err := os.Stat(filepath.Join(runnerDir, "_work")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the runner's work folder survived the cleanup: %v", err)
	}
	if hs, _ := c.HostState(ctx, "spark-2"); hs.Mode != spark.Idle {
		t.Errorf("after the cleanup the host is %s", hs.Mode)
	}
}

// escapees are C programs a hostile job leaves behind: each opens the FIFO
// in argv[1] for writing and keeps it open while any part of it runs.
var escapees = map[string]string{
	// Its main thread exits alone: the process is a zombie whose other
	// thread runs on.
	"half-dead": `#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>
#include <sys/syscall.h>
static void *spin(void *a) { for (;;) pause(); return a; }
int main(int argc, char **argv) {
	int fd = open(argv[1], O_WRONLY); write(fd, "up\n", 3);
	pthread_t t; pthread_create(&t, 0, spin, 0);
	syscall(SYS_exit, 0);
}`,
	// It forks and exits without pause, so its PID changes faster than
	// /proc can be read.
	"hopper": `#include <fcntl.h>
#include <unistd.h>
int main(int argc, char **argv) {
	int fd = open(argv[1], O_WRONLY); write(fd, "up\n", 3);
	for (;;) if (fork() != 0) _exit(0);
}`,
}

// Nothing a job leaves behind survives the cleanup of a runner user's
// lease: a process whose main thread exited alone, or one that changes
// its PID faster than /proc is read, is stopped too, before the cleanup
// is acknowledged. (Root with a C compiler: the agent switches users.)
func TestCleanup_NoEscapeeOfTheRunnersUserSurvives(t *testing.T) {
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("switching the runner's user needs root on Linux")
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler for the escapees")
	}
	for name, src := range escapees {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, ops, host, lease := leasedHost(t)
			dir := t.TempDir()
			os.Chmod(filepath.Dir(dir), 0o755)
			os.Chmod(dir, 0o755)
			bin := filepath.Join(dir, name)
			os.WriteFile(bin+".c", []byte(src), 0o644)
			if out, err := exec.Command(cc, "-pthread", "-o", bin, bin+".c").CombinedOutput(); err != nil {
				t.Skipf("cc: %v: %s", err, out)
			}
			fifo := filepath.Join(dir, "held")
			if err := syscall.Mkfifo(fifo, 0o666); err != nil {
				t.Fatal(err)
			}
			os.Chmod(fifo, 0o666)
			runner := filepath.Join(dir, "run.sh")
			os.WriteFile(runner, []byte("#!/bin/sh\nsetsid env -i "+bin+" "+fifo+" </dev/null >/dev/null 2>&1 &\nexec sleep 300\n"), 0o755)
			up, gone := make(chan struct{}), make(chan struct{})
			go func() { // EOF: no process holds the FIFO open any more
				f, err := os.Open(fifo)
				if err != nil {
					return
				}
				defer f.Close()
				buf := make([]byte, 3)
				if _, err := f.Read(buf); err == nil {
					close(up)
				}
				io.Copy(io.Discard, f)
				close(gone)
			}()
			events := make(chan agent.Event, 1024)
			go agent.Run(ctx, agent.Config{Client: host, Host: "spark-2", GPU: gpu{}, Disk: disk(1 << 40), WorkRoot: filepath.Join(dir, "work"),
				RunnerCmd: runner, RunnerUser: "nobody", Every: 10 * time.Millisecond, OnEvent: func(e agent.Event) { events <- e }})
			select {
			case <-up:
			case <-ctx.Done():
				t.Fatal("the escapee never started")
			}
			st, _ := ops.Status(ctx, lease)
			if err := ops.Release(ctx, lease, st.Request.Token); err != nil {
				t.Fatal(err)
			}
			for acked := false; !acked; {
				select {
				case e := <-events:
					acked = e.Kind == "cleaned" && e.Err == nil
				case <-ctx.Done():
					t.Fatal("the cleanup was never acknowledged")
				}
			}
			select {
			case <-gone:
			case <-ctx.Done():
				t.Errorf("the %s escapee still runs after the cleanup was acknowledged", name)
			}
		})
	}
}
