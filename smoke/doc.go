// Package smoke is the on-pod CUDA compatibility proof: GPU model metadata
// does not establish CUDA/PTX compatibility, so a pod must compile, load and
// run a kernel before its runner registers.
//
// Run performs six timed, logged steps and stops at the first failure with
// a *StepError naming it:
//
//  1. driver visibility and CUDA API version (ParseNvidiaSMI): the GPUs
//     from nvidia-smi's query (QueryArgs), the driver's CUDA version from
//     its banner, which has no query field, in either layout: "Driver
//     Version: 580.159.04  CUDA Version: 13.0" up to the R595 drivers,
//     "KMD Version: 610.57.04  CUDA UMD Version: 13.3" from R610 on. A
//     banner it cannot read fails with a *BannerError quoting what it
//     saw (the line with the value, else the banner's first line), and a
//     failing nvidia-smi with a *CommandError carrying what it printed;
//  2. tier selection (SelectTier): NVRTC 12.8 for drivers supporting 12.8 or
//     newer, 12.6 for 12.6 or newer, rejection below; never an NVRTC newer
//     than the driver;
//  3. a minimal NVRTC install for that tier only: the pinned package is
//     downloaded and its SHA-256 verified before dpkg -i installs it (no
//     package-index refresh); a tier without a pinned checksum is refused;
//  4. NVRTC compilation of a tiny kernel for the device's compute capability;
//  5. loading the PTX through the driver, launching, synchronizing and
//     verifying the read-back;
//  6. the VRAM floor: every GPU's memory.total is at least min_vram_gb.
//
// On a unified-memory device (DGX Spark's GB10) the GPU has no memory of
// its own: it shares the host's, and nvidia-smi's memory.total reads N/A
// (in brackets). There the floor means the memory the driver says the device can
// address, cuDeviceTotalMem, through the driver API the proof already
// loads: the pool the GPU shares with the host, so a bound on what a test
// may get, not memory held for it. Once any GPU's memory is unreported,
// every CUDA device the GPUs occupy is held to the floor that way, since
// nvidia-smi's GPU order need not be CUDA's. The testdata/nvidia-smi
// corpus (real output of every driver series from R470 to R610, with its
// SOURCES.md) is what the parser is tested and fuzzed against.
//
// libcuda and libnvrtc are called through purego (dlopen without cgo), and
// every CUresult and nvrtcResult maps to its name (CUDAError). The CUDA
// backend is an interface, so the proof is tested with fakes; the bindings
// themselves are tested against C stand-ins for libcuda.so.1 and
// libnvrtc.so.12 (testdata/fakecuda, built with the system C compiler) and,
// without a GPU, against NVIDIA's real libnvrtc and libcuda.so.1 when
// GPUGATE_REAL_NVRTC_LIBDIR is set (scripts/real-libs-check.sh). On a GPU
// host the real-hardware tests run with GPUGATE_REAL_GPU=1
// (scripts/gpu-check.sh): with --install, the rendered startup runs the
// proof through every step on the card, the dpkg install of the tier's
// package included, before the runner registers.
//
// StartupScript renders the pod's entrypoint: the proof runs as root with
// the JIT runner config stripped from its environment, and only its success
// registers the runner. The proof travels inside the create request: built
// small (ProofBuildArgs: no HTTP, TLS, YAML or regexp in it; NVRTC is
// downloaded with the image's curl), PackProof gzips and base64-encodes it
// into environment chunks that each fit one exec string, and the script
// rebuilds it, checks its SHA-256 and unsets the chunks before anything
// runs. The built ./examples/smoke is about 2.9 MB, 1.18 MB gzipped and
// 1.57 MB of the environment in 13 chunks, within Linux's 2 MiB exec limit
// (MaxExecBytes). The byte budget allows at most 15 chunks, so with the
// tier table, the checksum and the provisioner's own variables a pod
// carries at most 28 environment variables, inside the 50 RunPod allows;
// NewPodStartup composes the whole thing. A runner image
// that carries the proof can be used instead (ScriptParams.ProofPath).
//
// The YAML tier table is loaded on the hosted side by package
// smoke/tiers; the pod receives it as JSON (EnvTiers, ParseConfigJSON).
package smoke
