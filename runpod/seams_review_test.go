package runpod_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/rest"
	"github.com/gpugate/gpugate/runpod/runpodtest"
)

// A Retry-After never stops cleanup from trying, in the listing too: one
// 429 on the listing that resolves a pod by name is waited out between
// tries, never ends the budget on the first.
func TestDeleteByName_ARetryAfterNeverStopsTheListing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		res, err := w.provision(context.Background(), w.catalog(t))
		if err != nil {
			t.Fatal(err)
		}
		w.srv.AddFault(runpodtest.Fault{Method: "GET", Path: "/v2/pods", Status: 429, RetryAfter: "25", Times: 1})
		if err := runpod.DeleteByName(context.Background(), w.c, res.Label); err != nil {
			t.Fatalf("DeleteByName: %v", err)
		}
		if got := w.srv.Running(); len(got) != 0 {
			t.Errorf("still running: %v", got)
		}
	})
}

// staleList answers the first listing after the first create as if the
// pod did not exist yet (an eventually consistent listing), and loses the
// create's response after the server processed it.
type staleList struct {
	inner http.RoundTripper
	mu    sync.Mutex
	posts int
	stale bool
}

func (s *staleList) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	isPost := r.Method == "POST" && r.URL.Path == "/v2/pods"
	if r.Method == "GET" && r.URL.Path == "/v2/pods" && s.posts == 1 && !s.stale {
		s.stale = true
		s.mu.Unlock()
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(`{"pods":[]}`)), Request: r}, nil
	}
	if isPost {
		s.posts++
	}
	s.mu.Unlock()
	resp, err := s.inner.RoundTrip(r)
	if isPost && err == nil {
		resp.Body.Close()
		return nil, errors.New("connection reset after processing")
	}
	return resp, err
}

// A lost create retried because a stale listing did not show its pod can
// leave two pods with one name: the sweep deletes every one of them.
func TestProvision_TheSweepDeletesEveryPodOfTheName(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		c, err := w.srv.NewClient(rest.WithHTTPClient(&http.Client{Transport: &staleList{inner: w.srv.Client().Transport}}))
		if err != nil {
			t.Fatal(err)
		}
		w.deps.API = c
		res, err := w.provision(context.Background(), w.catalog(t))
		named := res.PodID + " " + res.LivePodID + " " + strings.Join(res.UnresolvedPodNames, " ") + " " + fmt.Sprint(err)
		for _, id := range w.srv.Running() {
			if !strings.Contains(named, id) {
				t.Errorf("pod %s billing, named nowhere (result %+v)", id, res)
			}
		}
	})
}

// zeroCost reports every pod's price as unknown.
type zeroCost struct{ runpod.PodAPI }

func (z zeroCost) CreatePod(ctx context.Context, r rest.CreatePodRequest) (*rest.Pod, error) {
	p, err := z.PodAPI.CreatePod(ctx, r)
	if p != nil {
		p.Cost = 0
	}
	return p, err
}

func (z zeroCost) GetPod(ctx context.Context, id string) (*rest.Pod, error) {
	p, err := z.PodAPI.GetPod(ctx, id)
	if p != nil {
		p.Cost = 0
	}
	return p, err
}

// The ceiling is a spending rule even when no price is known: with the
// catalog down and the pod reporting no cost, a pod is never accepted
// under a ceiling it cannot be held to.
func TestProvision_ACeilingRefusesAPodOfUnknownPrice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		w.cfg.MaxHourlyPrice = 0.01
		w.deps.API = zeroCost{w.c}
		res, _ := w.provision(context.Background(), nil)
		if res.PodID != "" {
			t.Fatalf("accepted %s of unknown price under a $0.01/h ceiling", res.PodID)
		}
		if got := w.srv.Running(); len(got) != 0 {
			t.Errorf("still running: %v", got)
		}
	})
}

// A 403 that refuses the key stops provisioning even when it mentions a
// pool (of keys); a 403 about the candidate's GPU skips only that one.
func TestProvision_A403IsAKeyRefusalUnlessItIsAboutTheGPU(t *testing.T) {
	tests := map[string]struct {
		detail    string
		wantStop  bool
		wantPosts int
	}{
		"a pool of API keys":       {"access denied to your account's pool of API keys", true, 1},
		"access denied":            {"access denied", true, 1},
		"the candidate's GPU name": {"not allowed to deploy RTX 4090 on this account", false, 2},
		"the requested pool":       {"your account cannot access the requested pool", false, 2},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newWorld(t)
				w.srv.AddFault(runpodtest.Fault{Method: "POST", Path: "/v2/pods", Status: 403, Detail: tc.detail, Times: 1})
				plan := runpod.CandidatePlan(w.cfg, w.catalog(t))
				if plan[0].GPUTypeID != "NVIDIA GeForce RTX 4090" && !tc.wantStop {
					plan[0], plan[1] = plan[1], plan[0]
				}
				_, err := runpod.Provision(context.Background(), w.deps, w.cfg, plan, w.tmpl)
				if got := errors.Is(err, runpod.ErrKeyRefused); got != tc.wantStop {
					t.Errorf("err = %v; key refused %v, want %v", err, got, tc.wantStop)
				}
				if n := w.srv.Count("POST", "/v2/pods"); n != tc.wantPosts {
					t.Errorf("%d creates, want %d", n, tc.wantPosts)
				}
			})
		})
	}
}
