#!/usr/bin/env bash
# Rendered by gpugate (smoke.StartupScript): prove this host runs CUDA before the runner registers.
set -euo pipefail
[ -n "${GPUGATE_MIN_VRAM_GB:-}" ] || GPUGATE_MIN_VRAM_GB="20"
export GPUGATE_MIN_VRAM_GB
echo "gpugate: running the CUDA proof before registration"
if ! sudo --preserve-env env -u RUNNER_JIT_CONFIG /usr/local/bin/gpugate-smoke; then
  echo "gpugate: the CUDA proof failed; this pod never registers a runner" >&2
  exit 1
fi
echo "gpugate: CUDA proof passed; registering the runner"
cd /home/runner
# The runner takes the JIT config as an argument; out of the environment,
# the steps of its jobs (pull request code) do not inherit it.
jit="${RUNNER_JIT_CONFIG}"
unset RUNNER_JIT_CONFIG
exec ./run.sh --jitconfig "$jit"
