package smoke

import (
	"errors"
	"strings"
	"testing"
)

// fakeCompiler answers like NVRTC: a PTX module for the requested target,
// or whatever a broken toolkit gives.
type fakeCompiler struct {
	ptx        string // "" : a PTX for the asked architecture
	versionErr error
	compileErr error
	arch       string // what Compile was asked for
}

func (f *fakeCompiler) NVRTCVersion() (Version, error) { return Version{12, 8}, f.versionErr }

func (f *fakeCompiler) Compile(src, name, arch string) ([]byte, error) {
	f.arch = arch
	if f.compileErr != nil {
		return nil, f.compileErr
	}
	if f.ptx != "" {
		return []byte(f.ptx), nil
	}
	return []byte(".version 8.7\n.target sm_" + strings.TrimPrefix(arch, "compute_") + "\n.address_size 64\n\n.visible .entry gpugate_add(\n)\n{\n\tret;\n}\n\x00"), nil
}

// The cache-trust seed: "Both restored and newly installed trees must
// compile a small PTX kernel before use/publication, rather than trusting
// a hit message." Only a PTX module for the asked target that defines the
// kernel proves the tree.
func TestCheckCompile_AToolkitTreeMustCompileTheKernelNotTrustACacheHit(t *testing.T) {
	f := &fakeCompiler{}
	text, err := CheckCompile(f, "compute_90a")
	if err != nil || f.arch != "compute_90a" || !strings.Contains(text, "NVRTC 12.8 compiled") || !strings.Contains(text, "for compute_90a") {
		t.Fatalf("a good tree: %q, %v (compiled for %q)", text, err, f.arch)
	}
	nvrtcErr := &CUDAError{Call: "nvrtcCompileProgram", Code: 6, NVRTC: true, Log: "error: unknown architecture"}
	for name, tc := range map[string]struct {
		f    *fakeCompiler
		arch string
		want string
	}{
		"NVRTC refuses":         {&fakeCompiler{compileErr: nvrtcErr}, "compute_90", "NVRTC_ERROR_COMPILATION"},
		"NVRTC unreadable":      {&fakeCompiler{versionErr: errors.New("nvrtcVersion: 1")}, "compute_90", "nvrtcVersion"},
		"another target":        {&fakeCompiler{ptx: ".target sm_52\n.visible .entry gpugate_add(\n"}, "compute_90", "does not target sm_90"},
		"a target's prefix":     {&fakeCompiler{ptx: ".target sm_900\n.visible .entry gpugate_add(\n"}, "compute_90", "does not target sm_90"},
		"no kernel":             {&fakeCompiler{ptx: ".target sm_90\n"}, "compute_90", "does not define the kernel"},
		"an sm_ architecture":   {&fakeCompiler{}, "sm_90", "is not compute_XY"},
		"a bare number":         {&fakeCompiler{}, "90", "is not compute_XY"},
		"one digit":             {&fakeCompiler{}, "compute_9", "is not compute_XY"},
		"two letters":           {&fakeCompiler{}, "compute_90ab", "is not compute_XY"},
		"an option smuggled in": {&fakeCompiler{}, "compute_90 --dopt=on", "is not compute_XY"},
	} {
		_, err := CheckCompile(tc.f, tc.arch)
		if !errors.Is(err, ErrToolkit) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want ErrToolkit naming %q", name, err, tc.want)
		}
	}
	if _, err := CheckCompile(&fakeCompiler{compileErr: nvrtcErr}, "compute_90"); !errors.Is(err, nvrtcErr) {
		t.Errorf("NVRTC's error must stay reachable: %v", err)
	}
	// A multi-target directive names the target first.
	if _, err := CheckCompile(&fakeCompiler{ptx: ".target sm_90, texmode_independent\n.visible .entry gpugate_add(\n"}, "compute_90"); err != nil {
		t.Errorf("a target with options: %v", err)
	}
}

// NVRTC through purego, with no driver call: the in-process fake.
func TestOpenNVRTC_CompilesWithoutTheDriver(t *testing.T) {
	d := loadFakeDriver(t)
	c, err := OpenNVRTC(d.dir)
	if err != nil {
		t.Fatal(err)
	}
	if text, err := CheckCompile(c, "compute_89"); err != nil || !strings.Contains(text, "for compute_89") {
		t.Errorf("%q, %v", text, err)
	}
	if n := d.nvrtcLeft(); n != 0 {
		t.Errorf("%d NVRTC programs left behind", n)
	}
	if _, err := OpenNVRTC(t.TempDir()); !errors.Is(err, ErrLibrary) {
		t.Errorf("an empty directory: %v, want ErrLibrary", err)
	}
}

func FuzzCheckCompile(f *testing.F) {
	f.Add("compute_90", ".target sm_90\n.visible .entry gpugate_add(\n")
	f.Add("compute_90a", ".target sm_90a, debug\n.visible .entry gpugate_add(\n")
	f.Add("sm_90", "")
	f.Fuzz(func(t *testing.T, arch, ptx string) {
		fc := &fakeCompiler{ptx: ptx}
		if ptx == "" {
			fc.ptx = "\x00"
		}
		text, err := CheckCompile(fc, arch)
		if err != nil {
			if !errors.Is(err, ErrToolkit) {
				t.Fatalf("err %v is not ErrToolkit", err)
			}
			return
		}
		xy := strings.TrimPrefix(arch, "compute_")
		if xy == arch || !strings.Contains(ptx, ".target sm_"+xy) || !strings.Contains(ptx, ".entry gpugate_add(") || !strings.Contains(text, arch) {
			t.Fatalf("accepted arch %q with PTX %q", arch, ptx)
		}
	})
}
