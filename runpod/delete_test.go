package runpod_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/rest"
	"github.com/gpugate/gpugate/runpod/runpodtest"
)

func newPod(t *testing.T, c *rest.Client) *rest.Pod {
	t.Helper()
	p, err := c.CreatePod(context.Background(), podRequest("gate-c1", "NVIDIA L4"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDelete_404ConfirmsAndDeleteIsIdempotent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, c := setup(t)
		p := newPod(t, c)
		for i := range 2 {
			if err := runpod.Delete(context.Background(), c, p.ID); err != nil {
				t.Fatalf("delete %d: %v", i+1, err)
			}
		}
		if len(srv.Running()) != 0 {
			t.Error("pod still running")
		}
		if err := runpod.Delete(context.Background(), c, "never-existed"); err != nil {
			t.Errorf("a 404 confirms deletion: %v", err)
		}
	})
}

func TestDelete_AtMostFiveAttemptsWithin180Seconds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, c := setup(t)
		p := newPod(t, c)
		srv.AddFault(runpodtest.Fault{Method: "DELETE", Path: "/v2/pods/*", Status: 503, Times: 100})
		start := time.Now()
		err := runpod.Delete(context.Background(), c, p.ID)
		var de *runpod.DeleteError
		if !errors.As(err, &de) || !errors.Is(err, runpod.ErrNotDeleted) || de.PodID != p.ID {
			t.Fatalf("err = %v, want a DeleteError naming %s", err, p.ID)
		}
		if n := srv.Count("DELETE", "/v2/pods/*"); n > 5 || n < 2 {
			t.Errorf("%d DELETE attempts, want 2..5", n)
		}
		if el := time.Since(start); el > 180*time.Second {
			t.Errorf("took %v, past the 180 s budget", el)
		}
	})
}

// A Retry-After never stops cleanup from trying: a hostile or stale header
// is a minimum between attempts only up to the client's cap, and a pod's
// first DELETE goes out even while another call's 429 has the client
// cooling down.
func TestDelete_ARetryAfterNeverStopsCleanupFromTrying(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, c := setup(t)
		p := newPod(t, c)
		// Another call's 429 with an absurd Retry-After: 277 hours.
		srv.AddFault(runpodtest.Fault{Path: "/v2/catalog/gpus", Status: 429, RetryAfter: "999999"})
		done := make(chan error, 1)
		go func() {
			_, err := c.ListGPUTypes(context.Background(), rest.CatalogQuery{})
			done <- err
		}()
		synctest.Wait() // the catalog call got its 429 and is cooling down
		if cool := c.Cooldown(); cool <= 0 || cool > rest.DefaultMaxRetryAfter {
			t.Errorf("one header imposed a %v cooldown; want a pause up to the cap %v", cool, rest.DefaultMaxRetryAfter)
		}
		// The DELETE itself is throttled once with the same header.
		srv.AddFault(runpodtest.Fault{Method: "DELETE", Path: "/v2/pods/*", Status: 429, RetryAfter: "999999"})
		start := time.Now()
		if err := runpod.Delete(context.Background(), c, p.ID); err != nil {
			t.Fatalf("Delete: %v; the capped pause fits the budget, so cleanup retries and confirms", err)
		}
		if n := srv.Count("DELETE", "/v2/pods/*"); n != 2 {
			t.Errorf("%d DELETE requests, want 2: the first at once, the retry after the capped pause", n)
		}
		if el := time.Since(start); el < rest.DefaultMaxRetryAfter || el > 180*time.Second {
			t.Errorf("deleted after %v, want the capped Retry-After (%v) honoured as a minimum within the budget", el, rest.DefaultMaxRetryAfter)
		}
		if got := srv.Running(); len(got) != 0 {
			t.Errorf("still running: %v", got)
		}
		if err := <-done; err != nil {
			t.Errorf("the catalog call after its capped pause: %v", err)
		}
	})
}

func TestDelete_PermanentErrorStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, c := setup(t)
		p := newPod(t, c)
		srv.AddFault(runpodtest.Fault{Method: "DELETE", Path: "/v2/pods/*", Status: 409, Times: 10})
		err := runpod.Delete(context.Background(), c, p.ID)
		if !errors.Is(err, rest.ErrConflict) || !errors.Is(err, runpod.ErrNotDeleted) {
			t.Fatalf("err = %v, want ErrConflict inside ErrNotDeleted", err)
		}
		if n := srv.Count("DELETE", "/v2/pods/*"); n != 1 {
			t.Errorf("%d attempts; a permanent error stops at once", n)
		}
	})
}

func TestDelete_LostResponseIsCheckedWithGET(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, c := setup(t)
		p := newPod(t, c)
		srv.AddFault(runpodtest.Fault{Method: "DELETE", Path: "/v2/pods/*", LoseResponse: true})
		if err := runpod.Delete(context.Background(), c, p.ID); err != nil {
			t.Fatal(err)
		}
		if n := srv.Count("DELETE", "/v2/pods/*"); n != 1 {
			t.Errorf("%d DELETEs; the GET after the lost response shows the pod gone", n)
		}
		if srv.Count("GET", "/v2/pods/"+p.ID) != 1 {
			t.Error("want one GET checking the lost DELETE")
		}
	})
}

func TestDelete_EachRequestTimesOutAt20Seconds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, c := setup(t)
		p := newPod(t, c)
		srv.AddFault(runpodtest.Fault{Method: "DELETE", Path: "/v2/pods/*", Delay: time.Hour})
		start := time.Now()
		if err := runpod.Delete(context.Background(), c, p.ID); err != nil {
			t.Fatal(err)
		}
		reqs := srv.Requests()
		last := reqs[len(reqs)-1]
		if last.Method != "DELETE" || last.Status != 204 {
			t.Fatalf("last request %+v, want the second DELETE", last)
		}
		if el := last.At.Sub(start); el < 20*time.Second || el > 60*time.Second {
			t.Errorf("second attempt after %v; the first must time out at 20 s", el)
		}
	})
}

func TestDelete_BadPodID(t *testing.T) {
	_, c := setup(t)
	if err := runpod.Delete(context.Background(), c, "a/b"); err == nil {
		t.Error("want an error for a pod id with a slash")
	}
}

func TestDelete_OnlyTheContracts204Confirms(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, c := setup(t)
		p := newPod(t, c)
		// A 200 with junk never processed the delete: unknown, look and retry.
		srv.AddFault(runpodtest.Fault{Method: "DELETE", Path: "/v2/pods/*", Malformed: true})
		if err := runpod.Delete(context.Background(), c, p.ID); err != nil {
			t.Fatal(err)
		}
		if len(srv.Running()) != 0 || srv.Count("DELETE", "/v2/pods/*") != 2 {
			t.Errorf("running %v after %d DELETEs; a non-204 success must not count as confirmation", srv.Running(), srv.Count("DELETE", "/v2/pods/*"))
		}
	})
}

// Seed 001: "Pre-delete cost metadata is a single best-effort GET bounded
// to five seconds ... Reporting never prevents deletion." A throttled API
// costs the deletion five seconds, not the client's 60-second deadline.
func TestRecordBeforeDelete_BoundedToFiveSecondsAndNeverBlocksTheDeletion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, c := setup(t)
		p := newPod(t, c)
		got, err := runpod.RecordBeforeDelete(context.Background(), c, p.ID)
		if err != nil || got.ID != p.ID {
			t.Fatalf("a healthy read: %+v, %v", got, err)
		}
		srv.AddFault(runpodtest.Fault{Method: "GET", Path: "/v2/pods/" + p.ID, Status: 429, RetryAfter: "30", Times: 100})
		start := time.Now()
		if _, err := runpod.RecordBeforeDelete(context.Background(), c, p.ID); err == nil {
			t.Fatal("a throttled read must fail")
		}
		if took := time.Since(start); took > runpod.RecordTimeout {
			t.Errorf("the read took %v, more than %v", took, runpod.RecordTimeout)
		}
		if err := runpod.Delete(context.Background(), c, p.ID); err != nil || len(srv.Running()) != 0 {
			t.Errorf("the deletion after a failed read: %v, running %v", err, srv.Running())
		}
	})
}

// Cleanup's pre-delete read is a single GET: one request whatever it
// answers, two seconds to connect and five in all.
func TestRecordBeforeDelete_IsASingleGETWithTwoSecondsToConnect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, c := setup(t)
		p := newPod(t, c)
		srv.AddFault(runpodtest.Fault{Method: "GET", Path: "/v2/pods/" + p.ID, Status: 503, Times: 100})
		before := srv.Count("GET", "/v2/pods/*")
		if _, err := runpod.RecordBeforeDelete(context.Background(), c, p.ID); !errors.Is(err, rest.ErrTransient) {
			t.Fatalf("err = %v, want the 503", err)
		}
		if n := srv.Count("GET", "/v2/pods/*") - before; n != 1 {
			t.Errorf("%d GET requests, want a single one", n)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		// A server that accepts the connection and never completes TLS.
		var conns []net.Conn
		tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			client, server := net.Pipe()
			conns = append(conns, client, server)
			go io.Copy(io.Discard, server)
			return client, nil
		}}
		c, err := rest.NewClient(rest.WithAPIKey("rpa_key-0123456789"), rest.WithBaseURL("https://runpod.test"), rest.WithHTTPClient(&http.Client{Transport: tr}))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = runpod.RecordBeforeDelete(context.Background(), c, "pod1")
		if err == nil {
			t.Fatal("a connection that never completes must fail the read")
		}
		if took := time.Since(start); took != runpod.RecordConnectTimeout {
			t.Errorf("gave up after %v, want the %v connect bound", took, runpod.RecordConnectTimeout)
		}
		tr.CloseIdleConnections()
		for _, c := range conns {
			c.Close()
		}
	})
}
