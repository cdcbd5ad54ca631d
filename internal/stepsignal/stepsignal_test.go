package stepsignal

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"testing"
)

// TestMain lets the signal test start this binary as the child it
// signals: with GPUGATE_SIGNAL_HELPER set, the process is that child.
func TestMain(m *testing.M) {
	switch os.Getenv("GPUGATE_SIGNAL_HELPER") {
	case "undo":
		ctx, stop := UndoOnSignal()
		fmt.Println("ready")
		<-ctx.Done()
		stop()
		fmt.Println("undone") // provision deletes its pod here
		os.Exit(0)
	case "finish":
		FinishOnSignal()
		fmt.Println("ready")
		bufio.NewScanner(os.Stdin).Scan() // the deletion in flight
		fmt.Println("finished")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// The runner cancels a step with SIGINT (then SIGTERM): a command that
// buys sees its context cancelled and undoes what it started; a command
// that deletes is not killed halfway.
func TestSignals_UndoCancelsTheContextFinishKeepsGoing(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no SIGINT to send")
	}
	for _, mode := range []string{"undo", "finish"} {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), "GPUGATE_SIGNAL_HELPER="+mode)
			stdin, _ := cmd.StdinPipe()
			out, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			lines := bufio.NewScanner(out)
			if !lines.Scan() || lines.Text() != "ready" {
				cmd.Process.Kill()
				t.Fatalf("child said %q", lines.Text())
			}
			cmd.Process.Signal(os.Interrupt)
			if mode == "finish" {
				fmt.Fprintln(stdin, "done") // only now may it finish
			}
			want := map[string]string{"undo": "undone", "finish": "finished"}[mode]
			if !lines.Scan() || lines.Text() != want {
				t.Errorf("after SIGINT the child said %q, want %q", lines.Text(), want)
			}
			stdin.Close()
			if err := cmd.Wait(); err != nil {
				t.Errorf("the child did not exit cleanly: %v", err)
			}
		})
	}
}
