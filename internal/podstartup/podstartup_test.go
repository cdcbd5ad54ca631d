package podstartup

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpugate/gpugate/internal/cli"
	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/smoke"
	"github.com/gpugate/gpugate/smoke/tiers"
)

func TestApply_PutsTheProofIntoEveryCandidatesTemplate(t *testing.T) {
	dir := t.TempDir()
	proof := filepath.Join(dir, "gpugate-smoke")
	os.WriteFile(proof, append([]byte("\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x3e\x00"), make([]byte, 1<<20)...), 0o755)
	tmpl := runpod.PodTemplate{Env: map[string]string{"KEEP": "1"}}
	st, err := Options{Proof: proof}.Apply(&tmpl, seedPods, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"KEEP", smoke.EnvTiers, smoke.EnvProofSHA256, st.Payload.Chunks[0]} {
		if tmpl.Env[k] == "" {
			t.Errorf("the template lacks %s", k)
		}
	}
	if tmpl.Args.Reveal() != st.Command || !strings.HasPrefix(st.Command, "bash -c '") {
		t.Errorf("the template's startup command is %q", tmpl.Args.Reveal())
	}
	if printed := fmt.Sprint(tmpl.Args); strings.Contains(printed, "run.sh") {
		t.Errorf("the startup command must print redacted: %s", printed)
	}
}

func TestApply_ASimulationWithoutAProofUsesTheInImageVariant(t *testing.T) {
	var tmpl runpod.PodTemplate
	st, err := Options{}.Apply(&tmpl, seedPods, false)
	if err != nil || st.Payload != nil || !strings.Contains(st.Command, "/usr/local/bin/gpugate-smoke") {
		t.Errorf("payload %v, err %v", st.Payload, err)
	}
}

func TestRegister_TheThreeFlagsFillTheOptions(t *testing.T) {
	var o Options
	flags := flag.NewFlagSet("provision", flag.ContinueOnError)
	o.Register(flags)
	if err := flags.Parse([]string{"-nvrtc-tiers", "t.yml", "-proof", "p", "-proof-path", "/usr/local/bin/gpugate-smoke"}); err != nil {
		t.Fatal(err)
	}
	want := Options{Tiers: "t.yml", Proof: "p", ProofPath: "/usr/local/bin/gpugate-smoke"}
	if diff := cmp.Diff(want, o); diff != "" {
		t.Errorf("options (-want +got):\n%s", diff)
	}
}

// Real pods are refused before anything is bought: no proof, two proofs, an
// unpinned or unreadable tier table, an unreadable proof. The template is
// left as it was.
func TestApply_RealPodsAreRefusedBeforeAnythingIsBought(t *testing.T) {
	dir := t.TempDir()
	pinned := filepath.Join(dir, "pinned.yml")
	os.WriteFile(pinned, bytes.ReplaceAll(tiers.Example, []byte(`sha256: ""`), []byte("sha256: "+strings.Repeat("ab", 32))), 0o644)
	bad := filepath.Join(dir, "bad.yml")
	os.WriteFile(bad, []byte("tiers: [{name: full, colour: blue}]\n"), 0o644)
	missing := filepath.Join(dir, "missing")
	for name, tc := range map[string]struct {
		opts Options
		want error
	}{
		"no proof":            {Options{Tiers: pinned}, ErrNoProof},
		"two proofs":          {Options{Tiers: pinned, Proof: "p", ProofPath: "/p"}, ErrTwoProofs},
		"unpinned tier table": {Options{ProofPath: "/p"}, smoke.ErrNoChecksum},
		"malformed tiers":     {Options{Tiers: bad, ProofPath: "/p"}, smoke.ErrConfig},
		"unreadable tiers":    {Options{Tiers: missing, ProofPath: "/p"}, fs.ErrNotExist},
		"unreadable proof":    {Options{Tiers: pinned, Proof: missing}, fs.ErrNotExist},
	} {
		t.Run(name, func(t *testing.T) {
			tmpl := runpod.PodTemplate{Env: map[string]string{"KEEP": "1"}}
			_, err := tc.opts.Apply(&tmpl, seedPods, true)
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if diff := cmp.Diff(runpod.PodTemplate{Env: map[string]string{"KEEP": "1"}}, tmpl); diff != "" {
				t.Errorf("a refused Apply changed the template (-want +got):\n%s", diff)
			}
		})
	}
}

func TestApply_APinnedTableAndAProofInTheImageAreEnoughForRealPods(t *testing.T) {
	pinned := filepath.Join(t.TempDir(), "pinned.yml")
	os.WriteFile(pinned, bytes.ReplaceAll(tiers.Example, []byte(`sha256: ""`), []byte("sha256: "+strings.Repeat("ab", 32))), 0o644)
	var tmpl runpod.PodTemplate
	st, err := Options{Tiers: pinned, ProofPath: "/opt/proof"}.Apply(&tmpl, seedPods, true)
	if err != nil {
		t.Fatal(err)
	}
	if st.Payload != nil || !strings.Contains(tmpl.Args.Reveal(), "/opt/proof") || tmpl.Env[smoke.EnvTiers] == "" {
		t.Errorf("payload %v, command %q, tiers %q", st.Payload, tmpl.Args.Reveal(), tmpl.Env[smoke.EnvTiers])
	}
}

// Seed 001 matches the catalog's and the pods' CUDA floor to the proof's
// lowest tier ("min_cuda_version: \"12.6\""; "rejects runtimes below
// 12.6"). A floor below every tier buys hosts that the proof can only
// reject, after they were paid for: refused before anything is bought. A
// higher floor just skips the baseline tier.
func TestApply_RefusesACUDAFloorBelowEveryTier(t *testing.T) {
	for floor, ok := range map[string]bool{"12.6": true, "12.8": true, "13.0": true, "12.4": false, "11.8": false, "twelve": false} {
		tmpl := runpod.PodTemplate{}
		_, err := Options{}.Apply(&tmpl, runpod.Config{MinCUDAVersion: floor, MinVRAMGB: 20}, false)
		if ok != (err == nil) || !ok && !errors.Is(err, runpod.ErrFloor) {
			t.Errorf("min_cuda_version %s: %v", floor, err)
		}
		if floor == "12.4" && (err == nil || !strings.Contains(err.Error(), "raise min_cuda_version to 12.6")) {
			t.Errorf("the refusal must say what to set: %v", err)
		}
	}
}

// The same for memory: a VRAM floor below the proof's buys GPUs it
// rejects.
func TestApply_RefusesAVRAMFloorBelowTheProofs(t *testing.T) {
	for vram, ok := range map[int]bool{20: true, 48: true, 16: false, 0: false} {
		tmpl := runpod.PodTemplate{}
		_, err := Options{}.Apply(&tmpl, runpod.Config{MinCUDAVersion: "12.6", MinVRAMGB: vram}, false)
		if ok != (err == nil) || !ok && !errors.Is(err, runpod.ErrFloor) {
			t.Errorf("min_vram_gb %d: %v", vram, err)
		}
	}
}

// seedPods is the floors of runpod.ExampleConfig.
var seedPods = runpod.Config{MinCUDAVersion: "12.6", MinVRAMGB: 20}

// A real run's command line names exactly one CUDA proof: neither, or
// both, is a refused command line (exit 2), said in one line on the flag
// set's output.
func TestRefuse_ExactlyOneProofElseTheCommandLineIsRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		o    Options
		want string // "" for no refusal
	}{
		"-proof":      {Options{Proof: "p"}, ""},
		"-proof-path": {Options{ProofPath: "/p"}, ""},
		"neither":     {Options{}, "needs the CUDA proof"},
		"both":        {Options{Proof: "p", ProofPath: "/p"}, "alternatives"},
	} {
		var out bytes.Buffer
		flags := flag.NewFlagSet("provision", flag.ContinueOnError)
		flags.SetOutput(&out)
		err := tc.o.Refuse(flags)
		if tc.want == "" {
			if err != nil || out.Len() != 0 {
				t.Errorf("%s: %v, %q; want no refusal", name, err, out.String())
			}
			continue
		}
		if !errors.Is(err, cli.ErrUsage) || cli.Status(err) != 2 || !strings.Contains(out.String(), tc.want) || strings.Count(out.String(), "\n") != 1 {
			t.Errorf("%s: %v, %q; want a refusal naming %q in one line", name, err, out.String(), tc.want)
		}
	}
}

// The pod flags default to the workflow run the command runs in, and the
// template every candidate is created from carries them: the image, the
// ownership tags (a missing attempt is the first), the name prefix, the
// debug retention, the disk and the startup; -config names the reviewed
// configuration, the bundled example without it.
func TestPods_TheFlagsAreTheTemplateEveryCandidateIsCreatedFrom(t *testing.T) {
	env := map[string]string{"GITHUB_REPOSITORY": "o/r", "GITHUB_WORKFLOW_REF": "o/r/.github/workflows/gpu.yml@refs/heads/main", "GITHUB_RUN_ID": "42", "RUNNER_TEMP": "/rt"}
	var p Pods
	flags := flag.NewFlagSet("provision", flag.ContinueOnError)
	p.Register(flags, func(k string) string { return env[k] })
	if err := flags.Parse([]string{"-keep-failed-pods", "-prefix", "mine"}); err != nil {
		t.Fatal(err)
	}
	want := Pods{Image: "ghcr.io/actions/actions-runner:latest", Prefix: "mine", Repo: "o/r", Workflow: env["GITHUB_WORKFLOW_REF"], RunID: 42, RunAttempt: 1, KeepFailed: true, RetentionFile: "/rt/runpod-debug-retained.json"}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Fatalf("flags (-want +got):\n%s", diff)
	}
	p.RunAttempt = 0
	cfg, tmpl, _, err := p.Load(Options{}, false)
	if err != nil {
		t.Fatal(err)
	}
	if example, _ := runpod.LoadConfig(runpod.ExampleConfig); !cmp.Equal(cfg, example) {
		t.Errorf("without -config the configuration is the bundled example: %+v", cfg)
	}
	owner := runpod.Ownership{Repository: "o/r", Workflow: env["GITHUB_WORKFLOW_REF"], RunID: 42, RunAttempt: 1}
	if tmpl.Image != want.Image || tmpl.Owner != owner || tmpl.RunnerPrefix != "mine" || !tmpl.KeepFailed || tmpl.Disk != 40 || tmpl.Args.Reveal() == "" {
		t.Errorf("template %+v", tmpl)
	}
	p.Config = filepath.Join(t.TempDir(), "missing.yml")
	if _, _, _, err := p.Load(Options{}, false); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing -config: %v", err)
	}
	p.Config = ""
	if _, _, _, err := p.Load(Options{}, true); !errors.Is(err, ErrNoProof) {
		t.Errorf("real pods without a proof: %v", err)
	}
}
