package wait_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpugate/gpugate/internal/wait"
)

// A pause ends after its duration, or at once with the context's error
// when the context ends first.
func TestFor_EndsAfterItsDurationOrWithTheContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if err := wait.For(context.Background(), time.Minute); err != nil || time.Since(start) != time.Minute {
			t.Errorf("%v after %s, want nil after 1m", err, time.Since(start))
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start = time.Now()
		if err := wait.For(ctx, time.Hour); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != time.Second {
			t.Errorf("%v after %s, want the deadline after 1s", err, time.Since(start))
		}
		if err := wait.For(ctx, 0); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("an ended context, no wait: %v", err)
		}
	})
}
