package smoke

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"slices"

	"go.yaml.in/yaml/v3"
)

// Tier is one NVRTC runtime tier: used when the driver supports CUDA at
// least CUDA, installed from one pinned Debian package.
type Tier struct {
	Name    string `yaml:"name"`
	CUDA    string `yaml:"cuda"`    // "12.8"
	Package string `yaml:"package"` // cuda-nvrtc-12-8
	Version string `yaml:"version"` // 12.8.93-1
	URL     string `yaml:"url"`
	SHA256  string `yaml:"sha256"`  // the pinned checksum; installation refuses an empty one
	LibDir  string `yaml:"lib_dir"` // where the package puts libnvrtc.so.*
}

// Config is the proof's configuration.
type Config struct {
	Tiers     []Tier `yaml:"tiers"`
	MinVRAMGB int    `yaml:"min_vram_gb"`

	// Env is the outside world; nil uses the real one (nvidia-smi, HTTP,
	// dpkg, libcuda and libnvrtc through purego).
	Env Env `yaml:"-"`
	// Log receives one record per step; nil discards.
	Log *slog.Logger `yaml:"-"`
	// WorkDir holds the downloaded package; default os.TempDir().
	WorkDir string `yaml:"-"`
}

// ExampleConfig is the seed's two tiers: the full tier (NVRTC 12.8) and the
// baseline tier (NVRTC 12.6), from NVIDIA's ubuntu2404 repository. The
// sha256 fields are left for the maintainer to pin from that repository's
// Packages index: installation refuses a tier without one.
//
//go:embed example_tiers.yml
var ExampleConfig []byte

// ErrConfig is matched by LoadConfig errors.
var ErrConfig = errors.New("smoke: invalid config")

var (
	sha256Pattern = regexp.MustCompile(`^[0-9a-f]{64}$`)
	debPattern    = regexp.MustCompile(`^https://[^\s]+\.deb$`)
)

// LoadConfig parses the tier table strictly and validates it.
func LoadConfig(data []byte) (Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && err != io.EOF {
		return Config{}, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	return c, c.Validate()
}

// Validate checks the tiers.
func (c Config) Validate() error {
	if len(c.Tiers) == 0 {
		return fmt.Errorf("%w: no tiers", ErrConfig)
	}
	if c.MinVRAMGB < 0 {
		return fmt.Errorf("%w: min_vram_gb must not be negative", ErrConfig)
	}
	seen := map[Version]bool{}
	for i, t := range c.Tiers {
		v, err := ParseVersion(t.CUDA)
		switch {
		case err != nil:
			return fmt.Errorf("%w: tiers[%d].cuda: %v", ErrConfig, i, err)
		case seen[v]:
			return fmt.Errorf("%w: tiers[%d]: two tiers for CUDA %s", ErrConfig, i, v)
		case t.Name == "" || t.Package == "" || t.Version == "" || t.LibDir == "":
			return fmt.Errorf("%w: tiers[%d]: name, package, version and lib_dir are required", ErrConfig, i)
		case !debPattern.MatchString(t.URL):
			return fmt.Errorf("%w: tiers[%d].url %q: want an https URL of a .deb", ErrConfig, i, t.URL)
		case t.SHA256 != "" && !sha256Pattern.MatchString(t.SHA256):
			return fmt.Errorf("%w: tiers[%d].sha256: want 64 lowercase hex digits", ErrConfig, i)
		}
		seen[v] = true
	}
	return nil
}

// ErrTier is matched when the driver supports no tier.
var ErrTier = errors.New("smoke: the driver supports no configured CUDA tier")

// SelectTier picks the newest tier the driver supports: the full tier
// (12.8) for a driver supporting CUDA 12.8 or newer, the baseline (12.6) for
// 12.6 or newer, and rejection below the lowest tier. The chosen NVRTC is
// never newer than the driver.
func SelectTier(driverCUDA Version, tiers []Tier) (Tier, error) {
	type tv struct {
		t Tier
		v Version
	}
	var ok []tv
	lowest := Version{1 << 30, 0}
	for _, t := range tiers {
		v, err := ParseVersion(t.CUDA)
		if err != nil {
			return Tier{}, fmt.Errorf("%w: tier %s: %v", ErrTier, t.Name, err)
		}
		if v.Less(lowest) {
			lowest = v
		}
		if !driverCUDA.Less(v) {
			ok = append(ok, tv{t, v})
		}
	}
	if len(ok) == 0 {
		return Tier{}, fmt.Errorf("%w: the driver supports CUDA %s, below the lowest tier %s: this host cannot run the archive", ErrTier, driverCUDA, lowest)
	}
	best := slices.MaxFunc(ok, func(a, b tv) int {
		switch {
		case a.v.Less(b.v):
			return -1
		case b.v.Less(a.v):
			return 1
		}
		return 0
	})
	return best.t, nil
}
