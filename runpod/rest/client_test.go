package rest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpugate/gpugate/internal/faketime"
	"github.com/gpugate/gpugate/runpod/rest"
	"github.com/gpugate/gpugate/runpod/runpodtest"
)

// setup and podRequest are runpodtest's.
func setup(t *testing.T, opts ...rest.Option) (*runpodtest.Server, *rest.Client) {
	t.Helper()
	return runpodtest.Setup(t, opts...)
}

func podRequest(name, gpu string) rest.CreatePodRequest {
	return runpodtest.SecretPodRequest(name, gpu)
}

// The capacity text is configuration: another provider wording makes a 400
// a capacity miss (move on without paying) only under its own pattern.
func TestWithCapacityPattern_ReplacesTheCapacityWording(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tt := range []struct {
			opts []rest.Option
			want error
		}{
			{nil, rest.ErrRejected},
			{[]rest.Option{rest.WithCapacityPattern(regexp.MustCompile(`(?i)gpu pool exhausted`))}, rest.ErrNoCapacity},
		} {
			srv, c := setup(t, tt.opts...)
			srv.AddFault(runpodtest.Fault{Method: "POST", Path: "/v2/pods", Status: 400, Detail: "GPU pool exhausted in this region", Times: 1})
			if _, err := c.CreatePod(context.Background(), podRequest("gate-c1", "NVIDIA L4")); !errors.Is(err, tt.want) {
				t.Errorf("%d options: err = %v, want %v", len(tt.opts), err, tt.want)
			}
		}
	})
}

func TestCreateRetryTable_PermanentErrorsAreNotRetried(t *testing.T) {
	tests := map[string]struct {
		fault runpodtest.Fault
		want  error
	}{
		"422 never retried":             {runpodtest.Fault{Status: 422}, rest.ErrInvalidRequest},
		"400 capacity is ErrNoCapacity": {runpodtest.Fault{Status: 400, Detail: runpodtest.CapacityDetail}, rest.ErrNoCapacity},
		"400 other is ErrRejected":      {runpodtest.Fault{Status: 400, Detail: "bad cross-field rule"}, rest.ErrRejected},
		"402 is ErrInsufficientBalance": {runpodtest.Fault{Status: 402}, rest.ErrInsufficientBalance},
		"403 is ErrForbidden":           {runpodtest.Fault{Status: 403}, rest.ErrForbidden},
		"401 is ErrUnauthorized":        {runpodtest.Fault{Status: 401}, rest.ErrUnauthorized},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv, c := setup(t)
				tt.fault.Method, tt.fault.Path, tt.fault.Times = "POST", "/v2/pods", 10
				srv.AddFault(tt.fault)
				_, err := c.CreatePod(context.Background(), podRequest("gate-c1", "NVIDIA L4"))
				if !errors.Is(err, tt.want) {
					t.Fatalf("err = %v, want %v", err, tt.want)
				}
				var ae *rest.APIError
				if !errors.As(err, &ae) || ae.StatusCode != tt.fault.Status {
					t.Errorf("err = %v, want an *APIError with status %d", err, tt.fault.Status)
				}
				if n := srv.Count("POST", "/v2/pods"); n != 1 {
					t.Errorf("%d create requests, want exactly 1", n)
				}
				if len(srv.Running()) != 0 {
					t.Error("a failed create left a pod")
				}
			})
		})
	}
}

// Transient failures that cannot have created the pod (408, 429) get one
// short retry; a failure that may have (a 5xx, a dropped connection, a
// malformed answer) is never sent again: the pod is looked up by name, and
// when it is not found the create's outcome is unknown, for the caller's
// sweep. Nothing is bought twice.
func TestCreateRetryTable_TransientFailuresAreRetriedWithoutBuyingTwice(t *testing.T) {
	tests := map[string]struct {
		fault   runpodtest.Fault
		retried bool // retried and created; else ErrCreateUnknown after one POST
	}{
		"408":               {runpodtest.Fault{Status: 408}, true},
		"429":               {runpodtest.Fault{Status: 429, RetryAfter: "3"}, true},
		"500":               {runpodtest.Fault{Status: 500}, false},
		"502":               {runpodtest.Fault{Status: 502}, false},
		"503":               {runpodtest.Fault{Status: 503}, false},
		"transport failure": {runpodtest.Fault{Drop: true}, false},
		"malformed body":    {runpodtest.Fault{Malformed: true}, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv, c := setup(t)
				f := tc.fault
				f.Method, f.Path, f.Times = "POST", "/v2/pods", 1 // one short retry in the tier
				srv.AddFault(f)
				p, err := c.CreatePod(context.Background(), podRequest("gate-c1", "NVIDIA L4"))
				posts := srv.Count("POST", "/v2/pods")
				if tc.retried {
					if err != nil {
						t.Fatal(err)
					}
					if p.GPU == nil || p.GPU.ID != "NVIDIA L4" || p.Cost != 0.43 || posts != 2 {
						t.Errorf("pod = %+v after %d creates", p, posts)
					}
				} else if !errors.Is(err, rest.ErrCreateUnknown) || posts != 1 {
					t.Errorf("err = %v after %d creates; want ErrCreateUnknown after one", err, posts)
				}
				if got := srv.Running(); len(got) > 1 {
					t.Errorf("running pods %v: nothing is bought twice", got)
				}
			})
		})
	}
}

func TestRetry_CreateSharesSixtySecondDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, c := setup(t)
		srv.AddFault(runpodtest.Fault{Method: "POST", Path: "/v2/pods", Status: 503, Times: 1000})
		start := time.Now()
		_, err := c.CreatePod(context.Background(), podRequest("gate-c1", "NVIDIA L4"))
		if !errors.Is(err, rest.ErrTransient) {
			t.Fatalf("err = %v, want the last transient failure", err)
		}
		if el := time.Since(start); el > 60*time.Second {
			t.Errorf("the create and its retries took %v, past the 60 s deadline", el)
		}
		if n := srv.Count("POST", "/v2/pods"); n != 1 {
			t.Errorf("%d creates; a create that may have taken effect is never sent again", n)
		}
	})
}

func TestRetry_RetryAfterIsAMinimumEvenAboveTheBackoffCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		policy := rest.DefaultRetryPolicy()
		policy.Deadline = 5 * time.Minute
		policy.MaxInterval = 2 * time.Second
		srv, c := setup(t, rest.WithRetryPolicy(policy), rest.WithMaxRetryAfter(5*time.Minute))
		srv.AddFault(runpodtest.Fault{Path: "/v2/pods/*", Status: 429, RetryAfter: "90"})
		p, err := c.CreatePod(context.Background(), podRequest("gate-c1", "NVIDIA L4"))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := c.GetPod(context.Background(), p.ID); err != nil {
			t.Fatal(err)
		}
		if el := time.Since(start); el < 90*time.Second {
			t.Errorf("retried after %v; Retry-After 90 is a minimum above the 2 s cap", el)
		}
	})
}

func TestRetry_RetryAfterHTTPDate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, c := setup(t)
		at := time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat)
		srv.AddFault(runpodtest.Fault{Path: "/v2/catalog/gpus", Status: 429, RetryAfter: at})
		start := time.Now()
		if _, err := c.ListGPUTypes(context.Background(), rest.CatalogQuery{}); err != nil {
			t.Fatal(err)
		}
		if el := time.Since(start); el < 29*time.Second {
			t.Errorf("retried after %v, before the HTTP-date in Retry-After", el)
		}
	})
}

func TestRetry_PauseLongerThanTheDeadlineEndsTheCallAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, c := setup(t, rest.WithMaxRetryAfter(time.Hour))
		srv.AddFault(runpodtest.Fault{Path: "/v2/catalog/gpus", Status: 429, RetryAfter: "120"})
		start := time.Now()
		_, err := c.ListGPUTypes(context.Background(), rest.CatalogQuery{})
		if !errors.Is(err, rest.ErrDeadline) {
			t.Fatalf("err = %v, want ErrDeadline", err)
		}
		if el := time.Since(start); el != 0 {
			t.Errorf("slept %v before giving up; a pause past the deadline must end the call at once", el)
		}
	})
}

func TestRetry_CooldownIsSharedByEveryCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, c := setup(t)
		p, err := c.CreatePod(context.Background(), podRequest("gate-c1", "NVIDIA L4"))
		if err != nil {
			t.Fatal(err)
		}
		srv.AddFault(runpodtest.Fault{Path: "/v2/catalog/gpus", Status: 429, RetryAfter: "20"})
		done := make(chan error, 1)
		go func() {
			_, err := c.ListGPUTypes(context.Background(), rest.CatalogQuery{})
			done <- err
		}()
		synctest.Wait() // the catalog call got its 429 and is cooling down
		start := time.Now()
		if _, err := c.GetPod(context.Background(), p.ID); err != nil {
			t.Fatal(err)
		}
		if el := time.Since(start); el < 20*time.Second {
			t.Errorf("GetPod went out after %v; a 429 on one call must pause the others for 20 s", el)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		// The cooldown also bounds a single request: with less time than
		// the pause, GetPod fails at once without sending. A DELETE is
		// the exception: it stops the billing, so it goes out at once.
		srv.AddFault(runpodtest.Fault{Path: "/v2/catalog/gpus", Status: 429, RetryAfter: "25"})
		go func() {
			_, err := c.ListGPUTypes(context.Background(), rest.CatalogQuery{})
			done <- err
		}()
		synctest.Wait()
		before := srv.Count("GET", "/v2/pods/*")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := c.GetPod(ctx, p.ID); !errors.Is(err, rest.ErrDeadline) {
			t.Errorf("err = %v, want ErrDeadline", err)
		}
		if srv.Count("GET", "/v2/pods/*") != before {
			t.Error("a request was sent during the cooldown")
		}
		if err := c.DeletePod(ctx, p.ID); err != nil {
			t.Errorf("DeletePod during the cooldown: %v; a DELETE is sent at once", err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

func TestRetry_MalformedResponseIsUnknownNeverHealthyOrDead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, c := setup(t)
		p, err := c.CreatePod(context.Background(), podRequest("gate-c1", "NVIDIA L4"))
		if err != nil {
			t.Fatal(err)
		}
		srv.AddFault(runpodtest.Fault{Path: "/v2/pods/" + p.ID, Malformed: true, Times: 100})
		_, err = c.GetPod(context.Background(), p.ID)
		if !errors.Is(err, rest.ErrMalformed) || !errors.Is(err, rest.ErrTransient) {
			t.Fatalf("err = %v, want ErrMalformed and ErrTransient", err)
		}
		if errors.Is(err, rest.ErrNotFound) {
			t.Error("a malformed observation must never read as a gone pod")
		}
		if n := srv.Count("GET", "/v2/pods/"+p.ID); n < 2 {
			t.Errorf("%d reads: a malformed response backs off and retries", n)
		}
	})
}

func TestCreatePod_LostResponseIsNotBoughtTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, c := setup(t)
		srv.AddFault(runpodtest.Fault{Method: "POST", Path: "/v2/pods", LoseResponse: true})
		p, err := c.CreatePod(context.Background(), podRequest("gate-c1", "NVIDIA L4"))
		if err != nil {
			t.Fatal(err)
		}
		if n := srv.Count("POST", "/v2/pods"); n != 1 {
			t.Errorf("%d creates: after a lost response the client must find the pod by name, not create another", n)
		}
		if got := srv.Running(); len(got) != 1 || got[0] != p.ID {
			t.Errorf("running %v, want only %s", got, p.ID)
		}
	})
}

func TestSecrets_NeverInErrorsOrLogs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		srv, c := setup(t, rest.WithLogger(slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
		req := podRequest("gate-c1", "NVIDIA L4")
		srv.AddFault(runpodtest.Fault{Method: "POST", Path: "/v2/pods", Status: 422,
			Detail: "env.RUNNER_JIT_CONFIG=JITSECRET-abcdef too long; args=bash -c 'STARTUPSECRET-123456'; key " + runpodtest.APIKey})
		_, err := c.CreatePod(context.Background(), req)
		if err == nil {
			t.Fatal("want the 422")
		}
		reqJSON, _ := json.Marshal(req)
		slog.New(slog.NewTextHandler(&logs, nil)).Info("client", "client", c)
		for _, text := range []string{err.Error(), logs.String(), string(reqJSON), fmtAll(req), fmtAll(c), fmtAll(*c)} {
			for _, s := range []string{"JITSECRET", "STARTUPSECRET", runpodtest.APIKey} {
				if strings.Contains(text, s) {
					t.Errorf("%s leaked into %q", s, text)
				}
			}
		}
		// The wire request does carry them: the pod needs its JIT config.
		var sent map[string]any
		json.Unmarshal(srv.Requests()[0].Body, &sent)
		if env := sent["env"].(map[string]any); env["RUNNER_JIT_CONFIG"] != "JITSECRET-abcdef" || sent["args"] != "bash -c 'STARTUPSECRET-123456'" {
			t.Errorf("sent body lacks the secrets the pod needs: %v", sent)
		}
	})
}

func TestListPods_FollowsCursorWithinBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := runpodtest.New(runpodtest.WithPageSize(2))
		c, err := srv.NewClient()
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"a", "b", "c", "d", "e"} {
			if _, err := c.CreatePod(context.Background(), podRequest(n, "NVIDIA A100-SXM4-80GB")); err != nil {
				t.Fatal(err)
			}
		}
		pods, err := c.ListPods(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range pods {
			names = append(names, p.Name)
		}
		if diff := cmp.Diff([]string{"a", "b", "c", "d", "e"}, names); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		short, err := srv.NewClient(rest.WithMaxPages(2))
		if err != nil {
			t.Fatal(err)
		}
		if pods, err := short.ListPods(context.Background()); err == nil || pods != nil {
			t.Errorf("past the page bound: %d pods, err %v; want an error and no partial list", len(pods), err)
		}
	})
}

func TestListGPUTypes_SendsTheCatalogQuery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, c := setup(t)
		gpus, err := c.ListGPUTypes(context.Background(), rest.CatalogQuery{Cloud: "SECURE", Count: 1, MinCUDAVersion: "12.6"})
		if err != nil {
			t.Fatal(err)
		}
		if got := srv.Requests()[0].Query; got != "cloud=SECURE&count=1&include=AVAILABILITY&minCudaVersion=12.6&product=POD" {
			t.Errorf("query = %q", got)
		}
		var l4 rest.GPUType
		for _, g := range gpus {
			if g.ID == "NVIDIA L4" {
				l4 = g
			}
		}
		want := rest.GPUType{ID: "NVIDIA L4", Name: "L4", MemoryGB: 24, Secure: true, SecurePrice: 0.43, Availability: "MEDIUM"}
		if diff := cmp.Diff(want, l4); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}

func TestGetPod_ReadsTheV2Record(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, c := setup(t)
		created := time.Now().UTC()
		p, err := c.CreatePod(context.Background(), podRequest("gate-c1", "NVIDIA GeForce RTX 4090"))
		if err != nil {
			t.Fatal(err)
		}
		if p.Status != rest.StatusProvisioning || p.StartedAt != nil || p.Runtime != nil {
			t.Errorf("new pod = %+v, want PROVISIONING without start or runtime", p)
		}
		faketime.Advance(61 * time.Second) // fake time: provisioning 20 s + starting 40 s
		got, err := c.GetPod(context.Background(), p.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != rest.StatusRunning || got.Runtime == nil || got.StartedAt == nil || !got.StartedAt.Equal(created.Add(20*time.Second).Truncate(time.Second)) {
			t.Errorf("pod = %+v, want RUNNING with runtime, started 20 s after creation", got)
		}
		if got.CUDAVersion != "12.8" || got.Cost != 0.69 || got.Env["GPUGATE_REPOSITORY"] != "o/r" {
			t.Errorf("pod = %+v", got)
		}
		if _, err := c.GetPod(context.Background(), "nope"); !errors.Is(err, rest.ErrNotFound) {
			t.Errorf("unknown pod: err = %v, want ErrNotFound", err)
		}
		if srv.Count("GET", "/v2/pods/nope") != 1 {
			t.Error("a 404 must not be retried")
		}
	})
}

func TestNewClient_Options(t *testing.T) {
	if _, err := rest.NewClient(); !errors.Is(err, rest.ErrNoAPIKey) {
		t.Errorf("no key: err = %v, want ErrNoAPIKey", err)
	}
	for name, opt := range map[string]rest.Option{
		"bad base URL":    rest.WithBaseURL("ftp://x"),
		"nil HTTP client": rest.WithHTTPClient(nil),
		"bad policy":      rest.WithRetryPolicy(rest.RetryPolicy{}),
		"zero pages":      rest.WithMaxPages(0),
	} {
		if _, err := rest.NewClient(rest.WithAPIKey("k"), opt); err == nil || name == "bad base URL" && !errors.Is(err, rest.ErrBaseURL) {
			t.Errorf("%s: want an error, got %v", name, err)
		}
	}
}

// ClientFromEnv sends the key only where the environment says, and only
// encrypted or to a loopback test server; a refusal never prints the key
// or a password the URL carries.
func TestClientFromEnv_TheKeyGoesOnlyToAnEncryptedOrLoopbackServer(t *testing.T) {
	srv := runpodtest.New()
	url := srv.Start()
	defer srv.Close()
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	// A loopback server over plain http: the client reaches it.
	c, err := rest.ClientFromEnv(env(rest.EnvAPIKey, runpodtest.APIKey, rest.EnvAPIURL, url))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListPods(context.Background()); err != nil || srv.Count("GET", "/v2/pods") != 1 {
		t.Errorf("the loopback fake was not called: %v", err)
	}
	if _, err := rest.ClientFromEnv(env(rest.EnvAPIURL, url)); !errors.Is(err, rest.ErrNoAPIKey) {
		t.Errorf("no key: %v", err)
	}
	for name, raw := range map[string]string{
		"plain http elsewhere": "http://user:hunter2@proxy.example.com:8080",
		"not http":             "ftp://user:hunter2@runpod.example.com",
	} {
		_, err := rest.ClientFromEnv(env(rest.EnvAPIKey, "rpa_from_env_secret", rest.EnvAPIURL, raw))
		if !errors.Is(err, rest.ErrBaseURL) || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "rpa_from_env_secret") {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, ok := range []string{"https://proxy.example.com", "http://localhost:1", "http://[::1]:1"} {
		if _, err := rest.ClientFromEnv(env(rest.EnvAPIKey, "k", rest.EnvAPIURL, ok)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// fmtAll prints v every way a log line might.
func fmtAll(v any) string {
	var b strings.Builder
	for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
		b.WriteString(sprintf(f, v))
	}
	return b.String()
}

// Pods return their environment, and a pod started with the packed CUDA
// proof carries about 1.6 MB of it: a listing of several such pods is far
// larger than a typical API response and must still be read whole.
func TestListPods_ReadsPodsCarryingThePackedProof(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, c := setup(t)
		chunk := strings.Repeat("A", 120<<10)
		const n = 8
		for i := range n {
			req := podRequest(fmt.Sprintf("p%d", i), "NVIDIA A100-SXM4-80GB")
			for k := range 13 {
				req.Env[fmt.Sprintf("GPUGATE_PROOF_%02d", k)] = chunk
			}
			if _, err := c.CreatePod(context.Background(), req); err != nil {
				t.Fatal(err)
			}
		}
		srv.SetStock("NVIDIA A100-SXM4-80GB", 0)
		pods, err := c.ListPods(context.Background())
		if err != nil {
			t.Fatalf("listing %d pods with %.1f MB of environment each: %v", n, float64(13*len(chunk))/1e6, err)
		}
		if len(pods) != n || pods[n-1].Env["GPUGATE_PROOF_12"] != chunk {
			t.Errorf("got %d pods", len(pods))
		}
	})
}

// RunPod lets a pod have 50 environment variables; a request over that,
// or one setting a variable both plain and secret, is refused before it is
// sent.
func TestCreatePod_RefusesAnEnvironmentAPodCannotHave(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, c := setup(t)
		atLimit := podRequest("gate-c1", "NVIDIA L4")
		for i := len(atLimit.Env) + len(atLimit.SecretEnv); i < rest.MaxPodEnv; i++ {
			atLimit.Env[fmt.Sprintf("V%02d", i)] = "x"
		}
		if _, err := c.CreatePod(context.Background(), atLimit); err != nil {
			t.Fatalf("%d variables: %v", rest.MaxPodEnv, err)
		}
		over := podRequest("gate-c2", "NVIDIA L4")
		maps.Copy(over.Env, atLimit.Env)
		over.Env["ONE_MORE"] = "x"
		both := podRequest("gate-c3", "NVIDIA L4")
		both.Env["RUNNER_JIT_CONFIG"] = "plain"
		for name, req := range map[string]rest.CreatePodRequest{"51 variables": over, "plain and secret": both} {
			_, err := c.CreatePod(context.Background(), req)
			if !errors.Is(err, rest.ErrInvalidRequest) || strings.Contains(err.Error(), "JITSECRET") {
				t.Errorf("%s: %v, want ErrInvalidRequest", name, err)
			}
		}
		if n := srv.Count("POST", "/v2/pods"); n != 1 {
			t.Errorf("%d creates sent, want only the one within the limit", n)
		}
	})
}

// A pod read back from the API carries its environment, JIT runner config
// included: printing, logging or encoding the pod shows the keys only.
func TestPodEnv_ReadBackPodsShowKeysNeverValues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, c := setup(t)
		created, err := c.CreatePod(context.Background(), podRequest("gate-c1", "NVIDIA L4"))
		if err != nil {
			t.Fatal(err)
		}
		pod, err := c.GetPod(context.Background(), created.ID)
		if err != nil {
			t.Fatal(err)
		}
		if pod.Env["RUNNER_JIT_CONFIG"] != "JITSECRET-abcdef" {
			t.Fatalf("the fake must return the environment as RunPod does: %v", pod.Env)
		}
		var logs bytes.Buffer
		slog.New(slog.NewJSONHandler(&logs, nil)).Info("pod", "pod", pod, "env", pod.Env)
		slog.New(slog.NewTextHandler(&logs, nil)).Info("pod", "env", pod.Env)
		encoded, _ := json.Marshal(pod)
		for _, text := range []string{fmtAll(pod), fmtAll(*pod), fmtAll(pod.Env), sprintf("%x", pod.Env) + sprintf("%q", pod.Env), logs.String(), string(encoded)} {
			if strings.Contains(text, "JITSECRET") || !strings.Contains(text, "RUNNER_JIT_CONFIG") {
				t.Errorf("want the key and never the value in %q", text)
			}
		}
	})
}
