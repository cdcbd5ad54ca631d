package tiers_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpugate/gpugate/smoke/tiers"
)

// Made-up checksums: the fixture follows the Packages format, not NVIDIA's
// real index.
var (
	sum128 = strings.Repeat("a1", 32)
	sum126 = strings.Repeat("b2", 32)
)

// stanza renders one Packages entry the way a Debian repository does.
func stanza(name, version, sum string) string {
	return fmt.Sprintf(`Package: %s
Version: %s
Architecture: amd64
Priority: optional
Section: devel
Maintainer: cudatools <cudatools@nvidia.com>
Installed-Size: 101234
Depends: cuda-toolkit-config-common
Filename: ./%s_%s_amd64.deb
Size: 40123456
MD5sum: 0123456789abcdef0123456789abcdef
SHA256: %s
Description: NVRTC native runtime libraries
 CUDA NVRTC runtime libraries,
 in two lines.

`, name, version, name, version, sum)
}

func index() string {
	return stanza("cuda-nvrtc-12-6", "12.6.77-1", strings.Repeat("c3", 32)) +
		stanza("cuda-nvrtc-12-6", "12.6.85-1", sum126) +
		stanza("cuda-nvrtc-12-8", "12.8.93-1", sum128) +
		stanza("cuda-nvrtc-dev-12-8", "12.8.93-1", strings.Repeat("d4", 32))
}

func parsed(t *testing.T, text string) []tiers.Package {
	t.Helper()
	idx, err := tiers.ParsePackages(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

func TestParsePackages_ReadsEveryStanzasPinningFields(t *testing.T) {
	// CRLF line ends, lower-case field names and no final blank line are
	// all accepted.
	text := index() + "package: cuda-keyring\r\nversion: 1.1-1\r\narchitecture: all\r\nfilename: ./cuda-keyring_1.1-1_all.deb\r\nsha256: " + strings.ToUpper(strings.Repeat("e5", 32))
	want := []tiers.Package{
		{"cuda-nvrtc-12-6", "12.6.77-1", "amd64", "./cuda-nvrtc-12-6_12.6.77-1_amd64.deb", strings.Repeat("c3", 32)},
		{"cuda-nvrtc-12-6", "12.6.85-1", "amd64", "./cuda-nvrtc-12-6_12.6.85-1_amd64.deb", sum126},
		{"cuda-nvrtc-12-8", "12.8.93-1", "amd64", "./cuda-nvrtc-12-8_12.8.93-1_amd64.deb", sum128},
		{"cuda-nvrtc-dev-12-8", "12.8.93-1", "amd64", "./cuda-nvrtc-dev-12-8_12.8.93-1_amd64.deb", strings.Repeat("d4", 32)},
		{"cuda-keyring", "1.1-1", "all", "./cuda-keyring_1.1-1_all.deb", strings.Repeat("e5", 32)},
	}
	if diff := cmp.Diff(want, parsed(t, text)); diff != "" {
		t.Errorf("packages (-want +got):\n%s", diff)
	}
}

func TestParsePackages_ErrorsNameTheLine(t *testing.T) {
	for name, tc := range map[string]struct {
		text, line string
	}{
		"a continuation first": {" orphan\n", "line 1"},
		"not a field":          {"Package: a\nVersion: 1\nno colon here\n", "line 3"},
		"a short SHA256":       {"Package: a\nVersion: 1\nSHA256: abc\n", "line 3"},
		"no Version":           {stanza("a", "1", sum128) + "Package: b\nSHA256: " + sum126 + "\n", "line 17"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := tiers.ParsePackages(strings.NewReader(tc.text))
			if !errors.Is(err, tiers.ErrIndex) || !strings.Contains(err.Error(), tc.line) {
				t.Errorf("err %v, want ErrIndex naming %s", err, tc.line)
			}
		})
	}
}

// Pinning changes the two checksums and nothing else: the comments and
// the layout of the reviewed table stay as they were.
func TestPin_FillsEachTiersChecksumAndChangesNothingElse(t *testing.T) {
	out, done, err := tiers.Pin(tiers.Example, parsed(t, index()))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(string(tiers.Example), `sha256: ""`, `sha256: "`+sum128+`"`, 1)
	want = strings.Replace(want, `sha256: ""`, `sha256: "`+sum126+`"`, 1)
	if diff := cmp.Diff(want, string(out)); diff != "" {
		t.Errorf("pinned table (-want +got):\n%s", diff)
	}
	cfg, err := tiers.Load(out)
	if err != nil || cfg.RequirePinned() != nil {
		t.Fatalf("the pinned table: %v, %v", err, cfg.RequirePinned())
	}
	wantDone := []tiers.Pinned{
		{Tier: "full", Package: "cuda-nvrtc-12-8", Version: "12.8.93-1", SHA256: sum128},
		{Tier: "baseline", Package: "cuda-nvrtc-12-6", Version: "12.6.85-1", SHA256: sum126},
	}
	if diff := cmp.Diff(wantDone, done); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	// Pinning again agrees with itself.
	again, done, err := tiers.Pin(out, parsed(t, index()))
	if err != nil || !bytes.Equal(again, out) || !done[0].Already || !done[1].Already {
		t.Errorf("re-pinning: %v, %+v, changed %v", err, done, !bytes.Equal(again, out))
	}
}

func TestPin_APinNeverChangesSilently(t *testing.T) {
	old := strings.Repeat("0f", 32)
	table := bytes.Replace(tiers.Example, []byte(`sha256: ""`), []byte(`sha256: "`+old+`"`), 1)
	_, _, err := tiers.Pin(table, parsed(t, index()))
	if !errors.Is(err, tiers.ErrPin) || !strings.Contains(err.Error(), old) || !strings.Contains(err.Error(), sum128) {
		t.Errorf("err %v, want ErrPin naming both checksums", err)
	}
}

func TestPin_RefusesATierTheIndexCannotPin(t *testing.T) {
	movedURL := strings.Replace(string(tiers.Example), "cuda-nvrtc-12-6_12.6.85-1_amd64.deb", "cuda-nvrtc-12-6_12.6.85-1_arm64.deb", 1)
	noSum := strings.Replace(stanza("cuda-nvrtc-12-8", "12.8.93-1", sum128), "SHA256: "+sum128+"\n", "", 1) + stanza("cuda-nvrtc-12-6", "12.6.85-1", sum126)
	for name, tc := range map[string]struct {
		table, index, says string
	}{
		"a version the index lacks":   {string(tiers.Example), stanza("cuda-nvrtc-12-8", "12.8.90-1", sum128), "no cuda-nvrtc-12-8 at version 12.8.93-1"},
		"a url naming another file":   {movedURL, index(), "correct the url"},
		"an entry without a checksum": {string(tiers.Example), noSum, "no SHA256"},
		"the entry listed twice":      {string(tiers.Example), index() + stanza("cuda-nvrtc-12-8", "12.8.93-1", sum128), "2 times"},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := tiers.Pin([]byte(tc.table), parsed(t, tc.index))
			if !errors.Is(err, tiers.ErrPin) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("err %v, want ErrPin saying %q", err, tc.says)
			}
		})
	}
	if _, _, err := tiers.Pin([]byte("tiers: [\n"), parsed(t, index())); err == nil {
		t.Error("a table that does not load was pinned")
	}
}

func FuzzParsePackages(f *testing.F) {
	f.Add([]byte(index()))
	f.Add([]byte("Package: a\r\nVersion: 1\r\n \r\n"))
	f.Add([]byte(" x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		idx, err := tiers.ParsePackages(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, tiers.ErrIndex) {
				t.Fatalf("unwrapped error %v", err)
			}
			return
		}
		for _, p := range idx {
			if p.Name == "" || p.Version == "" || p.SHA256 != "" && len(p.SHA256) != 64 {
				t.Fatalf("accepted %+v", p)
			}
		}
	})
}

// Whatever table Pin accepts, it changes only the checksums.
func FuzzPin(f *testing.F) {
	f.Add(tiers.Example)
	f.Add([]byte("tiers:\n  - {name: full, cuda: '12.8', package: cuda-nvrtc-12-8, version: 12.8.93-1, url: 'https://x/cuda-nvrtc-12-8_12.8.93-1_amd64.deb', lib_dir: /l}\n"))
	idx, err := tiers.ParsePackages(strings.NewReader(index()))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, table []byte) {
		out, _, err := tiers.Pin(table, idx)
		if err != nil {
			return
		}
		before, err1 := tiers.Load(table)
		after, err2 := tiers.Load(out)
		if err1 != nil || err2 != nil || after.RequirePinned() != nil {
			t.Fatalf("pinned a table that does not load: %v %v %v", err1, err2, after.RequirePinned())
		}
		for i := range before.Tiers {
			before.Tiers[i].SHA256 = after.Tiers[i].SHA256
		}
		if diff := cmp.Diff(before, after); diff != "" {
			t.Errorf("Pin changed more than the checksums (-before +after):\n%s", diff)
		}
	})
}

// BenchmarkParsePackages reads an index of NVIDIA's size (about 3,000
// packages in a CUDA repository) and one 100 times larger.
func BenchmarkParsePackages(b *testing.B) {
	for _, n := range []int{3_000, 300_000} {
		var text strings.Builder
		for i := range n {
			text.WriteString(stanza(fmt.Sprintf("pkg-%d", i), "1.0-1", sum128))
		}
		data := []byte(text.String())
		b.Run(fmt.Sprintf("packages=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if idx, err := tiers.ParsePackages(bytes.NewReader(data)); err != nil || len(idx) != n {
					b.Fatal(len(idx), err)
				}
			}
		})
	}
}

// A maintainer pins the reviewed table from the repository's own index
// instead of copying checksums by hand.
func ExamplePin() {
	index, err := tiers.ParsePackages(strings.NewReader(index()))
	if err != nil {
		fmt.Println(err)
		return
	}
	_, done, err := tiers.Pin(tiers.Example, index)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range done {
		fmt.Printf("%s: %s %s sha256 %s…\n", p.Tier, p.Package, p.Version, p.SHA256[:8])
	}
	// Output:
	// full: cuda-nvrtc-12-8 12.8.93-1 sha256 a1a1a1a1…
	// baseline: cuda-nvrtc-12-6 12.6.85-1 sha256 b2b2b2b2…
}
