package runpod_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/runpodtest"
)

// TestWatch_NoPaidPodOutlivesItsJobUnderRandomSchedules: whatever the job
// does (its tests start at any time or never; it ends before its tests,
// after them, or never), whether the pull request moves or closes, and
// whatever GitHub's and RunPod's APIs fail meanwhile, the watchdog
// returns within the pod's lifetime backstop, and it returns without
// deleting only when the job completed after its tests started. It
// deletes for obsolescence only when the pull request really moved or
// closed (unknown state is never obsolete), and for the setup deadline
// only when the tests had not started by then, or their start could not
// be read.
func TestWatch_NoPaidPodOutlivesItsJobUnderRandomSchedules(t *testing.T) {
	const watchStartsAfter = 40 * time.Second // the pod started 40 s before the watch (newWatchWorld)
	opts := runpod.DefaultWatchOptions()
	deadline := opts.SetupDeadline - watchStartsAfter
	for seed := range 200 {
		synctest.Test(t, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 5))
			w := newWatchWorld(t)
			at := func(d time.Duration, f func()) { time.AfterFunc(d, f) }
			random := func(limit time.Duration) time.Duration { return time.Duration(rng.Int64N(int64(limit))) }
			var log []string
			note := func(format string, args ...any) { log = append(log, fmt.Sprintf(format, args...)) }

			testsStart := time.Duration(-1) // never
			if rng.IntN(10) < 7 {
				testsStart = random(1200 * time.Second)
				at(testsStart, func() { w.prog.Set(runpod.JobProgress{TestsStarted: true}) })
				note("tests start at %v", testsStart)
			}
			completesAfterTests := false
			switch rng.IntN(3) {
			case 0: // the job ends
				end := random(3000 * time.Second)
				if testsStart >= 0 && end > testsStart {
					completesAfterTests = true
					at(end, func() { w.prog.Set(runpod.JobProgress{TestsStarted: true, Completed: true, Conclusion: "success"}) })
				} else {
					at(end, func() { w.prog.Set(runpod.JobProgress{Completed: true, Conclusion: "failure"}) })
					testsStart = -1
				}
				note("job ends at %v (after tests: %v)", end, completesAfterTests)
			}
			obsolete := time.Duration(-1)
			if rng.IntN(4) == 0 {
				obsolete = random(2000 * time.Second)
				next := runpod.PR{Open: rng.IntN(2) == 0, HeadSHA: "moved"}
				at(obsolete, func() { w.pr.Set(next, nil) })
				note("the pull request changes at %v", obsolete)
			}
			progressBlind := false // the progress API failed across the setup deadline
			for range rng.IntN(3) {
				from, span := random(2000*time.Second), random(300*time.Second)
				if from <= deadline+opts.GitHubPoll && from+span >= deadline-opts.GitHubPoll {
					progressBlind = true
				}
				at(from, func() { w.prog.Fail(true) })
				at(from+span, func() { w.prog.Fail(false) })
				note("progress fails %v..%v", from, from+span)
			}
			for range rng.IntN(3) {
				from, span := random(2000*time.Second), random(300*time.Second)
				at(from, func() {
					if obsolete < 0 || from < obsolete {
						w.pr.Set(runpod.PR{}, errors.New("502 Bad Gateway"))
					}
				})
				at(from+span, func() {
					if obsolete < 0 || from+span < obsolete {
						w.pr.Set(runpod.PR{Open: true, HeadSHA: head}, nil)
					}
				})
				note("the PR read fails %v..%v", from, from+span)
			}
			for range rng.IntN(3) {
				from, n := random(2000*time.Second), 1+rng.IntN(5)
				at(from, func() {
					w.srv.AddFault(runpodtest.Fault{Method: "GET", Path: "/v2/pods/" + w.pod, Status: 503, Times: n})
				})
				note("%d pod reads fail from %v", n, from)
			}

			res, took, err := w.watch()
			fail := func(format string, args ...any) {
				t.Helper()
				t.Errorf("seed %d: "+format+"\nschedule: %q\nresult %+v, err %v, after %v", append(append([]any{seed}, args...), log, res, err, took)...)
			}
			if took > opts.Lifetime-watchStartsAfter+5*time.Minute {
				fail("the watch outlived the lifetime backstop")
			}
			switch res.Outcome {
			case runpod.WatchCompleted:
				if !completesAfterTests || res.Deleted {
					fail("ended without deleting, but the job did not complete after its tests")
				}
			case runpod.WatchGone:
				fail("the pod was gone, but nothing deleted it")
			default:
				if !res.Deleted || len(w.srv.Running()) != 0 {
					fail("the pod is still running")
				}
			}
			if res.Outcome == runpod.WatchObsolete && (obsolete < 0 || took < obsolete) {
				fail("deleted as obsolete, but the pull request had not changed")
			}
			if res.Outcome == runpod.WatchSetupTimeout && testsStart >= 0 && testsStart < deadline-5*time.Second && !progressBlind {
				fail("deleted at the setup deadline, but the tests had started at %v", testsStart)
			}
		})
	}
}
