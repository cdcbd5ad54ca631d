package main

// Billing: every pod the demo prints is billed by one rule.

import (
	"encoding/json"
	"math"
	"testing"
	"testing/synctest"

	"github.com/gpugate/gpugate/cost"
	"github.com/gpugate/gpugate/gateflow/demo"
	"github.com/gpugate/gpugate/runpod"
)

// The demo tells the truth about money: every pod is billed by one rule.
// The cost report bills the accepted pod from its container's start (20 s
// after the create: startup/queue is 60 s up to the job's start), so the
// attempt table must bill the same pod, and the pod the proof rejected,
// from that instant too. Billing an attempt from the create (80 s for
// the accepted pod, 81 s for the rejected one) made the accepted attempt's
// $ disagree with the report's startup stage for the same interval, and
// "rejected candidates" carry 20 s of provisioning the report's own rule
// never bills.
func TestDemo_AnAttemptIsBilledFromTheInstantTheCostReportBillsItsPod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		out, errOut, code := runGateflow(t, nil, "-json")
		var doc demo.Doc
		if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil {
			t.Fatalf("exit %d, %v:\n%s%s", code, err, out, errOut)
		}
		first := doc.Runs[0]
		var startup *cost.Stage
		for i, st := range first.Cost.Stages {
			if st.Name == cost.StageStartup {
				startup = &first.Cost.Stages[i]
			}
		}
		if startup == nil || startup.Seconds == nil || startup.Cost == nil {
			t.Fatalf("no known startup stage: %+v", first.Cost.Stages)
		}
		for _, a := range first.Result.Attempts {
			if a.Outcome == runpod.OutcomeAccepted && (a.Seconds != *startup.Seconds || math.Abs(a.EstimatedCost-*startup.Cost) > 1e-9) {
				t.Errorf("accepted attempt: %v s, $%.6f; the cost report's startup/queue for the same pod up to the hand-over: %v s, $%.6f",
					a.Seconds, a.EstimatedCost, *startup.Seconds, *startup.Cost)
			}
		}
		// The whole pod, attempt then the report's later stages, is the
		// report's paid window.
		w := first.Cost.Window
		if sum := *startup.Seconds; sum+20+80+10 != w.Seconds {
			t.Errorf("startup %v s + setup 20 + tests 80 + cleanup 10 != the %v s window", sum, w.Seconds)
		}
	})
}
