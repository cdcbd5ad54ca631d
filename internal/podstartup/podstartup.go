// Package podstartup turns the provisioning programs' flags into what every
// candidate pod's create request carries for the CUDA proof: the NVRTC tier
// table and the packed proof in the environment, and the startup command
// that runs the proof before the runner registers. The rule the startup
// must keep with the pods' floors is the library's
// (runpod.Config.CheckFloors), which Provision applies too; this package
// only reads the flags and the files they name.
package podstartup

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"

	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/rest"
	"github.com/gpugate/gpugate/smoke"
	"github.com/gpugate/gpugate/smoke/tiers"
)

// Options are the flags.
type Options struct {
	Tiers     string // YAML NVRTC tier table; "" uses tiers.Example
	Proof     string // the proof binary, built with smoke.ProofBuildArgs
	ProofPath string // the proof inside the runner image, instead of Proof
}

// Register adds -nvrtc-tiers, -proof and -proof-path to fs.
func (o *Options) Register(fs *flag.FlagSet) {
	fs.StringVar(&o.Tiers, "nvrtc-tiers", "", "NVRTC tier table for the on-pod CUDA proof (YAML); default: the bundled example, whose sha256 pins must be filled")
	fs.StringVar(&o.Proof, "proof", "", "the CUDA proof binary (CGO_ENABLED=0 go "+fmt.Sprint(smoke.ProofBuildArgs)+" -o FILE ./examples/smoke); it travels inside each pod's create request")
	fs.StringVar(&o.ProofPath, "proof-path", "", "instead of -proof: where the proof is inside a runner image built with it (pinned by digest)")
}

var (
	// ErrNoProof is returned when real pods would be created without a proof.
	ErrNoProof = errors.New("podstartup: no CUDA proof: pass -proof FILE (built from ./examples/smoke) or -proof-path PATH (inside the runner image); a pod without the proof would register a runner on an unproven host")
	// ErrTwoProofs is returned when both -proof and -proof-path are given.
	ErrTwoProofs = errors.New("podstartup: -proof and -proof-path are alternatives: pass one")
)

// Apply renders the startup and puts it into tmpl. It refuses, before
// anything is bought, floors of the pods' configuration that admit hosts
// the proof can only reject, each after it was paid for (runpod.ErrFloor,
// runpod.Config.CheckFloors): a min_cuda_version below the lowest NVRTC
// tier, or a min_vram_gb below the proof's. For real pods (required) it
// also refuses a missing proof (ErrNoProof) and a tier table
// without pinned checksums (smoke.ErrNoChecksum); simulations, whose pods
// run no script, get the in-image variant when no proof is given.
func (o Options) Apply(tmpl *runpod.PodTemplate, pods runpod.Config, required bool) (smoke.PodStartup, error) {
	if o.Proof != "" && o.ProofPath != "" {
		return smoke.PodStartup{}, ErrTwoProofs
	}
	if required && o.Proof == "" && o.ProofPath == "" {
		return smoke.PodStartup{}, ErrNoProof
	}
	data := tiers.Example
	if o.Tiers != "" {
		var err error
		if data, err = os.ReadFile(o.Tiers); err != nil {
			return smoke.PodStartup{}, fmt.Errorf("podstartup: -nvrtc-tiers: %w", err)
		}
	}
	cfg, err := tiers.Load(data)
	if err != nil {
		return smoke.PodStartup{}, err
	}
	if err := pods.CheckFloors(cfg); err != nil {
		return smoke.PodStartup{}, err
	}
	if required {
		if err := cfg.RequirePinned(); err != nil {
			return smoke.PodStartup{}, err
		}
	}
	var proof []byte
	if o.Proof != "" {
		if proof, err = os.ReadFile(o.Proof); err != nil {
			return smoke.PodStartup{}, fmt.Errorf("podstartup: -proof: %w", err)
		}
	}
	st, err := smoke.NewPodStartup(cfg, proof, smoke.ScriptParams{ProofPath: o.ProofPath})
	if err != nil {
		return smoke.PodStartup{}, err
	}
	if tmpl.Env == nil {
		tmpl.Env = map[string]string{}
	}
	maps.Copy(tmpl.Env, st.Env)
	tmpl.Args = rest.Secret(st.Command)
	return st, nil
}
