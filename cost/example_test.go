package cost_test

import (
	"fmt"
	"time"

	"github.com/gpugate/gpugate/cost"
)

func ExamplePaidWindow() {
	rec, _ := cost.ParsePodRecord([]byte(`{"id":"p1","lastStartedAt":"2026-10-06 10:05:00 +0000 UTC","costPerHr":0.74,"adjustedCostPerHr":0.69}`))
	w, _ := cost.PaidWindow(rec, time.Date(2026, 10, 6, 11, 5, 0, 0, time.UTC))
	fmt.Printf("%.0f s at $%.2f/h (%s) = $%.2f\n", w.Seconds, w.HourlyPrice, w.PriceSource, w.Cost)

	unknown, _ := cost.ParsePodRecord([]byte(`{"id":"p2","startedAt":null,"createdAt":"2026-10-06T10:00:00Z","cost":0.43}`))
	w, _ = cost.PaidWindow(unknown, time.Date(2026, 10, 6, 11, 0, 0, 0, time.UTC))
	fmt.Println("known:", w.Known, "cost known:", w.CostKnown())
	// Output:
	// 3600 s at $0.69/h (adjusted) = $0.69
	// known: false cost known: false
}
