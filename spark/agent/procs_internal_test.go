//go:build linux

package agent

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
)

// looks is LeaseProcesses whose n-th look (from 0) finds what of says.
type looks struct {
	n  int
	of func(n int) []int
}

func (l *looks) Of(string) ([]int, error) {
	pids := l.of(l.n)
	l.n++
	return pids, nil
}

// A cleanup gives up after twenty looks, whatever they find: a process
// that comes back now and then (restarted by something the looks do not
// see) cannot hold the agent in its cleanup, and never makes it clean.
func TestStopLease_GivesUpAfterTwentyLooksWhateverTheLooksFind(t *testing.T) {
	const gone = 1 << 22 // above any pid_max: no process has it
	l := &looks{of: func(n int) []int {
		if n < 20 || n%2 == 1 {
			return []int{gone}
		}
		return nil
	}}
	if err := stopLease(l, "r1"); !errors.Is(err, ErrProcesses) {
		t.Errorf("a process found on every other look: %v, want ErrProcesses", err)
	}
	if l.n > 22 {
		t.Errorf("%d looks, want at most 22", l.n)
	}
}

// A killed process counts until it has ended, but only while its PID is
// its own: a process that took the PID since is never signalled. (Root:
// the test picks the next PID through ns_last_pid.)
func TestStopLease_NeverSignalsAProcessThatTookAKilledPID(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("setting the next PID needs root")
	}
	first := exec.Command("sleep", "300")
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	pid := first.Process.Pid
	var victim *exec.Cmd
	t.Cleanup(func() {
		if victim != nil && victim.Process != nil {
			victim.Process.Kill()
			victim.Wait()
		}
	})
	l := &looks{of: func(n int) []int {
		switch n {
		case 0:
			return []int{pid}
		case 1:
			// The killed process has ended and was reaped; another
			// takes its PID before the next look.
			first.Wait()
			if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0o644); err != nil {
				t.Skipf("no ns_last_pid here: %v", err)
			}
			victim = exec.Command("sleep", "300")
			if err := victim.Start(); err != nil {
				t.Fatal(err)
			}
			if victim.Process.Pid != pid {
				t.Skipf("the next process took pid %d, not %d", victim.Process.Pid, pid)
			}
		}
		return nil
	}}
	if err := stopLease(l, "r1"); err != nil {
		t.Errorf("stopLease: %v", err)
	}
	if victim == nil || victim.Process.Pid != pid {
		t.Fatal("no process took the killed PID")
	}
	if err := victim.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the process that took killed pid %d was signalled: %v", pid, err)
	}
	var ws syscall.WaitStatus
	if wpid, _ := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); wpid == pid {
		t.Errorf("the process that took killed pid %d ended: %v", pid, ws)
	}
}

// A process's start time is read past its command, whatever the command
// holds: spaces and ") " too.
func TestStartTime_ACommandWithParenthesesAndSpacesIsSkipped(t *testing.T) {
	dir := t.TempDir()
	odd := dir + "/a) b ) c"
	if err := os.Symlink("/bin/sleep", odd); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(odd, "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	plain := exec.Command("sleep", "300")
	if err := plain.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { plain.Process.Kill(); plain.Wait() }()
	// Started moments apart, in clock ticks since boot: within a second.
	got, _ := strconv.ParseInt(startTime(cmd.Process.Pid), 10, 64)
	want, _ := strconv.ParseInt(startTime(plain.Process.Pid), 10, 64)
	if want == 0 || got < want-100 || got > want {
		t.Errorf("start time of %q: %d; a plain sleep started after it: %d", odd, got, want)
	}
}
