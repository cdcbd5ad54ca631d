package dstack_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpugate/gpugate/spark/dstack"
	"github.com/gpugate/gpugate/spark/dstack/dstacktest"
)

func TestClient_TheTokenIsNeverPrinted(t *testing.T) {
	srv := dstacktest.New()
	tok := dstacktest.Token
	c, err := dstack.NewClient(dstacktest.BaseURL, tok, dstacktest.Project, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	// The client itself, every way it can be printed or logged.
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("client", "c", c, "v", *c)
	texts = append(texts, fmt.Sprintf("%v %+v %#v", c, *c, *c), logged.String())
	// A server that echoes the token in its error detail.
	srv.AddFault(dstacktest.Fault{Path: getPath, Status: 400, Detail: "bad header Bearer " + tok})
	_, err = c.GetRun(ctx, "x")
	var apiErr *dstack.APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("GetRun = %v, want an *APIError", err)
	}
	texts = append(texts, err.Error(), fmt.Sprintf("%+v %#v", err, apiErr))
	// A refused token.
	bad, _ := dstack.NewClient(dstacktest.BaseURL, tok+"-wrong", dstacktest.Project, srv.Client())
	_, err = bad.GetRun(ctx, "x")
	if !errors.Is(err, dstack.ErrUnauthorized) {
		t.Fatalf("GetRun with a wrong token = %v, want ErrUnauthorized", err)
	}
	texts = append(texts, err.Error())
	// A transport error (the server is gone).
	url := srv.Start()
	srv.Close()
	gone, _ := dstack.NewClient(url, tok, dstacktest.Project, nil)
	_, err = gone.GetRun(ctx, "x")
	if err == nil {
		t.Fatal("GetRun on a closed server = nil")
	}
	texts = append(texts, err.Error())
	for _, s := range texts {
		if strings.Contains(s, tok) || strings.Contains(s, tok+"-wrong") {
			t.Errorf("the token is in %q", s)
		}
	}
}

func TestClient_NeverFollowsARedirect(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		w.Write([]byte(`{}`))
	}))
	defer other.Close()
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer redirect.Close()
	// Even a caller's client that would follow redirects.
	follows := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return nil }}
	c, err := dstack.NewClient(redirect.URL, dstacktest.Token, dstacktest.Project, follows)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetFleet(ctx, "spark"); !errors.Is(err, dstack.ErrRedirect) {
		t.Fatalf("GetFleet = %v, want ErrRedirect", err)
	}
	if n := elsewhere.Load(); n != 0 {
		t.Fatalf("the redirect target got %d requests (and the token)", n)
	}
}

func TestNewClient_RefusesWhatItCannotUseSafely(t *testing.T) {
	for name, tc := range map[string]struct{ url, token, project, fix string }{
		"plain http to a remote host": {"http://dstack.example.com", "t", "main", "https"},
		"no host":                     {"https://", "t", "main", "address"},
		"credentials in the url":      {"https://u:p@dstack.example.com", "t", "main", "address"},
		"another scheme":              {"ftp://dstack.example.com", "t", "main", "https"},
		"no token":                    {"https://dstack.example.com", " ", "main", "token"},
		"a token with a newline":      {"https://dstack.example.com", "abc\ndef", "main", "token"},
		"no project":                  {"https://dstack.example.com", "t", "", "project"},
		"a project with a slash":      {"https://dstack.example.com", "t", "a/b", "project"},
	} {
		_, err := dstack.NewClient(tc.url, tc.token, tc.project, nil)
		if !errors.Is(err, dstack.ErrConfig) {
			t.Errorf("%s: NewClient = %v, want ErrConfig", name, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.fix) {
			t.Errorf("%s: the error %q should say what to fix (%s)", name, err, tc.fix)
		}
	}
	for _, u := range []string{"http://127.0.0.1:3000", "http://localhost:3000/", "http://[::1]:3000", "https://dstack.example.com"} {
		if _, err := dstack.NewClient(u, "t", "main", nil); err != nil {
			t.Errorf("NewClient(%s) = %v, want nil", u, err)
		}
	}
}

func TestClient_ANon2xxAnswerIsAnAPIErrorWithDstacksDetail(t *testing.T) {
	f := newFixture(t, "cluster")
	_, err := f.c.GetRun(ctx, "no-such-run")
	var apiErr *dstack.APIError
	if !errors.As(err, &apiErr) || !errors.Is(err, dstack.ErrNotFound) {
		t.Fatalf("GetRun = %v, want an *APIError that is ErrNotFound", err)
	}
	if apiErr.Status != 400 || apiErr.Code != "resource_not_exists" || apiErr.Detail != "Run not found" || apiErr.Path != getPath {
		t.Errorf("APIError = %+v", *apiErr)
	}
	// A 422 names the field.
	_, err = f.c.ApplyRun(ctx, dstack.RunSpec{RunName: "a-run", Configuration: dstack.RunConfiguration{Type: "task"}})
	if !errors.As(err, &apiErr) || apiErr.Status != 422 || !strings.Contains(apiErr.Detail, "commands") {
		t.Errorf("ApplyRun of a task without commands = %v, want a 422 naming commands", err)
	}
}

func TestClient_AnUnknownProjectIsProjectNotFound(t *testing.T) {
	srv := dstacktest.New()
	c, _ := dstack.NewClient(dstacktest.BaseURL, dstacktest.Token, "nope", srv.Client())
	if _, err := c.GetFleet(ctx, "spark"); !errors.Is(err, dstack.ErrProjectNotFound) || errors.Is(err, dstack.ErrNotFound) {
		t.Fatalf("GetFleet = %v, want ErrProjectNotFound only", err)
	}
}

func TestClient_AHungCallEndsAtTheRequestBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, "cluster")
		f.srv.AddFault(dstacktest.Fault{Path: fleetPath, Hang: true})
		start := time.Now()
		_, err := f.c.GetFleet(ctx, fleetName)
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("GetFleet = %v, want a timeout", err)
		}
		if took := time.Since(start); took != dstack.DefaultTimeout {
			t.Fatalf("the hung call took %v, want DefaultTimeout", took)
		}
	})
}

func TestClient_AnAnswerWithoutARequiredFieldIsMalformed(t *testing.T) {
	for name, body := range map[string]string{
		"not json":              `{"id": "trunc`,
		"no run_spec":           `{"id": "1", "status": "running", "submitted_at": "2023-01-02T03:04:00Z"}`,
		"no run name":           `{"id": "1", "status": "running", "submitted_at": "2023-01-02T03:04:00Z", "run_spec": {"configuration": {"type": "task"}}}`,
		"no configuration":      `{"id": "1", "status": "running", "submitted_at": "2023-01-02T03:04:00Z", "run_spec": {"run_name": "x"}}`,
		"a list, not a run":     `[]`,
		"null":                  `null`,
		"a bad job":             `{"id": "1", "status": "running", "submitted_at": "2023-01-02T03:04:00Z", "run_spec": {"run_name": "x", "configuration": {"type": "task"}}, "jobs": [{"job_spec": "x"}]}`,
		"a bad fleet reference": `{"id": "1", "status": "running", "submitted_at": "2023-01-02T03:04:00Z", "run_spec": {"run_name": "x", "configuration": {"type": "task", "fleets": [{"project": "p"}]}}}`,
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(body)) }))
		c, _ := dstack.NewClient(srv.URL, "t", "main", nil)
		_, err := c.GetRun(ctx, "x")
		srv.Close()
		if !errors.Is(err, dstack.ErrMalformed) {
			t.Errorf("%s: GetRun = %v, want ErrMalformed", name, err)
		}
	}
	f := newFixture(t, "cluster")
	f.srv.AddFault(dstacktest.Fault{Path: fleetPath, Malformed: true})
	if _, err := f.c.GetFleet(ctx, fleetName); !errors.Is(err, dstack.ErrMalformed) {
		t.Errorf("a malformed fleet: GetFleet = %v, want ErrMalformed", err)
	}
}

func TestListRuns_FollowsEveryPage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, "cluster")
		// Inside the bubble the clock stands still: every run has the same
		// submitted_at, so the pages turn on the run ID alone.
		for i := range 250 {
			if _, err := f.c.ApplyRun(ctx, dstack.RunSpec{RunName: fmt.Sprintf("run-%d", i), Configuration: dstack.RunConfiguration{Type: "task", Commands: []string{"true"}}}); err != nil {
				t.Fatal(err)
			}
		}
		runs, err := f.c.ListRuns(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, r := range runs {
			seen[r.Name] = true
		}
		if len(runs) != 250 || len(seen) != 250 {
			t.Fatalf("%d runs (%d names), want 250", len(runs), len(seen))
		}
		if n := f.srv.Count(listPath); n != 3 {
			t.Errorf("%d pages, want 3", n)
		}
	})
}

func TestListRuns_LeavesFinishedRunsOutWhenAskedTo(t *testing.T) {
	f := newFixture(t, "cluster")
	name, _ := f.b.Start(ctx, ciWork("r-00000000000000a1", "spark-1"))
	f.srv.Progress()
	f.srv.Finish(name, false)
	if runs, err := f.c.ListRuns(ctx, true); err != nil || len(runs) != 0 {
		t.Fatalf("active runs = %v, %v; want none", runs, err)
	}
	runs, err := f.c.ListRuns(ctx, false)
	if err != nil || len(runs) != 1 || runs[0].Status != dstack.RunDone || !runs[0].Status.Finished() {
		t.Fatalf("all runs = %+v, %v; want the done run", runs, err)
	}
}
