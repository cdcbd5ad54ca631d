package smoke

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseConfigJSON_RoundTripsConfigJSON(t *testing.T) {
	cfg := example()
	js, err := cfg.JSON()
	if err != nil {
		t.Fatal(err)
	}
	again, err := ParseConfigJSON([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(cfg.Tiers, again.Tiers); diff != "" || again.MinVRAMGB != 20 {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestParseConfigJSON_IsStrict(t *testing.T) {
	exampleConfig := exampleJSON()
	for name, in := range map[string]string{
		"empty":          ``,
		"unknown field":  `{"tiers": [], "tier": []}`,
		"trailing value": exampleConfig + `{}`,
		"trailing brace": exampleConfig + `}`,
		"no tiers":       `{"min_vram_gb": 20}`,
		"a bad checksum": strings.Replace(exampleConfig, `"sha256":""`, `"sha256":"ABC"`, 1),
		"a plain http":   strings.Replace(exampleConfig, `https://developer`, `http://developer`, 1),
		"not a .deb":     strings.Replace(exampleConfig, `amd64.deb"`, `amd64.tar"`, 1),
		"a spaced url":   strings.Replace(exampleConfig, `repos/ubuntu2404`, `repos/ ubuntu2404`, 1),
		"negative vram":  strings.Replace(exampleConfig, `"min_vram_gb":20`, `"min_vram_gb":-1`, 1),
		// A URL copied from another tier or release installs a package
		// other than the one the tier pins.
		"another package's url": strings.Replace(exampleConfig, `/cuda-nvrtc-12-8_12.8.93-1_amd64.deb`, `/cuda-nvrtc-12-6_12.8.93-1_amd64.deb`, 1),
		"another version's url": strings.Replace(exampleConfig, `/cuda-nvrtc-12-8_12.8.93-1_amd64.deb`, `/cuda-nvrtc-12-8_12.8.61-1_amd64.deb`, 1),
		"no architecture":       strings.Replace(exampleConfig, `/cuda-nvrtc-12-8_12.8.93-1_amd64.deb`, `/cuda-nvrtc-12-8_12.8.93-1.deb`, 1),
	} {
		if _, err := ParseConfigJSON([]byte(in)); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: err = %v, want ErrConfig", name, err)
		}
	}
}

func FuzzParseConfigJSON(f *testing.F) {
	f.Add([]byte(exampleJSON()))
	f.Add([]byte(`{"tiers":[{"name":"a","cuda":"12.6","package":"p","version":"1","url":"https://x/p_1_amd64.deb","sha256":"","lib_dir":"/l"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfigJSON(data)
		if err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("unwrapped error %v", err)
			}
			return
		}
		js, err := cfg.JSON()
		if err != nil {
			t.Fatalf("a valid table does not render: %v", err)
		}
		again, err := ParseConfigJSON([]byte(js))
		if err != nil || !cmp.Equal(cfg.Tiers, again.Tiers) || cfg.MinVRAMGB != again.MinVRAMGB {
			t.Fatalf("does not round-trip: %v", err)
		}
	})
}

// labelValue replaces a regular expression (the proof links no regexp);
// for every label of both banner layouts it must find what the expression
// finds.
var labelPatterns = map[string]*regexp.Regexp{}

func init() {
	for _, label := range []string{labelCUDA, labelCUDAUMD, labelDriver, labelKMD} {
		labelPatterns[label] = regexp.MustCompile(regexp.QuoteMeta(label) + `\s*([^\s|]+)`)
	}
}

func FuzzLabelValue_AgreesWithTheRegexp(f *testing.F) {
	f.Add([]byte(banner))
	f.Add([]byte("CUDA Version: | CUDA Version:12.4|"))
	f.Add([]byte("CUDA Version:\t\n"))
	f.Add([]byte("CUDA UMD Version: | KMD Version:\n610.57.04 CUDA UMD Version:13.3|"))
	for _, c := range corpusBannerData(f) {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for label, pattern := range labelPatterns {
			got, line, ok := labelValue(string(b), label)
			m := pattern.FindSubmatch(b)
			if ok != (m != nil) || (ok && got != string(m[1])) {
				t.Fatalf("labelValue(%q, %q) = %q, %v; the regexp finds %q", b, label, got, ok, m)
			}
			if ok && !strings.Contains(line, label) {
				t.Fatalf("labelValue(%q, %q): the line %q does not hold the label", b, label, line)
			}
		}
	})
}

// A Debian repository names a package's file <package>_<version>_<arch>.deb,
// without the version's epoch.
func TestDebNames(t *testing.T) {
	for url, want := range map[string]bool{
		"https://r/x/cuda-nvrtc-12-8_12.8.93-1_amd64.deb": true,
		"https://r/x/cuda-nvrtc-12-8_12.8.93-1_arm64.deb": true,
		"https://r/x/cuda-nvrtc-12-8_12.8.93-1.deb":       false,
		"https://r/x/cuda-nvrtc-12-8_12.8.93-1_a_b.deb":   false,
		"https://r/x/cuda-nvrtc-12-6_12.8.93-1_amd64.deb": false,
	} {
		if got := debNames(url, "cuda-nvrtc-12-8", "12.8.93-1"); got != want {
			t.Errorf("%s: %v, want %v", url, got, want)
		}
	}
	if !debNames("https://r/libfoo_2.3-1_amd64.deb", "libfoo", "1:2.3-1") {
		t.Error("an epoch is not part of the file name")
	}
}
