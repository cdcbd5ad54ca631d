package faketime

import (
	"testing"
	"testing/synctest"
	"time"
)

func TestAdvanceMovesOnlyTheFakeClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		Advance(90 * time.Minute)
		if got := time.Since(start); got != 90*time.Minute {
			t.Errorf("advanced %v, want 90m", got)
		}
	})
}

func TestAdvanceRefusesToSleepForReal(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Advance outside a bubble must panic, not sleep")
		}
	}()
	Advance(time.Hour)
}
