package smoke_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpugate/gpugate/internal/workflowtest"
	"github.com/gpugate/gpugate/smoke"
	"github.com/gpugate/gpugate/smoke/tiers"
)

// The change-aware CI seed: "After registration the GPU selects the
// driver-compatible SDK (12.8 for the full capability tier), transfers
// only that SDK", and "rejects runtimes below 12.6 or NVRTC newer than the
// driver". The job on the pod takes the tier from the proof's own result
// (the one decision, SelectTier's), as the adoption workflow's step runs
// it, and downloads that tier's runtime tree only.
func TestTheJobUsesTheRuntimeTierTheProofChose(t *testing.T) {
	gpu := workflowtest.Read(t, "runpod-gpu-execute.yml").Jobs["gpu-tests"]
	tier := gpu.Step(t, "tier", func(s workflowtest.Step) bool { return s.ID == "tier" })
	if tier.Env["PROOF_RESULT"] != smoke.DefaultResultPath {
		t.Errorf("the step reads %q, but the proof writes %s", tier.Env["PROOF_RESULT"], smoke.DefaultResultPath)
	}
	downloads := 0
	for _, s := range gpu.Steps {
		if strings.HasPrefix(s.Uses, "actions/download-artifact@") && strings.HasPrefix(s.Artifact(), "cuda-runtime-") {
			downloads++
			if s.Artifact() != "cuda-runtime-${{ steps.tier.outputs.tier }}-part-*" {
				t.Errorf("the pod downloads %q, not the chosen tier's tree", s.Artifact())
			}
		}
	}
	if downloads == 0 {
		t.Error("the pod downloads no runtime tree")
	}
	// Every tier the example table lets the proof choose has a staged tree.
	cfg, err := tiers.Load(tiers.Example)
	if err != nil {
		t.Fatal(err)
	}
	matrix := workflowtest.Read(t, "runpod-gpu-test.yml").Jobs["cuda-runtime"].Strategy.Matrix.Values["cuda"]
	staged := map[string]bool{}
	if list, ok := matrix.([]any); ok {
		for _, v := range list {
			staged[fmt.Sprint(v)] = true
		}
	}
	for _, tr := range cfg.Tiers {
		if !staged[tr.CUDA] {
			t.Errorf("the proof may choose tier %s (CUDA %s), but the hosted side stages runtime trees for %v only", tr.Name, tr.CUDA, matrix)
		}
	}
	r := workflowtest.NewRunner(t, "python3")
	for name, tc := range map[string]struct {
		result any // nil: no result file
		code   int
		tier   string
	}{
		"the full tier":                   {proven("12.8", 13, 0), 0, "12.8"},
		"the baseline tier":               {proven("12.6", 12, 6), 0, "12.6"},
		"the full tier on a 12.10 driver": {proven("12.8", 12, 10), 0, "12.8"},
		"an unstaged tier":                {proven("11.8", 12, 8), 1, ""},
		"NVRTC newer than the driver":     {proven("12.8", 12, 6), 1, ""},
		"no driver version":               {smoke.Result{Tier: smoke.Tier{Name: "full", CUDA: "12.8"}}, 1, ""},
		"no result":                       {nil, 1, ""},
	} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "proof.json")
			if tc.result != nil {
				data, _ := json.Marshal(tc.result)
				os.WriteFile(file, data, 0o644)
			}
			res := r.Run(t, tier, map[string]string{"PROOF_RESULT": file})
			if res.Code != tc.code || res.Output("tier") != tc.tier || (tc.code != 0) != strings.Contains(res.Out, "::error::") {
				t.Errorf("exit %d, tier %q, want %d and %q:\n%s", res.Code, res.Output("tier"), tc.code, tc.tier, res.Out)
			}
			// "Before tests, the runner logs both versions."
			if proof, ok := tc.result.(smoke.Result); ok && tc.code == 0 && !strings.Contains(res.Out, "driver CUDA "+proof.SMI.CUDAVersion.String()+", NVRTC "+tc.tier) {
				t.Errorf("the log does not name both versions:\n%s", res.Out)
			}
		})
	}
}

// proven is the result a passing proof leaves: the driver's CUDA version
// and the tier it chose.
func proven(tier string, major, minor int) smoke.Result {
	return smoke.Result{SMI: smoke.SMI{CUDAVersion: smoke.Version{Major: major, Minor: minor}}, Tier: smoke.Tier{Name: "t", CUDA: tier}}
}
