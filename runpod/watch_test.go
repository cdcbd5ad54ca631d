package runpod_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpugate/gpugate/internal/faketime"
	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/rest"
	"github.com/gpugate/gpugate/runpod/runpodtest"
)

type watchWorld struct {
	srv  *runpodtest.Server
	c    *rest.Client
	prog *runpodtest.Progress
	pr   *runpodtest.PR
	runs *runpodtest.Runs
	deps runpod.WatchDeps
	pod  string
}

// newWatchWorld creates a pod and waits until it runs (started 20 s after
// creation, running 40 s later).
func newWatchWorld(t *testing.T) *watchWorld {
	t.Helper()
	w := &watchWorld{srv: runpodtest.New(), prog: &runpodtest.Progress{}, pr: runpodtest.NewPR(head), runs: runpodtest.NewRuns()}
	c, err := w.srv.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	w.c = c
	p, err := c.CreatePod(context.Background(), podRequest("gpugate-1-1-c1", "NVIDIA L4"))
	if err != nil {
		t.Fatal(err)
	}
	w.pod = p.ID
	faketime.Advance(60 * time.Second)
	w.deps = runpod.WatchDeps{API: c, Progress: w.prog, PR: w.pr, Head: head, Runs: w.runs, RunID: 1}
	return w
}

func (w *watchWorld) watch() (runpod.WatchResult, time.Duration, error) {
	start := time.Now()
	res, err := runpod.Watch(context.Background(), w.deps, w.pod, runpod.DefaultWatchOptions())
	return res, time.Since(start), err
}

func TestWatch_SetupDeadline900sFromStartedAt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWatchWorld(t) // started 40 s ago
		res, took, err := w.watch()
		if !errors.Is(err, runpod.ErrWatchdog) || res.Outcome != runpod.WatchSetupTimeout || !res.Deleted {
			t.Fatalf("res %+v, err %v", res, err)
		}
		if took < 860*time.Second || took > 870*time.Second {
			t.Errorf("deleted after %v; the 900 s run from startedAt, 40 s before the watch began", took)
		}
		if len(w.srv.Running()) != 0 {
			t.Error("pod still running")
		}
		if res.CostSoFar <= 0 {
			t.Error("early deletion must report the cost already known")
		}
	})
}

func TestWatch_ProgressFailuresDoNotExtendTheSetupDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWatchWorld(t)
		w.prog.Fail(true)
		res, took, _ := w.watch()
		if res.Outcome != runpod.WatchSetupTimeout || took > 870*time.Second {
			t.Errorf("outcome %s after %v; an unreadable progress API must not extend the deadline", res.Outcome, took)
		}
	})
}

func TestWatch_TestsStartingDisarmsSetupThenLifetimeBackstop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWatchWorld(t)
		time.AfterFunc(300*time.Second, func() { w.prog.Set(runpod.JobProgress{TestsStarted: true}) })
		res, took, err := w.watch()
		if !errors.Is(err, runpod.ErrWatchdog) || res.Outcome != runpod.WatchLifetime || !res.TestsStarted {
			t.Fatalf("res %+v, err %v", res, err)
		}
		if took < 3550*time.Second || took > 3570*time.Second {
			t.Errorf("deleted after %v; want the 3,600 s backstop from startedAt", took)
		}
	})
}

// An Actions token has 1,000 requests an hour per repository, shared by
// every job: over the pod's hour the watchdog reads the pod every 10 s but
// GitHub (the PR and the job's progress) every 30 s.
func TestWatch_GitHubIsReadEvery30SecondsNotOnEveryPodRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWatchWorld(t)
		time.AfterFunc(300*time.Second, func() { w.prog.Set(runpod.JobProgress{TestsStarted: true}) })
		res, took, _ := w.watch()
		if res.Outcome != runpod.WatchLifetime {
			t.Fatalf("res %+v", res)
		}
		most := int(took/(30*time.Second)) + 2
		if w.prog.Reads() > most || w.pr.Reads() > most || res.PodReads < int(took/(10*time.Second)) {
			t.Errorf("in %v: %d progress and %d PR reads (want at most %d each), %d pod reads", took, w.prog.Reads(), w.pr.Reads(), most, res.PodReads)
		}
	})
}

// The setup deadline never deletes on a stale progress read: tests that
// started 5 s before it, after the last periodic read, are seen.
func TestWatch_TheSetupDeadlineReadsProgressAfreshBeforeDeleting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWatchWorld(t)                                                                          // the deadline falls 860 s into the watch
		time.AfterFunc(855*time.Second, func() { w.prog.Set(runpod.JobProgress{TestsStarted: true}) }) // the last periodic read was at 840 s
		res, _, _ := w.watch()
		if res.Outcome != runpod.WatchLifetime || !res.TestsStarted {
			t.Errorf("res %+v: tests that had started were taken for a stalled setup", res)
		}
	})
}

// A GitHub request that never answers must not stop the watchdog: each
// read is bounded, and the setup deadline still deletes the pod.
func TestWatch_AHungGitHubRequestDoesNotSuspendTheDeadlines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWatchWorld(t)
		w.prog.Hang(true)
		res, took, _ := w.watch()
		if res.Outcome != runpod.WatchSetupTimeout || !res.Deleted || took > 900*time.Second {
			t.Errorf("outcome %s, deleted %v, after %v: a hung progress read suspended the watchdog", res.Outcome, res.Deleted, took)
		}
	})
}

func TestWatch_JobCompletingAfterTestsEndsTheWatchWithoutDeleting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWatchWorld(t)
		w.prog.Set(runpod.JobProgress{TestsStarted: true})
		time.AfterFunc(1200*time.Second, func() { w.prog.Set(runpod.JobProgress{TestsStarted: true, Completed: true, Conclusion: "success"}) })
		res, _, err := w.watch()
		if err != nil || res.Outcome != runpod.WatchCompleted || res.Deleted {
			t.Errorf("res %+v, err %v", res, err)
		}
		// Steady-state cadence: at most six pod reads a minute.
		if res.PodReads > 6*21 {
			t.Errorf("%d pod reads in 20 minutes", res.PodReads)
		}
	})
}

// The result says whether the GPU job passed as a field of its own, the
// job's conclusion as GitHub reports it, so nothing has to read it out of
// the human Reason: a failed job completed too, and "" is unknown.
func TestWatch_TheResultCarriesTheJobsConclusion(t *testing.T) {
	for name, tc := range map[string]struct {
		job     runpod.JobProgress
		outcome runpod.WatchOutcome
	}{
		"passed":              {runpod.JobProgress{TestsStarted: true, Completed: true, Conclusion: "success"}, runpod.WatchCompleted},
		"failed":              {runpod.JobProgress{TestsStarted: true, Completed: true, Conclusion: "failure"}, runpod.WatchCompleted},
		"finished before":     {runpod.JobProgress{Completed: true, Conclusion: "cancelled"}, runpod.WatchEarlyFinish},
		"no conclusion given": {runpod.JobProgress{TestsStarted: true, Completed: true}, runpod.WatchCompleted},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newWatchWorld(t)
				w.prog.Set(tc.job)
				res, _, _ := w.watch()
				if res.Outcome != tc.outcome || res.Conclusion != tc.job.Conclusion {
					t.Errorf("outcome %q, conclusion %q; want %q, %q", res.Outcome, res.Conclusion, tc.outcome, tc.job.Conclusion)
				}
			})
		})
	}
	synctest.Test(t, func(t *testing.T) {
		w := newWatchWorld(t) // the tests never start
		if res, _, _ := w.watch(); res.Outcome != runpod.WatchSetupTimeout || res.Conclusion != "" {
			t.Errorf("a job the watch never saw finish: outcome %q, conclusion %q", res.Outcome, res.Conclusion)
		}
	})
}

func TestWatch_JobFinishingBeforeTestsDeletesThePod(t *testing.T) {
	for _, listed := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			w := newWatchWorld(t)
			time.AfterFunc(100*time.Second, func() {
				w.prog.Set(runpod.JobProgress{Completed: true, Conclusion: "failure", TestStepListed: listed})
			})
			res, _, err := w.watch()
			if !errors.Is(err, runpod.ErrWatchdog) || res.Outcome != runpod.WatchEarlyFinish || len(w.srv.Running()) != 0 {
				t.Errorf("res %+v, err %v", res, err)
			}
			// A completed job lists all its steps: without the test step,
			// the watchdog's test-step setting is the likely fault.
			if hint := strings.Contains(res.Reason, "names the wrong step"); hint == listed {
				t.Errorf("test step listed %v: reason %q", listed, res.Reason)
			}
		})
	}
}

func TestWatch_ObsolescenceDeletesFirstThenCancelsTheRun(t *testing.T) {
	for name, next := range map[string]runpod.PR{"head moved": {Open: true, HeadSHA: "other"}, "closed": {Open: false, HeadSHA: head}} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newWatchWorld(t)
				w.prog.Set(runpod.JobProgress{TestsStarted: true})
				time.AfterFunc(200*time.Second, func() { w.pr.Set(next, nil) })
				res, _, err := w.watch()
				if !errors.Is(err, runpod.ErrObsolete) || !res.Deleted || !res.RunCanceled || !slices.Equal(w.runs.Canceled(), []int64{1}) {
					t.Errorf("res %+v, err %v, canceled %v", res, err, w.runs.Canceled())
				}
				if len(w.srv.Running()) != 0 {
					t.Error("the pod must be deleted before the run is cancelled")
				}
			})
		})
	}
}

func TestWatch_UnknownPRStateAndManualValidationsAreNeverObsolete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWatchWorld(t)
		w.pr.Set(runpod.PR{}, errors.New("GitHub down"))
		w.prog.Set(runpod.JobProgress{TestsStarted: true, Completed: true})
		if res, _, err := w.watch(); err != nil || res.Outcome != runpod.WatchCompleted {
			t.Errorf("unknown PR state: %+v, %v", res, err)
		}
		w.deps.PR = nil
		if res, _, err := w.watch(); err != nil || res.Outcome != runpod.WatchCompleted {
			t.Errorf("manual validation: %+v, %v", res, err)
		}
	})
}

func TestWatch_UnreadableStartMetadataDeletesAndFailsVisibly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWatchWorld(t)
		w.srv.AddFault(runpodtest.Fault{Method: "GET", Path: "/v2/pods/" + w.pod, Status: 503, Times: 1000})
		res, took, err := w.watch()
		if !errors.Is(err, runpod.ErrWatchdog) || res.Outcome != runpod.WatchUnreadable || !res.Deleted {
			t.Fatalf("res %+v, err %v", res, err)
		}
		if took > 130*time.Second {
			t.Errorf("took %v to give up on unreadable metadata", took)
		}
	})
}

func TestWatch_AlreadyDeletedPodEndsQuietly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWatchWorld(t)
		runpod.Delete(context.Background(), w.c, w.pod)
		if res, _, err := w.watch(); err != nil || res.Outcome != runpod.WatchGone {
			t.Errorf("%+v, %v", res, err)
		}
	})
}
