// Package podcost turns what runpod reports into what cost accounts: the
// accepted pod's billing record and the rejected attempts that were paid
// for. The examples share it so every report is built the same way.
package podcost

import (
	"time"

	"github.com/gpugate/gpugate/cost"
	"github.com/gpugate/gpugate/runpod"
)

// Record is the pod's billing record, read before deletion. A pod that
// never reported a start keeps StartedAt nil: its cost is unknown.
func Record(p *runpod.Pod) cost.PodRecord {
	rec := cost.PodRecord{APIVersion: 2, ID: p.ID, Name: p.Name, StartedAt: p.StartedAt, ListPrice: p.Cost}
	if p.GPU != nil {
		rec.GPUTypeID = p.GPU.ID
	}
	return rec
}

// Rejected lists the attempts that created a pod and were not accepted:
// the paid side of provisioning. Attempts that created nothing cost
// nothing and are left out.
func Rejected(attempts []runpod.Attempt) []cost.Attempt {
	var out []cost.Attempt
	for _, a := range attempts {
		if a.Outcome == runpod.OutcomeAccepted || a.PodID == "" {
			continue
		}
		out = append(out, cost.Attempt{Name: a.Name, GPUTypeID: a.Candidate.GPUTypeID, Outcome: string(a.Outcome), Seconds: a.Seconds, EstimatedCost: a.EstimatedCost})
	}
	return out
}

// Marks are the cost report's stage marks from the GPU job's progress as
// GitHub reports it: when the job started, and when its test step started
// and ended. A time the source did not report stays nil, so its stage is
// unknown, never zero.
func Marks(p runpod.JobProgress) cost.Marks {
	at := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		return &t
	}
	return cost.Marks{JobStarted: at(p.JobStartedAt), TestsStarted: at(p.TestsStartedAt), TestsEnded: at(p.TestsEndedAt)}
}
