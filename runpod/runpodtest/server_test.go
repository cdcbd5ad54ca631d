package runpodtest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpugate/gpugate/internal/faketime"
	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/rest"
	"github.com/gpugate/gpugate/runpod/runpodtest"
)

func req(name, gpu string) rest.CreatePodRequest {
	return rest.CreatePodRequest{Name: name, Image: "img", GPU: rest.GPURequest{ID: gpu, Count: 1, MinCUDAVersion: "12.6"}, Cloud: "SECURE"}
}

func TestPodsMoveThroughTheScheduleAndTheLedgerBillsFromStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := runpodtest.New(runpodtest.WithSchedule(10*time.Second, 30*time.Second))
		c, _ := srv.NewClient()
		ctx := context.Background()
		p, err := c.CreatePod(ctx, req("a", "NVIDIA L4"))
		if err != nil {
			t.Fatal(err)
		}
		status := func() rest.PodStatus {
			t.Helper()
			got, err := c.GetPod(ctx, p.ID)
			if err != nil {
				t.Fatal(err)
			}
			return got.Status
		}
		for _, step := range []struct {
			wait time.Duration
			want rest.PodStatus
		}{{0, rest.StatusProvisioning}, {10 * time.Second, rest.StatusStarting}, {30 * time.Second, rest.StatusRunning}} {
			faketime.Advance(step.wait)
			if got := status(); got != step.want {
				t.Fatalf("after %v: %s, want %s", step.wait, got, step.want)
			}
		}
		faketime.Advance(3600*time.Second - 30*time.Second)
		if err := runpod.Delete(ctx, c, p.ID); err != nil {
			t.Fatal(err)
		}
		faketime.Advance(time.Hour) // nothing is billed after deletion
		l := srv.Ledger()
		if len(l) != 1 || !l[0].Deleted || l[0].BilledSeconds(time.Now()) != 3600 || l[0].Cost(time.Now()) != 0.43 {
			t.Errorf("ledger %+v: want one deleted pod billed 3600 s at 0.43", l)
		}
		if len(srv.Running()) != 0 {
			t.Error("pod still running")
		}
	})
}

func TestBehaviorsExitErrorAndLostRuntime(t *testing.T) {
	tests := map[string]struct {
		b          runpodtest.Behavior
		want       rest.PodStatus
		hasRuntime bool
	}{
		"exit":         {runpodtest.Behavior{ExitAfter: time.Second}, rest.StatusExited, false},
		"error":        {runpodtest.Behavior{ErrorAfter: time.Second}, rest.StatusError, false},
		"lose runtime": {runpodtest.Behavior{LoseRuntimeAfter: time.Second}, rest.StatusRunning, false},
		"never run":    {runpodtest.Behavior{NeverRun: true}, rest.StatusStarting, false},
		"healthy":      {runpodtest.Behavior{}, rest.StatusRunning, true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := runpodtest.New()
				srv.SetBehavior("NVIDIA L4", tt.b)
				got := podAfter(t, srv, req("a", "NVIDIA L4"), 5*time.Minute)
				if got.Status != tt.want || (got.Runtime != nil) != tt.hasRuntime {
					t.Errorf("status %s runtime %v, want %s runtime=%v", got.Status, got.Runtime, tt.want, tt.hasRuntime)
				}
				if tt.want == rest.StatusExited && got.Cost != 0 {
					t.Errorf("an exited pod reports cost %v, want 0", got.Cost)
				}
			})
		})
	}
}

func TestCreateValidation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := runpodtest.New()
		hc := srv.Client()
		post := func(body string) int {
			r, _ := http.NewRequest("POST", runpodtest.BaseURL+"/v2/pods", strings.NewReader(body))
			r.Header.Set("Authorization", "Bearer "+runpodtest.APIKey)
			resp, err := hc.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return resp.StatusCode
		}
		tests := map[string]struct {
			body string
			want int
		}{
			"valid":                         {`{"name":"a","image":"i","gpu":{"id":"NVIDIA L4","minCudaVersion":"12.6"}}`, 201},
			"unknown field":                 {`{"name":"a","image":"i","gpu":{"id":"NVIDIA L4"},"bogus":1}`, 422},
			"no name":                       {`{"image":"i","gpu":{"id":"NVIDIA L4"}}`, 422},
			"malformed minCudaVersion":      {`{"name":"a","image":"i","gpu":{"id":"NVIDIA L4","minCudaVersion":"12"}}`, 422},
			"both CUDA constraints":         {`{"name":"a","image":"i","gpu":{"id":"NVIDIA L4","minCudaVersion":"12.6","allowedCudaVersions":["12.8"]}}`, 400},
			"floor with explicit empty set": {`{"name":"a","image":"i","gpu":{"id":"NVIDIA L4","minCudaVersion":"12.6","allowedCudaVersions":[]}}`, 201},
			"host below the floor":          {`{"name":"a","image":"i","gpu":{"id":"NVIDIA L4","minCudaVersion":"12.8"}}`, 400},
			"neither gpu nor cpu":           {`{"name":"a","image":"i"}`, 400},
			"not JSON":                      {`{`, 422},
		}
		for name, tt := range tests {
			if got := post(tt.body); got != tt.want {
				t.Errorf("%s: status %d, want %d", name, got, tt.want)
			}
		}
		r, _ := http.NewRequest("GET", runpodtest.BaseURL+"/v2/pods", nil)
		r.Header.Set("Authorization", "Bearer wrong")
		if resp, _ := hc.Do(r); resp.StatusCode != 401 {
			t.Errorf("wrong key: %d, want 401", resp.StatusCode)
		}
	})
}

func TestStockRunsOutAndReturnsOnDelete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := runpodtest.New()
		srv.SetStock("NVIDIA L4", 1)
		c, _ := srv.NewClient()
		ctx := context.Background()
		p, err := c.CreatePod(ctx, req("a", "NVIDIA L4"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.CreatePod(ctx, req("b", "NVIDIA L4")); !errors.Is(err, rest.ErrNoCapacity) {
			t.Fatalf("err = %v, want ErrNoCapacity", err)
		}
		gpus, _ := c.ListGPUTypes(ctx, rest.CatalogQuery{MinCUDAVersion: "12.6"})
		for _, g := range gpus {
			if g.ID == "NVIDIA L4" && g.Availability != rest.AvailabilityNone {
				t.Errorf("L4 availability %s with no stock, want NONE", g.Availability)
			}
		}
		if err := runpod.Delete(ctx, c, p.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := c.CreatePod(ctx, req("b", "NVIDIA L4")); err != nil {
			t.Errorf("stock did not come back after deletion: %v", err)
		}
	})
}

func TestStartedServerServesOverLoopback(t *testing.T) {
	srv := runpodtest.New()
	url := srv.Start()
	defer srv.Close()
	srv.AddFault(runpodtest.Fault{Path: "/v2/pods", Drop: true})
	c, err := rest.NewClient(rest.WithAPIKey(runpodtest.APIKey), rest.WithBaseURL(url))
	if err != nil {
		t.Fatal(err)
	}
	// The first request's connection drops; the retry succeeds at once.
	policy := rest.DefaultRetryPolicy()
	policy.InitialInterval, policy.Jitter = time.Millisecond, 0
	c2, _ := rest.NewClient(rest.WithAPIKey(runpodtest.APIKey), rest.WithBaseURL(url), rest.WithRetryPolicy(policy))
	if _, err := c2.ListPods(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListGPUTypes(context.Background(), rest.CatalogQuery{}); err != nil {
		t.Fatal(err)
	}
	if srv.Count("GET", "/v2/pods") != 2 {
		t.Errorf("want the dropped request and its retry logged")
	}
}

func TestWithAPIKey_OnlyThatKeyIsAccepted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := runpodtest.New(runpodtest.WithAPIKey("rotated-key"))
		c, err := srv.NewClient()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.ListPods(context.Background()); err != nil {
			t.Errorf("the configured key: %v", err)
		}
		stale, err := rest.NewClient(rest.WithAPIKey(runpodtest.APIKey), rest.WithBaseURL(runpodtest.BaseURL), rest.WithHTTPClient(srv.Client()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := stale.ListPods(context.Background()); !errors.Is(err, rest.ErrUnauthorized) {
			t.Errorf("the default key after rotation: %v, want ErrUnauthorized", err)
		}
	})
}

// A container's entrypoint is exec'd with the pod's environment and startup
// command; past Linux's limits the exec fails and the container exits at
// once, with no runner.
func TestAPodBeyondTheExecLimitExitsAtOnce(t *testing.T) {
	chunk := func(n int) string { return strings.Repeat("A", n) }
	tests := map[string]struct {
		env  map[string]string
		args string
		want rest.PodStatus
	}{
		"a packed proof within the limit": {map[string]string{"P00": chunk(120 << 10), "P01": chunk(120 << 10)}, "bash -c 'true'", rest.StatusRunning},
		"one string over 128 KiB":         {map[string]string{"P00": chunk(128 << 10)}, "", rest.StatusExited},
		"all strings over 2 MiB":          {manyChunks(17, chunk(125<<10)), "", rest.StatusExited},
		"a startup command over 128 KiB":  {nil, "bash -c '" + chunk(128<<10) + "'", rest.StatusExited},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := req("a", "NVIDIA L4")
				r.Env, r.Args = tt.env, rest.Secret(tt.args)
				got := podAfter(t, runpodtest.New(), r, 5*time.Minute)
				if got.Status != tt.want {
					t.Errorf("status %s, want %s", got.Status, tt.want)
				}
			})
		})
	}
}

// podAfter creates the pod and reads it back after d.
func podAfter(t *testing.T, srv *runpodtest.Server, r rest.CreatePodRequest, d time.Duration) *rest.Pod {
	t.Helper()
	c, _ := srv.NewClient()
	p, err := c.CreatePod(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	faketime.Advance(d)
	got, err := c.GetPod(context.Background(), p.ID)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func manyChunks(n int, v string) map[string]string {
	m := map[string]string{}
	for i := range n {
		m[fmt.Sprintf("P%02d", i)] = v
	}
	return m
}
