package runpod_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/rest"
	"github.com/gpugate/gpugate/runpod/runpodtest"
)

const head = "0123456789abcdef0123456789abcdef01234567"

type world struct {
	srv  *runpodtest.Server
	reg  *runpodtest.Registry
	pr   *runpodtest.PR
	c    *rest.Client
	cfg  runpod.Config
	logs *bytes.Buffer
	deps runpod.Deps
	tmpl runpod.PodTemplate
}

func newWorld(t testing.TB, opts ...runpodtest.Option) *world {
	t.Helper()
	w := &world{srv: runpodtest.New(opts...), logs: &bytes.Buffer{}}
	w.reg = w.srv.NewRegistry()
	w.pr = runpodtest.NewPR(head)
	c, err := w.srv.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	w.c = c
	w.cfg, err = runpod.LoadConfig(runpod.ExampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	w.deps = runpod.Deps{API: c, Registry: w.reg, PR: w.pr, Head: head,
		Log: slog.New(slog.NewJSONHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	w.tmpl = runpod.PodTemplate{
		Image: "ghcr.io/actions/actions-runner:latest@sha256:abc",
		Owner: runpod.Ownership{Repository: "o/r", Workflow: ".github/workflows/gpu.yml", RunID: 42, RunAttempt: 1},
		Args:  "bash /startup.sh --secret-token-STARTUP",
		Disk:  40,
	}
	return w
}

func (w *world) provision(ctx context.Context, offers []rest.GPUType) (runpod.Result, error) {
	return runpod.Provision(ctx, w.deps, w.cfg, runpod.CandidatePlan(w.cfg, offers), w.tmpl)
}

func (w *world) catalog(t testing.TB) []rest.GPUType {
	t.Helper()
	offers, err := w.c.ListGPUTypes(context.Background(), rest.CatalogQuery{Cloud: "SECURE", Count: 1, MinCUDAVersion: "12.6"})
	if err != nil {
		t.Fatal(err)
	}
	return offers
}

func outcomes(r runpod.Result) []string {
	var out []string
	for _, a := range r.Attempts {
		out = append(out, fmt.Sprintf("%s:%s", a.Candidate.GPUTypeID, a.Outcome))
	}
	return out
}

func TestProvision_AcceptsOnlyRunningWithRuntimeAndItsOwnRunnerOnline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		res, err := w.provision(context.Background(), w.catalog(t))
		if err != nil {
			t.Fatal(err)
		}
		if res.GPUTypeID != "NVIDIA L4" || res.Tier != "cost-preferred" || res.HourlyPrice != 0.43 || res.Label != "gpugate-42-1-c1" || len(res.Attempts) != 1 {
			t.Errorf("result %+v", res)
		}
		// provisioning 20 s + starting 40 s + proof 30 s, seen at the next 10 s poll
		if res.StartupSeconds < 90 || res.StartupSeconds > 100 {
			t.Errorf("startup %v s, want 90..100", res.StartupSeconds)
		}
		pod, err := w.c.GetPod(context.Background(), res.PodID)
		if err != nil || pod.Status != rest.StatusRunning || pod.Runtime == nil {
			t.Errorf("accepted pod %+v, %v", pod, err)
		}
		if got := w.srv.Running(); len(got) != 1 || got[0] != res.PodID {
			t.Errorf("running %v, want only the accepted pod", got)
		}
	})
}

// lookupClock records when the registry was read and what the pod was.
type lookupClock struct {
	runpod.RunnerRegistry
	api runpod.PodAPI
	mu  sync.Mutex
	bad []string
}

func (l *lookupClock) Runner(ctx context.Context, name string) (runpod.Runner, bool, error) {
	pods, _ := l.api.ListPods(ctx)
	for _, p := range pods {
		if p.Name == name && p.Status != rest.StatusRunning {
			l.mu.Lock()
			l.bad = append(l.bad, fmt.Sprintf("registry read while %s was %s", name, p.Status))
			l.mu.Unlock()
		}
	}
	return l.RunnerRegistry.Runner(ctx, name)
}

func TestProvision_ReadsTheRegistryOnlyAfterARunningObservation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		lc := &lookupClock{RunnerRegistry: w.reg, api: w.c}
		w.deps.Registry = lc
		if _, err := w.provision(context.Background(), w.catalog(t)); err != nil {
			t.Fatal(err)
		}
		for _, b := range lc.bad {
			t.Error(b)
		}
	})
}

func TestProvision_RejectsAndDeletesUnprovenPods(t *testing.T) {
	tests := map[string]struct {
		setup   func(w *world)
		outcome runpod.Outcome
		maxSecs float64 // the rejection comes this quickly
	}{
		"EXITED rejects at once": {func(w *world) { w.reg.FailProofOn("NVIDIA L4") }, runpod.OutcomeExited, 110},
		"ERROR rejects at once": {func(w *world) {
			w.srv.SetBehavior("NVIDIA L4", runpodtest.Behavior{ErrorAfter: 5 * time.Second})
		}, runpod.OutcomeExited, 80},
		"runtime lost after boot rejects": {func(w *world) {
			w.srv.SetBehavior("NVIDIA L4", runpodtest.Behavior{LoseRuntimeAfter: 15 * time.Second})
		}, runpod.OutcomeLostRuntime, 90},
		"startup_timeout rejects": {func(w *world) {
			w.srv.SetBehavior("NVIDIA L4", runpodtest.Behavior{NeverRun: true})
		}, runpod.OutcomeTimeout, 425},
		"runner never online rejects at the timeout": {func(w *world) { w.reg.FailProofFor("gpugate-42-1-c1") }, runpod.OutcomeTimeout, 425},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newWorld(t)
				tt.setup(w)
				res, err := w.provision(context.Background(), w.catalog(t))
				if err != nil {
					t.Fatal(err)
				}
				first := res.Attempts[0]
				if first.Outcome != tt.outcome || first.Seconds > tt.maxSecs {
					t.Errorf("first attempt %+v, want %s within %v s", first, tt.outcome, tt.maxSecs)
				}
				if res.PodID == first.PodID || res.Attempts[1].Outcome != runpod.OutcomeAccepted {
					t.Errorf("outcomes %v: the next candidate must be tried and accepted", outcomes(res))
				}
				if got := w.srv.Running(); len(got) != 1 || got[0] != res.PodID {
					t.Errorf("running %v; the rejected pod must be deleted", got)
				}
				if first.EstimatedCost <= 0 || res.RejectedCost != first.EstimatedCost {
					t.Errorf("rejected cost %v, attempt cost %v", res.RejectedCost, first.EstimatedCost)
				}
				// Its runner registration goes with it; the accepted one's
				// stays for the job.
				if got := w.reg.Removed(); !slices.Equal(got, []string{first.Name}) {
					t.Errorf("runner registrations removed %v, want the rejected attempt's %s only", got, first.Name)
				}
			})
		})
	}
}

func TestProvision_CapacityMissMovesOnWithoutSleepingOrCreating(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		offers := w.catalog(t)
		w.srv.SetStock("NVIDIA L4", 0)
		w.srv.SetStock("NVIDIA GeForce RTX 4090", 0)
		w.cfg.MaxConsecutiveStartupFailures = 1 // capacity misses must not count
		start := time.Now()
		res, err := w.provision(context.Background(), offers)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"NVIDIA L4:no-capacity", "NVIDIA GeForce RTX 4090:no-capacity", "NVIDIA RTX 6000 Ada Generation:accepted"}
		if !slices.Equal(outcomes(res), want) {
			t.Errorf("outcomes %v, want %v", outcomes(res), want)
		}
		if len(w.srv.Ledger()) != 1 {
			t.Errorf("%d pods created; a capacity miss creates nothing", len(w.srv.Ledger()))
		}
		if res.StartupSeconds != time.Since(start).Seconds() {
			t.Errorf("capacity misses took time: startup %v s of %v s total", res.StartupSeconds, time.Since(start).Seconds())
		}
	})
}

func TestProvision_402StopsEverything(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		w.srv.AddFault(runpodtest.Fault{Method: "POST", Path: "/v2/pods", Status: 402, Times: 10})
		res, err := w.provision(context.Background(), w.catalog(t))
		if !errors.Is(err, rest.ErrInsufficientBalance) || len(res.Attempts) != 1 {
			t.Errorf("err %v after %d attempts, want ErrInsufficientBalance after 1", err, len(res.Attempts))
		}
	})
}

func TestProvision_EveryCandidateRejectedIsAProblemWithTheRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		w.srv.AddFault(runpodtest.Fault{Method: "POST", Path: "/v2/pods", Status: 400, Detail: "dataCenterIds: unknown data center", Times: 100})
		res, err := w.provision(context.Background(), w.catalog(t))
		if !errors.Is(err, rest.ErrRejected) || errors.Is(err, runpod.ErrExhausted) || !strings.Contains(err.Error(), "unknown data center") {
			t.Errorf("err = %v; want the last 400 detail reported as a problem with the request", err)
		}
		if len(res.Attempts) != 5 || len(w.srv.Ledger()) != 0 {
			t.Errorf("%d attempts, %d pods", len(res.Attempts), len(w.srv.Ledger()))
		}
	})
}

// wrongGPU answers creates with another GPU than asked for.
type wrongGPU struct {
	runpod.PodAPI
	gpu string
}

func (w wrongGPU) CreatePod(ctx context.Context, req rest.CreatePodRequest) (*rest.Pod, error) {
	p, err := w.PodAPI.CreatePod(ctx, req)
	if p != nil {
		if w.gpu == "" {
			p.GPU = nil
		} else {
			p.GPU = &rest.PodGPU{ID: w.gpu, Count: 1}
		}
	}
	return p, err
}

func TestProvision_GPUOutsideTheTierIsRejectedBeforeAnyRunnerStarts(t *testing.T) {
	for name, gpu := range map[string]string{"no GPU ID": "", "H100 instead": "NVIDIA H100 80GB HBM3", "unreviewed type": "NVIDIA RTX A4000"} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newWorld(t)
				w.deps.API = wrongGPU{w.c, gpu}
				w.cfg.MaxConsecutiveStartupFailures = 0
				res, err := w.provision(context.Background(), w.catalog(t))
				if !errors.Is(err, runpod.ErrExhausted) {
					t.Fatalf("err = %v, want ErrExhausted", err)
				}
				for _, a := range res.Attempts {
					if a.Outcome != runpod.OutcomeGPUMismatch || a.Seconds != 0 {
						t.Errorf("attempt %+v: want an immediate gpu-mismatch", a)
					}
				}
				if len(w.srv.Running()) != 0 || len(w.srv.Ledger()) != 5 {
					t.Errorf("running %v of %d created: every mismatched pod must be deleted", w.srv.Running(), len(w.srv.Ledger()))
				}
			})
		})
	}
}

func TestProvision_ExhaustedAfterMaxProvisionAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		w.cfg.MaxConsecutiveStartupFailures = 0
		w.cfg.MaxProvisionAttempts = 3
		for _, g := range runpodtest.DefaultGPUs() {
			w.reg.FailProofOn(g.ID)
		}
		res, err := w.provision(context.Background(), w.catalog(t))
		if !errors.Is(err, runpod.ErrExhausted) || len(res.Attempts) != 3 || len(w.srv.Ledger()) != 3 {
			t.Errorf("err %v, %d attempts, %d pods; want ErrExhausted after exactly 3", err, len(res.Attempts), len(w.srv.Ledger()))
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("USD %.4f", res.RejectedCost)) || res.RejectedCost <= 0 {
			t.Errorf("the exhaustion error must report the rejected cost: %v", err)
		}
	})
}

func TestProvision_StopsAfterConsecutiveStartupFailures(t *testing.T) {
	for _, tc := range []struct {
		max, want int
		err       error
	}{{2, 2, runpod.ErrStartupFailures}, {0, 5, runpod.ErrExhausted}} {
		t.Run(fmt.Sprint("max=", tc.max), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newWorld(t)
				w.cfg.MaxConsecutiveStartupFailures = tc.max
				for _, g := range runpodtest.DefaultGPUs() {
					w.reg.FailProofOn(g.ID)
				}
				res, err := w.provision(context.Background(), w.catalog(t))
				if !errors.Is(err, tc.err) || len(res.Attempts) != tc.want {
					t.Errorf("err %v after %d attempts; want %v after %d", err, len(res.Attempts), tc.err, tc.want)
				}
				if len(w.srv.Running()) != 0 {
					t.Error("pods left running")
				}
			})
		})
	}
}

func TestProvision_DeleteExhaustionCreatesNothingMore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		w.reg.FailProofOn("NVIDIA L4")
		w.srv.AddFault(runpodtest.Fault{Method: "DELETE", Path: "/v2/pods/*", Status: 503, Times: 1000})
		res, err := w.provision(context.Background(), w.catalog(t))
		var de *runpod.DeleteError
		if !errors.As(err, &de) || de.PodID != res.Attempts[0].PodID || res.LivePodID != de.PodID {
			t.Fatalf("err = %v, result %+v; want a DeleteError naming the live pod", err, res)
		}
		if len(w.srv.Ledger()) != 1 || len(res.Attempts) != 1 {
			t.Errorf("%d pods created after a delete exhaustion", len(w.srv.Ledger())-1)
		}
		if !strings.Contains(res.Markdown(), "may still be running") {
			t.Error("the summary must name the live pod")
		}
	})
}

func TestProvision_ObsoletePRDeletesAndStops(t *testing.T) {
	tests := map[string]func(w *world){
		"head moved while waiting": func(w *world) {
			time.AfterFunc(30*time.Second, func() { w.pr.Set(runpod.PR{Open: true, HeadSHA: "feedface"}, nil) })
		},
		"closed while waiting": func(w *world) {
			time.AfterFunc(30*time.Second, func() { w.pr.Set(runpod.PR{Open: false, HeadSHA: head}, nil) })
		},
	}
	for name, setup := range tests {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newWorld(t)
				setup(w)
				res, err := w.provision(context.Background(), w.catalog(t))
				if !errors.Is(err, runpod.ErrObsolete) || res.PodID != "" {
					t.Fatalf("err = %v; want ErrObsolete and no accepted pod", err)
				}
				if len(w.srv.Running()) != 0 || res.Attempts[0].Outcome != runpod.OutcomeObsolete {
					t.Errorf("running %v, outcomes %v: the pod must be deleted", w.srv.Running(), outcomes(res))
				}
			})
		})
	}
	t.Run("closed before the first candidate", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			w := newWorld(t)
			w.pr.Set(runpod.PR{Open: false}, nil)
			_, err := w.provision(context.Background(), w.catalog(t))
			if !errors.Is(err, runpod.ErrObsolete) || len(w.srv.Ledger()) != 0 {
				t.Errorf("err = %v, %d pods; want ErrObsolete before any create", err, len(w.srv.Ledger()))
			}
		})
	})
	t.Run("unknown state is never obsolete", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			w := newWorld(t)
			w.pr.Set(runpod.PR{}, errors.New("GitHub is down"))
			if _, err := w.provision(context.Background(), w.catalog(t)); err != nil {
				t.Errorf("err = %v; unknown PR state must not stop provisioning", err)
			}
		})
	})
}

func TestProvision_CanceledContextStillDeletesThePod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
		defer cancel()
		offers := w.catalog(t)
		res, err := w.provision(ctx, offers)
		if err == nil || res.PodID != "" {
			t.Fatalf("err = %v, pod %s; want a canceled provision", err, res.PodID)
		}
		if len(w.srv.Running()) != 0 {
			t.Errorf("running %v after cancellation", w.srv.Running())
		}
		// The seconds a cancelled step has left go to the deletion: the
		// runner registration is left (its label is the attempt's own).
		if got := w.reg.Removed(); len(got) != 0 || !strings.Contains(w.logs.String(), `"msg":"provision.runner_left"`) {
			t.Errorf("removed %v after cancellation; want none, and provision.runner_left", got)
		}
	})
}

func TestProvision_EveryCreateCarriesTheFloorTagsAndASingleUseJIT(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		w.reg.FailProofOn("NVIDIA L4")
		res, err := w.provision(context.Background(), w.catalog(t))
		if err != nil {
			t.Fatal(err)
		}
		minted := w.reg.Minted()
		seen := map[string]bool{}
		for _, a := range res.Attempts {
			env := w.srv.Env(a.PodID)
			for k, want := range map[string]string{
				runpod.TagRepository: "o/r", runpod.TagWorkflow: ".github/workflows/gpu.yml", runpod.TagRunID: "42",
				runpod.TagRunAttempt: "1", runpod.EnvRunnerName: a.Name, runpod.EnvMinCUDA: "12.6",
				runpod.EnvJITConfig: minted[a.Name].Reveal(),
			} {
				if env[k] != want {
					t.Errorf("%s: env %s = %q, want %q", a.Name, k, env[k], want)
				}
			}
			if seen[env[runpod.EnvJITConfig]] {
				t.Error("a JIT config was reused")
			}
			seen[env[runpod.EnvJITConfig]] = true
		}
		for _, r := range w.srv.Requests() {
			if r.Method == "POST" && !bytes.Contains(r.Body, []byte(`"minCudaVersion":"12.6"`)) {
				t.Errorf("create without gpu.minCudaVersion: %s", r.Body)
			}
		}
	})
}

func TestProvision_ResultMarkdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		offers := w.catalog(t)
		w.srv.SetStock("NVIDIA L4", 0)
		w.reg.FailProofOn("NVIDIA GeForce RTX 4090")
		res, err := w.provision(context.Background(), offers)
		if err != nil {
			t.Fatal(err)
		}
		md := res.Markdown()
		for _, want := range []string{
			"| 1 | `gpugate-42-1-c1` | NVIDIA L4 | cost-preferred | $0.43 (list) | no-capacity | 0 | $0.0000 |",
			"| 2 | `gpugate-42-1-c2` | NVIDIA GeForce RTX 4090 | cost-preferred | $0.69 | exited |",
			"| 3 | `gpugate-42-1-c3` | NVIDIA RTX 6000 Ada Generation | premium | $0.77 | accepted |",
			"**Accepted:** pod ",
		} {
			if !strings.Contains(md, want) {
				t.Errorf("summary lacks %q:\n%s", want, md)
			}
		}
	})
}

// TestProvision_InvariantsUnderRandomFaultSchedules runs 1,000 randomized
// schedules (stock, proof failures, slow or dying pods, API faults, PR
// moves, delete outages) and checks the invariants after each.
func TestProvision_InvariantsUnderRandomFaultSchedules(t *testing.T) {
	var wasted float64
	for i := range 1000 {
		wasted += runSchedule(t, uint64(i))
	}
	t.Logf("1000 schedules: %.0f simulated paid seconds wasted on rejected candidates", wasted)
}

func FuzzProvisionSchedule(f *testing.F) {
	for i := range 5 {
		f.Add(uint64(i))
	}
	f.Fuzz(func(t *testing.T, seed uint64) { runSchedule(t, seed) })
}

// runSchedule builds a random world from seed, provisions, checks every
// invariant and returns the billed seconds of rejected pods.
func runSchedule(t *testing.T, seed uint64) (wasted float64) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(seed, 99))
		w := newWorld(t, runpodtest.WithSchedule(time.Duration(r.IntN(60))*time.Second, time.Duration(1+r.IntN(120))*time.Second))
		w.cfg.MaxConsecutiveStartupFailures = r.IntN(4)
		w.cfg.MaxProvisionAttempts = 3 + r.IntN(4)
		failing := map[string]bool{}
		for _, g := range runpodtest.DefaultGPUs() {
			switch r.IntN(8) {
			case 0:
				w.srv.SetStock(g.ID, 0)
			case 1:
				w.reg.FailProofOn(g.ID)
				failing[g.ID] = true
			case 2:
				w.srv.SetBehavior(g.ID, runpodtest.Behavior{NeverRun: true})
			case 3:
				w.srv.SetBehavior(g.ID, runpodtest.Behavior{LoseRuntimeAfter: time.Duration(1+r.IntN(20)) * time.Second})
				failing[g.ID] = true // may pass the proof before losing runtime
			}
		}
		for n := 1 + r.IntN(6); n > 0; n-- {
			f := runpodtest.Fault{Times: 1 + r.IntN(3)}
			f.Method, f.Path = []string{"POST", "GET", "DELETE", "GET"}[r.IntN(4)], []string{"/v2/pods", "/v2/pods/*", "/v2/pods/*", "/v2/catalog/gpus"}[r.IntN(4)]
			switch r.IntN(9) {
			case 0:
				f.Status, f.RetryAfter = 429, fmt.Sprint(r.IntN(30))
			case 1:
				f.Status = []int{500, 502, 503, 408}[r.IntN(4)]
			case 2:
				f.Drop = true
			case 3:
				f.LoseResponse = true
			case 4:
				f.Malformed = true
			case 5:
				f.Status, f.Detail = 400, runpodtest.CapacityDetail
			case 6:
				f.Status = []int{402, 403, 422, 400}[r.IntN(4)]
			case 7:
				f.Delay = time.Duration(r.IntN(40)) * time.Second
			case 8:
				f.Method, f.Path, f.Status, f.Times = "DELETE", "/v2/pods/*", 503, 50 // a delete outage
			}
			w.srv.AddFault(f)
		}
		if r.IntN(10) == 0 {
			w.reg.FailLookups(1 + r.IntN(5))
		}
		if r.IntN(8) == 0 {
			at := time.Duration(r.IntN(600)) * time.Second
			open := r.IntN(2) == 0
			time.AfterFunc(at, func() { w.pr.Set(runpod.PR{Open: open, HeadSHA: "moved"}, nil) })
		}
		var offers []rest.GPUType
		if r.IntN(4) > 0 {
			offers, _ = w.c.ListGPUTypes(context.Background(), rest.CatalogQuery{Cloud: "SECURE", Count: 1, MinCUDAVersion: "12.6"})
		}
		plan := runpod.CandidatePlan(w.cfg, offers)
		res, err := runpod.Provision(context.Background(), w.deps, w.cfg, plan, w.tmpl)

		ledger := w.srv.Ledger()
		running := w.srv.Running()
		// Every pod ever created is the accepted one or deleted, except one
		// whose deletion could not be confirmed, which is named.
		for _, e := range ledger {
			if e.PodID == res.PodID || e.Deleted {
				continue
			}
			if !errors.Is(err, runpod.ErrNotDeleted) || (res.LivePodID != e.PodID && !slices.Contains(res.UnresolvedPodNames, e.Name)) {
				t.Fatalf("seed %d: pod %s left running (err %v, outcomes %v)", seed, e.PodID, err, outcomes(res))
			}
		}
		// Nothing is created after a delete exhaustion: the live pod is the last one.
		if last := ledger[max(len(ledger)-1, 0):]; errors.Is(err, runpod.ErrNotDeleted) && len(last) == 1 && last[0].PodID != res.LivePodID && !slices.Contains(res.UnresolvedPodNames, last[0].Name) {
			t.Fatalf("seed %d: a pod was created after the delete exhaustion of %s", seed, res.LivePodID)
		}
		// A pod ID field holds only IDs.
		if res.LivePodID != "" && !slices.ContainsFunc(ledger, func(e runpodtest.LedgerEntry) bool { return e.PodID == res.LivePodID }) {
			t.Fatalf("seed %d: LivePodID %q is not a pod ID", seed, res.LivePodID)
		}
		// The attempt budget is never exceeded.
		if len(res.Attempts) > w.cfg.MaxProvisionAttempts || len(ledger) > w.cfg.MaxProvisionAttempts {
			t.Fatalf("seed %d: %d attempts, %d pods over a budget of %d", seed, len(res.Attempts), len(ledger), w.cfg.MaxProvisionAttempts)
		}
		// An unproven pod is never accepted: the accepted pod runs, with its
		// runtime, and its own runner is online.
		if res.PodID != "" {
			if err != nil {
				t.Fatalf("seed %d: accepted %s but err %v", seed, res.PodID, err)
			}
			pod, gerr := w.c.GetPod(context.Background(), res.PodID)
			runner, found, _ := w.reg.Runner(context.Background(), res.Label)
			if gerr == nil && (pod.Status != rest.StatusRunning || !found || (!runner.Online && !failing[res.GPUTypeID])) {
				t.Fatalf("seed %d: accepted unproven pod %+v (runner %+v)", seed, pod, runner)
			}
			if !slices.Contains(running, res.PodID) {
				t.Fatalf("seed %d: the accepted pod is not running", seed)
			}
		} else if err == nil {
			t.Fatalf("seed %d: no pod and no error", seed)
		}
		// Every attempt's runner registration is removed but the accepted
		// one's: no offline registration is left behind.
		removed := w.reg.Removed()
		for _, a := range res.Attempts {
			if got := slices.Contains(removed, a.Name); got != (a.Outcome != runpod.OutcomeAccepted) && !(a.Outcome == runpod.OutcomeCreateError && strings.Contains(a.Reason, "minting")) {
				t.Fatalf("seed %d: attempt %s (%s): registration removed %v", seed, a.Name, a.Outcome, got)
			}
		}
		// Secrets never appear in a log record, an error or the summary.
		texts := []string{w.logs.String(), res.Markdown(), fmt.Sprint(res)}
		if err != nil {
			texts = append(texts, err.Error())
		}
		secrets := []string{runpodtest.APIKey, "secret-token-STARTUP"}
		for _, s := range w.reg.Minted() {
			secrets = append(secrets, s.Reveal())
		}
		for _, text := range texts {
			for _, s := range secrets {
				if strings.Contains(text, s) {
					t.Fatalf("seed %d: secret %q leaked", seed, s[:8])
				}
			}
		}
		now := time.Now()
		for _, e := range ledger {
			if e.PodID != res.PodID {
				wasted += e.BilledSeconds(now)
			}
		}
	})
	return wasted
}

// A template whose pods could never be created stops before the first
// attempt: nothing is created, nothing is paid.
func TestProvision_ATemplateOverThePodEnvironmentLimitBuysNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		w.tmpl.Env = map[string]string{}
		for i := range rest.MaxPodEnv {
			w.tmpl.Env[fmt.Sprintf("GPUGATE_PROOF_%02d", i)] = "chunk"
		}
		_, err := w.provision(context.Background(), w.catalog(t))
		if !errors.Is(err, runpod.ErrTemplate) || !errors.Is(err, rest.ErrInvalidRequest) {
			t.Fatalf("err %v, want ErrTemplate and ErrInvalidRequest", err)
		}
		if n := w.srv.Count("POST", "/v2/pods"); n != 0 || w.srv.TotalCost() != 0 {
			t.Errorf("%d creates, $%v paid; want none", n, w.srv.TotalCost())
		}
	})
}

func TestProvision_MissingDependenciesOrOwnershipAreTemplateErrors(t *testing.T) {
	w := newWorld(t)
	plan := runpod.CandidatePlan(w.cfg, nil)
	noOwner := w.tmpl
	noOwner.Owner = runpod.Ownership{}
	noImage := w.tmpl
	noImage.Image = ""
	for name, tc := range map[string]struct {
		deps runpod.Deps
		tmpl runpod.PodTemplate
	}{
		"no registry": {runpod.Deps{API: w.c}, w.tmpl},
		"no image":    {w.deps, noImage},
		"no owner":    {w.deps, noOwner},
	} {
		if _, err := runpod.Provision(context.Background(), tc.deps, w.cfg, plan, tc.tmpl); !errors.Is(err, runpod.ErrTemplate) {
			t.Errorf("%s: %v, want ErrTemplate", name, err)
		}
	}
	if n := w.srv.Count("POST", "/v2/pods"); n != 0 {
		t.Errorf("%d creates, want none", n)
	}
}

// Seed 001: "Debug retention applies to genuine startup failures; a pod
// made obsolete by PR closure/head movement is deleted even when
// keep_failed_pods was requested" and "the provisioner records actual
// retained IDs in a small runpod-debug-retained artifact, whose name
// includes the run, attempt and comma-separated pod IDs". A GPU outside
// the tier is not a startup failure either.
func TestProvision_KeepFailedRetainsOnlyGenuineStartupFailuresAndRecordsThem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		w.tmpl.KeepFailed = true
		w.cfg.MaxConsecutiveStartupFailures = 3
		w.reg.FailProofOn("NVIDIA L4")        // the cheapest: exits
		w.reg.FailProofFor("gpugate-42-1-c2") // the next: never online
		res, err := w.provision(context.Background(), w.catalog(t))
		if err != nil {
			t.Fatal(err)
		}
		if got := outcomes(res); len(got) != 3 || res.Attempts[2].Outcome != runpod.OutcomeAccepted {
			t.Fatalf("outcomes %v", got)
		}
		kept := []string{res.Attempts[0].PodID, res.Attempts[1].PodID}
		if !slices.Equal(res.RetainedPods(), kept) || !res.Attempts[0].Retained || !res.Attempts[1].Retained || res.Attempts[2].Retained {
			t.Errorf("retained %v (attempts %+v), want the two failed candidates %v", res.RetainedPods(), res.Attempts, kept)
		}
		running := w.srv.Running()
		slices.Sort(running)
		want := append(slices.Clone(kept), res.PodID)
		slices.Sort(want)
		if !slices.Equal(running, want) {
			t.Errorf("running %v, want the retained %v and the accepted %s", running, kept, res.PodID)
		}
		rec, ok := res.RetentionRecord(w.tmpl.Owner)
		if !ok {
			t.Fatal("no retention record")
		}
		parsed, ok := runpod.ParseRetentionRecord(rec.Name())
		if !ok || parsed.RunID != 42 || parsed.Attempt != 1 || !slices.Equal(parsed.PodIDs, kept) {
			t.Errorf("record %q parses as %+v, %v", rec.Name(), parsed, ok)
		}
		if !strings.Contains(w.logs.String(), `"msg":"provision.retain"`) {
			t.Error("no provision.retain event")
		}
		if got := w.reg.Removed(); len(got) != 0 {
			t.Errorf("runner registrations of retained pods removed: %v", got)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		w.tmpl.KeepFailed = true
		time.AfterFunc(30*time.Second, func() { w.pr.Set(runpod.PR{Open: false, HeadSHA: head}, nil) })
		res, err := w.provision(context.Background(), w.catalog(t))
		if !errors.Is(err, runpod.ErrObsolete) || len(w.srv.Running()) != 0 || len(res.RetainedPods()) != 0 {
			t.Errorf("err %v, running %v, retained %v: an obsolete pod is deleted even with keep_failed_pods", err, w.srv.Running(), res.RetainedPods())
		}
		if _, ok := res.RetentionRecord(w.tmpl.Owner); ok {
			t.Error("a record without retained pods")
		}
	})
}

// The local-validation label can be added after authorization: read
// again with the pull request before every create and while a pod
// starts, it stops provisioning (ErrObsolete) before anything more is
// bought, and the starting pod is deleted; a library caller of Provision
// gets the rule, not only the commands.
func TestProvision_ALabelAddedAfterAuthorizationBuysNothingMore(t *testing.T) {
	t.Run("before the first create", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			w := newWorld(t)
			w.pr.Set(runpod.PR{Open: true, HeadSHA: head, Labels: []string{"gpu-validated-locally"}}, nil)
			_, err := w.provision(context.Background(), w.catalog(t))
			if !errors.Is(err, runpod.ErrObsolete) || len(w.srv.Ledger()) != 0 {
				t.Errorf("err = %v, %d pods; want ErrObsolete before any create", err, len(w.srv.Ledger()))
			}
		})
	})
	t.Run("while the pod starts", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			w := newWorld(t)
			time.AfterFunc(30*time.Second, func() {
				w.pr.Set(runpod.PR{Open: true, HeadSHA: head, Labels: []string{"ready", "gpu-validated-locally"}}, nil)
			})
			res, err := w.provision(context.Background(), w.catalog(t))
			if !errors.Is(err, runpod.ErrObsolete) || res.PodID != "" || len(w.srv.Running()) != 0 {
				t.Errorf("err = %v, accepted %q, running %v; want ErrObsolete and the pod deleted", err, res.PodID, w.srv.Running())
			}
		})
	})
}
