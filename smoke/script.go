package smoke

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// MaxArgBytes is Linux's limit on one exec argument (MAX_ARG_STRLEN,
// 128 KiB): a startup script passed as one argument must fit in it.
const MaxArgBytes = 128 << 10

// ScriptParams renders a pod's startup script.
type ScriptParams struct {
	// Proof is the proof binary packed into the pod's environment
	// (PackProof): the script rebuilds it from there, so it travels inside
	// the create request and nothing is fetched on the pod. Its Env must be
	// part of the pod's environment.
	Proof *Payload
	// ProofPath is where the proof binary is when Proof is nil: a runner
	// image built with it (pinned by digest). Default
	// /usr/local/bin/gpugate-smoke.
	ProofPath string
	// RunnerDir holds the preinstalled runner (default /home/runner).
	RunnerDir string
	// JITEnv names the variable carrying the JIT runner config (default
	// RUNNER_JIT_CONFIG). Only its name appears in the script.
	JITEnv string
	// Env are non-secret parameter defaults exported to the proof; the
	// pod's own environment overrides them.
	Env map[string]string
	// ResultPath is where the proof leaves its result (the GPUs, the
	// driver and the tier it chose; no secret) for the job that runs on
	// this pod, so the job uses the runtime tree of the same tier.
	// NewPodStartup passes it as EnvResult (default DefaultResultPath).
	ResultPath string
}

// EnvResult names the pod variable that tells the proof where to write
// its result (smoke -result's default).
const EnvResult = "GPUGATE_PROOF_RESULT"

// DefaultResultPath is where the proof writes its result on a pod.
const DefaultResultPath = "/var/tmp/gpugate-proof.json"

// ErrScript is matched by StartupScript's refusals.
var ErrScript = errors.New("smoke: refusing to render the startup script")

// isEnvName reports whether s is an upper-case environment variable name.
func isEnvName(s string) bool {
	for i, c := range s {
		if !(c == '_' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return s != ""
}

// looksSecret reports whether an environment name suggests a secret.
func looksSecret(name string) bool {
	for _, w := range []string{"TOKEN", "SECRET", "KEY", "PASSWORD", "JIT", "CREDENTIAL"} {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

// StartupScript renders the pod's entrypoint: it runs the CUDA proof as
// root before anything registers, with the JIT runner config stripped from
// the proof's environment (env -u), registers the preinstalled runner only
// after the proof passed, and exits non-zero (stopping the container) when
// it failed. Nothing is fetched over the network: the proof is rebuilt from
// the pod's environment (Proof) or is in the image (ProofPath). The script
// names the JIT variable but never contains a secret.
func StartupScript(p ScriptParams) (string, error) {
	if p.ProofPath == "" {
		p.ProofPath = "/usr/local/bin/gpugate-smoke"
	}
	if p.RunnerDir == "" {
		p.RunnerDir = "/home/runner"
	}
	if p.JITEnv == "" {
		p.JITEnv = "RUNNER_JIT_CONFIG"
	}
	if !isEnvName(p.JITEnv) {
		return "", fmt.Errorf("%w: JIT variable name %q", ErrScript, p.JITEnv)
	}
	for _, s := range []string{p.ProofPath, p.RunnerDir} {
		if !strings.HasPrefix(s, "/") || strings.ContainsAny(s, "'\"$`\\\n ") {
			return "", fmt.Errorf("%w: path %q must be absolute and plain", ErrScript, s)
		}
	}
	var b strings.Builder
	b.WriteString("#!/usr/bin/env bash\n")
	b.WriteString("# Rendered by gpugate (smoke.StartupScript): prove this host runs CUDA before the runner registers.\n")
	b.WriteString("set -euo pipefail\n")
	// What stays special inside a shell's double quotes.
	dqEscape := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "$", `\$`, "`", "\\`")
	for _, k := range slices.Sorted(maps.Keys(p.Env)) {
		v := p.Env[k]
		switch {
		case !isEnvName(k):
			return "", fmt.Errorf("%w: environment name %q", ErrScript, k)
		case looksSecret(k):
			return "", fmt.Errorf("%w: %s looks like a secret; parameters in the script must be non-secret", ErrScript, k)
		case strings.ContainsAny(v, "\n\r\x00"):
			return "", fmt.Errorf("%w: %s's value spans lines", ErrScript, k)
		}
		// The pod's own value wins; else the rendered one, in plain double
		// quotes (inside "${K:-...}" bash still pairs single quotes, so a
		// value holding one broke the script).
		fmt.Fprintf(&b, "[ -n \"${%[1]s:-}\" ] || %[1]s=\"%[2]s\"\nexport %[1]s\n", k, dqEscape.Replace(v))
	}
	proof, cleanup := p.ProofPath, ""
	if p.Proof != nil {
		cleanup = "\nrm -f \"$proof\""
		if len(p.Proof.Chunks) == 0 || !IsSHA256(p.Proof.SHA256) {
			return "", fmt.Errorf("%w: the proof payload is empty: build it with PackProof", ErrScript)
		}
		// Rebuild the proof from the environment, check it is the binary
		// that was packed, and drop the chunks so that nothing after this
		// carries them (they take most of the exec limit).
		proof = `"$proof"`
		b.WriteString("proof=\"$(mktemp -t gpugate-smoke.XXXXXX)\"\n")
		b.WriteString("printf %s")
		for _, c := range p.Proof.Chunks {
			fmt.Fprintf(&b, ` "${%s}"`, c)
		}
		b.WriteString(" | base64 -d | gunzip > \"$proof\"\n")
		fmt.Fprintf(&b, "echo \"${%s}  $proof\" | sha256sum --check --quiet --strict -\n", EnvProofSHA256)
		fmt.Fprintf(&b, "unset %s %s\n", strings.Join(p.Proof.Chunks, " "), EnvProofSHA256)
		b.WriteString("chmod 0755 \"$proof\"\n")
	}
	fmt.Fprintf(&b, `echo "gpugate: running the CUDA proof before registration"
if ! sudo --preserve-env env -u %[1]s %[2]s; then
  echo "gpugate: the CUDA proof failed; this pod never registers a runner" >&2
  exit 1
fi
echo "gpugate: CUDA proof passed; registering the runner"%[4]s
cd %[3]s
# The runner takes the JIT config as an argument; out of the environment,
# the steps of its jobs (pull request code) do not inherit it.
jit="${%[1]s}"
unset %[1]s
exec ./run.sh --jitconfig "$jit"
`, p.JITEnv, proof, p.RunnerDir, cleanup)
	return b.String(), nil
}

// Fits reports whether a rendered script fits in one exec argument, the
// way a pod's startup command is passed.
func Fits(script string) bool { return ExecFits([]string{script}, nil) }

// StartupCommand wraps a script as the pod's startup command: bash -c with
// the script single-quoted (a quote inside closes the quoting, is escaped,
// and reopens it).
func StartupCommand(script string) string {
	return "bash -c '" + strings.ReplaceAll(script, "'", `'\''`) + "'"
}

// The runner image is not a CUDA base image, so the capabilities the NVIDIA
// container runtime mounts (libcuda for compute, nvidia-smi for utility)
// are requested explicitly. They must be in the create request: the runtime
// reads them when it creates the container, before any script runs. The
// visible devices are left to the provider, which assigns the GPU.
const (
	EnvDriverCapabilities = "NVIDIA_DRIVER_CAPABILITIES"
	DriverCapabilities    = "compute,utility"
)

// PodStartup is what a pod's create request carries for the proof.
type PodStartup struct {
	// Env is non-secret: the NVIDIA driver capabilities, the tier table
	// (EnvTiers) and, when the proof is embedded, its chunks and checksum.
	Env map[string]string
	// Command is the startup command. It holds no secret, but like every
	// pod startup command it is handled as one (rest.Secret).
	Command string
	// Payload is the packed proof; nil when the image carries it.
	Payload *Payload
}

// NewPodStartup renders a pod's startup for the tier table cfg. With a
// proof binary, the proof travels packed in the environment (PackProof);
// with proof nil, p.ProofPath names it inside a digest-pinned image.
func NewPodStartup(cfg Config, proof []byte, p ScriptParams) (PodStartup, error) {
	tiers, err := cfg.JSON()
	if err != nil {
		return PodStartup{}, err
	}
	result := p.ResultPath
	if result == "" {
		result = DefaultResultPath
	}
	if !strings.HasPrefix(result, "/") || strings.ContainsAny(result, "\n\r\x00") {
		return PodStartup{}, fmt.Errorf("%w: result path %q must be absolute", ErrScript, result)
	}
	out := PodStartup{Env: map[string]string{EnvTiers: tiers, EnvDriverCapabilities: DriverCapabilities, EnvResult: result}}
	if proof != nil {
		if out.Payload, err = PackProof(proof); err != nil {
			return PodStartup{}, err
		}
		maps.Copy(out.Env, out.Payload.Env)
		p.Proof = out.Payload
	}
	script, err := StartupScript(p)
	if err != nil {
		return PodStartup{}, err
	}
	out.Command = StartupCommand(script)
	if !Fits(out.Command) {
		return PodStartup{}, fmt.Errorf("%w: the startup command is %d bytes, over one exec argument (%d)", ErrScript, len(out.Command), MaxArgBytes)
	}
	return out, nil
}
