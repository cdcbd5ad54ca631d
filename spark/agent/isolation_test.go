//go:build unix

package agent_test

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"os/user"
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
// process group too, and none runs into the next lease; and nothing that
// user wrote outlives the lease: not its copy of the runner (the install
// itself unchanged), its home, its temporary directory or what it owns
// in a shared scratch directory. (Root only: the agent switches users.)
func TestCleanup_NothingOfTheRunnersUserOutlivesTheLease(t *testing.T) {
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("switching the runner's user needs root on Linux")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, ops, host, lease := leasedHost(t)
	dir := walkableDir(t)
	pidFile := filepath.Join(dir, "escaped")
	scratch := filepath.Join(dir, "scratch")
	os.Mkdir(scratch, 0o1777)
	os.Chmod(scratch, os.ModeSticky|0o777)
	os.WriteFile(filepath.Join(scratch, "roots"), []byte("kept"), 0o644)
	runnerDir := filepath.Join(dir, "actions-runner")
	os.MkdirAll(runnerDir, 0o755)
	runner := filepath.Join(runnerDir, "run.sh")
	// The escapee: a new session, an empty environment; it writes its PID
	// as the host sees it (the job's own namespace numbers it otherwise).
	// Then what a hostile job writes for the next one.
	script := "#!/bin/sh\nsetsid env -i /bin/sh -c 'read -r p rest < /proc/self/stat; echo $p > \"$0\"; exec sleep 300' " + pidFile + " </dev/null >/dev/null 2>&1 &\n" +
		`own=$(dirname "$0")
mkdir -p "$own/_work/repo" "$own/_diag" && echo poison > "$own/_work/repo/hook"
cp "$0" "$own/x" && rm -f "$0" && { cat "$own/x"; echo 'echo poisoned'; } > "$0"
echo poison > "$HOME/.bashrc"; echo poison > "$TMPDIR/t"
mkdir -p "$SCRATCH/d/e" && echo poison > "$SCRATCH/d/e/f" && echo poison > "$SCRATCH/g"
echo written > "$SCRATCH/done"
exec sleep 300
`
	os.WriteFile(runner, []byte(script), 0o755)
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
		RunnerCmd: runner, RunnerUser: "nobody", Scratch: []string{scratch}, RunnerEnv: []string{"SCRATCH=" + scratch},
		Every: 10 * time.Millisecond, OnEvent: func(e agent.Event) { events <- e }})
	var pid int
	for written := false; pid == 0 || !written; {
		e := next()
		if e.Kind == "runner-started" && e.Err != nil || e.Kind == "preflight-failed" {
			t.Fatalf("%s: %v", e.Kind, e.Err)
		}
		if data, _ := os.ReadFile(pidFile); len(strings.TrimSpace(string(data))) > 0 {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(data)))
		}
		_, err := os.Stat(filepath.Join(scratch, "done"))
		written = err == nil
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
	if data, _ := os.ReadFile(runner); string(data) != script {
		t.Errorf("the runner's install was changed by a job: %q", data)
	}
	for _, path := range []string{filepath.Join(runnerDir, "_work"), filepath.Join(runnerDir, "_diag"), filepath.Join(dir, "work", lease),
		filepath.Join(scratch, "d"), filepath.Join(scratch, "g"), filepath.Join(scratch, "done")} {
		if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s survived the cleanup: %v", path, err)
		}
	}
	if _, err := os.Stat(filepath.Join(scratch, "roots")); err != nil {
		t.Errorf("a file the runner's user does not own was removed from the scratch directory: %v", err)
	}
	if hs, _ := c.HostState(ctx, "spark-2"); hs.Mode != spark.Idle {
		t.Errorf("after the cleanup the host is %s", hs.Mode)
	}
}

// A runner install the runner's user could change is refused, as is a
// work root inside it: a job could otherwise rewrite the runner that
// runs the next job. (Root only: the check is for a user of its own.)
func TestAgent_ARunnerInstallTheRunnersUserCanWriteIsRefused(t *testing.T) {
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("a runner user needs root on Linux")
	}
	_, _, host, _ := leasedHost(t)
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody")
	}
	nobody, _ := strconv.Atoi(u.Uid)
	for name, setup := range map[string]func(t *testing.T, install string){
		"a file it owns": func(_ *testing.T, install string) {
			os.Chown(filepath.Join(install, "bin", "Runner.Listener"), nobody, nobody)
		},
		"a file others write": func(_ *testing.T, install string) { os.Chmod(filepath.Join(install, "bin", "Runner.Listener"), 0o757) },
		"its directory":       func(_ *testing.T, install string) { os.Chown(install, nobody, nobody) },
		"the work root in it": func(*testing.T, string) {},
		"an ACL that lets it write": func(t *testing.T, install string) {
			if err := setACL(filepath.Join(install, "run.sh"), "access", nobody); err != nil {
				t.Skipf("no ACLs here: %v", err)
			}
		},
		"a default ACL on its directory": func(t *testing.T, install string) {
			if err := setACL(filepath.Join(install, "bin"), "default", nobody); err != nil {
				t.Skipf("no ACLs here: %v", err)
			}
		},
		"a link out of it": func(t *testing.T, install string) {
			outside := filepath.Join(filepath.Dir(install), "outside")
			os.Mkdir(outside, 0o755)
			os.Symlink(outside, filepath.Join(install, "externals"))
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			os.Chmod(dir, 0o755)
			install := filepath.Join(dir, "actions-runner")
			os.MkdirAll(filepath.Join(install, "bin"), 0o755)
			os.WriteFile(filepath.Join(install, "run.sh"), []byte("#!/bin/sh\n"), 0o755)
			os.WriteFile(filepath.Join(install, "bin", "Runner.Listener"), nil, 0o755)
			setup(t, install)
			work := filepath.Join(dir, "work")
			if name == "the work root in it" {
				work = filepath.Join(install, "work")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // an agent that starts runs until then
			defer cancel()
			err := agent.Run(ctx, agent.Config{Client: host, Host: "spark-2", WorkRoot: work,
				RunnerCmd: filepath.Join(install, "run.sh"), RunnerUser: "nobody"})
			if !errors.Is(err, agent.ErrConfig) {
				t.Errorf("an install with %s: %v, want ErrConfig", name, err)
			}
		})
	}
}

// walkableDir is a test directory the runner's user may walk into.
func walkableDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755)
	os.Chmod(dir, 0o755)
	return dir
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
	// It kills every process its user may signal, the agent's killer
	// running as that user included, and forks on: only a kill it cannot
	// reach stops it.
	"killer": `#include <fcntl.h>
#include <signal.h>
#include <unistd.h>
int main(int argc, char **argv) {
	int fd = open(argv[1], O_WRONLY); write(fd, "up\n", 3);
	for (;;) { kill(-1, SIGKILL); if (fork() != 0) _exit(0); }
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
			dir := walkableDir(t)
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
			os.Mkdir(filepath.Join(dir, "actions-runner"), 0o755)
			runner := filepath.Join(dir, "actions-runner", "run.sh")
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
				RunnerCmd: runner, RunnerUser: "nobody", Scratch: []string{}, Every: 10 * time.Millisecond, OnEvent: func(e agent.Event) { events <- e }})
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

// A restarted agent stops what the agent before it left running (a
// killed agent's runner goes on as an orphan) before it takes its lease's
// config again, and starts the job in a fresh directory: no second
// runner, and, with a runner user, no job refused for the old one.
func TestAgent_ARestartedAgentStopsWhatTheOldOneLeftRunning(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("lease processes are found through Linux's /proc")
	}
	for _, user := range []string{"", "nobody"} {
		t.Run("runner user "+user, func(t *testing.T) {
			if user != "" && os.Geteuid() != 0 {
				t.Skip("a runner user needs root")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, _, host, lease := leasedHost(t)
			dir := walkableDir(t)
			_, fifo := fifoRunner(t, dir)
			os.Chmod(fifo, 0o666)
			os.Mkdir(filepath.Join(dir, "actions-runner"), 0o755)
			runner := filepath.Join(dir, "actions-runner", "run.sh")
			os.WriteFile(runner, []byte("#!/bin/sh\nenv > \""+fifo+"\"\nexec sleep 300\n"), 0o755)
			work := filepath.Join(dir, "work")
			os.MkdirAll(filepath.Join(work, lease), 0o755)
			os.WriteFile(filepath.Join(work, lease, "stale"), nil, 0o644)
			// The old agent's runner, still running: it carries the
			// job's work directory, or only the runner's user.
			orphan := exec.Command("sleep", "300")
			orphan.Env = []string{"SPARK_LEASE=" + lease, "SPARK_WORK_DIR=" + filepath.Join(work, lease)}
			orphan.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if user != "" {
				orphan.Env = nil
				orphan.SysProcAttr.Credential = &syscall.Credential{Uid: 65534, Gid: 65534}
			}
			if err := orphan.Start(); err != nil {
				t.Fatal(err)
			}
			defer orphan.Process.Kill()
			go orphan.Wait()
			events := make(chan agent.Event, 1024)
			go agent.Run(ctx, agent.Config{Client: host, Host: "spark-2", GPU: gpu{}, Disk: disk(1 << 40), WorkRoot: work,
				RunnerCmd: runner, RunnerUser: user, Scratch: []string{}, Every: 10 * time.Millisecond, OnEvent: func(e agent.Event) { events <- e }})
			started := make(chan error, 1)
			go func() { _, err := os.ReadFile(fifo); started <- err }()
			select { // the job's runner started
			case err := <-started:
				if err != nil {
					t.Fatal(err)
				}
			case <-ctx.Done():
				t.Fatal("the restarted agent never started the job's runner")
			}
			if alive(orphan.Process.Pid) {
				t.Errorf("the old agent's runner %d still runs beside the new one", orphan.Process.Pid)
			}
			if _, err := os.Stat(filepath.Join(work, lease, "stale")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the job started in the old try's directory: %v", err)
			}
			for len(events) > 0 {
				if e := <-events; e.Kind == "preflight-failed" || e.Kind == "released" {
					t.Errorf("%s: %v", e.Kind, e.Err)
				}
			}
		})
	}
}

// A tree deeper than the agent may hold descriptors for, which defeats
// os.RemoveAll, is removed at cleanup too: a job cannot keep its host
// from being cleaned.
func TestCleanup_ATreeTooDeepForRemoveAllIsRemovedToo(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the descriptor count is read from Linux's /proc")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, ops, host, lease := leasedHost(t)
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "actions-runner"), 0o755)
	runner := filepath.Join(dir, "actions-runner", "run.sh")
	const depth = 600
	os.WriteFile(runner, []byte("#!/bin/sh\nmkdir -p \"$SPARK_WORK_DIR/"+strings.Repeat("d/", depth)+"\" && echo made > \"$SPARK_WORK_DIR/made\"\nexec sleep 300\n"), 0o755)
	fds, _ := os.ReadDir("/proc/self/fd")
	var old syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old)
	low := syscall.Rlimit{Cur: uint64(len(fds) + 200), Max: old.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Skip(err)
	}
	defer syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old)
	events := make(chan agent.Event, 1024)
	work := filepath.Join(dir, "work")
	go agent.Run(ctx, agent.Config{Client: host, Host: "spark-2", GPU: gpu{}, Disk: disk(1 << 40), WorkRoot: work,
		RunnerCmd: runner, Every: 10 * time.Millisecond, OnEvent: func(e agent.Event) { events <- e }})
	for made := false; !made; {
		select {
		case <-events:
		case <-ctx.Done():
			t.Fatal("the runner never made its tree")
		}
		_, err := os.Stat(filepath.Join(work, lease, "made"))
		made = err == nil
	}
	st, _ := ops.Status(ctx, lease)
	if err := ops.Release(ctx, lease, st.Request.Token); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case e := <-events:
			if e.Kind == "cleaned" && e.Err == nil {
				if _, err := os.Lstat(filepath.Join(work, lease)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the cleanup was acknowledged with the lease's directory there: %v", err)
				}
				return
			}
		case <-ctx.Done():
			t.Fatal("the cleanup of a deep tree was never acknowledged")
		}
	}
}

// An agent's ID is its host's on its machine: one read from a disk image
// cloned from another host or machine is not its own, so the clone cannot
// take the config the original took; its own ID is.
func TestAgent_AnIDClonedFromAnotherHostOrMachineIsNotItsOwn(t *testing.T) {
	machine, err := os.ReadFile("/etc/machine-id")
	if err != nil || len(strings.TrimSpace(string(machine))) == 0 {
		t.Skip("no /etc/machine-id")
	}
	mid := strings.TrimSpace(string(machine))
	for file, own := range map[string]bool{
		"spark-2 " + mid + " original":                      true,
		"spark-2 0123456789abcdef0123456789abcdef original": false,
		"spark-9 " + mid + " original":                      false,
		"original":                                          false,
	} {
		t.Run(file, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, _, host, _ := leasedHost(t)
			if _, err := host.TakeRunner(ctx, "spark-2", "original"); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			runner, _ := fifoRunner(t, dir)
			work := filepath.Join(dir, "work")
			os.Mkdir(work, 0o755)
			os.WriteFile(filepath.Join(work, ".agent-id"), []byte(file+"\n"), 0o600)
			took := make(chan error, 16)
			go agent.Run(ctx, agent.Config{Client: host, Host: "spark-2", GPU: gpu{}, Disk: disk(1 << 40), WorkRoot: work,
				RunnerCmd: runner, Every: 10 * time.Millisecond, OnEvent: func(e agent.Event) {
					if e.Kind == "runner-started" || e.Kind == "runner-config" {
						took <- e.Err
					}
				}})
			select {
			case err := <-took:
				if own && err != nil || !own && !errors.Is(err, spark.ErrConflict) {
					t.Errorf("the agent with %q took the original's config: %v (its own: %v)", file, err, own)
				}
			case <-ctx.Done():
				t.Fatal("the agent never tried the config")
			}
		})
	}
}

// No System V or POSIX IPC object a job made outlives its lease: a
// shared memory segment left by one job would hand its contents to the
// next. (Root only: the agent switches users.)
func TestCleanup_NoIPCObjectOfTheRunnersUserOutlivesTheLease(t *testing.T) {
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("switching the runner's user needs root on Linux")
	}
	if _, err := exec.LookPath("ipcmk"); err != nil {
		t.Skip("no ipcmk to make IPC objects with")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	before := nobodysIPC(t) // not the job's: made by something else on the host
	_, ops, host, lease := leasedHost(t)
	dir := walkableDir(t)
	done := filepath.Join(dir, "made")
	os.WriteFile(done, nil, 0o666)
	os.Chmod(done, 0o666)
	os.Mkdir(filepath.Join(dir, "actions-runner"), 0o755)
	runner := filepath.Join(dir, "actions-runner", "run.sh")
	os.WriteFile(runner, []byte("#!/bin/sh\nipcmk -M 4096 && ipcmk -Q && ipcmk -S 1 && echo made > \""+done+"\"\nexec sleep 300\n"), 0o755)
	events := make(chan agent.Event, 1024)
	go agent.Run(ctx, agent.Config{Client: host, Host: "spark-2", GPU: gpu{}, Disk: disk(1 << 40), WorkRoot: filepath.Join(dir, "work"),
		RunnerCmd: runner, RunnerUser: "nobody", Scratch: []string{}, Every: 10 * time.Millisecond, OnEvent: func(e agent.Event) { events <- e }})
	for made := false; !made; {
		select {
		case <-events:
		case <-ctx.Done():
			t.Fatal("the job never made its IPC objects")
		}
		data, _ := os.ReadFile(done)
		made = len(data) > 0
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
	for _, obj := range nobodysIPC(t) {
		if !slices.Contains(before, obj) {
			t.Errorf("an IPC object of the runner's user outlived the lease: %s", obj)
		}
	}
}

// nobodysIPC lists the host's System V IPC objects owned by uid 65534,
// each as "kind id".
func nobodysIPC(t *testing.T) []string {
	t.Helper()
	var objs []string
	for _, kind := range []string{"shm", "msg", "sem"} {
		data, err := os.ReadFile("/proc/sysvipc/" + kind)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			if f := strings.Fields(line); len(f) > 1 && slices.Contains(f, "65534") {
				objs = append(objs, kind+" "+f[1])
			}
		}
	}
	return objs
}

// A root-owned install with links in it, or reached through a link (a
// versioned install), is accepted: a link's own mode grants nothing, and
// the install is checked where it lies. (Root only.)
func TestAgent_ARootOwnedInstallWithLinksIsAccepted(t *testing.T) {
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("a runner user needs root on Linux")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _, host, _ := leasedHost(t)
	dir := t.TempDir()
	install := filepath.Join(dir, "actions-runner-2.330.0")
	os.MkdirAll(filepath.Join(install, "externals", "node20", "bin"), 0o755)
	os.MkdirAll(filepath.Join(install, "externals", "node20", "lib"), 0o755)
	os.WriteFile(filepath.Join(install, "externals", "node20", "lib", "npm-cli.js"), nil, 0o755)
	os.Symlink("../lib/npm-cli.js", filepath.Join(install, "externals", "node20", "bin", "npm"))
	os.WriteFile(filepath.Join(install, "run.sh"), []byte("#!/bin/sh\nexec sleep 300\n"), 0o755)
	os.Symlink("actions-runner-2.330.0", filepath.Join(dir, "actions-runner"))
	started := make(chan struct{}, 1)
	err := func() error {
		go func() { <-started; cancel() }()
		return agent.Run(ctx, agent.Config{Client: host, Host: "spark-2", GPU: gpu{}, Disk: disk(1 << 40), WorkRoot: filepath.Join(dir, "work"),
			RunnerCmd: filepath.Join(dir, "actions-runner", "run.sh"), RunnerUser: "nobody", Scratch: []string{}, Every: 10 * time.Millisecond,
			OnEvent: func(e agent.Event) {
				if e.Kind == "heartbeat" {
					select {
					case started <- struct{}{}:
					default:
					}
				}
			}})
	}()
	if err != nil {
		t.Errorf("a root-owned install with links: %v, want the agent to run", err)
	}
}

// The install is checked again before each job, not only when the agent
// starts: an install the runner's user can write by the time a job comes
// runs no job, and the lease is given back.
func TestAgent_AnInstallChangedAfterTheAgentStartedRunsNoJob(t *testing.T) {
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("a runner user needs root on Linux")
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody")
	}
	nobody, _ := strconv.Atoi(u.Uid)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _, host, _ := leasedHost(t)
	dir := walkableDir(t)
	install := filepath.Join(dir, "actions-runner")
	os.MkdirAll(filepath.Join(install, "bin"), 0o755)
	ran := filepath.Join(dir, "ran")
	os.WriteFile(filepath.Join(install, "run.sh"), []byte("#!/bin/sh\ntouch "+ran+"\nexec sleep 300\n"), 0o755)
	listener := filepath.Join(install, "bin", "Runner.Listener")
	os.WriteFile(listener, nil, 0o755)
	events := make(chan agent.Event, 1024)
	changed := false
	go agent.Run(ctx, agent.Config{Client: host, Host: "spark-2", GPU: gpu{}, Disk: disk(1 << 40), WorkRoot: filepath.Join(dir, "work"),
		RunnerCmd: filepath.Join(install, "run.sh"), RunnerUser: "nobody", Scratch: []string{}, Every: 10 * time.Millisecond,
		OnEvent: func(e agent.Event) {
			// The agent has started (its first heartbeat) and the job
			// has not: the install changes hands now.
			if e.Kind == "heartbeat" && !changed {
				changed = true
				if err := os.Chown(listener, nobody, nobody); err != nil {
					t.Error(err)
				}
			}
			events <- e
		}})
	for released := false; !released; {
		select {
		case e := <-events:
			switch e.Kind {
			case "runner-started":
				if !errors.Is(e.Err, agent.ErrConfig) {
					t.Fatalf("a job started from an install its runner's user can write: %v, want ErrConfig", e.Err)
				}
			case "released":
				released = true
			}
		case <-ctx.Done():
			t.Fatalf("the lease was not given back: %v", ctx.Err())
		}
	}
	if _, err := os.Stat(ran); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the runner ran from an install its user can write: %v", err)
	}
}

// releasedJob starts an agent whose runner user's job runs script from a
// root-owned install (bin/Runner.Listener and run.sh, in dir) and then
// writes $DONE; once it has, the lease is released (with restart, only
// after that agent stopped and a new one started: a restart mid-lease).
// It returns the agent's events from then on. cfg's Disk, Scratch and
// RunnerEnv are the test's; the rest is set here.
func releasedJob(ctx context.Context, t *testing.T, dir, script string, cfg agent.Config, restart bool) <-chan agent.Event {
	t.Helper()
	_, ops, host, lease := leasedHost(t)
	done := filepath.Join(dir, "done")
	os.WriteFile(done, nil, 0o666)
	os.Chmod(done, 0o666)
	install := filepath.Join(dir, "actions-runner")
	os.MkdirAll(filepath.Join(install, "bin"), 0o755)
	os.WriteFile(filepath.Join(install, "bin", "Runner.Listener"), []byte("listener"), 0o755)
	os.WriteFile(filepath.Join(install, "run.sh"), []byte("#!/bin/sh\n"+script+"\necho made > \"$DONE\"\nexec sleep 300\n"), 0o755)
	cfg.WorkRoot, cfg.RunnerCmd = filepath.Join(dir, "work"), filepath.Join(install, "run.sh")
	cfg.RunnerEnv = append(cfg.RunnerEnv, "DONE="+done)
	first, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	events, stopped := runnerAgent(first, t, host, cfg)
	for made := false; !made; {
		select {
		case e := <-events:
			if e.Kind == "runner-started" && e.Err != nil || e.Kind == "preflight-failed" {
				t.Fatalf("%s: %v", e.Kind, e.Err)
			}
		case <-ctx.Done():
			t.Fatalf("the job did not finish its script: %v", ctx.Err())
		}
		data, _ := os.ReadFile(done)
		made = len(data) > 0
	}
	if restart {
		stop()
		<-stopped
		events, _ = runnerAgent(ctx, t, host, cfg)
	}
	st, _ := ops.Status(ctx, lease)
	if err := ops.Release(ctx, lease, st.Request.Token); err != nil {
		t.Fatal(err)
	}
	return events
}

// cleaned is the first cleanup outcome among events.
func cleaned(ctx context.Context, t *testing.T, events <-chan agent.Event) error {
	t.Helper()
	return eventOf(ctx, t, events, "cleaned").Err
}

// runnerAgent starts an agent on host for the runner user nobody, with
// cfg's paths and settings (a disk with a TiB free and no swept
// directory unless cfg names them; a round every 10 ms), and returns its
// events and a channel closed when it has stopped. What runs as nobody is
// killed when the test ends.
func runnerAgent(ctx context.Context, t *testing.T, host *spark.APIClient, cfg agent.Config) (<-chan agent.Event, <-chan struct{}) {
	t.Helper()
	events := make(chan agent.Event, 4096)
	cfg.Client, cfg.Host, cfg.GPU, cfg.RunnerUser, cfg.Every = host, "spark-2", gpu{}, "nobody", 10*time.Millisecond
	cfg.OnEvent = func(e agent.Event) { events <- e }
	if cfg.Disk == nil {
		cfg.Disk = disk(1 << 40)
	}
	if cfg.Scratch == nil {
		cfg.Scratch = []string{}
	}
	t.Cleanup(func() { exec.Command("pkill", "-9", "-u", "nobody").Run() })
	stopped := make(chan struct{})
	go func() { agent.Run(ctx, cfg); close(stopped) }()
	return events, stopped
}

// eventOf waits for the next event of kind among events.
func eventOf(ctx context.Context, t *testing.T, events <-chan agent.Event, kind string) agent.Event {
	t.Helper()
	for {
		select {
		case e := <-events:
			if e.Kind == kind {
				return e
			}
		case <-ctx.Done():
			t.Fatalf("no %s event: %v", kind, ctx.Err())
			return agent.Event{}
		}
	}
}

// A job owns its copy's directories, so it can move the copy's files,
// links to the root-owned install, anywhere it may write on that file
// system. Moved into a swept directory they are removed; moved anywhere
// else, the cleanup is not acknowledged until they are gone.
func TestCleanup_AnInstallLinkMovedOutOfTheCopyIsALeftover(t *testing.T) {
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("a runner user needs root on Linux")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := walkableDir(t)
	scratch, elsewhere := filepath.Join(dir, "scratch"), filepath.Join(dir, "elsewhere")
	for _, d := range []string{scratch, elsewhere} {
		os.Mkdir(d, 0o1777)
		os.Chmod(d, os.ModeSticky|0o777)
	}
	events := releasedJob(ctx, t, dir, `own=$(dirname "$0")
mv "$own/run.sh" "$SCRATCH/names-the-next-job-reads"
mv "$own/bin/Runner.Listener" "$ELSEWHERE/more-names"`,
		agent.Config{Scratch: []string{scratch}, RunnerEnv: []string{"SCRATCH=" + scratch, "ELSEWHERE=" + elsewhere}}, false)
	if err := cleaned(ctx, t, events); !errors.Is(err, agent.ErrLeftovers) {
		t.Errorf("a link to the install left outside every swept directory: %v, want ErrLeftovers", err)
	}
	if _, err := os.Lstat(filepath.Join(scratch, "names-the-next-job-reads")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a link to the install moved into a swept directory outlived the sweep: %v", err)
	}
	os.Remove(filepath.Join(elsewhere, "more-names"))
	if err := cleaned(ctx, t, events); err != nil {
		t.Errorf("once the link is gone the cleanup is acknowledged: %v", err)
	}
}

// A process of the runner's user that starts while the agent prepares
// the job (a cron entry, a login) finds no way into the lease's
// directory, which stays root's until it is complete, and the runner does
// not start while it runs.
func TestAgent_ARunnerUserProcessDuringTheCopyRedirectsNothing(t *testing.T) {
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("a runner user needs root on Linux")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _, host, _ := leasedHost(t)
	run := rootInstall(t)
	dir := filepath.Dir(filepath.Dir(run))
	ran := filepath.Join(dir, "ran")
	os.WriteFile(run, []byte("#!/bin/sh\ntouch "+ran+"\nexec sleep 300\n"), 0o755)
	work := filepath.Join(dir, "work")
	// It tries to list the lease's directory while the agent builds it.
	late := lateProcess{script: "for i in $(seq 200); do ls " + work + "/*/ && echo in > " + filepath.Join(dir, "reached") + "; done; exec sleep 300"}
	events, _ := runnerAgent(ctx, t, host, agent.Config{Disk: late, WorkRoot: work, RunnerCmd: run})
	if e := eventOf(ctx, t, events, "runner-started"); !errors.Is(e.Err, agent.ErrProcesses) {
		t.Errorf("the runner started while a process of its user ran: %v, want ErrProcesses", e.Err)
	}
	if _, err := os.Stat(ran); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the runner ran: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "reached")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a process of the runner's user reached into the lease's directory while the agent built it")
	}
}

// lateProcess is the preflight's disk check; when it runs, a process of
// the runner's user (nobody) starts, as a cron entry of that user would,
// after the agent first looked for them.
type lateProcess struct{ script string }

func (l lateProcess) Free(string) (uint64, error) {
	cmd := exec.Command("/bin/sh", "-c", l.script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := cmd.Start(); err == nil {
		go cmd.Wait()
	}
	return 1 << 40, nil
}

// A job writes no core dump: one could hold its secrets, and a crash
// handler writes it as another user, where no sweep finds it. The hard
// limit is zero, so the job cannot raise it; the agent's own, which its
// other commands inherit, is the host's.
func TestAgent_OnlyTheJobCanWriteNoCoreDump(t *testing.T) {
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("a runner user needs root on Linux")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := walkableDir(t)
	limit := filepath.Join(dir, "limit")
	os.WriteFile(limit, nil, 0o666)
	os.Chmod(limit, 0o666)
	var before syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_CORE, &before)
	events := releasedJob(ctx, t, dir, `ulimit -H -c > "$LIMIT"`, agent.Config{Scratch: []string{}, RunnerEnv: []string{"LIMIT=" + limit}}, false)
	if err := cleaned(ctx, t, events); err != nil {
		t.Fatalf("cleanup: %v", err)
	}
	if data, _ := os.ReadFile(limit); strings.TrimSpace(string(data)) != "0" {
		t.Errorf("the job's core dump limit is %q, want 0", strings.TrimSpace(string(data)))
	}
	var after syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_CORE, &after)
	if after != before {
		t.Errorf("the agent's own core limit changed from %+v to %+v: its other commands (the service's, the preflight's) keep the host's", before, after)
	}
}

// A link the job moved out of its copy is found by an agent restarted
// mid-lease too: the links are counted from the install alone, not from
// what the agent saw when it started.
func TestAgent_ARestartedAgentStillRefusesALinkTheJobMovedOut(t *testing.T) {
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("a runner user needs root on Linux")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := walkableDir(t)
	elsewhere := filepath.Join(dir, "elsewhere")
	os.Mkdir(elsewhere, 0o1777)
	os.Chmod(elsewhere, os.ModeSticky|0o777)
	events := releasedJob(ctx, t, dir, `mv "$(dirname "$0")/bin/Runner.Listener" "$ELSEWHERE/names"`,
		agent.Config{Scratch: []string{}, RunnerEnv: []string{"ELSEWHERE=" + elsewhere}}, true)
	if err := cleaned(ctx, t, events); !errors.Is(err, agent.ErrLeftovers) {
		t.Errorf("a restarted agent's cleanup with a link to the install left outside it: %v, want ErrLeftovers", err)
	}
}

// Each job's runner is hard links to the install, which only the
// install's file system can hold: a work root on another is refused, not
// met with copies a job could move anywhere unseen.
func TestAgent_AWorkRootOnAnotherFileSystemThanTheInstallIsRefused(t *testing.T) {
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("a runner user needs root on Linux")
	}
	var shm, tmp syscall.Stat_t
	if syscall.Stat("/dev/shm", &shm) != nil || syscall.Stat(os.TempDir(), &tmp) != nil || shm.Dev == tmp.Dev {
		t.Skip("no second file system here")
	}
	_, _, host, _ := leasedHost(t)
	work, err := os.MkdirTemp("/dev/shm", "work")
	if err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	install := filepath.Join(walkableDir(t), "actions-runner")
	os.MkdirAll(install, 0o755)
	os.WriteFile(filepath.Join(install, "run.sh"), []byte("#!/bin/sh\nexec sleep 300\n"), 0o755)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = agent.Run(ctx, agent.Config{Client: host, Host: "spark-2", WorkRoot: work, Scratch: []string{},
		RunnerCmd: filepath.Join(install, "run.sh"), RunnerUser: "nobody"})
	if !errors.Is(err, agent.ErrConfig) {
		t.Errorf("a work root on another file system than the install: %v, want ErrConfig", err)
	}
}

// A directory the sweep keeps (a scratch root) that the runner's user
// owns, or could replace with one of its own, is refused: what a job
// left on it or put in its place would outlive the sweep.
func TestAgent_AScratchDirectoryTheRunnersUserOwnsOrCanReplaceIsRefused(t *testing.T) {
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("a runner user needs root on Linux")
	}
	_, _, host, _ := leasedHost(t)
	dir := walkableDir(t)
	install := filepath.Join(dir, "actions-runner")
	os.MkdirAll(install, 0o755)
	os.WriteFile(filepath.Join(install, "run.sh"), []byte("#!/bin/sh\nexec sleep 300\n"), 0o755)
	owned, open := filepath.Join(dir, "owned"), filepath.Join(dir, "open")
	os.Mkdir(owned, 0o755)
	os.Chown(owned, 65534, 65534)
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777) // not sticky: the user may rename what is in it
	os.Mkdir(filepath.Join(open, "scratch"), 0o777)
	os.Chmod(filepath.Join(open, "scratch"), os.ModeSticky|0o777)
	for name, root := range map[string]string{"one it owns": owned, "one in a directory it may write": filepath.Join(open, "scratch"),
		"one not made yet, in a directory it may write": filepath.Join(open, "later")} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := agent.Run(ctx, agent.Config{Client: host, Host: "spark-2", WorkRoot: filepath.Join(dir, "work"), Scratch: []string{root},
			RunnerCmd: filepath.Join(install, "run.sh"), RunnerUser: "nobody"})
		cancel()
		if !errors.Is(err, agent.ErrConfig) {
			t.Errorf("a scratch directory, %s: %v, want ErrConfig", name, err)
		}
	}
}

// runAgentErr runs an agent for a runner user with cfg's paths on a
// leased host and returns what Run returned (ErrConfig at once when it
// refuses to start; nil when it ran until the test's deadline).
func runAgentErr(t *testing.T, cfg agent.Config) error {
	t.Helper()
	_, _, host, _ := leasedHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cfg.Client, cfg.Host, cfg.RunnerUser = host, "spark-2", "nobody"
	if cfg.Scratch == nil {
		cfg.Scratch = []string{}
	}
	return agent.Run(ctx, cfg)
}

// rootInstall is a root-owned install in a directory the runner's user
// may walk; it returns run.sh.
func rootInstall(t *testing.T) string {
	t.Helper()
	install := filepath.Join(walkableDir(t), "actions-runner")
	os.MkdirAll(install, 0o755)
	os.WriteFile(filepath.Join(install, "run.sh"), []byte("#!/bin/sh\nexec sleep 300\n"), 0o755)
	return filepath.Join(install, "run.sh")
}

// A relative runner path, or swept directory, is refused with a runner
// user: the install is checked and copied where it lies, and a sweep
// must never take the install for a job's leftover.
func TestAgent_ARelativeRunnerPathIsRefused(t *testing.T) {
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("a runner user needs root on Linux")
	}
	run := rootInstall(t)
	t.Chdir(filepath.Dir(run))
	work := filepath.Join(filepath.Dir(filepath.Dir(run)), "work")
	if err := runAgentErr(t, agent.Config{WorkRoot: work, RunnerCmd: "./run.sh"}); !errors.Is(err, agent.ErrConfig) {
		t.Errorf("a relative runner path: %v, want ErrConfig", err)
	}
	if err := runAgentErr(t, agent.Config{WorkRoot: work, RunnerCmd: run, Scratch: []string{"tmp"}}); !errors.Is(err, agent.ErrConfig) {
		t.Errorf("a relative swept directory: %v, want ErrConfig", err)
	}
	if _, err := os.Stat(run); err != nil {
		t.Errorf("the install is gone: %v", err)
	}
}

// A work root the runner's user owns, may write or could replace is
// refused: what a job left there, beside the lease directories, would
// reach the next, and the agent's ID and lock are there.
func TestAgent_AWorkRootTheRunnersUserOwnsOrCanReplaceIsRefused(t *testing.T) {
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("a runner user needs root on Linux")
	}
	run := rootInstall(t)
	dir := filepath.Dir(filepath.Dir(run))
	owned, open := filepath.Join(dir, "owned"), filepath.Join(dir, "open")
	os.Mkdir(owned, 0o755)
	os.Chown(owned, 65534, 65534)
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	for name, work := range map[string]string{"one it owns": owned, "one it may write": open, "one in a directory it may write": filepath.Join(open, "work")} {
		if err := runAgentErr(t, agent.Config{WorkRoot: work, RunnerCmd: run}); !errors.Is(err, agent.ErrConfig) {
			t.Errorf("a work root, %s: %v, want ErrConfig", name, err)
		}
	}
}

// A runner that cannot be started (not executable, a missing
// interpreter) gives its lease back at once, with the runner's exit,
// instead of holding the host until the job's grace has passed.
func TestAgent_ARunnerThatCannotStartReleasesItsLeaseWithTheError(t *testing.T) {
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("a runner user needs root on Linux")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, _, host, _ := leasedHost(t)
	run := rootInstall(t)
	os.WriteFile(run, []byte("#!/no/such/interpreter\n"), 0o755)
	events, _ := runnerAgent(ctx, t, host, agent.Config{WorkRoot: filepath.Join(filepath.Dir(filepath.Dir(run)), "work"), RunnerCmd: run, JobGrace: time.Hour})
	exited := false
	for {
		select {
		case e := <-events:
			switch e.Kind {
			case "runner-exited":
				exited = true
				if e.Err == nil {
					t.Errorf("a runner that could not start exited with no error")
				}
			case "released":
				if !exited {
					t.Fatalf("released before the runner exited: %v", e.Err)
				}
				if e.Err != nil {
					t.Errorf("release: %v", e.Err)
				}
				return
			}
		case <-ctx.Done():
			t.Fatalf("the lease of a runner that could not start was not given back (runner exited: %v)", exited)
		}
	}
}

// The work root's link check that a crashed agent left behind is a link
// to the install outside it; the next agent removes it, so it never
// keeps jobs from starting.
func TestAgent_ALinkCheckLeftByACrashDoesNotKeepJobsFromStarting(t *testing.T) {
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("a runner user needs root on Linux")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, _, host, _ := leasedHost(t)
	run := rootInstall(t)
	work := filepath.Join(filepath.Dir(filepath.Dir(run)), "work")
	os.Mkdir(work, 0o755)
	if err := os.Link(run, filepath.Join(work, ".link-check")); err != nil {
		t.Fatal(err)
	}
	events, _ := runnerAgent(ctx, t, host, agent.Config{WorkRoot: work, RunnerCmd: run})
	if e := eventOf(ctx, t, events, "runner-started"); e.Err != nil {
		t.Errorf("a link check left by a crash kept the job from starting: %v", e.Err)
	}
}
