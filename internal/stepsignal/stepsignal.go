// Package stepsignal is how a gpugate command answers the Actions runner's
// cancellation. It is its own package so that the CUDA proof, whose size
// is budgeted against the exec limit, does not link os/signal.
package stepsignal

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// The Actions runner cancels a step by signalling the step's own process:
// SIGINT, then SIGTERM 7.5 seconds later, then, 2.5 seconds after that,
// it kills the process tree. Go's default on either signal is to exit at
// once, so a command that holds a paid resource must choose.

// UndoOnSignal returns a context that SIGINT or SIGTERM cancels: for a
// command that buys (provision), whose cancellation deletes what it
// created before it returns, inside the runner's ten seconds.
func UndoOnSignal() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// FinishOnSignal ignores SIGINT and SIGTERM: for a command that deletes
// (cleanup, watch, reap), whose deletion in flight should finish rather
// than die half-done, until the runner's final kill.
func FinishOnSignal() {
	signal.Ignore(os.Interrupt, syscall.SIGTERM)
}
