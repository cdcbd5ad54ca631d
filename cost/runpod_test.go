package cost

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/rest"
)

func TestRejectedKeepsOnlyCreatedUnacceptedAttempts(t *testing.T) {
	attempts := []runpod.Attempt{
		{Name: "g-c1", Candidate: runpod.Candidate{GPUTypeID: "NVIDIA L4"}, Outcome: runpod.OutcomeNoCapacity},
		{Name: "g-c2", Candidate: runpod.Candidate{GPUTypeID: "NVIDIA GeForce RTX 4090"}, PodID: "p2", Outcome: runpod.OutcomeExited, Seconds: 95, EstimatedCost: 0.018},
		{Name: "g-c3", Candidate: runpod.Candidate{GPUTypeID: "NVIDIA L40S"}, PodID: "p3", Outcome: runpod.OutcomeAccepted, Seconds: 80},
	}
	want := []Attempt{{Name: "g-c2", GPUTypeID: "NVIDIA GeForce RTX 4090", Outcome: "exited", Seconds: 95, EstimatedCost: 0.018}}
	if diff := cmp.Diff(want, RejectedAttempts(attempts)); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

func TestRecordKeepsAnUnknownStartUnknown(t *testing.T) {
	start := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	got := PodRecordOf(&rest.Pod{ID: "p1", Name: "g-c1", Cost: 0.69, StartedAt: &start, GPU: &rest.PodGPU{ID: "NVIDIA GeForce RTX 4090"}})
	want := PodRecord{APIVersion: 2, ID: "p1", Name: "g-c1", GPUTypeID: "NVIDIA GeForce RTX 4090", StartedAt: &start, ListPrice: 0.69}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	if PodRecordOf(&rest.Pod{ID: "p2", Cost: 0.69}).StartedAt != nil {
		t.Error("a pod without startedAt must keep its start unknown")
	}
}

// Stage marks GitHub did not report remain unknown: nil, never the zero
// time.
func TestMarksKeepUnreportedTimesUnknown(t *testing.T) {
	start := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	tests := start.Add(3 * time.Minute)
	got := MarksOf(runpod.JobProgress{JobStartedAt: start, TestsStartedAt: tests})
	want := Marks{JobStarted: &start, TestsStarted: &tests}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}
