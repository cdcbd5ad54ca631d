package tiers_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gpugate/gpugate/smoke"
	"github.com/gpugate/gpugate/smoke/tiers"
)

func TestLoad_TheExampleIsTheSeedsTwoTiers(t *testing.T) {
	cfg, err := tiers.Load(tiers.Example)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tr := range cfg.Tiers {
		got = append(got, tr.Name+" "+tr.CUDA+" "+tr.Package+" "+tr.Version)
	}
	want := fmt.Sprint([]string{"full 12.8 cuda-nvrtc-12-8 12.8.93-1", "baseline 12.6 cuda-nvrtc-12-6 12.6.85-1"})
	if fmt.Sprint(got) != want || cfg.MinVRAMGB != 20 {
		t.Errorf("got %v, min %d GiB", got, cfg.MinVRAMGB)
	}
}

func TestLoad_RefusesUnknownFieldsAndBadTiers(t *testing.T) {
	for name, in := range map[string]string{
		"unknown field": "tiers: []\nmin_vram: 20\n",
		"no tiers":      "min_vram_gb: 20\n",
		"not yaml":      "tiers: [\n",
		"bad version":   "tiers:\n  - {name: a, cuda: twelve, package: p, version: '1', url: 'https://x/a.deb', lib_dir: /l}\n",
	} {
		if _, err := tiers.Load([]byte(in)); !errors.Is(err, smoke.ErrConfig) {
			t.Errorf("%s: err = %v, want smoke.ErrConfig", name, err)
		}
	}
}

func FuzzLoad(f *testing.F) {
	f.Add(tiers.Example)
	f.Add([]byte("tiers:\n  - {name: a, cuda: '12.6', package: p, version: '1', url: 'https://x/a.deb', lib_dir: /l}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := tiers.Load(data)
		if err != nil {
			if !errors.Is(err, smoke.ErrConfig) {
				t.Fatalf("unwrapped error %v", err)
			}
			return
		}
		// What loads must reach the pod intact.
		js, err := cfg.JSON()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := smoke.ParseConfigJSON([]byte(js)); err != nil {
			t.Fatalf("a loaded table does not survive the trip to the pod: %v", err)
		}
	})
}

// The hosted side loads the YAML table and hands the pod its JSON form.
func ExampleLoad() {
	cfg, err := tiers.Load(tiers.Example)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range cfg.Tiers {
		fmt.Printf("%s: NVRTC %s from %s %s\n", t.Name, t.CUDA, t.Package, t.Version)
	}
	// Output:
	// full: NVRTC 12.8 from cuda-nvrtc-12-8 12.8.93-1
	// baseline: NVRTC 12.6 from cuda-nvrtc-12-6 12.6.85-1
}
