package runpod

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func exampleConfig(t testing.TB) Config {
	t.Helper()
	cfg, err := LoadConfig(ExampleConfig)
	if err != nil {
		t.Fatalf("LoadConfig(ExampleConfig): %v", err)
	}
	return cfg
}

func TestLoadConfig_ExampleHasTheSeedValues(t *testing.T) {
	want := Config{
		Tiers: []Tier{
			{Name: "cost-preferred", GPUTypes: []string{"NVIDIA GeForce RTX 4090", "NVIDIA L4"}},
			{Name: "premium", GPUTypes: []string{"NVIDIA L40S", "NVIDIA RTX 6000 Ada Generation"}},
			{Name: "a100", GPUTypes: []string{"NVIDIA A100-SXM4-80GB"}},
		},
		MinVRAMGB: 20, MinCUDAVersion: "12.6", Cloud: "SECURE",
		MaxPriceCandidates: 3, MaxProvisionAttempts: 6, MaxConsecutiveStartupFailures: 2,
		StartupTimeout: 420 * time.Second, StartupPoll: 10 * time.Second,
		Exclude:        []string{"NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA H100 NVL"},
		MaxHourlyPrice: 1.49, CreateDeadline: 60 * time.Second,
	}
	if diff := cmp.Diff(want, exampleConfig(t)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestLoadConfig_OmittedNumbersTakeDefaultsAndJSONWorks(t *testing.T) {
	cfg, err := LoadConfig([]byte(`{"tiers": [{"name": "only", "gpu_types": ["NVIDIA L4"]}], "max_consecutive_startup_failures": 0}`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxProvisionAttempts != 6 || cfg.StartupTimeout != 420*time.Second || cfg.MinCUDAVersion != "12.6" {
		t.Errorf("defaults not applied: %+v", cfg)
	}
	if cfg.MaxConsecutiveStartupFailures != 0 {
		t.Error("an explicit 0 (disable the early stop) must survive the defaults")
	}
}

func TestLoadConfig_ErrorsNameTheField(t *testing.T) {
	const tiers = "tiers: [{name: a, gpu_types: [X]}]\n"
	tests := map[string]struct{ yaml, field string }{
		"empty":                {"", "tiers"},
		"unknown key":          {tiers + "max_attempts: 3\n", "(document)"},
		"no tiers":             {"min_vram_gb: 20\n", "tiers"},
		"tier without name":    {"tiers: [{gpu_types: [X]}]\n", "tiers[0].name"},
		"tier without types":   {"tiers: [{name: a}]\n", "tiers[0].gpu_types"},
		"duplicate tier":       {"tiers: [{name: a, gpu_types: [X]}, {name: a, gpu_types: [Y]}]\n", "tiers[1].name"},
		"type in two tiers":    {"tiers: [{name: a, gpu_types: [X]}, {name: b, gpu_types: [X]}]\n", "tiers[1].gpu_types"},
		"excluded in a tier":   {"tiers: [{name: a, gpu_types: [NVIDIA H100 NVL]}]\n", "tiers[0].gpu_types"},
		"bad cuda":             {tiers + "min_cuda_version: '12'\n", "min_cuda_version"},
		"bad cloud":            {tiers + "cloud: PUBLIC\n", "cloud"},
		"attempts below tiers": {"tiers: [{name: a, gpu_types: [X]}, {name: b, gpu_types: [Y]}]\nmax_provision_attempts: 1\n", "max_provision_attempts"},
		"negative failures":    {tiers + "max_consecutive_startup_failures: -1\n", "max_consecutive_startup_failures"},
		"zero poll":            {tiers + "startup_poll: 0s\n", "startup_poll"},
		"timeout below poll":   {tiers + "startup_timeout: 5s\n", "startup_timeout"},
		"duration as int":      {tiers + "startup_timeout: 420\n", "(document)"},
		"negative ceiling":     {tiers + "max_hourly_price: -1\n", "max_hourly_price"},
		"negative vram":        {tiers + "min_vram_gb: -1\n", "min_vram_gb"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := LoadConfig([]byte(tt.yaml))
			var ce *ConfigError
			if !errors.As(err, &ce) || !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("err = %v, want a ConfigError", err)
			}
			if ce.Field != tt.field {
				t.Errorf("field = %q, want %q (%v)", ce.Field, tt.field, err)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "runpod: invalid config: "+tt.field+": ") {
				t.Errorf("message %q does not name the field first", msg)
			}
		})
	}
}

// A configuration file holds one document: a second '---' document is
// refused, never silently ignored, whatever it says.
func TestLoadConfig_ASecondDocumentIsRefused(t *testing.T) {
	data := append(append([]byte{}, ExampleConfig...), "\n---\nmax_hourly_price: 9\n"...)
	_, err := LoadConfig(data)
	var ce *ConfigError
	if !errors.As(err, &ce) || !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("err = %v, want a ConfigError", err)
	}
	if ce.Field != "(document)" || !strings.Contains(ce.Msg, "one YAML document") {
		t.Errorf("err = %v, want the document refused for its second '---' document", err)
	}
}

func TestLoadConfigFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runpod.yml")
	if err := os.WriteFile(path, ExampleConfig, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfigFile(path); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfigFile(path + ".missing"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("err = %v, want ErrNotExist", err)
	}
}

func FuzzLoadConfig(f *testing.F) {
	f.Add(ExampleConfig)
	f.Add([]byte(`{"tiers": [{"name": "a", "gpu_types": ["X"]}], "startup_timeout": "1h"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := LoadConfig(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error %v does not match ErrInvalidConfig", err)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("a loaded config does not validate: %v", err)
		}
		// A valid config always plans every tier within the attempt budget.
		plan := CandidatePlan(cfg, nil)
		checkPlanProperties(t, cfg, nil, plan)
	})
}
