package runpod

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/gpugate/gpugate/internal/strictyaml"
)

// Tier is a reviewed allowlist of GPU type IDs, in the order they are tried.
type Tier struct {
	Name     string   `yaml:"name" json:"name"`
	GPUTypes []string `yaml:"gpu_types" json:"gpu_types"`
}

// Config is what provisioning may buy. Live catalog data never adds a GPU
// type the tiers do not list.
type Config struct {
	Tiers                         []Tier        `yaml:"tiers"`
	MinVRAMGB                     int           `yaml:"min_vram_gb"`
	MinCUDAVersion                string        `yaml:"min_cuda_version"` // catalog filter and gpu.minCudaVersion
	Cloud                         string        `yaml:"cloud"`            // SECURE or COMMUNITY
	MaxPriceCandidates            int           `yaml:"max_price_candidates"`
	MaxProvisionAttempts          int           `yaml:"max_provision_attempts"`
	MaxConsecutiveStartupFailures int           `yaml:"max_consecutive_startup_failures"` // 0 disables the early stop
	StartupTimeout                time.Duration `yaml:"startup_timeout"`
	StartupPoll                   time.Duration `yaml:"startup_poll"`
	Exclude                       []string      `yaml:"exclude"`          // never auto-selected
	MaxHourlyPrice                float64       `yaml:"max_hourly_price"` // 0: no ceiling; checked against the catalog and the created pod's own cost
	CreateDeadline                time.Duration `yaml:"create_deadline"`  // every create request and pause of one provisioning (60s)
}

// DefaultConfig holds the default numbers. It has no tiers: which GPUs to buy
// is a review decision, so a configuration must list them.
func DefaultConfig() Config {
	return Config{
		MinVRAMGB:                     20,
		MinCUDAVersion:                "12.6",
		Cloud:                         "SECURE",
		MaxPriceCandidates:            3,
		MaxProvisionAttempts:          6,
		MaxConsecutiveStartupFailures: 2,
		StartupTimeout:                420 * time.Second,
		StartupPoll:                   10 * time.Second,
		CreateDeadline:                60 * time.Second,
		Exclude:                       []string{"NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA H100 NVL"},
	}
}

// ExampleConfig is the default reviewed configuration (tiers cost-preferred,
// premium and A100; the A100 SXM ceiling of USD 1.49/hour reviewed on
// 2026-07-15), as YAML.
//
//go:embed example_config.yml
var ExampleConfig []byte

// ErrInvalidConfig is matched by every configuration error.
var ErrInvalidConfig = errors.New("runpod: invalid config")

// ConfigError names the field that is wrong.
type ConfigError struct {
	Field string // the YAML key, e.g. "tiers[1].gpu_types"
	Msg   string
}

// Error names the invalid configuration field and what is wrong with it.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("runpod: invalid config: %s: %s", e.Field, e.Msg)
}

// Is matches ErrInvalidConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// LoadConfig parses YAML or JSON strictly (unknown keys are errors, and a
// file holds one document: a second '---' document is an error) over
// DefaultConfig, so omitted numbers take the defaults, and validates the
// result. An empty file is an error: it lists no tiers. Durations are
// strings such as "420s".
func LoadConfig(data []byte) (Config, error) {
	cfg := DefaultConfig()
	if err := strictyaml.Decode(data, &cfg); err != nil {
		if errors.Is(err, strictyaml.ErrEmpty) {
			return Config{}, &ConfigError{Field: "tiers", Msg: "the configuration is empty: list the reviewed GPU tiers"}
		}
		return Config{}, &ConfigError{Field: "(document)", Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// LoadConfigFile reads and parses a configuration file.
func LoadConfigFile(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("runpod: read config: %w", err)
	}
	cfg, err := LoadConfig(data)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

var cudaVersion = regexp.MustCompile(`^\d+\.\d+$`)

// Validate checks the configuration and names the first wrong field.
func (c Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	if len(c.Tiers) == 0 {
		return bad("tiers", "list at least one reviewed tier of GPU type IDs")
	}
	excluded := map[string]bool{}
	for _, id := range c.Exclude {
		excluded[id] = true
	}
	seen := map[string]string{}
	names := map[string]bool{}
	for i, t := range c.Tiers {
		field := fmt.Sprintf("tiers[%d]", i)
		switch {
		case strings.TrimSpace(t.Name) == "":
			return bad(field+".name", "a tier needs a name")
		case names[t.Name]:
			return bad(field+".name", "tier %q is listed twice", t.Name)
		case len(t.GPUTypes) == 0:
			return bad(field+".gpu_types", "tier %q lists no GPU types", t.Name)
		}
		names[t.Name] = true
		for _, id := range t.GPUTypes {
			switch {
			case strings.TrimSpace(id) == "":
				return bad(field+".gpu_types", "empty GPU type ID")
			case excluded[id]:
				return bad(field+".gpu_types", "%q is in exclude: excluded types are never auto-selected, so remove it from the tier or from exclude", id)
			case seen[id] != "":
				return bad(field+".gpu_types", "%q is already in tier %q: a type belongs to one tier", id, seen[id])
			}
			seen[id] = t.Name
		}
	}
	switch {
	case c.MinVRAMGB < 0:
		return bad("min_vram_gb", "must not be negative")
	case !cudaVersion.MatchString(c.MinCUDAVersion):
		return bad("min_cuda_version", "%q: want major.minor, such as \"12.6\"", c.MinCUDAVersion)
	case c.Cloud != "SECURE" && c.Cloud != "COMMUNITY":
		return bad("cloud", "%q: want SECURE or COMMUNITY", c.Cloud)
	case c.MaxPriceCandidates < 0:
		return bad("max_price_candidates", "must not be negative")
	case c.MaxProvisionAttempts < len(c.Tiers):
		return bad("max_provision_attempts", "%d is fewer than the %d tiers: every tier must be reachable within the attempt budget", c.MaxProvisionAttempts, len(c.Tiers))
	case c.MaxConsecutiveStartupFailures < 0:
		return bad("max_consecutive_startup_failures", "must not be negative (0 disables the early stop)")
	case c.StartupPoll <= 0:
		return bad("startup_poll", "must be positive, such as \"10s\"")
	case c.StartupTimeout < c.StartupPoll:
		return bad("startup_timeout", "%s is shorter than startup_poll %s", c.StartupTimeout, c.StartupPoll)
	case c.MaxHourlyPrice < 0:
		return bad("max_hourly_price", "must not be negative (0 means no ceiling)")
	case c.CreateDeadline <= 0:
		return bad("create_deadline", "must be positive, such as \"60s\": every create request and pause of one provisioning shares it")
	}
	return nil
}
