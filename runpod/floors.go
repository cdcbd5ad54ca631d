package runpod

import (
	"errors"
	"fmt"

	"github.com/gpugate/gpugate/smoke"
)

// ErrFloor is returned by Config.CheckFloors and, before anything is
// bought, by Provision when the pods' floors admit hosts the on-pod CUDA
// proof rejects.
var ErrFloor = errors.New("runpod: the pods' floors admit hosts the CUDA proof rejects")

// CheckFloors refuses floors of c below the on-pod CUDA proof's, whose
// tier table is proof: a min_vram_gb below the proof's, which rejects a
// GPU with less memory, or a min_cuda_version below the proof's lowest
// NVRTC tier, which rejects a driver older than every tier. Either admits
// hosts that are paid for and then rejected (ErrFloor); the error says
// the floor to set. Provision checks the template's own tier table
// (smoke.EnvTiers in PodTemplate.Env) the same way.
func (c Config) CheckFloors(proof smoke.Config) error {
	if c.MinVRAMGB < proof.MinVRAMGB {
		return fmt.Errorf("%w: min_vram_gb %d admits GPUs with less memory than the proof requires (%d GB); the proof would reject each after it was paid for: raise min_vram_gb to %d", ErrFloor, c.MinVRAMGB, proof.MinVRAMGB, proof.MinVRAMGB)
	}
	floor, err := smoke.ParseVersion(c.MinCUDAVersion)
	if err != nil {
		return fmt.Errorf("%w: min_cuda_version %q: %w", ErrFloor, c.MinCUDAVersion, err)
	}
	var lowest smoke.Version
	var name string
	for i, t := range proof.Tiers {
		v, err := smoke.ParseVersion(t.CUDA)
		if err != nil {
			return fmt.Errorf("%w: tier %s: %w", ErrFloor, t.Name, err)
		}
		if i == 0 || v.Less(lowest) {
			lowest, name = v, t.Name
		}
	}
	if len(proof.Tiers) > 0 && floor.Less(lowest) {
		return fmt.Errorf("%w: min_cuda_version %s admits hosts whose driver is older than the lowest tier (%s, CUDA %s); the proof would reject each after it was paid for: raise min_cuda_version to %s", ErrFloor, floor, name, lowest, lowest)
	}
	return nil
}

// checkProofFloors checks the floors of cfg against the tier table the
// template gives the on-pod CUDA proof (smoke.EnvTiers), when it gives
// one: a table the proof cannot read would fail every candidate after it
// was paid for too.
func checkProofFloors(cfg Config, tmpl PodTemplate) error {
	table, ok := tmpl.Env[smoke.EnvTiers]
	if !ok {
		return nil
	}
	proof, err := smoke.ParseConfigJSON([]byte(table))
	if err != nil {
		return fmt.Errorf("%w: PodTemplate.Env %s: %w", ErrTemplate, smoke.EnvTiers, err)
	}
	return cfg.CheckFloors(proof)
}
