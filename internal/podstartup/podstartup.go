// Package podstartup turns the provisioning programs' flags into what every
// candidate pod's create request carries: for the CUDA proof (Options), the
// NVRTC tier table and the packed proof in the environment, and the
// startup command that runs the proof before the runner registers; and
// the rest of the pod template (Pods), from the configuration it is bought
// under to its ownership tags. The rule the startup must keep with the
// pods' floors is the library's (runpod.Config.CheckFloors), which
// Provision applies too; this package only reads the flags and the files
// they name.
package podstartup

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"

	"github.com/gpugate/gpugate/internal/cli"
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

// Pods are the flags of what every candidate pod of a provisioning is
// besides its startup: the reviewed configuration it is bought under, its
// runner image and name prefix, the ownership tags the reaper reads, and
// whether a candidate that failed its startup is kept for debugging.
type Pods struct {
	Config     string // the RunPod configuration file; "" is runpod.ExampleConfig
	Image      string // the runner image, pinned to its digest before any GPU is bought
	Prefix     string // the runner name/label prefix; "" is the ownership's (runpod.Ownership.Prefix)
	Repo       string // owner/name, an ownership tag
	Workflow   string // the GPU workflow, an ownership tag
	RunID      int64  // the run that owns the pods, an ownership tag
	RunAttempt int    // that run's attempt, an ownership tag
	KeepFailed bool   // keep candidates that failed their startup (runpod.PodTemplate.KeepFailed)

	// RetentionFile is where, with KeepFailed, the retention record of the
	// kept pods is written: the file the workflow uploads as the artifact
	// the reaper honours.
	RetentionFile string
}

// Register adds -config, -image, -prefix, -repo, -workflow, -run-id,
// -run-attempt, -keep-failed-pods and -retention-file to fs; getenv gives
// the defaults of the workflow run the command runs in (GITHUB_REPOSITORY,
// GITHUB_WORKFLOW_REF, GITHUB_RUN_ID, GITHUB_RUN_ATTEMPT, RUNNER_TEMP).
func (p *Pods) Register(fs *flag.FlagSet, getenv func(string) string) {
	fs.StringVar(&p.Config, "config", "", "RunPod configuration (YAML or JSON); default: the bundled example (the default tiers)")
	fs.StringVar(&p.Image, "image", "ghcr.io/actions/actions-runner:latest", "runner image, ideally pinned to a digest")
	fs.StringVar(&p.Prefix, "prefix", "", "runner name/label prefix; default gpugate-<run-id>-<run-attempt>, the only one the reaper recognises (another needs runpod.ReapPolicy.Prefix)")
	fs.StringVar(&p.Repo, "repo", getenv("GITHUB_REPOSITORY"), "owner/name of the repository (ownership tag; repository runners when -org is empty)")
	fs.StringVar(&p.Workflow, "workflow", getenv("GITHUB_WORKFLOW_REF"), "the GPU workflow (ownership tag): its path, or GITHUB_WORKFLOW_REF's owner/repo/path@ref; tagged as the path the reaper matches")
	cli.RunFlags(fs, getenv, &p.RunID, &p.RunAttempt, "that owns the pods (ownership tag)")
	fs.BoolVar(&p.KeepFailed, "keep-failed-pods", false, "a debug dispatch's keep_failed_pods: keep candidates that failed their startup for inspection (still billing); outputs retention_record, the artifact name the reaper honours, and writes -retention-file for its upload")
	fs.StringVar(&p.RetentionFile, "retention-file", filepath.Join(cmp.Or(getenv("RUNNER_TEMP"), os.TempDir()), "runpod-debug-retained.json"), "with -keep-failed-pods: where the retention record's artifact file goes")
}

// Load reads the configuration and renders the pod template every
// candidate is created from: the image as given (a real run pins it to its
// digest before any GPU is bought, runpod.ResolveImage), the ownership
// tags (an attempt below 1 is the first), the name prefix, KeepFailed, a
// 40 GB disk, and the startup (startup.Apply, its refusals included;
// required for real pods).
func (p Pods) Load(startup Options, required bool) (runpod.Config, runpod.PodTemplate, smoke.PodStartup, error) {
	var cfg runpod.Config
	var err error
	if p.Config == "" {
		cfg, err = runpod.LoadConfig(runpod.ExampleConfig)
	} else {
		cfg, err = runpod.LoadConfigFile(p.Config)
	}
	if err != nil {
		return runpod.Config{}, runpod.PodTemplate{}, smoke.PodStartup{}, err
	}
	tmpl := runpod.PodTemplate{
		Image:        p.Image,
		KeepFailed:   p.KeepFailed,
		RunnerPrefix: p.Prefix,
		Owner:        runpod.Ownership{Repository: p.Repo, Workflow: p.Workflow, RunID: p.RunID, RunAttempt: max(p.RunAttempt, 1)},
		Disk:         40,
	}
	st, err := startup.Apply(&tmpl, cfg, required)
	if err != nil {
		return runpod.Config{}, runpod.PodTemplate{}, smoke.PodStartup{}, err
	}
	return cfg, tmpl, st, nil
}

var (
	// ErrNoProof is returned when real pods would be created without a proof.
	ErrNoProof = errors.New("podstartup: no CUDA proof: pass -proof FILE (built from ./examples/smoke) or -proof-path PATH (inside the runner image); a pod without the proof would register a runner on an unproven host")
	// ErrTwoProofs is returned when both -proof and -proof-path are given.
	ErrTwoProofs = errors.New("podstartup: -proof and -proof-path are alternatives: pass one")
)

// Refuse refuses a real run's command line (cli.Refuse, exit status 2)
// without exactly one CUDA proof for its pods to run before their runners
// register: neither -proof nor -proof-path, or both. Apply would refuse
// the same (ErrNoProof, ErrTwoProofs), after the command line was taken.
func (o Options) Refuse(fs *flag.FlagSet) error {
	switch {
	case o.Proof == "" && o.ProofPath == "":
		return cli.Refuse(fs, "a real run needs the CUDA proof: -proof FILE (built from ./examples/smoke) or -proof-path PATH (inside the runner image)")
	case o.Proof != "" && o.ProofPath != "":
		return cli.Refuse(fs, "-proof and -proof-path are alternatives: pass one")
	}
	return nil
}

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
