package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpugate/gpugate/spark"
)

func TestStartsOnTheEmbeddedDefaultAndGrants(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := startSparkd(ctx, t, "-init", "-db", t.TempDir()+"/spark.db")
	if fi, _ := os.Stat(d.tokenFile); fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v", fi.Mode().Perm())
	}
	cl, _ := spark.NewAPIClient(d.addr, d.token, nil)
	st, err := cl.Request(ctx, spark.LeaseRequest{Class: spark.MergeCI})
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if st, err = cl.Wait(wctx, st.Request.ID); err != nil || st.Request.State != spark.Active {
		t.Fatalf("%+v %v", st, err)
	}
	// The dashboard mirror is read-only and needs no token.
	resp, err := http.Get(d.addr + "/dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"name":"Spark 1"`) || strings.Contains(string(body), d.token) {
		t.Errorf("dashboard %d: %s", resp.StatusCode, body)
	}
	if resp, err := http.Post(d.addr+"/dashboard.json", "application/json", nil); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("the dashboard must be read-only: %v %v", resp.Status, err)
	}
	if resp, err := http.Get(d.addr + "/v1/hosts"); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the API still needs the token: %v %v", resp.Status, err)
	}
	cancel()
	if code := <-d.done; code != 0 {
		t.Errorf("exit %d", code)
	}
	if strings.Contains(d.logs.String(), d.token) {
		t.Error("the token was logged")
	}
}

// daemon is a sparkd that startSparkd started. tokenFile and token are
// its generated operator token's (none with -tokens and no -token-file).
type daemon struct {
	addr, tokenFile, token string
	done                   <-chan int    // its exit status, once ctx ends
	logs                   *bytes.Buffer // read it only after done
}

// startSparkd runs sparkd with args (on a free loopback port, reconciling
// every 20 ms) until ctx ends, and returns once its API listens.
func startSparkd(ctx context.Context, t *testing.T, args ...string) daemon {
	t.Helper()
	ready := make(chan [2]string, 1)
	done := make(chan int, 1)
	logs := new(bytes.Buffer)
	go func() {
		done <- run(ctx, append([]string{"-addr", "127.0.0.1:0", "-reconcile", "20ms"}, args...), logs, ready)
	}()
	select {
	case info := <-ready:
		if info[1] == "" { // -tokens without -token-file: no operator token
			return daemon{addr: info[0], done: done, logs: logs}
		}
		data, err := os.ReadFile(info[1])
		if err != nil {
			t.Fatal(err)
		}
		return daemon{addr: info[0], tokenFile: info[1], token: strings.TrimSpace(string(data)), done: done, logs: logs}
	case code := <-done:
		t.Fatalf("sparkd exited %d: %s", code, logs.String())
	}
	return daemon{}
}

// -webhook-secret-file without -github-org and -jit-dir is a refused
// command line: exit 2, one line, before any database is made.
func TestWebhookNeedsItsOrganizationAndJITDirectory(t *testing.T) {
	secretFile := t.TempDir() + "/whsecret"
	os.WriteFile(secretFile, []byte("a-webhook-secret\n"), 0o600)
	var logs bytes.Buffer
	db := t.TempDir() + "/spark.db"
	code := run(context.Background(), []string{"-addr", "127.0.0.1:0", "-init", "-db", db, "-webhook-secret-file", secretFile}, &logs, nil)
	if code != 2 || !strings.Contains(logs.String(), "-github-org and -jit-dir are required") || strings.Count(strings.TrimSpace(logs.String()), "\n") != 0 {
		t.Errorf("exit %d: %s", code, logs.String())
	}
	if _, err := os.Stat(db); err == nil {
		t.Error("a refused command line created the database")
	}
	if strings.Contains(logs.String(), "a-webhook-secret") {
		t.Error("the webhook secret was printed")
	}
}
