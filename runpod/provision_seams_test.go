package runpod_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/rest"
	"github.com/gpugate/gpugate/runpod/runpodtest"
)

// A lost create whose pod cannot be listed is never "confirmed deleted":
// the pod is known only by its name, so no ID field receives the name (a
// DELETE of it answers 404, which confirmed a pod that kept billing).
// Cleanup resolves the name by listing before it claims anything, and
// fails naming the pod when the listing still fails.
func TestProvision_APodKnownOnlyByNameIsNeverConfirmedDeleted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		w.srv.AddFault(runpodtest.Fault{Method: "POST", Path: "/v2/pods", LoseResponse: true})
		w.srv.AddFault(runpodtest.Fault{Method: "GET", Path: "/v2/pods", Status: 503, Times: 1000})
		res, err := w.provision(context.Background(), nil)
		var de *runpod.DeleteError
		if !errors.Is(err, runpod.ErrNotDeleted) || !errors.As(err, &de) {
			t.Fatalf("err = %v, want a DeleteError", err)
		}
		name := res.Attempts[0].Name
		if res.LivePodID != "" || !slices.Equal(res.UnresolvedPodNames, []string{name}) || de.Name != name || de.PodID != "" {
			t.Fatalf("live pod ID %q, unresolved name %q, error %+v; want the pod known by name %q only", res.LivePodID, res.UnresolvedPodNames, de, name)
		}
		if got := w.srv.Running(); len(got) != 1 {
			t.Fatalf("running %v, want the lost create's pod", got)
		}

		// Cleanup while the listing still fails: not confirmed, named.
		err = runpod.DeleteByName(context.Background(), w.c, name)
		if !errors.Is(err, runpod.ErrNotDeleted) || !errors.As(err, &de) || de.Name != name {
			t.Fatalf("DeleteByName err = %v, want ErrNotDeleted naming %q", err, name)
		}
		if n := w.srv.Count("DELETE", "/v2/pods/*"); n != 0 {
			t.Errorf("%d DELETE requests sent without an ID", n)
		}

		// The listing recovers: the pod is found by name and deleted.
		w.srv.ClearFaults()
		if err := runpod.DeleteByName(context.Background(), w.c, name); err != nil {
			t.Fatalf("DeleteByName: %v", err)
		}
		if got := w.srv.Running(); len(got) != 0 {
			t.Errorf("still running after the resolution: %v", got)
		}
		// A name with no pod (the lost create never happened) is no error.
		if err := runpod.DeleteByName(context.Background(), w.c, "gpugate-42-1-c9"); err != nil {
			t.Errorf("DeleteByName of a name no pod has: %v", err)
		}
	})
}

// The create retry policy (RunPod trust boundary): an unrelated transient
// failure gets one short retry in the current tier; every create request
// and pause of one provisioning shares one 60-second deadline; a refused
// API key (401, or a 403 that is not about the GPU type) stops at once.
func TestProvision_CreateRetryIsOneShortRetryWithinOneSixtySecondDeadline(t *testing.T) {
	tests := map[string]struct {
		fault     runpodtest.Fault
		wantErr   error
		maxPosts  int // at most this many create requests in all
		posts     int // exactly this many (0: not checked)
		wantFirst runpod.Outcome
	}{
		"a persistent 503": {
			fault: runpodtest.Fault{Status: 503, Times: 1000}, wantErr: runpod.ErrExhausted, maxPosts: 12, wantFirst: runpod.OutcomeCreateError,
		},
		"a slow persistent 503": {
			fault: runpodtest.Fault{Status: 503, Delay: 25 * time.Second, Times: 1000}, wantErr: runpod.ErrCreateDeadline, maxPosts: 3, wantFirst: runpod.OutcomeCreateError,
		},
		"a 401": {
			fault: runpodtest.Fault{Status: 401, Times: 1000}, wantErr: runpod.ErrKeyRefused, posts: 1, wantFirst: runpod.OutcomeKeyRefused,
		},
		"a 403 refusing the key": {
			fault: runpodtest.Fault{Status: 403, Detail: "access denied", Times: 1000}, wantErr: runpod.ErrKeyRefused, posts: 1, wantFirst: runpod.OutcomeKeyRefused,
		},
		"a 403 about the GPU pool": {
			fault: runpodtest.Fault{Status: 403, Times: 1}, posts: 2, wantFirst: runpod.OutcomeForbidden,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newWorld(t)
				tc.fault.Method, tc.fault.Path = "POST", "/v2/pods"
				w.srv.AddFault(tc.fault)
				res, err := w.provision(context.Background(), w.catalog(t))
				if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				if tc.wantErr == nil && err != nil {
					t.Fatalf("err = %v, want the next candidate accepted", err)
				}
				posts := 0
				var first, last time.Time
				for _, r := range w.srv.Requests() {
					if r.Method == "POST" && r.Path == "/v2/pods" {
						if posts == 0 {
							first = r.At
						}
						posts++
						last = r.At
					}
				}
				if tc.posts != 0 && posts != tc.posts {
					t.Errorf("%d create requests, want %d", posts, tc.posts)
				}
				if tc.maxPosts != 0 && (posts > tc.maxPosts || posts > 2*len(res.Attempts)) {
					t.Errorf("%d create requests for %d candidates, want one short retry each, at most %d", posts, len(res.Attempts), tc.maxPosts)
				}
				if span := last.Sub(first); span > 60*time.Second {
					t.Errorf("create requests went out over %v, past the shared 60 s deadline", span)
				}
				if got := res.Attempts[0].Outcome; got != tc.wantFirst {
					t.Errorf("first attempt %s, want %s", got, tc.wantFirst)
				}
				if errors.Is(err, runpod.ErrKeyRefused) && !errors.Is(err, rest.ErrUnauthorized) && !errors.Is(err, rest.ErrForbidden) {
					t.Errorf("err = %v: the refusal should still carry its status", err)
				}
			})
		})
	}
}

// The hourly ceiling is a spending rule, not a catalog filter: with the
// catalog down the candidates are unpriced, and a created pod whose own
// cost is above max_hourly_price is deleted before its runner is used.
func TestProvision_TheCeilingHoldsAgainstTheCreatedPodsOwnCost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		w.cfg.MaxHourlyPrice = 0.01
		res, err := w.provision(context.Background(), nil) // the catalog failed
		if !errors.Is(err, runpod.ErrExhausted) || res.PodID != "" {
			t.Fatalf("accepted %q at $%.2f/h (err %v) over a $0.01/h ceiling", res.PodID, res.HourlyPrice, err)
		}
		for _, a := range res.Attempts {
			if a.Outcome != runpod.OutcomeOverCeiling {
				t.Errorf("attempt %s: %s, want %s", a.Name, a.Outcome, runpod.OutcomeOverCeiling)
			}
		}
		if got := w.srv.Running(); len(got) != 0 {
			t.Errorf("pods over the ceiling still running: %v", got)
		}
		if got := w.reg.Minted(); len(got) != len(res.Attempts) {
			t.Errorf("%d runner configs for %d attempts", len(got), len(res.Attempts))
		}
		for _, a := range res.Attempts {
			if r, found, _ := w.reg.Runner(context.Background(), a.Name); found && r.Online {
				t.Errorf("the runner of %s came online on a pod over the ceiling", a.Name)
			}
		}
	})
}
