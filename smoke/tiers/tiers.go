// Package tiers loads the on-pod CUDA proof's NVRTC tier table from YAML on
// the hosted side, and pins it: Pin fills each tier's sha256 from the
// Packages index (ParsePackages) of the repository the tier's url points
// into, changing nothing else in the file.
//
// It is apart from package smoke so that the proof binary, which travels
// inside the pod's create request, links no YAML parser (and, through it,
// no regexp): the pod receives the table as JSON (smoke.Config.JSON,
// smoke.ParseConfigJSON).
package tiers

import (
	_ "embed"
	"errors"
	"fmt"

	"github.com/gpugate/gpugate/internal/strictyaml"
	"github.com/gpugate/gpugate/smoke"
)

// Example is the default two tiers: the full tier (NVRTC 12.8) and the
// baseline tier (NVRTC 12.6), from NVIDIA's ubuntu2404 repository. The
// sha256 fields are left for the maintainer to pin from that repository's
// Packages index (Pin, or go run ./examples/nvrtcpin): installation
// refuses a tier without one.
//
//go:embed example.yml
var Example []byte

// Load parses a YAML tier table strictly (unknown fields are refused) and
// validates it. Errors match smoke.ErrConfig.
func Load(data []byte) (smoke.Config, error) {
	var c smoke.Config
	if err := strictyaml.Decode(data, &c); err != nil && !errors.Is(err, strictyaml.ErrEmpty) {
		return smoke.Config{}, fmt.Errorf("%w: tier table YAML: %v", smoke.ErrConfig, err)
	}
	return c, c.Validate()
}
