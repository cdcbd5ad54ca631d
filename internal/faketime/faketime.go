// Package faketime advances the fake clock of a testing/synctest bubble.
// Tests call Advance instead of time.Sleep so that waiting is never real:
// outside a bubble Advance panics rather than sleep.
package faketime

import (
	"fmt"
	"time"
)

// epoch is where every bubble's clock starts (documented by
// testing/synctest: midnight UTC 2000-01-01).
var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// InBubble reports whether the clock is a bubble's fake clock: one that
// started at the epoch and has run for less than ten years.
func InBubble() bool {
	now := time.Now()
	return !now.Before(epoch) && now.Before(epoch.AddDate(10, 0, 0))
}

// Advance lets d pass on the bubble's fake clock: the calling goroutine
// resumes once every other goroutine in the bubble is durably blocked and
// the fake time has moved on by d. It panics outside a bubble.
func Advance(d time.Duration) {
	if !InBubble() {
		panic(fmt.Sprintf("faketime: Advance(%v) outside a testing/synctest bubble would sleep for real; run the test inside synctest.Test", d))
	}
	time.Sleep(d)
}
