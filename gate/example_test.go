package gate_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/gpugate/gpugate/gate"
)

func ExampleReuse() {
	merge := strings.Repeat("b", 40)
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	gates := []gate.Gate{
		{ID: 1, ExternalID: gate.ExternalID{Ref: merge, Kind: gate.KindPaid}.String(), Status: "completed", Conclusion: "success", CompletedAt: at},
		{ID: 2, ExternalID: "", Status: "completed", Conclusion: "success", CompletedAt: at.Add(time.Hour)}, // legacy: ignored
	}
	d := gate.Reuse(gates, merge)
	fmt.Println(d.Reuse, d.From.ID)

	gates = append(gates, gate.Gate{ID: 3, ExternalID: gate.ExternalID{Ref: merge, Kind: gate.KindFailed}.String(), Status: "completed", Conclusion: "failure", CompletedAt: at.Add(2 * time.Hour)})
	fmt.Println(gate.Reuse(gates, merge).Reuse)
	// Output:
	// true 1
	// false
}

func ExampleParseExternalID() {
	id, ok := gate.ParseExternalID("runpod-gpu-gate:v1:" + strings.Repeat("b", 40) + ":reused")
	fmt.Println(ok, id.Kind)
	_, ok = gate.ParseExternalID("runpod-gpu-gate:v1:main:paid")
	fmt.Println(ok)
	// Output:
	// true reused
	// false
}
