//go:build unix

package shell

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A command killed at its deadline returns although a child it started in
// the background still holds its output open (an ssh, a pipeline's left
// side): the service steps and preflight checks are bounded by their
// contexts, and this is what makes that bound hold.
func TestRun_ReturnsAfterCancelWhileAChildHoldsTheOutput(t *testing.T) {
	defer func(d time.Duration) { waitDelay = d }(waitDelay)
	waitDelay = 10 * time.Millisecond
	dir := t.TempDir()
	ready, hold := filepath.Join(dir, "ready"), filepath.Join(dir, "hold")
	for _, p := range []string{ready, hold} {
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Skip("no FIFOs here")
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		// cat waits on hold with the command's output open; the shell
		// says it is running, then waits for cat.
		_, err := Run(ctx, `cat "$HOLD" & echo started > "$READY"; wait`, "HOLD="+hold, "READY="+ready)
		done <- err
	}()
	r, err := os.ReadFile(ready) // blocks until the shell has written
	if err != nil || strings.TrimSpace(string(r)) != "started" {
		t.Fatalf("ready: %q, %v", r, err)
	}
	cancel()
	if err := <-done; err == nil { // hangs here without the wait bound
		t.Error("a killed command reported success")
	}
	// Let cat go.
	if w, err := os.OpenFile(hold, os.O_WRONLY, 0); err == nil {
		w.Close()
	}
}

// The environment reaches the script, and the output comes back.
func TestRun_PassesTheEnvironment(t *testing.T) {
	out, err := Run(context.Background(), `printf '%s' "$SPARK_ALERT_KIND"`, "SPARK_ALERT_KIND=restore-failed")
	if err != nil || string(out) != "restore-failed" {
		t.Errorf("%q, %v", out, err)
	}
}
