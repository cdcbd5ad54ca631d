// Package shell runs the shell commands an operator configures (the fleet's
// resident-service steps, its alert command, a host's preflight checks)
// with a bound that holds even when the command leaves children behind.
package shell

import (
	"context"
	"os"
	"os/exec"
	"time"
)

// waitDelay is how long Run waits, after its context ends and the shell is
// killed, for the command's output to close. A child the shell started in
// the background (ssh, a pipeline's left side) keeps the output open after
// the shell is gone, and without this bound the wait lasted as long as
// that child did.
var waitDelay = 5 * time.Second

// Run runs script with sh -c and the extra environment, returning its
// combined output. When ctx ends, the shell is killed and Run returns
// within waitDelay, whatever the script started.
func Run(ctx context.Context, script string, env ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.WaitDelay = waitDelay
	return cmd.CombinedOutput()
}
