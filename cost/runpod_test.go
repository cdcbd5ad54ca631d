package cost

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpugate/gpugate/internal/faketime"
	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/rest"
	"github.com/gpugate/gpugate/runpod/runpodtest"
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

// The billing record is read before the deletion; when that read fails,
// the record provisioning saved at startup stands in, and only the
// record of this pod: without it the start is unknown, so the cost is
// unknown, never zero.
func TestRecordBeforeDelete_AFailedReadFallsBackToTheStartupRecordElseUnknown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := runpodtest.New(runpodtest.WithSchedule(0, 0))
		api, err := fake.NewClient()
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		pod, err := api.CreatePod(ctx, rest.CreatePodRequest{Name: "g-c1", Image: "img", GPU: rest.GPURequest{ID: "NVIDIA L4", Count: 1}})
		if err != nil {
			t.Fatal(err)
		}
		faketime.Advance(time.Second) // the pod starts: its record has a start
		rec, saved, readErr := RecordBeforeDelete(ctx, api, pod.ID, nil)
		if readErr != nil || saved || rec.ID != pod.ID || rec.StartedAt == nil || rec.GPUTypeID != "NVIDIA L4" {
			t.Errorf("a read record: %+v, saved %v, %v", rec, saved, readErr)
		}
		started := time.Now().Add(-time.Minute)
		snap := &rest.Pod{ID: pod.ID, Name: "g-c1", Cost: 0.5, StartedAt: &started}
		fake.AddFault(runpodtest.Fault{Method: "GET", Path: "/v2/pods/" + pod.ID, Status: 503, Times: 1000})
		rec, saved, readErr = RecordBeforeDelete(ctx, api, pod.ID, snap)
		if readErr == nil || !saved || !cmp.Equal(rec, PodRecordOf(snap)) {
			t.Errorf("a failed read with the startup record: %+v, saved %v, %v", rec, saved, readErr)
		}
		other := &rest.Pod{ID: "another", StartedAt: &started, Cost: 0.5}
		rec, saved, readErr = RecordBeforeDelete(ctx, api, pod.ID, other)
		if readErr == nil || saved || rec != (PodRecord{APIVersion: 2, ID: pod.ID}) {
			t.Errorf("a failed read with another pod's record: %+v, saved %v, %v", rec, saved, readErr)
		}
		fake.ClearFaults()
		rec, _, readErr = RecordBeforeDelete(ctx, api, "gpugate-1-1-c9", nil)
		if !errors.Is(readErr, rest.ErrNotFound) || rec.StartedAt != nil {
			t.Errorf("no such pod: %+v, %v", rec, readErr)
		}
		runpod.Delete(ctx, api, pod.ID)
	})
}

// A cleanup's outputs: the deletion, the cost and whether it is known; a
// run that accepted no pod paid nothing for one, so its cost is zero and
// known.
func TestReportOutputs_NoAcceptedPodCostsZeroAndKnown(t *testing.T) {
	paid := Report{PodID: "p1", Window: Window{Known: true, PriceSource: PriceList, Cost: 0.1234567}}
	unknown := Report{PodID: "p1", Window: Window{Known: false}}
	for name, tc := range map[string]struct {
		rep  Report
		want [][2]string
	}{
		"paid":    {paid, [][2]string{{"deleted", "true"}, {"cost", "0.123457"}, {"cost_known", "true"}}},
		"unknown": {unknown, [][2]string{{"deleted", "true"}, {"cost", "0.000000"}, {"cost_known", "false"}}},
		"no pod":  {NewRejectedReport(nil), [][2]string{{"deleted", "none"}, {"cost", "0.000000"}, {"cost_known", "true"}}},
	} {
		if diff := cmp.Diff(tc.want, tc.rep.Outputs()); diff != "" {
			t.Errorf("%s (-want +got)\n%s", name, diff)
		}
	}
}
