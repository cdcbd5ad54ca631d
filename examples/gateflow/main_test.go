package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"

	"github.com/gpugate/gpugate/cost"
	"github.com/gpugate/gpugate/gateflow/demo"
	"github.com/gpugate/gpugate/gateflow/econ"
	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/runpodtest"
)

func runGateflow(t *testing.T, env map[string]string, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr strings.Builder
	code := run(context.Background(), args, func(k string) string { return env[k] }, &stdout, &stderr)
	return stdout.String(), stderr.String(), code
}

func TestDemoRunsTheWholeLifecycleOnEmbeddedDefaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		out, errOut, code := runGateflow(t, nil)
		if code != 0 {
			t.Fatalf("exit %d\n%s%s", code, out, errOut)
		}
		for _, want := range []string{
			"1. classify", "2. authorize", "3. reuse", "4. plan", "5. image", "6. provision", "7. hand over", "8. watchdog", "9. cleanup", "10. publish", "11. cost",
			"no-capacity", "exited", "accepted", // the capacity miss, the host failing its CUDA proof, the winner
			"deleted (confirmed)", ":paid)", "startup/queue", "test execution",
			"first run 3, second run 0", ":reused) — no pod created", ":not-required) — no pod created",
			"429 answers ridden out: 1", "pods still running: 0",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		for _, secret := range []string{runpodtest.APIKey, "jitconfig-"} {
			if strings.Contains(out+errOut, secret) {
				t.Errorf("output carries a secret (%q)", secret)
			}
		}
	})
}

// go run ./examples/gateflow prints the same on every run. This runs the
// demonstration twice, at once, on the real clock (as go run does; inside
// a synctest bubble the clock would make any output repeat) and compares.
func TestDemo_PrintsTheSameOnEveryRun(t *testing.T) {
	outs := make([]string, 2)
	codes := make([]int, 2)
	var wg sync.WaitGroup
	for i := range outs {
		wg.Go(func() { outs[i], _, codes[i] = runGateflow(t, nil) })
	}
	wg.Wait()
	if codes[0] != 0 || codes[1] != 0 {
		t.Fatalf("exit %v:\n%s", codes, outs[0])
	}
	if diff := cmp.Diff(outs[0], outs[1]); diff != "" {
		t.Errorf("two runs of the demonstration differ (-first +second):\n%s", diff)
	}
}

// The attempt table shows the scenario's three events where they happened:
// the capacity miss, the host the CUDA proof rejected (its pod exited
// before its runner came online), and the 429 its pod's read was answered,
// under that attempt.
func TestDemo_TheAttemptTableShowsTheProofRejectionAndThe429(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		out, errOut, code := runGateflow(t, nil)
		if code != 0 {
			t.Fatalf("exit %d\n%s%s", code, out, errOut)
		}
		_, table, _ := strings.Cut(out, " 5. image")
		table, _, _ = strings.Cut(table, " 6. provision")
		rows := strings.Split(strings.TrimSpace(table), "\n")[1:] // after the image line
		outcomes := []string{}
		for _, r := range rows {
			switch {
			case strings.Contains(r, "no-capacity"):
				outcomes = append(outcomes, "no-capacity")
			case strings.Contains(r, " exited ") && strings.Contains(r, "EXITED before its runner came online"):
				outcomes = append(outcomes, "exited")
			case strings.Contains(r, "the CUDA proof failed on this host"):
				outcomes = append(outcomes, "proof rejected")
			case strings.Contains(r, "answered 429 Too Many Requests (Retry-After: 1 s)"):
				outcomes = append(outcomes, "429")
			case strings.Contains(r, " accepted "):
				outcomes = append(outcomes, "accepted")
			}
		}
		if want := []string{"no-capacity", "exited", "proof rejected", "429", "accepted"}; !cmp.Equal(outcomes, want) {
			t.Errorf("the attempt table shows %v, want %v:\n%s", outcomes, want, table)
		}
	})
}

// The demonstration compresses time, not money: every paid second it
// reports is a second of its real-time schedule, and every dollar what
// that second costs at the pod's hourly price. The accepted pod paid
// from its container's start (20 s after the create) through the CUDA
// proof (80 s after), the job's setup (20 s), tests (80 s) and cleanup
// (10 s): 170 s; the pod the proof rejected paid 80 s and the 429's
// second.
func TestDemo_DollarsAreAtRealTimeScale(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		out, errOut, code := runGateflow(t, nil, "-json")
		var doc demo.Doc
		if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil {
			t.Fatalf("exit %d, %v:\n%s%s", code, err, out, errOut)
		}
		first := doc.Runs[0]
		var seconds []float64
		for _, a := range first.Result.Attempts {
			seconds = append(seconds, a.Seconds)
			if want := a.Seconds / 3600 * a.HourlyPrice; math.Abs(a.EstimatedCost-want) > 1e-12 {
				t.Errorf("attempt %d: $%v for %v s at $%v/h, want $%v", a.N, a.EstimatedCost, a.Seconds, a.HourlyPrice, want)
			}
		}
		if want := []float64{0, 61, 60}; !cmp.Equal(seconds, want) {
			t.Errorf("the attempts paid %v s, want %v (real time)", seconds, want)
		}
		w := first.Cost.Window
		if w.Seconds != 170 || math.Abs(w.Cost-170*w.HourlyPrice/3600) > 1e-12 || w.HourlyPrice != first.Result.HourlyPrice {
			t.Errorf("the accepted pod's window: %v s, $%v at $%v/h; want 170 s at $%v/h", w.Seconds, w.Cost, w.HourlyPrice, first.Result.HourlyPrice)
		}
		stages := map[string]float64{}
		for _, st := range first.Cost.Stages {
			if st.Seconds != nil {
				stages[st.Name] = *st.Seconds
			}
		}
		want := map[string]float64{cost.StageStartup: 60, cost.StageSetup: 20, cost.StageExecution: 80, cost.StageCleanup: 10, cost.StageUnassigned: 0}
		if !cmp.Equal(stages, want) {
			t.Errorf("stages %v s, want %v", stages, want)
		}
		if total := w.Cost + first.Result.RejectedCost; math.Abs(doc.USD-total) > 1e-12 || doc.TimeScale != demo.TimeScale {
			t.Errorf("the document says $%v at time scale %d, the runs $%v", doc.USD, doc.TimeScale, total)
		}
	})
}

// -json prints what happened as one document instead of the narration:
// each run's class, gate kind, provisioning and cost; the fleet
// simulation's rows.
func TestJSONPrintsTheRunsInsteadOfTheNarration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		out, errOut, code := runGateflow(t, nil, "-json")
		var doc demo.Doc
		if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil {
			t.Fatalf("exit %d, %v:\n%s%s", code, err, out, errOut)
		}
		var got []string
		for _, r := range doc.Runs {
			got = append(got, fmt.Sprintf("#%d %s %s provisioned:%v cost:%v", r.PR, r.Class, r.Gate, r.Result != nil, r.Cost != nil))
		}
		want := []string{"#42 code paid provisioned:true cost:true", "#42 code reused provisioned:false cost:false", "#43 docs-only not-required provisioned:false cost:false"}
		if diff := cmp.Diff(want, got); diff != "" || !cmp.Equal(doc.PodCreates, []int{3, 0, 0}) || doc.PodsRunning != 0 {
			t.Errorf("runs (-want +got):\n%s\npod creates %v, running %d", diff, doc.PodCreates, doc.PodsRunning)
		}
		if first := doc.Runs[0]; first.Result.PodID == "" || first.Cost.PodID != first.Result.PodID || len(first.Result.Attempts) != 3 {
			t.Errorf("the paid run: %+v", first)
		}
		out, _, code = runGateflow(t, nil, "-json", "-simulate-fleet", "-merge-refs", "12")
		var fleet econ.Report
		if err := json.Unmarshal([]byte(out), &fleet); code != 0 || err != nil || fleet.MergeRefs != 12 || len(fleet.Policies) != len(econ.Policies())+1 || fleet.Policies[0].Name != "gpugate" {
			t.Errorf("-simulate-fleet -json: exit %d, %v: %+v", code, err, fleet)
		}
	})
}

func TestSimulationIsDeterministicForASeed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		args := []string{"-simulate-fleet", "-merge-refs", "12", "-seed", "5"}
		a, _, code := runGateflow(t, nil, args...)
		b, _, _ := runGateflow(t, nil, args...)
		if code != 0 || a != b {
			t.Fatalf("exit %d; two runs differ:\n%s\n---\n%s", code, a, b)
		}
		c, _, _ := runGateflow(t, nil, "-simulate-fleet", "-merge-refs", "12", "-seed", "6")
		if c == a {
			t.Error("a different seed gave the same month")
		}
		for _, want := range []string{"gpugate", "always premium tier", "no gate reuse", "no early stop", "no smoke proof", "oracle lower bound"} {
			if !strings.Contains(a, "\n"+want) {
				t.Errorf("the table lacks %q:\n%s", want, a)
			}
		}
	})
}

// The tour (docs/tour.md, linked from the README) shows the default
// simulated month's table; it must be what the command prints, so the
// economics it quotes stay true as the code changes.
func TestTheREADMEShowsWhatTheDefaultSimulationPrints(t *testing.T) {
	readme, err := os.ReadFile("../../docs/tour.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "```text\nsimulated month:")
	block, _, closed := strings.Cut(block, "```")
	if !ok || !closed {
		t.Fatal("docs/tour.md has no simulated-month block")
	}
	synctest.Test(t, func(t *testing.T) {
		out, _, code := runGateflow(t, nil, "-simulate-fleet")
		if code != 0 || !strings.Contains(out, "simulated month:"+block) {
			t.Errorf("exit %d; docs/tour.md's table is not the output of go run ./examples/gateflow -simulate-fleet:\n%s", code, cmp.Diff("simulated month:"+block, out))
		}
	})
}

// -real without its target, its run or the CUDA proof is a refused
// command line (exit 2, one line on stderr), whatever the environment;
// with them, a missing key or an unpinned tier table fails (exit 1). No
// case prints the key.
func TestRealModeRefusesWithoutCredentialsOrTargets(t *testing.T) {
	key := map[string]string{"RUNPOD_API_KEY": "rpa_secret_value"}
	target := []string{"-real", "-repo", "o/r", "-pr", "4", "-actor", "m", "-run-id", "9"}
	for name, tc := range map[string]struct {
		env  map[string]string
		args []string
		code int
		want string
	}{
		"no target":      {key, []string{"-real"}, 2, "-repo, -pr, -actor and -run-id are required"},
		"no target, key": {nil, []string{"-real"}, 2, "-repo, -pr, -actor and -run-id are required"},
		"no run":         {key, []string{"-real", "-repo", "o/r", "-pr", "4", "-actor", "m"}, 2, "-run-id is required"},
		"a bad repo":     {key, []string{"-real", "-repo", "o", "-pr", "4", "-actor", "m", "-run-id", "9"}, 2, "want owner/name"},
		"no proof":       {key, target, 2, "needs the CUDA proof"},
		"two proofs":     {key, append(append([]string{}, target...), "-proof", "p", "-proof-path", "/p"), 2, "alternatives"},
		"two modes":      {key, append(append([]string{}, target...), "-simulate-fleet"), 2, "different modes"},
		"no key":         {nil, append(append([]string{}, target...), "-proof-path", "/usr/local/bin/gpugate-smoke"), 1, "RUNPOD_API_KEY is not set"},
		"unpinned NVRTC": {key, append(append([]string{}, target...), "-proof-path", "/usr/local/bin/gpugate-smoke"), 1, "pin its sha256"},
	} {
		t.Run(name, func(t *testing.T) {
			out, errOut, code := runGateflow(t, tc.env, tc.args...)
			refusedInOneLine := out == "" && strings.Count(strings.TrimSpace(errOut), "\n") == 0
			if code != tc.code || !strings.Contains(out+errOut, tc.want) || strings.Contains(out+errOut, "rpa_secret_value") || tc.code == 2 && !refusedInOneLine {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d naming %q", code, out, errOut, tc.code, tc.want)
			}
		})
	}
}

// In Actions a re-run is a new attempt of the same run: its pods are
// tagged with that attempt (the reaper would call attempt 1's tag
// superseded and reclaim the pod mid-test) and its watchdog follows that
// attempt's jobs.
func TestRealModeTagsAndWatchesTheRunAttemptItRunsIn(t *testing.T) {
	env := map[string]string{"GITHUB_REPOSITORY": "o/r", "GITHUB_RUN_ID": "77", "GITHUB_RUN_ATTEMPT": "2",
		"GITHUB_WORKFLOW_REF": "o/r/.github/workflows/runpod-gpu-test.yml@refs/heads/main"}
	getenv := func(k string) string { return env[k] }
	var o options
	if err := flags(&o, getenv, io.Discard).Parse([]string{"-real"}); err != nil {
		t.Fatal(err)
	}
	got := o.ownership(getenv)
	want := runpod.Ownership{Repository: "o/r", Workflow: env["GITHUB_WORKFLOW_REF"], RunID: 77, RunAttempt: 2}
	if got != want {
		t.Errorf("ownership %+v, want %+v", got, want)
	}
	if tag := got.Tags()[runpod.TagRunAttempt]; tag != "2" {
		t.Errorf("the pods are tagged attempt %s, want 2", tag)
	}
}

// The policies an adopter would pick instead, SkyPilot's failover and
// dstack's offers, face the same world and seeds as gpugate, name the
// documentation their parameters come from, and, without the CUDA proof
// or gate reuse, pay more per validated ref and show more red gates.
func TestSimulation_ThePeersPoliciesFaceTheSameWorld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		out, _, code := runGateflow(t, nil, "-json", "-simulate-fleet", "-merge-refs", "40", "-seed", "3")
		var fleet econ.Report
		if err := json.Unmarshal([]byte(out), &fleet); code != 0 || err != nil {
			t.Fatalf("exit %d, %v", code, err)
		}
		rows := map[string]econ.Row{}
		for _, r := range fleet.Policies {
			rows[r.Name] = r
		}
		gg := rows["gpugate"]
		for _, peer := range []string{"SkyPilot-like", "dstack-like"} {
			r, ok := rows[peer]
			switch {
			case !ok:
				t.Errorf("no %s row", peer)
			case r.Source == "":
				t.Errorf("%s names no documentation for its parameters", peer)
			case r.USDPerValidated <= gg.USDPerValidated || r.FailedGates < gg.FailedGates:
				t.Errorf("%s: $%.4f per validated ref, %d red gates; gpugate $%.4f, %d", peer, r.USDPerValidated, r.FailedGates, gg.USDPerValidated, gg.FailedGates)
			}
		}
	})
}
