// Package wait is the one pause of gpugate's loops and retries that ends
// early when its context does.
package wait

import (
	"context"
	"time"
)

// For waits d, or until ctx ends (its error). A d of zero or less
// returns at once, with ctx's error if it has ended.
func For(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
