package runpod_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/rest"
	"github.com/gpugate/gpugate/runpod/runpodtest"
)

func ExampleCandidatePlan() {
	cfg, err := runpod.LoadConfig(runpod.ExampleConfig)
	if err != nil {
		panic(err)
	}
	offers := []rest.GPUType{
		{ID: "NVIDIA L4", MemoryGB: 24, Secure: true, SecurePrice: 0.43, Availability: "HIGH"},
		{ID: "NVIDIA GeForce RTX 4090", MemoryGB: 24, Secure: true, SecurePrice: 0.69, Availability: "NONE"},
		{ID: "NVIDIA L40S", MemoryGB: 48, Secure: true, SecurePrice: 0.86, Availability: "LOW"},
		{ID: "NVIDIA H100 80GB HBM3", MemoryGB: 80, Secure: true, SecurePrice: 0.10, Availability: "HIGH"},
	}
	for _, c := range runpod.CandidatePlan(cfg, offers) {
		fmt.Printf("%-32s %-15s live=%-5v %.2f\n", c.GPUTypeID, c.Tier, c.Live, c.Price)
	}
	// Output:
	// NVIDIA L4                        cost-preferred  live=true  0.43
	// NVIDIA L40S                      premium         live=true  0.86
	// NVIDIA A100-SXM4-80GB            a100            live=false 0.00
	// NVIDIA GeForce RTX 4090          cost-preferred  live=false 0.00
	// NVIDIA RTX 6000 Ada Generation   premium         live=false 0.00
}

func ExampleDelete() {
	srv := runpodtest.New()
	c, err := srv.NewClient()
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	pod, err := c.CreatePod(ctx, rest.CreatePodRequest{
		Name:  "gpu-gate-c1",
		Image: "ghcr.io/actions/actions-runner:latest",
		GPU:   rest.GPURequest{ID: "NVIDIA L4", Count: 1, MinCUDAVersion: "12.6"},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(runpod.Delete(ctx, c, pod.ID)) // confirmed
	fmt.Println(runpod.Delete(ctx, c, pod.ID)) // already gone: 404 confirms
	fmt.Println(len(srv.Running()), "pods running")
	// Output:
	// <nil>
	// <nil>
	// 0 pods running
}

// A reviewed tier names a type RunPod does not offer: refused before
// anything is bought, with the catalog's spelling when only the case or
// spacing differ.
func ExampleCheckGPUTypes() {
	cfg := runpod.DefaultConfig()
	cfg.Tiers = []runpod.Tier{{Name: "cost-preferred", GPUTypes: []string{"NVIDIA GeForce RTX 4090", "nvidia l4"}}}
	catalog := []rest.GPUType{{ID: "NVIDIA GeForce RTX 4090"}, {ID: "NVIDIA L4"}, {ID: "NVIDIA L40S"}}
	err := runpod.CheckGPUTypes(cfg, catalog)
	fmt.Println(errors.Is(err, runpod.ErrUnknownGPUType))
	fmt.Println(err)
	// Output:
	// true
	// runpod: GPU type not in RunPod's catalog: tier "cost-preferred" names "nvidia l4", which GET /v2/catalog/gpus does not list (3 types): did you mean "NVIDIA L4"?
}

// Provision buys the cheapest pod that proves it runs the project's CUDA
// (here against the in-process fake of RunPod's API and a fake runner
// registry), then the job's cleanup deletes it.
func ExampleProvision() {
	fake := runpodtest.New(runpodtest.WithSchedule(time.Millisecond, time.Millisecond))
	api, err := fake.NewClient()
	if err != nil {
		panic(err)
	}
	reg := fake.NewRegistry()
	reg.SetProofTime(time.Millisecond)
	reg.FailProofOn("NVIDIA L4") // this host cannot run the project's CUDA
	cfg, err := runpod.LoadConfig(runpod.ExampleConfig)
	if err != nil {
		panic(err)
	}
	cfg.StartupPoll = time.Millisecond
	ctx := context.Background()
	offers, err := api.ListGPUTypes(ctx, rest.CatalogQuery{Cloud: cfg.Cloud, Count: 1, MinCUDAVersion: cfg.MinCUDAVersion})
	if err != nil {
		panic(err)
	}
	tmpl := runpod.PodTemplate{
		Image:        "ghcr.io/actions/actions-runner@sha256:" + strings.Repeat("0", 64),
		RunnerPrefix: "gpu-gate-1234-1",
		Owner:        runpod.Ownership{Repository: "example/gpu-project", Workflow: "runpod-gpu-test.yml", RunID: 1234, RunAttempt: 1},
	}
	res, err := runpod.Provision(ctx, runpod.Deps{API: api, Registry: reg, Log: slog.New(slog.DiscardHandler)}, cfg, runpod.CandidatePlan(cfg, offers), tmpl)
	if err != nil {
		panic(err)
	}
	for _, a := range res.Attempts {
		fmt.Printf("%-24s %s\n", a.Candidate.GPUTypeID, a.Outcome)
	}
	fmt.Println("running on", res.GPUTypeID)
	fmt.Println(runpod.Delete(ctx, api, res.PodID), len(fake.Running()), "pods left")
	// Output:
	// NVIDIA L4                exited
	// NVIDIA GeForce RTX 4090  accepted
	// running on NVIDIA GeForce RTX 4090
	// <nil> 0 pods left
}

// PlanFromCatalog reads the live catalog (here the in-process fake's),
// checks the reviewed tiers against it and plans the candidates, which
// PlanText renders for a log.
func ExamplePlanFromCatalog() {
	cfg, err := runpod.LoadConfig(runpod.ExampleConfig)
	if err != nil {
		panic(err)
	}
	api, err := runpodtest.New().NewClient()
	if err != nil {
		panic(err)
	}
	plan, catalogErr, err := runpod.PlanFromCatalog(context.Background(), api, cfg)
	if err != nil {
		panic(err) // a reviewed GPU type the catalog does not list
	}
	if catalogErr != nil {
		fmt.Println("static candidates only:", catalogErr)
	}
	fmt.Print(runpod.PlanText(plan, cfg.MaxProvisionAttempts))
	// Output:
	// plan (5 candidates, 6 attempts allowed):
	//   1. NVIDIA L4                        cost-preferred  $0.43/h
	//   2. NVIDIA GeForce RTX 4090          cost-preferred  $0.69/h
	//   3. NVIDIA RTX 6000 Ada Generation   premium         $0.77/h
	//   4. NVIDIA A100-SXM4-80GB            a100            static
	//   5. NVIDIA L40S                      premium         static
}
