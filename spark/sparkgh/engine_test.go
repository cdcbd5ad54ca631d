package sparkgh

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/sparktest"
)

// newEngineWorld is newWorld with an execution engine running the lanes.
func newEngineWorld(t *testing.T, pairTest bool) *world {
	t.Helper()
	w := &world{gh: newFakeGH()}
	cfg := DefaultConfig("webhook-secret-123")
	cfg.Engine = "dstack"
	in, err := New(cfg, nil, w.gh, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.in = in
	w.opts = spark.DefaultOptions()
	w.opts.Service, w.opts.PairTest, w.opts.OnGrant = &sparktest.Service{}, pairTest, in.OnGrant
	if w.c, err = spark.New(sparktest.NewStore(), w.opts); err != nil {
		t.Fatal(err)
	}
	in.SetController(w.c)
	w.tick(t)
	return w
}

// grantedLane labels pull request 7 at sha1 and returns its granted lease.
func (w *world) grantedLane(t *testing.T, label string) spark.Request {
	t.Helper()
	w.label(t, "labeled", label, "maint", prJSON(7, sha1, []string{label}, false))
	w.tick(t)
	_, live, _ := w.c.Snapshot(ctx)
	if len(live) != 1 || live[0].State != spark.Active {
		t.Fatalf("the lane was not granted: %+v", live)
	}
	return live[0]
}

// With an execution engine the grant mints no one-job runner, hands no
// runner config off and dispatches no workflow: the engine runs the lane
// at its pull request's repository and commit, and no runner is ever
// removed or swept for it.
func TestOnGrant_WithAnEngineMintsNoRunnerAndDispatchesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newEngineWorld(t, false)
		handed := 0
		w.in.JITConfigs = func(string, Secret) error { handed++; return nil }
		r := w.grantedLane(t, "spark-test")
		if len(w.gh.minted) != 0 || len(w.gh.dispatches) != 0 || handed != 0 {
			t.Errorf("minted %v, dispatched %v, handed off %d configs: the engine runs the lane", w.gh.minted, w.gh.dispatches, handed)
		}
		if repo, sha, ok := Target(r); !ok || repo != "o/butter" || sha != sha1 {
			t.Errorf("Target = %q %q %v, want the pull request's repository and head", repo, sha, ok)
		}
		if got := w.gh.last(1).Title; got != "Spark 2 allocated — environment preparing" {
			t.Errorf("the granted check: %q", got)
		}
		if err := w.in.EngineFinished(ctx, r.ID, EngineRun{Name: "spark-" + r.ID, Why: "failed (job_failed)"}); err != nil {
			t.Fatal(err)
		}
		w.tick(t)
		if removed, err := w.in.SweepRegisteredRunners(ctx); err != nil || len(removed) != 0 || w.gh.removeCalls != 0 {
			t.Errorf("runners removed for a lane no runner ran: %v %v (%d calls)", removed, err, w.gh.removeCalls)
		}
		if got := w.in.Engine(); got != "dstack" {
			t.Errorf("Engine() = %q", got)
		}
	})
}

// The engine's report concludes the check: running, then passed only for
// a run that finished successfully with the lease's evidence receipt
// recorded (naming the digest and linking the run); a successful run
// without a receipt, and a run that did not succeed, fail it, naming the
// run and how it ended. Every report releases the lease.
func TestEngineFinished_PassesOnlyASuccessfulRunWithItsReceipt(t *testing.T) {
	const url = "https://dstack.example.com/projects/main/runs/0000-1"
	for name, tc := range map[string]struct {
		run          EngineRun
		receipt      bool
		title, concl string
		says         []string
	}{
		"succeeded with its receipt":    {EngineRun{Name: "spark-r", Succeeded: true, URL: url}, true, "Spark test passed — evidence receipt recorded", "success", []string{"(" + url + ")", "sha256:"}},
		"succeeded without a receipt":   {EngineRun{Name: "spark-r", Succeeded: true, URL: url}, false, "Spark test passed without an evidence receipt", "failure", nil},
		"failed, with a receipt":        {EngineRun{Name: "spark-r", Why: "failed (job_failed); job 0 failed: container_exited_with_error"}, true, "Spark test failed", "failure", []string{"run spark-r ended failed (job_failed); job 0 failed: container_exited_with_error"}},
		"aborted":                       {EngineRun{Name: "spark-r", Why: "terminated (aborted_by_user); job 0 aborted: aborted_by_user"}, false, "Spark test failed", "failure", []string{"spark-r", "aborted_by_user"}},
		"gone":                          {EngineRun{Name: "spark-r", Why: "without a trace"}, true, "Spark test failed", "failure", []string{"run spark-r ended without a trace"}},
		"refused, no run, no reason":    {EngineRun{}, false, "Spark test failed", "failure", []string{"it did not finish successfully"}},
		"a link that is not https only": {EngineRun{Name: "spark-r", Succeeded: true, URL: "http://127.0.0.1:3000/x"}, true, "Spark test passed — evidence receipt recorded", "success", nil},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newEngineWorld(t, false)
				r := w.grantedLane(t, "spark-test")
				if err := w.in.EngineRunning(ctx, r.ID); err != nil {
					t.Fatal(err)
				}
				w.tick(t)
				if got := w.gh.last(1).Title; got != "Spark test running — exact SHA 1111111" {
					t.Errorf("running: %q", got)
				}
				if tc.receipt {
					if _, err := w.c.RecordReceipt(ctx, r.ID, []byte(`{"suite":"smoke","passed":12}`)); err != nil {
						t.Fatal(err)
					}
				}
				if err := w.in.EngineFinished(ctx, r.ID, tc.run); err != nil {
					t.Fatal(err)
				}
				got := w.gh.last(1)
				if got.Title != tc.title || got.Conclusion != tc.concl {
					t.Errorf("the check: %q %q, want %q %q", got.Title, got.Conclusion, tc.title, tc.concl)
				}
				for _, s := range tc.says {
					if !strings.Contains(got.Summary, s) {
						t.Errorf("the check's summary %q does not say %q", got.Summary, s)
					}
				}
				if strings.Contains(got.Summary, "http://") {
					t.Errorf("the check links a run page that is not https: %q", got.Summary)
				}
				if st, _ := w.c.Status(ctx, r.ID); st.Request.State != spark.Released {
					t.Errorf("the lease is %s after the run's report, want released", st.Request.State)
				}
				if err := w.in.EngineFinished(ctx, r.ID, tc.run); !errors.Is(err, ErrNotActive) {
					t.Errorf("a second report: %v, want ErrNotActive", err)
				}
			})
		})
	}
}

// A report on a lease the integration did not queue (a development
// lease) is ErrNotActive and changes nothing.
func TestEngineFinished_ALeaseTheIntegrationDidNotQueueIsNotItsToEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newEngineWorld(t, false)
		dev, err := w.c.Submit(ctx, spark.SubmitRequest{Class: spark.Development, Owner: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		w.tick(t)
		if err := w.in.EngineFinished(ctx, dev.ID, EngineRun{Name: "spark-" + dev.ID, Succeeded: true}); !errors.Is(err, ErrNotActive) {
			t.Errorf("EngineFinished of a development lease: %v, want ErrNotActive", err)
		}
		if err := w.in.EngineRunning(ctx, dev.ID); !errors.Is(err, ErrNotActive) {
			t.Errorf("EngineRunning of a development lease: %v, want ErrNotActive", err)
		}
		if st, _ := w.c.Status(ctx, dev.ID); st.Request.State != spark.Active {
			t.Errorf("the development lease is %s", st.Request.State)
		}
	})
}
