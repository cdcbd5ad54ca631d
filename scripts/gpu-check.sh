#!/usr/bin/env bash
# gpu-check.sh runs the CUDA proof's real-hardware tests
# (TestRealGPU_PreinstalledNVRTC: nvidia-smi, tier selection, NVRTC
# compilation, a launch with read-back through the driver, the VRAM floor;
# TestRealGPU_ADriverErrorIsNamed: the driver's errors come back by name)
# on a GPU host that has NVRTC installed but may have neither Go nor network.
#
# Build the test binary where Go is, then copy the repository to the GPU host:
#   CGO_ENABLED=0 go test -c -o bin/smoke.test ./smoke
#   scripts/gpu-check.sh [--install] [bin/smoke.test]
# With no binary and Go on the PATH it runs `go test` instead.
# GPUGATE_REAL_GPU_NVRTC_LIBDIR names NVRTC's directory; otherwise the script
# uses the NVRTC tarball GPUGATE_NVRTC_TARBALL names, then looks where CUDA
# toolkits and the nvidia-cuda-nvrtc wheels put libnvrtc, and last unpacks
# nvrtc.tar.gz from beside the test binary. For a host with neither NVRTC
# nor network, make that tarball where a Debian mirror is reachable:
#   scripts/real-libs-check.sh --pack-nvrtc bin/nvrtc.tar.gz
#
# With --install (root only, on a disposable GPU host) it also runs the whole
# startup window on the card
# (TestRealGPU_TheStartupProvesTheGPUBeforeTheRunnerRegisters): the proof
# travels inside the rendered startup, downloads that NVRTC, repackaged as a
# tier's .deb, over HTTPS from a loopback server with the host's curl,
# checks its pin, installs it with dpkg -i, proves the card, and only then
# the stand-in runner registers; a wrong pin, a VRAM floor above the card
# and a driver older than every tier each stop it first. It needs the proof
# binary: gpugate-smoke beside the test binary, GPUGATE_PROOF_BIN, or Go on
# the PATH. Build it with smoke.ProofBuildArgs:
#   CGO_ENABLED=0 go build -trimpath -gcflags=all=-l -ldflags="-s -w" -o bin/gpugate-smoke ./examples/smoke
# The test removes the package it installed.
set -euo pipefail
cd "$(dirname "$0")/.."
tests='^TestRealGPU_(PreinstalledNVRTC|ADriverErrorIsNamed)$'
if [ "${1:-}" = --install ]; then
  shift
  [ "$(id -u)" = 0 ] || { echo "gpu-check: --install installs a package with dpkg: run it as root" >&2; exit 2; }
  export GPUGATE_REAL_DPKG=1
  tests='^TestRealGPU_(PreinstalledNVRTC|ADriverErrorIsNamed|TheStartupProvesTheGPUBeforeTheRunnerRegisters)$'
fi
bin="${1:-}"
unpack() { # unpack TARBALL: NVRTC's libraries into a directory of their own
  local dir
  dir=$(mktemp -d)
  tar -xzf "$1" -C "$dir"
  libdir="$dir"
  echo "gpu-check: NVRTC unpacked from $1"
}

nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader
libdir="${GPUGATE_REAL_GPU_NVRTC_LIBDIR:-}"
if [ -z "$libdir" ] && [ -n "${GPUGATE_NVRTC_TARBALL:-}" ]; then
  unpack "$GPUGATE_NVRTC_TARBALL"
fi
if [ -z "$libdir" ]; then
  candidates=(/usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib64 /usr/local/cuda-*/targets/x86_64-linux/lib)
  while IFS= read -r lib; do candidates+=("$(dirname "$lib")"); done < <(
    ldconfig -p 2>/dev/null | awk '/libnvrtc\.so/ {print $NF}'
    python3 -c 'import site; print("\n".join(site.getsitepackages()))' 2>/dev/null |
      while IFS= read -r sp; do find "$sp/nvidia" -maxdepth 3 -name 'libnvrtc.so*' 2>/dev/null; done
  )
  for d in "${candidates[@]}"; do
    if compgen -G "$d/libnvrtc.so*" >/dev/null; then libdir="$d"; break; fi
  done
fi
if [ -z "$libdir" ] && [ -n "$bin" ] && [ -f "$(dirname "$bin")/nvrtc.tar.gz" ]; then
  unpack "$(dirname "$bin")/nvrtc.tar.gz"
fi
if [ -z "$libdir" ]; then
  echo "gpu-check: no libnvrtc found; set GPUGATE_REAL_GPU_NVRTC_LIBDIR to its directory, or GPUGATE_NVRTC_TARBALL to a tarball (scripts/real-libs-check.sh --pack-nvrtc FILE)" >&2
  exit 2
fi
echo "gpu-check: NVRTC from $libdir: $(cd "$libdir" && ls libnvrtc*.so* | tr '\n' ' ')"
export GPUGATE_REAL_GPU=1 GPUGATE_REAL_GPU_NVRTC_LIBDIR="$libdir"
if [ -n "$bin" ]; then
  bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
  if [ -z "${GPUGATE_PROOF_BIN:-}" ] && [ -f "$(dirname "$bin")/gpugate-smoke" ]; then
    export GPUGATE_PROOF_BIN="$(dirname "$bin")/gpugate-smoke"
  fi
  cd smoke && exec "$bin" -test.run "$tests" -test.v -test.count=1
fi
exec go test ./smoke -run "$tests" -v -count=1
