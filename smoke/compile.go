package smoke

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// CheckCompile proves a CUDA toolkit tree by using it: both restored and
// newly installed trees must compile a small PTX kernel before use or
// publication, rather than trusting a hit message.
// NVRTC compiles the proof's kernel for arch (compute_XY), and the PTX must
// target sm_XY and define the kernel. It needs no GPU: run it on the
// hosted runner with OpenNVRTC on the tree's library directory. The text
// says what was compiled.
func CheckCompile(c Compiler, arch string) (string, error) {
	v, ptx, err := provePTX(c, arch, "gpugate_add", arch, func() ([]byte, error) {
		return c.Compile(KernelSource, "gpugate_add.cu", arch)
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("NVRTC %s compiled %d bytes of PTX for %s", v, len(ptx), arch), nil
}

// provePTX is what CheckCompile and CheckHeaders share: arch must be
// compute_XY, NVRTC must report its version and compile, and the PTX must
// target sm_XY and define kernel. what names the compilation in errors.
func provePTX(c Compiler, arch, kernel, what string, compile func() ([]byte, error)) (Version, []byte, error) {
	xy := smArch(arch)
	if xy == "" {
		return Version{}, nil, fmt.Errorf("%w: architecture %q is not compute_XY (for example compute_90)", ErrToolkit, arch)
	}
	v, err := c.NVRTCVersion()
	if err != nil {
		return Version{}, nil, fmt.Errorf("%w: %w", ErrToolkit, err)
	}
	ptx, err := compile()
	if err != nil {
		return v, nil, fmt.Errorf("%w: NVRTC %s for %s: %w", ErrToolkit, v, what, err)
	}
	ptx = bytes.TrimRight(ptx, "\x00")
	switch {
	case !targets(ptx, xy):
		return v, nil, fmt.Errorf("%w: NVRTC %s's PTX for %s does not target sm_%s", ErrToolkit, v, what, xy)
	case !bytes.Contains(ptx, []byte(".entry "+kernel+"(")):
		return v, nil, fmt.Errorf("%w: NVRTC %s's PTX for %s does not define the kernel %s", ErrToolkit, v, what, kernel)
	}
	return v, ptx, nil
}

// HeaderCompiler is a Compiler that also searches include directories
// (NVRTC's --include-path), which CheckHeaders needs. OpenNVRTC's compiler
// is one.
type HeaderCompiler interface {
	Compiler
	// CompileIncluding compiles like Compile, with includeDirs searched
	// for the source's #include <...> files.
	CompileIncluding(src, name, arch string, includeDirs []string) ([]byte, error)
}

// headerKernel is the entry CheckHeaders' source defines.
const headerKernel = "gpugate_headers"

// validHeader says whether h can be spliced into an #include <...> line:
// a relative path below the include directory, nothing that could end
// the directive or climb out of it.
func validHeader(h string) bool {
	if h == "" || strings.HasPrefix(h, "/") || strings.ContainsAny(h, "<>\"\\\n\r\x00") {
		return false
	}
	for part := range strings.SplitSeq(h, "/") {
		if part == "" || part == "." || part == ".." {
			return false
		}
	}
	return true
}

// CheckHeaders proves a runtime tree's CUDA JIT headers with its own NVRTC
// (hosted preparation "verifies the JIT headers
// with real NVRTC"; the trees carry "CUDA JIT headers (including CRT and
// CCCL)"): a kernel that includes every header in headers compiles for
// arch with includeDir on the include path, and the PTX targets sm_XY and
// defines the kernel. Where includeDir has a cccl subdirectory (CUDA 13
// keeps CCCL's cuda/std, thrust and cub there, and nvcc adds it itself),
// that is on the path too. A header the tree lacks, or one that does not
// compile, fails with ErrToolkit and NVRTC's log. It needs no GPU.
func CheckHeaders(c Compiler, arch, includeDir string, headers []string) (string, error) {
	hc, ok := c.(HeaderCompiler)
	if !ok {
		return "", fmt.Errorf("%w: this compiler cannot search include directories", ErrToolkit)
	}
	if includeDir == "" || len(headers) == 0 {
		return "", fmt.Errorf("%w: name the tree's include directory and at least one header to check", ErrToolkit)
	}
	var src strings.Builder
	for _, h := range headers {
		if !validHeader(h) {
			return "", fmt.Errorf("%w: header %q: want a relative path such as cuda_fp16.h or cuda/std/cstdint", ErrToolkit, h)
		}
		fmt.Fprintf(&src, "#include <%s>\n", h)
	}
	fmt.Fprintf(&src, "extern \"C\" __global__ void %s() {}\n", headerKernel)
	dirs := []string{includeDir}
	if fi, err := os.Stat(filepath.Join(includeDir, "cccl")); err == nil && fi.IsDir() {
		dirs = append(dirs, filepath.Join(includeDir, "cccl"))
	}
	included, from := strings.Join(headers, ", "), strings.Join(dirs, " and ")
	what := fmt.Sprintf("%s including %s from %s", arch, included, from)
	v, _, err := provePTX(c, arch, headerKernel, what, func() ([]byte, error) {
		return hc.CompileIncluding(src.String(), "gpugate_headers.cu", arch, dirs)
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("NVRTC %s compiled %s from %s for %s", v, included, from, arch), nil
}
