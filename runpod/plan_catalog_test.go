package runpod_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/rest"
	"github.com/gpugate/gpugate/runpod/runpodtest"
)

// The catalog is advisory: read, it prices the plan and checks the
// configured types; unread, the plan is the static tiers' and the reason
// comes back beside it; a configured type the catalog does not list is
// refused before anything is bought.
func TestPlanFromCatalog_AnUnreadCatalogFallsBackToTheStaticPlanAndSaysWhy(t *testing.T) {
	cfg, err := runpod.LoadConfig(runpod.ExampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fake := runpodtest.New()
	api, err := fake.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	plan, catalogErr, err := runpod.PlanFromCatalog(ctx, api, cfg)
	if err != nil || catalogErr != nil || len(plan) == 0 || !plan[0].Live {
		t.Fatalf("a read catalog: %v, %v, %v", plan, catalogErr, err)
	}
	offers, _ := api.ListGPUTypes(ctx, rest.CatalogQuery{Cloud: cfg.Cloud, Count: 1, MinCUDAVersion: cfg.MinCUDAVersion})
	if diff := cmp.Diff(runpod.CandidatePlan(cfg, offers), plan); diff != "" {
		t.Errorf("the plan is CandidatePlan's over the catalog (-want +got):\n%s", diff)
	}

	fake.AddFault(runpodtest.Fault{Method: "GET", Path: "/v2/catalog/gpus", Status: 400, Times: 1000})
	plan, catalogErr, err = runpod.PlanFromCatalog(ctx, api, cfg)
	if err != nil || catalogErr == nil || !cmp.Equal(plan, runpod.CandidatePlan(cfg, nil)) {
		t.Errorf("an unread catalog: %v, %v, %v; want the static plan and the reason", plan, catalogErr, err)
	}

	fake.ClearFaults()
	cfg.Tiers[0].GPUTypes[0] = "NVIDIA GeForce RTX 4090X"
	plan, _, err = runpod.PlanFromCatalog(ctx, api, cfg)
	if !errors.Is(err, runpod.ErrUnknownGPUType) || plan != nil {
		t.Errorf("a misspelled type: %v, %v; want ErrUnknownGPUType and no plan", plan, err)
	}
}

// The plan's log lines: the attempt budget, then each candidate with its
// tier and its live price, or static.
func TestPlanText_EachCandidateWithItsTierAndPrice(t *testing.T) {
	plan := []runpod.Candidate{
		{GPUTypeID: "NVIDIA L4", Tier: "cost-preferred", Price: 0.43, Live: true},
		{GPUTypeID: "NVIDIA A100-SXM4-80GB", Tier: "a100"},
	}
	want := "plan (2 candidates, 6 attempts allowed):\n" +
		"  1. NVIDIA L4                        cost-preferred  $0.43/h\n" +
		"  2. NVIDIA A100-SXM4-80GB            a100            static\n"
	if got := runpod.PlanText(plan, 6); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// The result's log lines: every attempt with the first line of its
// reason, the accepted pod, and what the rejected candidates cost.
func TestResultText_TheAttemptsTheAcceptedPodAndTheRejectedCost(t *testing.T) {
	res := runpod.Result{PodID: "p2", Label: "gpugate-1-1-c2", GPUTypeID: "NVIDIA L4", Tier: "cost-preferred", HourlyPrice: 0.43, StartupSeconds: 61.25, RejectedCost: 0.0125,
		Attempts: []runpod.Attempt{
			{N: 1, Name: "gpugate-1-1-c1", Candidate: runpod.Candidate{GPUTypeID: "NVIDIA GeForce RTX 4090"}, Outcome: runpod.OutcomeExited, Seconds: 65.2, HourlyPrice: 0.69, EstimatedCost: 0.0125, Reason: "the proof failed\nits log follows"},
			{N: 2, Name: "gpugate-1-1-c2", Candidate: runpod.Candidate{GPUTypeID: "NVIDIA L4"}, Outcome: runpod.OutcomeAccepted, Seconds: 61.25},
		}}
	want := "attempts:\n" +
		"  1. gpugate-1-1-c1       NVIDIA GeForce RTX 4090          $0.69/h  exited         65.2s  est. $0.012500  the proof failed\n" +
		"  2. gpugate-1-1-c2       NVIDIA L4                        -        accepted       61.2s  est. $0.000000  \n" +
		"accepted: pod p2 on NVIDIA L4 (tier cost-preferred) at $0.43/h after 61.2 s and 2 attempts; runner label gpugate-1-1-c2\n" +
		"rejected candidates cost an estimated USD 0.012500\n"
	if got := res.Text(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got := (runpod.Result{}).Text(); !strings.HasSuffix(got, "rejected candidates cost an estimated USD 0.000000\n") || strings.Contains(got, "accepted:") {
		t.Errorf("no pod accepted:\n%s", got)
	}
}
