package smoke

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"unicode"
)

// Tier is one NVRTC runtime tier: used when the driver supports CUDA at
// least CUDA, installed from one pinned Debian package.
type Tier struct {
	Name    string `yaml:"name" json:"name"`
	CUDA    string `yaml:"cuda" json:"cuda"`       // "12.8"
	Package string `yaml:"package" json:"package"` // cuda-nvrtc-12-8
	Version string `yaml:"version" json:"version"` // 12.8.93-1
	URL     string `yaml:"url" json:"url"`
	SHA256  string `yaml:"sha256" json:"sha256"`   // the pinned checksum; installation refuses an empty one
	LibDir  string `yaml:"lib_dir" json:"lib_dir"` // where the package puts libnvrtc.so.*
}

// Config is the proof's configuration.
type Config struct {
	Tiers     []Tier `yaml:"tiers" json:"tiers"`
	MinVRAMGB int    `yaml:"min_vram_gb" json:"min_vram_gb"`

	// Env is the outside world; nil uses the real one (nvidia-smi, HTTP,
	// dpkg, libcuda and libnvrtc through purego).
	Env Env `yaml:"-" json:"-"`
	// Log receives one record per step; nil discards.
	Log *slog.Logger `yaml:"-" json:"-"`
	// WorkDir holds the downloaded package; default os.TempDir().
	WorkDir string `yaml:"-" json:"-"`
}

// ErrConfig is matched by configuration errors (ParseConfigJSON,
// Validate, tiers.Load).
var ErrConfig = errors.New("smoke: invalid config")

// IsSHA256 reports whether s is 64 lowercase hex digits, the form a pinned
// checksum takes. (The proof avoids regexp: every package it links travels
// inside the pod's create request.)
func IsSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// isDebURL reports whether s is an https URL of a .deb without whitespace.
func isDebURL(s string) bool {
	rest, ok := strings.CutPrefix(s, "https://")
	return ok && len(rest) > len(".deb") && strings.HasSuffix(rest, ".deb") &&
		!strings.ContainsFunc(s, unicode.IsSpace)
}

// debNames reports whether the .deb at url is package at version: its file
// name is <package>_<version without epoch>_<arch>.deb.
func debNames(url, pkg, version string) bool {
	if _, v, ok := strings.Cut(version, ":"); ok {
		version = v
	}
	file := url[strings.LastIndexByte(url, '/')+1:]
	arch, ok := strings.CutPrefix(file, pkg+"_"+version+"_")
	return ok && len(arch) > len(".deb") && !strings.Contains(arch, "_")
}

// ParseConfigJSON parses the tier table in the JSON form the pod receives
// (GPUGATE_TIERS, written by Config.JSON), strictly: unknown fields and
// trailing data are refused. The pod-side proof reads JSON rather than YAML
// so that it links no YAML parser.
func ParseConfigJSON(data []byte) (Config, error) {
	var c Config
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("%w: tier table JSON: %v", ErrConfig, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Config{}, fmt.Errorf("%w: tier table JSON: trailing data after the object", ErrConfig)
	}
	return c, c.Validate()
}

// JSON is the tier table as the pod receives it (see ParseConfigJSON).
func (c Config) JSON() (string, error) {
	if err := c.Validate(); err != nil {
		return "", err
	}
	b, err := json.Marshal(c)
	return string(b), err
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
		case !isDebURL(t.URL):
			return fmt.Errorf("%w: tiers[%d].url %q: want an https URL of a .deb", ErrConfig, i, t.URL)
		case !debNames(t.URL, t.Package, t.Version):
			return fmt.Errorf("%w: tiers[%d].url %q does not name %s %s (a Debian repository's file is <package>_<version>_<arch>.deb): a copied URL would install another package than the one pinned", ErrConfig, i, t.URL, t.Package, t.Version)
		case t.SHA256 != "" && !IsSHA256(t.SHA256):
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

// EnvTiers carries the tier table to the pod, as JSON (Config.JSON).
const EnvTiers = "GPUGATE_TIERS"
