//go:build linux

package smoke

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The seed's startup window with every tool real but the GPU: "downloads
// and verifies a pinned driver-compatible NVRTC package, proves a CUDA
// kernel can run, and only then registers the preinstalled runner"; "A
// download or checksum failure stops startup before registration"; the
// packages "are installed directly with dpkg". The proof as the Action
// builds it travels in the rendered startup, downloads a real .deb (NVIDIA's
// libnvrtc from GPUGATE_REAL_NVRTC_LIBDIR, repackaged) with the image's
// curl over HTTPS from a loopback server, checks its pin, installs it with
// the real dpkg, loads it and the real driver library, and stops the
// startup at the driver's CUDA_ERROR_NO_DEVICE: no runner registers. A
// wrong pin installs nothing.
//
// It installs and removes a package on this machine, so it runs only as
// root with GPUGATE_REAL_DPKG=1 (scripts/real-libs-check.sh --install).
func TestRealLibraries_TheStartupInstallsTheTierWithRealCurlAndDpkg(t *testing.T) {
	nvrtcDir := os.Getenv("GPUGATE_REAL_NVRTC_LIBDIR")
	if nvrtcDir == "" || os.Getenv("GPUGATE_REAL_DRIVER_WITHOUT_GPU") != "1" || os.Getenv("GPUGATE_REAL_DPKG") != "1" || os.Geteuid() != 0 {
		t.Skip("needs root, GPUGATE_REAL_DPKG=1 and the real libraries without a GPU (scripts/real-libs-check.sh --install)")
	}
	for _, tool := range []string{"dpkg", "dpkg-deb", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skip(err)
		}
	}
	const pkg, version = "gpugate-nvrtc-check", "11.8.89-1"
	libDir := "/usr/local/" + pkg + "/lib"
	if out, err := exec.Command("dpkg", "-s", pkg).CombinedOutput(); err == nil {
		t.Fatalf("%s is already installed on this machine; remove it first:\n%s", pkg, out)
	}
	t.Cleanup(func() { exec.Command("dpkg", "--purge", pkg).Run() })

	url, sum, ca := tierRepo(t, nvrtcDir, pkg, version, libDir)
	_, proof := buildProof(t)

	start := func(t *testing.T, pin string) (int, string, *pod) {
		p := newPod(t)
		os.WriteFile(filepath.Join(p.bin, "nvidia-smi"), []byte(`#!/bin/sh
case "$1" in
--query-gpu=*) echo "NVIDIA L4, 535.261.03, 23034, 8.9" ;;
*) echo '| NVIDIA-SMI 535.261.03   Driver Version: 535.261.03   CUDA Version: 12.2 |' ;;
esac
`), 0o755)
		cfg := Config{MinVRAMGB: 16, Tiers: []Tier{{Name: "debian", CUDA: "11.8", Package: pkg, Version: version,
			URL: url, SHA256: pin, LibDir: libDir}}}
		st := p.startupWith(cfg, proof)
		p.env["CURL_CA_BUNDLE"] = ca
		p.env["LD_LIBRARY_PATH"] = os.Getenv("LD_LIBRARY_PATH") // the real libcuda.so.1
		code, out := p.start(st.Command)
		return code, out, p
	}

	t.Run("a pinned package installs, and the missing device stops the startup", func(t *testing.T) {
		code, out, p := start(t, sum)
		for _, want := range []string{"installed " + pkg + " " + version + " (sha256 verified)", "FAIL compile", "cuInit failed: CUDA_ERROR_NO_DEVICE (100)"} {
			if !strings.Contains(out, want) {
				t.Errorf("the startup's output lacks %q:\n%s", want, out)
			}
		}
		if code == 0 {
			t.Error("the startup succeeded without a device")
		}
		if _, ok := p.registered(); ok {
			t.Error("a runner registered without a device")
		}
		if out, err := exec.Command("dpkg", "-s", pkg).CombinedOutput(); err != nil || !strings.Contains(string(out), "Status: install ok installed") {
			t.Errorf("dpkg does not report %s installed: %v\n%s", pkg, err, out)
		}
		exec.Command("dpkg", "--purge", pkg).Run()
	})

	t.Run("a wrong pin installs nothing", func(t *testing.T) {
		wrong := sha256.Sum256([]byte("another package"))
		code, out, p := start(t, hex.EncodeToString(wrong[:]))
		if code == 0 || !strings.Contains(out, "FAIL install") || !strings.Contains(out, "checksum mismatch") || !strings.Contains(out, "nothing was installed") {
			t.Errorf("exit %d:\n%s", code, out)
		}
		if _, ok := p.registered(); ok {
			t.Error("a runner registered")
		}
		if err := exec.Command("dpkg", "-s", pkg).Run(); err == nil {
			t.Errorf("%s was installed despite a wrong pin", pkg)
		}
	})
}

// tierRepo stands in for NVIDIA's repository: it packages the NVRTC
// libraries in nvrtcDir as a tier's .deb (pkg at version, installing them
// under libDir) and serves it over HTTPS from a loopback server. It returns
// the package's URL, its SHA-256 (the tier's pin) and a CA bundle through
// which curl trusts the server.
func tierRepo(t *testing.T, nvrtcDir, pkg, version, libDir string) (url, sum, ca string) {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "DEBIAN"), 0o755); err != nil {
		t.Fatal(err)
	}
	control := "Package: " + pkg + "\nVersion: " + version +
		"\nArchitecture: amd64\nMaintainer: gpugate <check@example.invalid>\nDescription: NVRTC for gpugate's install check\n"
	if err := os.WriteFile(filepath.Join(root, "DEBIAN", "control"), []byte(control), 0o644); err != nil {
		t.Fatal(err)
	}
	staged := filepath.Join(root, strings.TrimPrefix(libDir, "/"))
	if err := os.MkdirAll(staged, 0o755); err != nil {
		t.Fatal(err)
	}
	libs, _ := filepath.Glob(filepath.Join(nvrtcDir, "libnvrtc*"))
	if out, err := exec.Command("cp", append(append([]string{"-a"}, libs...), staged)...).CombinedOutput(); err != nil || len(libs) == 0 {
		t.Fatalf("staging %v from %s: %v %s", libs, nvrtcDir, err, out)
	}
	deb := filepath.Join(t.TempDir(), pkg+"_"+version+"_amd64.deb")
	if out, err := exec.Command("dpkg-deb", "--build", "--root-owner-group", root, deb).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb: %v %s", err, out)
	}
	data, err := os.ReadFile(deb)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(data)

	srv := httptest.NewTLSServer(http.FileServer(http.Dir(filepath.Dir(deb))))
	t.Cleanup(srv.Close)
	ca = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	return srv.URL + "/" + filepath.Base(deb), hex.EncodeToString(h[:]), ca
}
