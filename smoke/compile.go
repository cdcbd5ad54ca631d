package smoke

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
)

// ErrToolkit is matched by CheckCompile's refusals: the toolkit tree's
// NVRTC did not produce a usable kernel.
var ErrToolkit = errors.New("smoke: the CUDA toolkit cannot compile the proof kernel")

// smArch is the sm_ suffix of a compute_XY architecture ("" when arch is
// not one). No regexp: the proof binary links none.
func smArch(arch string) string {
	xy, ok := strings.CutPrefix(arch, "compute_")
	digits := strings.TrimRight(xy, "abcdefghijklmnopqrstuvwxyz")
	if !ok || len(digits) < 2 || len(digits) > 3 || len(xy)-len(digits) > 1 || strings.Trim(digits, "0123456789") != "" {
		return ""
	}
	return xy
}

// targets says whether the PTX has a ".target sm_XY" directive for xy
// (alone, or first in a comma-separated list).
func targets(ptx []byte, xy string) bool {
	for line := range strings.Lines(string(ptx)) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), ".target sm_"+xy)
		if ok && (rest == "" || rest[0] == ',' || rest[0] == ' ' || rest[0] == '\t') {
			return true
		}
	}
	return false
}

// CheckCompile proves a CUDA toolkit tree by using it (the cache-trust
// seed: "Both restored and newly installed trees must compile a small PTX
// kernel before use/publication, rather than trusting a hit message"):
// NVRTC compiles the proof's kernel for arch (compute_XY), and the PTX must
// target sm_XY and define the kernel. It needs no GPU: run it on the
// hosted runner with OpenNVRTC on the tree's library directory. The text
// says what was compiled.
func CheckCompile(c Compiler, arch string) (string, error) {
	xy := smArch(arch)
	if xy == "" {
		return "", fmt.Errorf("%w: architecture %q is not compute_XY (for example compute_90)", ErrToolkit, arch)
	}
	v, err := c.NVRTCVersion()
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrToolkit, err)
	}
	ptx, err := c.Compile(KernelSource, "gpugate_add.cu", arch)
	if err != nil {
		return "", fmt.Errorf("%w: NVRTC %s for %s: %w", ErrToolkit, v, arch, err)
	}
	ptx = bytes.TrimRight(ptx, "\x00")
	switch {
	case !targets(ptx, xy):
		return "", fmt.Errorf("%w: NVRTC %s's PTX for %s does not target sm_%s", ErrToolkit, v, arch, xy)
	case !bytes.Contains(ptx, []byte(".entry gpugate_add(")):
		return "", fmt.Errorf("%w: NVRTC %s's PTX for %s does not define the kernel gpugate_add", ErrToolkit, v, arch)
	}
	return fmt.Sprintf("NVRTC %s compiled %d bytes of PTX for %s", v, len(ptx), arch), nil
}
