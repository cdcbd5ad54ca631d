package sparkgh

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gpugate/gpugate/internal/githubtest"
	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/sparktest"
	"github.com/gpugate/gpugate/spark/sqlitestore"
)

// githubServer serves the GitHub API shapes the adapter uses and records
// what the integration did.
type githubServer struct {
	mu         sync.Mutex
	titles     []string
	external   []string // each created check's external_id
	dispatched []map[string]any
	jit        []map[string]any
}

func (g *githubServer) handler(t *testing.T) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /repos/o/butter/collaborators/{user}/permission", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"permission":"write","role_name":"maintain"}`)
	})
	record := func(r *http.Request) string {
		var body struct {
			Output     struct{ Title string } `json:"output"`
			ExternalID string                 `json:"external_id"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		g.mu.Lock()
		g.titles = append(g.titles, body.Output.Title)
		g.mu.Unlock()
		return body.ExternalID
	}
	mux.HandleFunc("POST /repos/o/butter/check-runs", func(w http.ResponseWriter, r *http.Request) {
		ext := record(r)
		g.mu.Lock()
		g.external = append(g.external, ext)
		g.mu.Unlock()
		fmt.Fprint(w, `{"id":501}`)
	})
	mux.HandleFunc("PATCH /repos/o/butter/check-runs/501", func(w http.ResponseWriter, r *http.Request) {
		record(r)
		fmt.Fprint(w, `{"id":501}`)
	})
	mux.HandleFunc("GET /repos/o/butter", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"default_branch":"main"}`) })
	mux.HandleFunc("GET /repos/o/butter/pulls/7", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(prJSON(7, sha1, []string{"spark-test"}, false)) // what the label event said
	})
	mux.HandleFunc("POST /repos/o/butter/actions/workflows/spark-test.yml/dispatches", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		g.mu.Lock()
		g.dispatched = append(g.dispatched, body)
		g.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /orgs/acme/actions/runners/generate-jitconfig", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		g.mu.Lock()
		g.jit = append(g.jit, body)
		g.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"encoded_jit_config":"ENCODED-JIT"}`)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("unexpected GitHub call %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
	})
	return mux
}

// TestEndToEnd_LabelToPassedOnSQLite drives the whole path with a fake
// GitHub over HTTP and the controller on a real SQLite file.
func TestEndToEnd_LabelToPassedOnSQLite(t *testing.T) {
	g := &githubServer{}
	client, srv := githubtest.New(t, g.handler(t))
	const whSecret = "end-to-end-webhook-secret"
	in, err := New(DefaultConfig(whSecret), nil, &GitHubAPI{Client: client, Org: "acme"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	store, err := sqlitestore.Create(filepath.Join(t.TempDir(), "spark.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	opts := spark.DefaultOptions()
	opts.Service, opts.OnGrant = &sparktest.Service{}, in.OnGrant
	c, err := spark.New(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	in.SetController(c)
	wh := in.NewWebhook(8)
	deliver := func(event, delivery string, payload map[string]any) {
		t.Helper()
		payload["repository"] = map[string]any{"full_name": "o/butter", "id": repoID}
		body, _ := json.Marshal(payload)
		if code := post(wh, whSecret, delivery, event, body); code != http.StatusAccepted {
			t.Fatalf("%s: %d", event, code)
		}
		d := <-wh.queue // process as Run would
		if err := in.Process(ctx, d.event, d.payload); err != nil {
			t.Fatal(err)
		}
	}
	tick := func() {
		t.Helper()
		for _, h := range []string{"spark-1", "spark-2"} {
			c.Heartbeat(ctx, spark.HostReport{Host: h})
		}
		if err := c.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		if err := in.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	tick()
	deliver("pull_request", "1", map[string]any{"action": "labeled", "label": map[string]any{"name": "spark-test"},
		"sender": map[string]any{"login": "maint"}, "pull_request": prJSON(7, sha1, []string{"spark-test"}, false)})
	tick()
	if len(g.dispatched) != 1 || len(g.jit) != 1 {
		t.Fatalf("dispatched %v jit %v", g.dispatched, g.jit)
	}
	inputs := g.dispatched[0]["inputs"].(map[string]any)
	if g.dispatched[0]["ref"] != "main" || inputs["head_sha"] != sha1 || inputs["topology"] != "single" || inputs["suite"] != "smoke" {
		t.Errorf("dispatch %v", g.dispatched[0])
	}
	runner := RunnerName(inputs["reservation_id"].(string))
	if len(g.external) != 1 || g.external[0] != inputs["reservation_id"] {
		t.Errorf("the check's external_id %q, want the request %v, which a Re-run names back", g.external, inputs["reservation_id"])
	}
	if g.jit[0]["name"] != runner {
		t.Errorf("jit %v", g.jit[0])
	}
	deliver("workflow_job", "2", map[string]any{"action": "in_progress", "workflow_job": map[string]any{"runner_name": runner}})
	// While it runs, the dashboard mirror carries none of what the test
	// configured as secret or as an address.
	var dash bytes.Buffer
	c.DashboardHandler(DefaultConfig("").HostNames).ServeHTTP(httptestRecorder(&dash), httptest.NewRequest("GET", "/dashboard.json", nil))
	srvURL, _ := url.Parse(srv.URL)
	for _, f := range []string{whSecret, "ENCODED-JIT", srvURL.Host, srvURL.Hostname(), `"maint"`, "acme", runner} {
		if strings.Contains(dash.String(), f) {
			t.Errorf("dashboard leaks %q:\n%s", f, dash.String())
		}
	}
	if !strings.Contains(dash.String(), `"state":"active"`) {
		t.Errorf("dashboard lacks the running reservation:\n%s", dash.String())
	}
	// The entry point's receipt, recorded before the job ends: the check
	// passes only with it.
	id, _ := RunnerRequest(runner)
	if _, err := c.RecordReceipt(ctx, id, []byte("suite=smoke passed=12 failed=0\n")); err != nil {
		t.Fatal(err)
	}
	deliver("workflow_job", "3", map[string]any{"action": "completed", "workflow_job": map[string]any{"runner_name": runner, "conclusion": "success"}})
	var seen []string
	for _, title := range g.titles {
		if len(seen) == 0 || seen[len(seen)-1] != title {
			seen = append(seen, title)
		}
	}
	want := "Spark test queued — position 1 | Spark 2 allocated — environment preparing | Spark test running — exact SHA 1111111 | Spark test passed — evidence receipt recorded"
	if got := strings.Join(seen, " | "); got != want {
		t.Errorf("check titles\n got %s\nwant %s", got, want)
	}
	_, live, _ := c.Snapshot(ctx)
	if len(live) != 0 {
		t.Errorf("live requests after passing: %+v", live)
	}
}
