package smoke

import (
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// MaxArgBytes is Linux's limit on one exec argument (MAX_ARG_STRLEN,
// 128 KiB): a startup script passed as one argument must fit in it.
const MaxArgBytes = 128 << 10

// ScriptParams renders a pod's startup script.
type ScriptParams struct {
	// ProofPath is where the proof binary is when it is part of the image
	// (pinned by digest). Default /usr/local/bin/gpugate-smoke.
	ProofPath string
	// Payload is the gzip-compressed proof binary to embed in the script
	// instead; nil uses ProofPath.
	Payload []byte
	// RunnerDir holds the preinstalled runner (default /home/runner).
	RunnerDir string
	// JITEnv names the variable carrying the JIT runner config (default
	// RUNNER_JIT_CONFIG). Only its name appears in the script.
	JITEnv string
	// Env are non-secret parameter defaults exported to the proof; the
	// pod's own environment overrides them.
	Env map[string]string
}

// ErrScript is matched by StartupScript's refusals.
var ErrScript = errors.New("smoke: refusing to render the startup script")

var (
	envName       = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)
	secretLooking = regexp.MustCompile(`TOKEN|SECRET|KEY|PASSWORD|JIT|CREDENTIAL`)
)

// StartupScript renders the pod's entrypoint: it runs the CUDA proof as
// root before anything registers, with the JIT runner config stripped from
// the proof's environment (env -u), registers the preinstalled runner only
// after the proof passed, and exits non-zero (stopping the container) when
// it failed. Nothing is fetched over the network: the proof is in the image
// or embedded in the script. The script names the JIT variable but never
// contains a secret.
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
	if !envName.MatchString(p.JITEnv) {
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
	b.WriteString("export NVIDIA_VISIBLE_DEVICES=\"${NVIDIA_VISIBLE_DEVICES:-all}\"\n")
	b.WriteString("export NVIDIA_DRIVER_CAPABILITIES=\"${NVIDIA_DRIVER_CAPABILITIES:-compute,utility}\"\n")
	keys := make([]string, 0, len(p.Env))
	for k := range p.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := p.Env[k]
		switch {
		case !envName.MatchString(k):
			return "", fmt.Errorf("%w: environment name %q", ErrScript, k)
		case secretLooking.MatchString(k):
			return "", fmt.Errorf("%w: %s looks like a secret; parameters in the script must be non-secret", ErrScript, k)
		case strings.ContainsAny(v, "\n\r\x00"):
			return "", fmt.Errorf("%w: %s's value spans lines", ErrScript, k)
		}
		fmt.Fprintf(&b, "export %s=\"${%s:-%s}\"\n", k, k, strings.NewReplacer(`\`, `\\`, `"`, `\"`, "$", `\$`, "`", "\\`", "}", `\}`).Replace(v))
	}
	proof := p.ProofPath
	if len(p.Payload) > 0 {
		proof = "/tmp/gpugate-smoke"
		b.WriteString("base64 -d > /tmp/gpugate-smoke.gz <<'GPUGATE_PROOF'\n")
		enc := base64.StdEncoding.EncodeToString(p.Payload)
		for len(enc) > 76 {
			b.WriteString(enc[:76] + "\n")
			enc = enc[76:]
		}
		b.WriteString(enc + "\nGPUGATE_PROOF\n")
		b.WriteString("gunzip -f /tmp/gpugate-smoke.gz && chmod 0755 /tmp/gpugate-smoke\n")
	}
	fmt.Fprintf(&b, `echo "gpugate: running the CUDA proof before registration"
if ! sudo --preserve-env env -u %[1]s %[2]s; then
  echo "gpugate: the CUDA proof failed; this pod never registers a runner" >&2
  exit 1
fi
echo "gpugate: CUDA proof passed; registering the runner"
cd %[3]s
exec ./run.sh --jitconfig "${%[1]s}"
`, p.JITEnv, proof, p.RunnerDir)
	return b.String(), nil
}

// Fits reports whether a rendered script fits in one exec argument, the
// way a pod's startup command is passed.
func Fits(script string) bool { return len(script) <= MaxArgBytes }
