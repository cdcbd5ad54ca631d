package demo

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gpugate/gpugate/cost"
	"github.com/gpugate/gpugate/gateflow"
	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/rest"
	"github.com/gpugate/gpugate/runpod/runpodtest"
)

// TimeScale is how much faster than real time the demonstration runs: it
// compresses time, never money. Its fake provider and
// GPU job run TimeScale times faster than the schedule below; what it
// prints (each attempt's paid seconds, the accepted pod's paid window and
// its stages, and their dollars) is restated from that schedule at real
// time: each figure is what that many real seconds of the pod cost at its
// hourly price. The wall clock of a compressed run is not what a real run
// pays, and it differs from run to run; the schedule does neither, so the
// demonstration prints the same on every run.
const TimeScale = 100

// realTime is the demonstration's schedule at real time, and what the
// fake answered, to restate the compressed run.
type realTime struct {
	provision time.Duration // create to the container's start (billing starts)
	start     time.Duration // the container starting
	proof     time.Duration // the CUDA proof, before the runner registers (or the container exits)
	setup     time.Duration // the GPU job's setup, from the hand-over
	tests     time.Duration // the tests
	cleanup   time.Duration // the tests' end to the confirmed deletion
	requests  func() []runpodtest.Request
	throttle  runpodtest.Fault // the scenario's 429
}

var _ gateflow.Restater = (*realTime)(nil)

// compressed is d as the compressed run plays it.
func compressed(d time.Duration) time.Duration { return d / TimeScale }

// retryAfter is how long the scenario's 429 made the client wait: real
// seconds (Retry-After is never compressed).
func (rt *realTime) retryAfter() time.Duration {
	n, _ := strconv.Atoi(rt.throttle.RetryAfter)
	return time.Duration(n) * time.Second
}

// throttled lists the requests about pod id the fake answered 429.
func (rt *realTime) throttled(id string) []runpodtest.Request {
	var out []runpodtest.Request
	for _, r := range rt.requests() {
		if r.Status == 429 && id != "" && strings.TrimPrefix(r.Path, "/v2/pods/") == id {
			out = append(out, r)
		}
	}
	return out
}

// Notes are the lines the attempt table shows under attempt a: each 429
// its pod's reads were answered, and the client's pause.
func (rt *realTime) Notes(a runpod.Attempt) []string {
	var out []string
	if a.Outcome == runpod.OutcomeExited {
		// The demo's fake host fails the proof: the pod's entry point runs
		// it before registering the runner, and exits when it fails.
		out = append(out, "the CUDA proof failed on this host (it runs before the runner registers): the pod exited and was deleted at once")
	}
	for _, r := range rt.throttled(a.PodID) {
		out = append(out, fmt.Sprintf("%s %s answered 429 Too Many Requests (Retry-After: %s s): the client paused %s and read again", r.Method, r.Path, rt.throttle.RetryAfter, rt.retryAfter()))
	}
	return out
}

// Restate rewrites res's attempts at real time, by the rule the cost
// report bills a pod (cost.PaidWindow): from its container's start, never
// its create. A create the provider refused created no pod and paid
// nothing; a pod's provisioning, create to container start, is not billed;
// it paid from its container's start through the start and the CUDA proof,
// whether its runner then came online (accepted) or the proof stopped it
// (exited), and for any pause a 429 on its reads cost.
func (rt *realTime) Restate(res *runpod.Result) {
	res.RejectedCost = 0
	for i := range res.Attempts {
		a := &res.Attempts[i]
		a.Seconds = 0
		if a.PodID != "" {
			paid := rt.start + rt.proof + time.Duration(len(rt.throttled(a.PodID)))*rt.retryAfter()
			a.Seconds = paid.Seconds()
		}
		a.EstimatedCost = a.Seconds / 3600 * a.HourlyPrice
		if a.Outcome == runpod.OutcomeAccepted {
			res.StartupSeconds = a.Seconds
		} else {
			res.RejectedCost += a.EstimatedCost
		}
	}
}

// Report is the accepted pod's cost report at real time: its paid window
// runs from the container's start to the confirmed deletion, through the
// GPU job's start (the hand-over, once its runner was online: the accepted
// attempt's paid seconds after the container's start, so that its startup
// stage is that attempt), the tests' start after setup and their end, then
// cleanup. The container's start counts from the pod's create as the
// provider recorded it.
func (rt *realTime) Report(pod *rest.Pod, res runpod.Result) (cost.Report, error) {
	rec := cost.PodRecordOf(pod)
	created := pod.CreatedAt.UTC().Truncate(time.Second)
	started := created.Add(rt.provision)
	job := started.Add(time.Duration(res.StartupSeconds * float64(time.Second)))
	tests := job.Add(rt.setup)
	ended := tests.Add(rt.tests)
	deleted := ended.Add(rt.cleanup)
	rec.StartedAt = &started
	return cost.NewReport(rec, deleted, cost.Marks{JobStarted: &job, TestsStarted: &tests, TestsEnded: &ended}, cost.RejectedAttempts(res.Attempts))
}

// String says what the figures are.
func (rt *realTime) String() string {
	return fmt.Sprintf("the demonstration ran %dx faster than this schedule, which every time and dollar above restates at real time: provisioning %s, container start %s, CUDA proof %s, job setup %s, tests %s, cleanup %s; money is not compressed",
		TimeScale, rt.provision, rt.start, rt.proof, rt.setup, rt.tests, rt.cleanup)
}
