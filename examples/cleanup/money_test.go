package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/runpodtest"
)

// The money invariant across provisioning and cleanup: whatever the API
// does (lost responses, failing listings, dropped connections, hostile
// Retry-After headers, delete outages), at the end every pod the provider
// ever created is deleted or named in the job's failure output, and a
// cleanup that succeeded leaves no pod billing.
func TestProvisionThenCleanup_EveryPodIsDeletedOrNamed(t *testing.T) {
	for seed := range uint64(300) {
		moneySchedule(t, seed)
	}
}

func moneySchedule(t *testing.T, seed uint64) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(seed, 7))
		fake, api := useFakeRunPod(t)
		reg := fake.NewRegistry()
		reg.SetProofTime(time.Duration(5+r.IntN(60)) * time.Second)
		for _, g := range runpodtest.DefaultGPUs() {
			switch r.IntN(6) {
			case 0:
				fake.SetStock(g.ID, 0)
			case 1:
				reg.FailProofOn(g.ID)
			case 2:
				fake.SetBehavior(g.ID, runpodtest.Behavior{NeverRun: true})
			}
		}
		hostile := func() string {
			return []string{"999999", "5", "Fri, 31 Dec 9999 23:59:59 GMT", "-1", "nonsense", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)}[r.IntN(6)]
		}
		// A listing may lag behind a create while provisioning runs;
		// cleanup comes minutes later, past any such lag.
		fault := func(cleanup bool) runpodtest.Fault {
			f := runpodtest.Fault{Times: 1 + r.IntN(4)}
			f.Method, f.Path = []string{"POST", "GET", "GET", "DELETE"}[r.IntN(4)], []string{"/v2/pods", "/v2/pods", "/v2/pods/*", "/v2/pods/*"}[r.IntN(4)]
			kinds := 8
			if cleanup {
				kinds = 7
			}
			switch r.IntN(kinds) {
			case 0:
				f.Status, f.RetryAfter = 429, hostile()
			case 1:
				f.Status = []int{500, 502, 503}[r.IntN(3)]
			case 2:
				f.Drop = true
			case 3:
				f.LoseResponse = true
			case 4:
				f.Malformed = true
			case 5:
				f.Method, f.Path, f.Status, f.Times = "GET", "/v2/pods", 503, 20+r.IntN(200) // a listing outage
			case 6:
				f.Method, f.Path, f.Status, f.Times = "DELETE", "/v2/pods/*", 503, 5+r.IntN(50) // a delete outage
			case 7:
				f.Method, f.Path, f.ListLag = "GET", "/v2/pods", time.Duration(1+r.IntN(30))*time.Second // a listing that lags behind a create
			}
			return f
		}
		for n := 1 + r.IntN(6); n > 0; n-- {
			fake.AddFault(fault(false))
		}
		cfg, err := runpod.LoadConfig(runpod.ExampleConfig)
		if err != nil {
			t.Fatal(err)
		}
		if r.IntN(3) == 0 {
			cfg.MaxHourlyPrice = []float64{0.01, 0.5, 0.8}[r.IntN(3)]
		}
		tmpl := runpod.PodTemplate{Image: "ghcr.io/actions/actions-runner:latest@sha256:abc",
			Owner: runpod.Ownership{Repository: "o/r", Workflow: "gpu.yml", RunID: 9, RunAttempt: 1}}
		res, perr := runpod.Provision(context.Background(), runpod.Deps{API: api, Registry: reg, Log: slog.New(slog.DiscardHandler)}, cfg, runpod.CandidatePlan(cfg, nil), tmpl)
		// The failure output: the errors and the result's named pods, never
		// the attempt table (which lists every attempt's name anyway).
		var output strings.Builder
		if perr != nil {
			output.WriteString(perr.Error() + "\n")
		}
		output.WriteString(res.LivePodID + " " + strings.Join(res.UnresolvedPodNames, " ") + "\n")

		// Then cleanup runs, with faults of its own.
		fake.ClearFaults()
		for n := r.IntN(4); n > 0; n-- {
			fake.AddFault(fault(true))
		}
		dir := t.TempDir()
		data, _ := json.Marshal(res)
		provFile := filepath.Join(dir, "provision.json")
		os.WriteFile(provFile, data, 0o644)
		env := map[string]string{"RUNPOD_API_KEY": "rpa_x", "GITHUB_OUTPUT": filepath.Join(dir, "out"), "GITHUB_STEP_SUMMARY": filepath.Join(dir, "summary")}
		var stdout, stderr strings.Builder
		code := run(context.Background(), []string{"-provision", provFile, "-out", filepath.Join(dir, "cost.json")}, func(k string) string { return env[k] }, &stdout, &stderr)
		output.WriteString(stderr.String())

		for _, e := range fake.Ledger() {
			if e.Deleted || !e.EndedAt.IsZero() {
				continue
			}
			if code == 0 {
				t.Fatalf("seed %d: cleanup succeeded but pod %s (%s) is still billing\n%s", seed, e.PodID, e.Name, output.String())
			}
			if !strings.Contains(output.String(), e.PodID) && !strings.Contains(output.String(), e.Name) {
				t.Fatalf("seed %d: pod %s (%s) is billing and named nowhere in the job's output\n%s", seed, e.PodID, e.Name, output.String())
			}
		}
		if res.LivePodID != "" && strings.HasPrefix(res.LivePodID, tmpl.Owner.Prefix()) {
			t.Fatalf("seed %d: LivePodID holds a name: %s", seed, res.LivePodID)
		}
	})
}
