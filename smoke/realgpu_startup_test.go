//go:build linux

package smoke

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The seed's whole startup window on a real GPU: the pod "downloads and
// verifies a pinned driver-compatible NVRTC package, proves a CUDA kernel
// can run, and only then registers the preinstalled runner". The proof as
// the Action builds it travels inside the rendered startup, reads the real
// nvidia-smi, selects the tier, downloads the tier's .deb (the NVRTC in
// GPUGATE_REAL_GPU_NVRTC_LIBDIR, repackaged, on a loopback HTTPS server)
// with the image's curl, checks its pin, installs it with the real dpkg -i,
// compiles the kernel for the card's compute capability, launches it
// through the real driver, verifies the read-back and the VRAM floor, and
// only then the runner registers with its JIT config. Each failure path a
// real card can show stops the startup before registration.
//
// It installs and removes a package, so it runs only as root with
// GPUGATE_REAL_GPU=1 and GPUGATE_REAL_DPKG=1 (scripts/gpu-check.sh).
func TestRealGPU_TheStartupProvesTheGPUBeforeTheRunnerRegisters(t *testing.T) {
	nvrtcDir := os.Getenv("GPUGATE_REAL_GPU_NVRTC_LIBDIR")
	if os.Getenv("GPUGATE_REAL_GPU") != "1" || os.Getenv("GPUGATE_REAL_DPKG") != "1" || nvrtcDir == "" || os.Geteuid() != 0 {
		t.Skip("needs root on a GPU host with GPUGATE_REAL_GPU=1, GPUGATE_REAL_DPKG=1 and GPUGATE_REAL_GPU_NVRTC_LIBDIR (scripts/gpu-check.sh)")
	}
	for _, tool := range []string{"dpkg", "dpkg-deb", "curl", "nvidia-smi"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("a GPU pod's image has %s: %v", tool, err)
		}
	}
	const pkg = "gpugate-nvrtc-gpu-check"
	if out, err := exec.Command("dpkg", "-s", pkg).CombinedOutput(); err == nil {
		t.Fatalf("%s is already installed on this machine; remove it first:\n%s", pkg, out)
	}
	purge := func() { exec.Command("dpkg", "--purge", pkg).Run() }
	t.Cleanup(purge)
	installed := func() bool { return exec.Command("dpkg", "-s", pkg).Run() == nil }

	// The tier is the NVRTC at hand: its own CUDA version, never newer
	// than the driver's (the compile step checks that on the card).
	c, err := OpenNVRTC(nvrtcDir)
	if err != nil {
		t.Fatal(err)
	}
	nv, err := c.NVRTCVersion()
	if err != nil {
		t.Fatal(err)
	}
	version := nv.String() + "-1"
	libDir := "/usr/local/" + pkg + "/lib"
	url, sum, ca := tierRepo(t, nvrtcDir, pkg, version, libDir)
	tier := Tier{Name: "device", CUDA: nv.String(), Package: pkg, Version: version, URL: url, SHA256: sum, LibDir: libDir}
	_, proof := buildProof(t)

	start := func(t *testing.T, cfg Config) (int, string, *pod) {
		t.Helper()
		if err := os.Remove(DefaultResultPath); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		p := newPod(t)
		st := p.startupWith(cfg, proof)
		p.env["CURL_CA_BUNDLE"] = ca
		p.env["LD_LIBRARY_PATH"] = os.Getenv("LD_LIBRARY_PATH") // where the image keeps libcuda.so.1
		code, out := p.start(st.Command)
		t.Logf("exit %d:\n%s", code, out)
		if strings.Contains(out, "JITSECRET") {
			t.Error("the startup printed the JIT config")
		}
		return code, out, p
	}
	refused := func(t *testing.T, code int, out string, p *pod, step string, why ...string) {
		t.Helper()
		if code == 0 {
			t.Error("the startup succeeded")
		}
		for _, want := range append([]string{"FAIL " + step, "the CUDA proof failed at step " + step, "never registers a runner"}, why...) {
			if !strings.Contains(out, want) {
				t.Errorf("the startup's output lacks %q", want)
			}
		}
		if args, ok := p.registered(); ok {
			t.Errorf("a runner registered after a failed proof: %q", args)
		}
	}

	t.Run("every step passes on the card, then the runner registers", func(t *testing.T) {
		defer purge()
		code, out, p := start(t, Config{MinVRAMGB: 20, Tiers: []Tier{tier}})
		if code != 0 {
			t.Fatalf("the proof failed on a real GPU (exit %d)", code)
		}
		for _, want := range []string{
			"ok   driver", "ok   tier", "tier device (NVRTC " + nv.String() + ")",
			"installed " + pkg + " " + version + " (sha256 verified)",
			"NVRTC " + nv.String() + " compiled", "launched, synchronized and verified 4096 values",
			"every GPU has at least 20 GiB", "CUDA proof passed",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("the startup's output lacks %q", want)
			}
		}
		if !installed() {
			t.Errorf("dpkg does not report %s installed", pkg)
		}
		if args, ok := p.registered(); !ok || args != "--jitconfig JITSECRET-0123456789" {
			t.Errorf("after the proof passed the runner must register with its JIT config: %q %v", args, ok)
		}
		events, _ := os.ReadFile(p.events())
		if i, j := strings.Index(string(events), "sudo"), strings.Index(string(events), "register"); i < 0 || j < i {
			t.Errorf("the proof must run (as root) before the runner registers:\n%s", events)
		}
		result, err := os.ReadFile(DefaultResultPath)
		if err != nil || !strings.Contains(string(result), `"device"`) {
			t.Errorf("the result file must name the chosen tier: %v %s", err, result)
		}
	})

	t.Run("a wrong pin installs nothing and no runner registers", func(t *testing.T) {
		wrong := sha256.Sum256([]byte("another package"))
		bad := tier
		bad.SHA256 = hex.EncodeToString(wrong[:])
		code, out, p := start(t, Config{MinVRAMGB: 20, Tiers: []Tier{bad}})
		refused(t, code, out, p, StepInstall, "checksum mismatch", "nothing was installed")
		if installed() {
			t.Errorf("%s was installed despite a wrong pin", pkg)
		}
	})

	t.Run("a card below the VRAM floor fails the proof and no runner registers", func(t *testing.T) {
		defer purge()
		code, out, p := start(t, Config{MinVRAMGB: 4096, Tiers: []Tier{tier}})
		refused(t, code, out, p, StepVRAM, "the floor is 4096 GiB")
	})

	t.Run("a driver older than every tier is rejected before anything is downloaded", func(t *testing.T) {
		future := tier
		future.CUDA = "99.0"
		code, out, p := start(t, Config{MinVRAMGB: 20, Tiers: []Tier{future}})
		refused(t, code, out, p, StepTier)
		if installed() {
			t.Errorf("%s was installed for a driver no tier fits", pkg)
		}
	})
}
