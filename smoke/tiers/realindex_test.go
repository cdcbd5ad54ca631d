package tiers_test

import (
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpugate/gpugate/smoke/tiers"
)

// The seed: the proof "owns the NVRTC 12.6/12.8 Debian package versions and
// SHA-256 values from NVIDIA's official repository". Against a real
// repository's Packages index (GPUGATE_REAL_PACKAGES_INDEX, plain or
// gzipped) and packages downloaded from that repository
// (GPUGATE_REAL_DEBS, a directory of .deb files), Pin fills each tier with
// exactly the SHA-256 of the file a download delivers.
// scripts/real-libs-check.sh runs it with Debian's non-free archive, whose
// index has the format of NVIDIA's.
func TestRealIndex_PinIsTheChecksumOfTheDownloadedPackage(t *testing.T) {
	indexPath, debs := os.Getenv("GPUGATE_REAL_PACKAGES_INDEX"), os.Getenv("GPUGATE_REAL_DEBS")
	if indexPath == "" || debs == "" {
		t.Skip("set GPUGATE_REAL_PACKAGES_INDEX and GPUGATE_REAL_DEBS (scripts/real-libs-check.sh)")
	}
	f, err := os.Open(indexPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(indexPath, ".gz") {
		if r, err = gzip.NewReader(f); err != nil {
			t.Fatal(err)
		}
	}
	index, err := tiers.ParsePackages(r)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(debs, "*.deb"))
	if len(files) == 0 {
		t.Fatalf("no .deb in %s", debs)
	}
	var table strings.Builder
	table.WriteString("min_vram_gb: 16\ntiers:\n")
	want := map[string]string{} // tier name -> the file's checksum
	for i, file := range files {
		base := filepath.Base(file)
		fields := strings.Split(strings.TrimSuffix(base, ".deb"), "_")
		if len(fields) != 3 {
			t.Fatalf("%s is not <package>_<version>_<arch>.deb", base)
		}
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		name := fmt.Sprintf("t%d", i)
		want[name] = hex.EncodeToString(sum[:])
		// One tier per package; the CUDA versions only need to differ.
		fmt.Fprintf(&table, "  - {name: %s, cuda: \"%d.0\", package: %s, version: %q, url: \"https://repository.invalid/pool/%s\", sha256: \"\", lib_dir: /usr/lib}\n",
			name, 11+i, fields[0], fields[1], base)
	}
	pinned, report, err := tiers.Pin([]byte(table.String()), index)
	if err != nil {
		t.Fatalf("%v\n%s", err, table.String())
	}
	cfg, err := tiers.Load(pinned)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range cfg.Tiers {
		if tr.SHA256 != want[tr.Name] {
			t.Errorf("tier %s (%s %s): pinned %s, the downloaded file has %s", tr.Name, tr.Package, tr.Version, tr.SHA256, want[tr.Name])
		}
	}
	t.Logf("%d package(s) pinned from %s: %+v", len(report), filepath.Base(indexPath), report)
}
