package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpugate/gpugate/spark/dstack/dstacktest"
)

// With engine: dstack, -webhook-secret-file serves the GitHub lanes as
// dstack tasks: sparkd starts without -github-org or -jit-dir (no
// runner is minted or collected), and calls GitHub for none while idle.
func TestDstackEngineServesPullRequestLanesWithoutRunnerFlags(t *testing.T) {
	dir := t.TempDir()
	fake := dstacktest.New()
	defer fake.Close()
	fake.AddFleet(dstacktest.FleetSpec{Name: "spark", Hosts: []string{"gpu-a"}})
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("unexpected GitHub call %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
	}))
	defer api.Close()
	t.Setenv("GITHUB_API_URL", api.URL)
	t.Setenv("GITHUB_TOKEN", "ghs_test_token_not_real")
	os.WriteFile(filepath.Join(dir, "dstack-token"), []byte(dstacktest.Token), 0o600)
	os.WriteFile(filepath.Join(dir, "whsecret"), []byte("a-webhook-secret\n"), 0o600)
	fleetFile := filepath.Join(dir, "fleet.yml")
	os.WriteFile(fleetFile, []byte(`hosts:
  - {name: gpu-a, managed: true, agent: true}
engine: dstack
dstack:
  url: `+fake.Start()+`
  project: `+dstacktest.Project+`
  fleet: spark
  token_file: `+filepath.Join(dir, "dstack-token")+`
  suites: {smoke: [make smoke], performance: [make perf]}
`), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := startSparkd(ctx, t, "-init", "-db", filepath.Join(dir, "spark.db"), "-fleet", fleetFile, "-webhook-secret-file", filepath.Join(dir, "whsecret"))
	resp, err := http.Post(d.addr+"/github/webhook", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		t.Errorf("POST /github/webhook answered %d: the receiver is not served", resp.StatusCode)
	}
	cancel()
	if code := <-d.done; code != 0 {
		t.Errorf("exit %d: %s", code, d.logs.String())
	}
	if logs := d.logs.String(); strings.Contains(logs, "a-webhook-secret") || strings.Contains(logs, dstacktest.Token) {
		t.Error("a secret was logged")
	}
}
