// Package smoke is the on-pod CUDA compatibility proof: GPU model metadata
// does not establish CUDA/PTX compatibility, so a pod must compile, load and
// run a kernel before its runner registers (the "Runtime compatibility
// proof" of the RunPod provisioning seed).
//
// Run performs six timed, logged steps and stops at the first failure with
// a *StepError naming it:
//
//  1. driver visibility and CUDA API version (ParseNvidiaSMI);
//  2. tier selection (SelectTier): NVRTC 12.8 for drivers supporting 12.8 or
//     newer, 12.6 for 12.6 or newer, rejection below; never an NVRTC newer
//     than the driver;
//  3. a minimal NVRTC install for that tier only: the pinned package is
//     downloaded and its SHA-256 verified before dpkg -i installs it (no
//     package-index refresh); a tier without a pinned checksum is refused;
//  4. NVRTC compilation of a tiny kernel for the device's compute capability;
//  5. loading the PTX through the driver, launching, synchronizing and
//     verifying the read-back;
//  6. the VRAM floor.
//
// libcuda and libnvrtc are called through purego (dlopen without cgo), and
// every CUresult and nvrtcResult maps to its name (CUDAError). The CUDA
// backend is an interface, so the proof is tested with fakes; the real
// device test runs with GPUGATE_REAL_GPU=1.
//
// StartupScript renders the pod's entrypoint: the proof runs as root with
// the JIT runner config stripped from its environment, and only its success
// registers the runner. The proof binary (about 7 MB, 2.9 MB gzipped) does
// not fit one exec argument (MaxArgBytes), so the script expects it in the
// runner image (pinned by digest) rather than embedded; Payload embedding
// exists for small proofs.
package smoke
