package runpod_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/smoke"
	"github.com/gpugate/gpugate/smoke/tiers"
)

// proofTiers is the bundled tier table of the on-pod CUDA proof: its
// lowest tier is CUDA 12.6, its memory floor 20 GB.
func proofTiers(t testing.TB) smoke.Config {
	t.Helper()
	cfg, err := tiers.Load(tiers.Example)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Floors below the proof's admit hosts the proof can only reject, each
// after it was paid for: a CUDA floor below every tier, or a memory
// floor below the proof's. A higher floor only skips the lower tiers.
func TestCheckFloors_RefusesFloorsThatAdmitHostsTheProofRejects(t *testing.T) {
	proof := proofTiers(t)
	for name, tc := range map[string]struct {
		cfg runpod.Config
		ok  bool
	}{
		"the lowest tier":       {runpod.Config{MinCUDAVersion: "12.6", MinVRAMGB: 20}, true},
		"above the lowest tier": {runpod.Config{MinCUDAVersion: "13.0", MinVRAMGB: 48}, true},
		"CUDA below every tier": {runpod.Config{MinCUDAVersion: "12.4", MinVRAMGB: 20}, false},
		"CUDA not a version":    {runpod.Config{MinCUDAVersion: "twelve", MinVRAMGB: 20}, false},
		"memory below":          {runpod.Config{MinCUDAVersion: "12.6", MinVRAMGB: 16}, false},
	} {
		err := tc.cfg.CheckFloors(proof)
		if tc.ok != (err == nil) || !tc.ok && !errors.Is(err, runpod.ErrFloor) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// A library caller of Provision gets the floor rule too: a template that
// carries the proof's tier table (smoke.EnvTiers, as smoke.PodStartup's
// environment does) is checked against the pods' floors before anything
// is bought, and one the proof could not read is refused.
func TestProvision_FloorsBelowTheTemplatesProofBuyNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		table, err := proofTiers(t).JSON()
		if err != nil {
			t.Fatal(err)
		}
		for name, tc := range map[string]struct {
			floor, table string
			want         error
		}{
			"CUDA below every tier": {"12.4", table, runpod.ErrFloor},
			"unreadable tier table": {"12.6", `{"tiers":[]}`, runpod.ErrTemplate},
		} {
			w := newWorld(t)
			w.cfg.MinCUDAVersion = tc.floor
			w.tmpl.Env = map[string]string{smoke.EnvTiers: tc.table}
			_, err := w.provision(context.Background(), w.catalog(t))
			if !errors.Is(err, tc.want) {
				t.Errorf("%s: %v, want %v", name, err, tc.want)
			}
			if n := w.srv.Count("POST", "/v2/pods"); n != 0 || w.srv.TotalCost() != 0 {
				t.Errorf("%s: %d creates, $%v paid; want none", name, n, w.srv.TotalCost())
			}
		}
		w := newWorld(t)
		w.tmpl.Env = map[string]string{smoke.EnvTiers: table}
		if res, err := w.provision(context.Background(), w.catalog(t)); err != nil || res.PodID == "" {
			t.Errorf("floors at the proof's: %v, pod %q", err, res.PodID)
		}
	})
}
