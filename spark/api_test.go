package spark_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpugate/gpugate/spark"
)

const apiToken = "test-token-0123456789"

// hostToken is spark-2's own credential.
const hostToken = "host-token-spark-2-0123"

// setupAPI serves a seed fleet's controller on a loopback server and
// returns a client of it, with the operator's token (spark-2's agent has
// hostToken).
func setupAPI(t *testing.T) (*fleet, *httptest.Server, *spark.APIClient) {
	t.Helper()
	f := newFleet(t)
	h, err := spark.NewAuthHandler(f.c, spark.Tokens{apiToken: {Role: spark.RoleOperator, Name: "ops"},
		hostToken: {Role: spark.RoleHost, Name: "spark-2"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	cl, err := spark.NewAPIClient(srv.URL, apiToken, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	return f, srv, cl
}

func TestAPI_RequestWaitStatusReleaseCancel(t *testing.T) {
	f, _, cl := setupAPI(t)
	if printed := fmt.Sprintf("%v %+v %#v %v", cl, cl, cl, *cl); strings.Contains(printed, apiToken) {
		t.Errorf("a printed client shows its token: %s", printed)
	}
	first, err := cl.Request(ctx, spark.LeaseRequest{Class: spark.Development, Owner: "agent-1"})
	if err != nil || first.Request.State != spark.Queued || first.Position != 1 {
		t.Fatalf("%+v %v", first, err)
	}
	second, _ := cl.Request(ctx, spark.LeaseRequest{Class: spark.MergeCI, Host: "spark-2"})
	f.reconcile(t)
	st, err := cl.Wait(ctx, first.Request.ID)
	if err != nil || st.Request.State != spark.Active || st.Request.Token == 0 {
		t.Fatalf("wait: %+v %v", st, err)
	}
	st2, _ := cl.Status(ctx, second.Request.ID)
	if st2.Position != 1 || !strings.Contains(st2.Pending, "spark-2") {
		t.Errorf("status %+v", st2)
	}
	if err := cl.Cancel(ctx, first.Request.ID); !errors.Is(err, spark.ErrActive) {
		t.Errorf("cancel active: %v", err)
	}
	if err := cl.Release(ctx, first.Request.ID, st.Request.Token+1); !errors.Is(err, spark.ErrStaleToken) {
		t.Errorf("stale release: %v", err)
	}
	// The host's preflight asks the controller over the API.
	host := st.Request.Hosts[0]
	if err := cl.CheckToken(ctx, host, st.Request.Token); err != nil {
		t.Errorf("the lease's own token: %v", err)
	}
	if err := cl.CheckToken(ctx, host, st.Request.Token-1); !errors.Is(err, spark.ErrStaleToken) {
		t.Errorf("a stale token: %v", err)
	}
	if err := cl.CheckToken(ctx, "spark-9", st.Request.Token); !errors.Is(err, spark.ErrStaleToken) {
		t.Errorf("an unknown host: %v", err)
	}
	if err := cl.Release(ctx, first.Request.ID, st.Request.Token); err != nil {
		t.Fatal(err)
	}
	if err := cl.Cancel(ctx, second.Request.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Request(ctx, spark.LeaseRequest{Class: spark.MergeCI, Topology: spark.Pair}); !errors.Is(err, spark.ErrPairRefused) {
		t.Errorf("pair: %v", err)
	}
	hosts, err := cl.Hosts(ctx)
	if err != nil || len(hosts) != 2 {
		t.Errorf("%v %v", hosts, err)
	}
}

func TestAPI_BearerTokenRequired(t *testing.T) {
	f, srv, _ := setupAPI(t)
	for _, auth := range []string{"", "Bearer wrong", "Basic " + apiToken} {
		req, _ := http.NewRequest("GET", srv.URL+"/v1/hosts", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := srv.Client().Do(req)
		if err != nil || resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%q: %v %v", auth, resp.StatusCode, err)
		}
	}
	if _, err := spark.NewHandler(f.c, "short"); err == nil {
		t.Error("a short token must be refused")
	}
}

// duration_seconds is checked before it becomes a time.Duration: a count
// that would overflow one, or a negative one, is a 400, never a lease of
// some wrapped-around length.
func TestAPI_RefusesALeaseLengthOutsideTheClassLimit(t *testing.T) {
	_, _, cl := setupAPI(t)
	for _, secs := range []int{-1, 1 << 62, 8*3600 + 1} {
		_, err := cl.Request(ctx, spark.LeaseRequest{Class: spark.Development, DurationSeconds: secs})
		var apiErr *spark.APIError
		if !errors.Is(err, spark.ErrInvalid) || !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest {
			t.Errorf("duration_seconds %d: %v, want a 400 matching ErrInvalid", secs, err)
		}
	}
	st, err := cl.Request(ctx, spark.LeaseRequest{Class: spark.Development, DurationSeconds: 3600})
	if err != nil || st.Request.Duration != time.Hour {
		t.Errorf("a one-hour lease: %+v %v", st.Request, err)
	}
}

// The client's failures say which request failed and keep their cause: a
// cancelled call is both ErrUnavailable and the context's error, and an
// answer that is not JSON is an error, never an empty status.
func TestAPIClient_FailuresKeepTheirCause(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("<html>proxy error</html>"))
	}))
	defer srv.Close()
	cl, _ := spark.NewAPIClient(srv.URL, apiToken, srv.Client())
	_, err := cl.Status(ctx, "r-1")
	if err == nil || !strings.HasPrefix(err.Error(), "spark: GET /v1/leases/r-1: ") {
		t.Errorf("a non-JSON answer: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = cl.Status(cancelled, "r-1")
	if !errors.Is(err, spark.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled call: %v, want ErrUnavailable wrapping context.Canceled", err)
	}
}

// A host agent reports over the API what Controller.Heartbeat records;
// a report that does not say how many GPU processes run is refused, since
// absent must never read as a clean GPU, and an unknown host is refused.
func TestAPI_HostHeartbeat(t *testing.T) {
	f, srv, _ := setupAPI(t)
	cl, _ := spark.NewAPIClient(srv.URL, hostToken, srv.Client())
	if err := cl.Heartbeat(ctx, "spark-2", 3); err != nil {
		t.Fatal(err)
	}
	hosts, _, err := f.c.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hosts {
		if h.Name == "spark-2" && h.GPUProcesses != 3 {
			t.Errorf("spark-2 records %d GPU processes after reporting 3", h.GPUProcesses)
		}
	}
	if err := cl.Heartbeat(ctx, "spark-9", 0); !errors.Is(err, spark.ErrUnauthorized) {
		t.Errorf("an unknown host: %v, want ErrUnauthorized", err)
	}
	for _, body := range []string{`{}`, `{"gpu_processes": -1}`, `{"gpu_processes": 0, "extra": 1}`, `not json`} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/hosts/spark-2/heartbeat", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+hostToken)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("heartbeat body %s: status %d, want 400", body, resp.StatusCode)
		}
	}
}

// The API's request bodies are outside input (agents, the CLI, host
// agents): whatever arrives, the handler answers a 2xx, or a 4xx carrying
// an error code, and never fails inside.
func FuzzAPIRequestBodies(f *testing.F) {
	f.Add(uint8(0), []byte(`{"class":"development","duration_seconds":3600}`))
	f.Add(uint8(0), []byte(`{"class":"merge-ci","topology":"pair","pr":{"repo":"o/r","number":1,"sha":"abc"}}`))
	f.Add(uint8(1), []byte(`{"token":1}`))
	f.Add(uint8(2), []byte(`{"gpu_processes":0}`))
	f.Add(uint8(2), []byte(`{"gpu_processes":-1}`))
	fl := newFleet(f)
	h, err := spark.NewHandler(fl.c, apiToken)
	if err != nil {
		f.Fatal(err)
	}
	paths := []string{"/v1/leases", "/v1/leases/r-1/release", "/v1/hosts/spark-2/heartbeat"}
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		req := httptest.NewRequest(http.MethodPost, paths[int(route)%len(paths)], bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+apiToken)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch code := rec.Code; {
		case code >= 200 && code < 300:
		case code >= 400 && code < 500:
			var e spark.APIError
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Code == "" {
				t.Fatalf("%d without an error code: %s", code, rec.Body.Bytes())
			}
		default:
			t.Fatalf("%s answered %d: %s", req.URL.Path, code, rec.Body.Bytes())
		}
	})
}

// A client reading its token from a file uses a rotated token at once, so
// a long-running agent needs no restart; a file emptied or removed keeps
// the last token.
func TestAPIClient_ARotatedTokenFileTakesEffectWithoutARestart(t *testing.T) {
	f := newFleet(t)
	const oldTok, newTok = "old-host-token-0123456", "new-host-token-0123456"
	creds := spark.Tokens{oldTok: {Role: spark.RoleHost, Name: "spark-2"}}
	h, err := spark.NewAuthHandler(f.c, spark.AnyOf{creds})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	file := t.TempDir() + "/host-token"
	os.WriteFile(file, []byte(oldTok+"\n"), 0o600)
	cl, _ := spark.NewAPIClient(srv.URL, oldTok, nil)
	cl.ReadTokenFrom(file)
	if err := cl.Heartbeat(ctx, "spark-2", 0); err != nil {
		t.Fatal(err)
	}
	delete(creds, oldTok) // rotated on the controller
	creds[newTok] = spark.Credential{Role: spark.RoleHost, Name: "spark-2"}
	os.WriteFile(file, []byte(newTok+"\n"), 0o600) // and on the host
	if err := cl.Heartbeat(ctx, "spark-2", 0); err != nil {
		t.Errorf("after the rotation: %v", err)
	}
	os.WriteFile(file, nil, 0o600)
	if err := cl.Heartbeat(ctx, "spark-2", 0); err != nil {
		t.Errorf("an emptied token file dropped the token: %v", err)
	}
}
