#!/usr/bin/env bash
# real-libs-check.sh proves the CUDA proof's purego bindings against NVIDIA's
# real libraries on a machine with no GPU (TestRealLibraries_*): a real
# libnvrtc compiles the proof's kernel for compute_75 to compute_90 and
# reports errors by name, and a real libcuda.so.1 resolves every driver
# symbol the proof binds and fails its compile step by name when there is
# no device. It fetches both from Debian's non-free archive (no NVIDIA
# account or network access needed beyond a Debian mirror), unpacks them
# into a temporary directory and changes nothing on the machine. It also
# pins those packages with smoke/tiers.Pin from the archive's own Packages
# index (the format of NVIDIA's repository) and checks that each pin is the
# SHA-256 of the file apt downloaded.
#
#   scripts/real-libs-check.sh [--install] [--headers]
#   scripts/real-libs-check.sh --pack-nvrtc FILE
#
# With --install (root only, on a disposable machine or container), the
# proof as the Action builds it also runs inside its rendered startup with
# the real curl and dpkg: it downloads the NVRTC, repackaged as a tier's
# .deb, over HTTPS from a loopback server, checks its pin, installs it with
# dpkg -i and stops at the missing device; a wrong pin installs nothing. The
# test removes the package it installed.
#
# With --headers, NVIDIA's CUDA headers (Debian's nvidia-cuda-dev, a 774 MB
# download; only its include directory is unpacked) go through the runtime
# tree's JIT header check with the real NVRTC.
#
# It also packs that NVRTC as a device run carries it and runs
# scripts/gpu-check.sh with the tarball, the real-hardware test compiling
# with the real NVRTC and running the kernel through the C stand-in of the
# driver (needs a C compiler).
#
# With --pack-nvrtc FILE it only fetches Debian's NVRTC and writes its
# libraries, links kept, to FILE as a .tar.gz (about 23 MB): a GPU host
# without NVRTC and without network can then run scripts/gpu-check.sh with
# it (GPUGATE_NVRTC_TARBALL, or bin/nvrtc.tar.gz next to the test binary).
#
# DEBIAN_MIRROR (default http://deb.debian.org/debian) and DEBIAN_SUITE
# (default bookworm: NVRTC 11.8 and driver 535) choose the archive;
# NVRTC_PACKAGES and DRIVER_PACKAGE name that suite's packages, and
# DEBIAN_KEYRING the archive's signing keys (debian-archive-keyring).
set -euo pipefail
cd "$(dirname "$0")/.."
headers=""
pack=""
while [ $# -gt 0 ]; do
  arg="$1"
  shift
  case "$arg" in
  --pack-nvrtc)
    [ $# -gt 0 ] && [ -n "$1" ] || { echo "real-libs-check: --pack-nvrtc needs the file to write" >&2; exit 2; }
    pack="$1"
    shift
    ;;
  --install)
    [ "$(id -u)" = 0 ] || { echo "real-libs-check: --install installs a package with dpkg: run it as root" >&2; exit 2; }
    export GPUGATE_REAL_DPKG=1
    ;;
  --headers) headers="${HEADERS_PACKAGE:-nvidia-cuda-dev}" ;;
  *) echo "usage: real-libs-check.sh [--install] [--headers] | --pack-nvrtc FILE" >&2; exit 2 ;;
  esac
done
if [ -n "$pack" ]; then
  case "$pack" in /*) ;; *) pack="$PWD/$pack" ;; esac
fi
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
suite="${DEBIAN_SUITE:-bookworm}"
read -r -a nvrtc <<<"${NVRTC_PACKAGES:-libnvrtc11.2 libnvrtc-builtins11.8}"
driver="${DRIVER_PACKAGE:-libcuda1}"
keyring="${DEBIAN_KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}"
tools=(apt-get dpkg-deb go)
[ -z "$pack" ] || tools=(apt-get dpkg-deb tar)
for tool in "${tools[@]}"; do
  command -v "$tool" >/dev/null || { echo "real-libs-check: needs $tool (a Debian or Ubuntu machine with Go)" >&2; exit 2; }
done
[ -r "$keyring" ] || { echo "real-libs-check: no Debian archive keyring at $keyring: install debian-archive-keyring or set DEBIAN_KEYRING" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf -- "$tmp"' EXIT
mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial" "$tmp/debs" "$tmp/root"
echo "deb [signed-by=$keyring] $mirror $suite non-free" >"$tmp/sources.list"
apt=(apt-get -q -o "Dir::Etc::SourceList=$tmp/sources.list" -o Dir::Etc::SourceParts=- -o "Dir::State::Lists=$tmp/lists"
  -o "Dir::Cache=$tmp/cache" -o Debug::NoLocking=1 -o APT::Sandbox::User="$(id -un)")
"${apt[@]}" update >/dev/null
if [ -n "$pack" ]; then
  (cd "$tmp/debs" && "${apt[@]}" download "${nvrtc[@]}")
else
  (cd "$tmp/debs" && "${apt[@]}" download "${nvrtc[@]}" "$driver")
fi
for deb in "$tmp"/debs/*.deb; do dpkg-deb -x "$deb" "$tmp/root"; done
if [ -n "$pack" ]; then
  lib=$(dirname "$(find "$tmp/root" -name 'libnvrtc.so*' -print -quit)")
  mkdir -p "$(dirname "$pack")"
  (cd "$lib" && tar -czf "$pack" libnvrtc*)
  echo "real-libs-check: NVRTC ($(cd "$lib" && find . -maxdepth 1 -type f -name 'libnvrtc*' -printf '%f ')) packed into $pack"
  exit 0
fi
# The index apt verified against the signed InRelease, decompressed: the
# pin tool must give exactly the checksums of the files apt downloaded.
index=$(find "$tmp/lists" -maxdepth 1 -name "*_${suite}_non-free_binary-*_Packages*" -print -quit)
[ -n "$index" ] || { echo "real-libs-check: apt kept no Packages index in $tmp/lists" >&2; exit 1; }
/usr/lib/apt/apt-helper cat-file "$index" >"$tmp/Packages"
export GPUGATE_REAL_PACKAGES_INDEX="$tmp/Packages" GPUGATE_REAL_DEBS="$tmp/debs"
if [ -n "$headers" ]; then
  mkdir -p "$tmp/headers" "$tmp/dev"
  (cd "$tmp/headers" && "${apt[@]}" download "$headers")
  dpkg-deb --fsys-tarfile "$tmp"/headers/*.deb | tar -x -C "$tmp/dev" --wildcards './usr/include/*'
  export GPUGATE_REAL_CUDA_INCLUDE="$tmp/dev/usr/include"
  echo "CUDA headers from $GPUGATE_REAL_CUDA_INCLUDE"
fi

nvrtcdir=$(dirname "$(find "$tmp/root" -name 'libnvrtc.so*' -print -quit)")
cudadir=$(dirname "$(find "$tmp/root" -name 'libcuda.so.1' -print -quit)")
echo "NVRTC from $nvrtcdir; driver library from $cudadir"
export GPUGATE_REAL_NVRTC_LIBDIR="$nvrtcdir"
if compgen -G '/dev/nvidia[0-9]*' >/dev/null; then
  echo "this machine has an NVIDIA device: the no-device test is skipped (run scripts/gpu-check.sh for the device)"
else
  export GPUGATE_REAL_DRIVER_WITHOUT_GPU=1 LD_LIBRARY_PATH="$cudadir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
# As the pod runs it: a static binary (no cgo), loading the libraries through purego.
CGO_ENABLED=0 go test -count=1 -v -run 'TestRealLibraries_|TestRealIndex_' ./smoke ./smoke/tiers
