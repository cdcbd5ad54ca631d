package cost

import (
	"context"
	"time"

	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/rest"
)

// PodRecordOf is the billing record of a pod as the RunPod API reports it
// (v2), read before its deletion. A pod that never reported a start keeps
// StartedAt nil: its cost is unknown.
func PodRecordOf(p *rest.Pod) PodRecord {
	rec := PodRecord{APIVersion: 2, ID: p.ID, Name: p.Name, StartedAt: p.StartedAt, ListPrice: p.Cost}
	if p.GPU != nil {
		rec.GPUTypeID = p.GPU.ID
	}
	return rec
}

// RecordBeforeDelete is the billing record of the pod podID for its cost
// report, read before the pod's deletion as one bounded GET
// (runpod.RecordBeforeDelete). When that read fails, the record
// provisioning saved at startup stands in (snapshot, when it is this
// pod's: saved is true); without one the pod's start is unknown, so its
// cost is reported unknown, never zero. readErr is the failed read, for
// the caller to warn about: a failed read never stops the deletion.
func RecordBeforeDelete(ctx context.Context, api runpod.PodAPI, podID string, snapshot *rest.Pod) (rec PodRecord, saved bool, readErr error) {
	pod, err := runpod.RecordBeforeDelete(ctx, api, podID)
	switch {
	case err == nil:
		return PodRecordOf(pod), false, nil
	case snapshot != nil && snapshot.ID == podID:
		return PodRecordOf(snapshot), true, err
	}
	return PodRecord{APIVersion: 2, ID: podID}, false, err
}

// RejectedAttempts lists the provisioning attempts that created a pod and
// were not accepted: the paid side of provisioning, for Report.Rejected.
// Attempts that created nothing cost nothing and are left out.
func RejectedAttempts(attempts []runpod.Attempt) []Attempt {
	var out []Attempt
	for _, a := range attempts {
		if a.Outcome == runpod.OutcomeAccepted || a.PodID == "" {
			continue
		}
		out = append(out, Attempt{Name: a.Name, GPUTypeID: a.Candidate.GPUTypeID, Outcome: string(a.Outcome), Seconds: a.Seconds, EstimatedCost: a.EstimatedCost})
	}
	return out
}

// MarksOf are the stage marks of the GPU job's progress as GitHub reports
// it: when the job started, and when its test step started and ended. A
// time the source did not report stays nil, so its stage is unknown, never
// zero.
func MarksOf(p runpod.JobProgress) Marks {
	at := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		return &t
	}
	return Marks{JobStarted: at(p.JobStartedAt), TestsStarted: at(p.TestsStartedAt), TestsEnded: at(p.TestsEndedAt)}
}
