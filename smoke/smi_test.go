package smoke

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// corpusDir holds nvidia-smi output captured on hosts outside this
// project, one directory per host: banner.txt (plain nvidia-smi) and
// query-gpu.csv (nvidia-smi --query-gpu). SOURCES.md there says where each
// file came from.
const corpusDir = "testdata/nvidia-smi"

// corpusBanners is what each banner of the corpus reads as: both layouts,
// "Driver Version / CUDA Version" up to R595 and "KMD Version / CUDA UMD
// Version" from R610, on Linux, WSL, Windows and FreeBSD hosts.
var corpusBanners = map[string]Banner{
	"470.256.02-linux-a10g":                  {Version{11, 4}, "470.256.02"},
	"470.63.01-linux-geforce-laptop":         {Version{11, 4}, "470.63.01"},
	"515.65.01-linux-titan-v":                {Version{11, 7}, "515.65.01"},
	"525.105.17-linux-tesla-v100":            {Version{12, 0}, "525.105.17"},
	"531.68-wsl-geforce-rtx-3070":            {Version{12, 1}, "531.68"},
	"535.161.08-linux-h100":                  {Version{12, 2}, "535.161.08"},
	"535.247.01-linux-a10g":                  {Version{12, 2}, "535.247.01"},
	"546.12-windows-geforce-rtx-3050":        {Version{12, 3}, "546.12"},
	"550.135-linux-tesla-p4":                 {Version{12, 4}, "550.135"},
	"550.40.07-linux-geforce-rtx-4070":       {Version{12, 4}, "550.40.07"},
	"555.85-wsl-no-gpu-rows":                 {Version{12, 5}, "555.85"},
	"560.28.03-linux-line-only":              {Version{12, 6}, "560.28.03"},
	"565.57.01-linux-quadro-t1000":           {Version{12, 7}, "565.57.01"},
	"570.133.20-linux-l4":                    {Version{12, 8}, "570.133.20"},
	"576.52-wsl-geforce-rtx-5090-d":          {Version{12, 9}, "576.52"},
	"580.126.09-linux-gb10":                  {Version{13, 0}, "580.126.09"},
	"580.65.06-linux-geforce-rtx-4090":       {Version{13, 0}, "580.65.06"},
	"580.95.05-linux-gb10":                   {Version{13, 0}, "580.95.05"},
	"580.95.05-linux-geforce-rtx-3060":       {Version{13, 0}, "580.95.05"},
	"590.48.01-linux-h100-80gb-hbm3":         {Version{13, 1}, "590.48.01"},
	"590.48.01-linux-h100-mig":               {Version{13, 1}, "590.48.01"},
	"590.48.01-linux-h200":                   {Version{13, 1}, "590.48.01"},
	"590.48.01-linux-h200-mig":               {Version{13, 1}, "590.48.01"},
	"591.86-windows-geforce-rtx-2080-super":  {Version{13, 1}, "591.86"},
	"595.71.05-linux-geforce-rtx-2080-super": {Version{13, 2}, "595.71.05"},
	"595.71.05-linux-geforce-rtx-4080-super": {Version{13, 2}, "595.71.05"},
	"595.80-linux-l40s":                      {Version{13, 2}, "595.80"},
	"610.43.02-linux-b200":                   {Version{13, 3}, "610.43.02"},
	"610.43.02-linux-geforce-rtx-5070":       {Version{13, 3}, "610.43.02"},
	"610.43.03-linux-geforce-rtx-3080":       {Version{13, 3}, "610.43.03"},
	"610.57.04-linux-geforce-rtx-2080-super": {Version{13, 3}, "610.57.04"},
	"610.57.04-linux-geforce-rtx-5090-x2":    {Version{13, 3}, "610.57.04"},
	"610.62-windows-geforce-rtx-2080-super":  {Version{13, 3}, "610.62"},
}

// corpusUnreadable are the corpus's banners the proof cannot read, and
// what it must say it saw.
var corpusUnreadable = map[string]BannerError{
	// libc6-shim on FreeBSD: the driver answers, CUDA does not.
	"575.64.03-freebsd-cuda-na": {Label: "CUDA Version:", Value: "N/A",
		Line: "| NVIDIA-SMI 575.64.03              Driver Version: 575.64.03      CUDA Version: N/A      |"},
}

// corpusQuery is a --query-gpu capture and what the proof's columns read
// as. A capture with a header names its columns (units in brackets, which
// the proof's nounits leaves out); one without says them here.
type corpusQuery struct {
	columns []string // for a capture without a header
	want    []GPU    // the proof's columns, compared where the capture has them
}

var corpusQueries = map[string]corpusQuery{
	"570.86.15-linux-titan-v-rtx-5880": {want: []GPU{
		{Index: 0, Name: "NVIDIA TITAN V", DriverVersion: "570.86.15", ComputeCap: Version{7, 0}},
		{Index: 1, Name: "NVIDIA RTX 5880 Ada Generation", DriverVersion: "570.86.15", ComputeCap: Version{8, 9}},
	}},
	"580.95.05-linux-gb10": {columns: []string{"index", "name", "memory.total", "memory.used", "memory.free"},
		want: []GPU{{Name: "NVIDIA GB10", MemoryUnreported: true}}},
	"gb10-linux-query-with-header":   {want: []GPU{{Name: "NVIDIA GB10", MemoryUnreported: true}}},
	"590.48.01-linux-h100-80gb-hbm3": {want: []GPU{{Name: "NVIDIA H100 80GB HBM3", DriverVersion: "590.48.01", MemoryMiB: 81559, ComputeCap: Version{9, 0}}}},
	"590.48.01-linux-h100-mig":       {want: []GPU{{Name: "NVIDIA H100 80GB HBM3", DriverVersion: "590.48.01", MemoryMiB: 81559, ComputeCap: Version{9, 0}}}},
	"590.48.01-linux-h200":           {want: []GPU{{Name: "NVIDIA H200", DriverVersion: "590.48.01", MemoryMiB: 143771, ComputeCap: Version{9, 0}}}},
	"590.48.01-linux-h200-mig":       {want: []GPU{{Name: "NVIDIA H200", DriverVersion: "590.48.01", MemoryMiB: 143771, ComputeCap: Version{9, 0}}}},
	"591.86-windows-geforce-rtx-2080-super": {want: []GPU{
		{Name: "NVIDIA GeForce RTX 2080 SUPER", DriverVersion: "591.86", MemoryMiB: 8192, ComputeCap: Version{7, 5}}}},
	"595.71.05-linux-geforce-rtx-2080-super": {want: []GPU{
		{Name: "NVIDIA GeForce RTX 2080 SUPER", DriverVersion: "595.71.05", MemoryMiB: 8192, ComputeCap: Version{7, 5}}}},
	"595.71.05-linux-geforce-rtx-4080-super": {want: []GPU{
		{Name: "NVIDIA GeForce RTX 4080 SUPER", DriverVersion: "595.71.05", MemoryMiB: 16376, ComputeCap: Version{8, 9}}}},
	"595.80-linux-l40s": {want: []GPU{{Name: "NVIDIA L40S", DriverVersion: "595.80", MemoryMiB: 46068, ComputeCap: Version{8, 9}}}},
	"610.57.04-linux-geforce-rtx-2080-super": {want: []GPU{
		{Name: "NVIDIA GeForce RTX 2080 SUPER", DriverVersion: "610.57.04", MemoryMiB: 8192, ComputeCap: Version{7, 5}}}},
	"610.62-windows-geforce-rtx-2080-super": {want: []GPU{
		{Name: "NVIDIA GeForce RTX 2080 SUPER", DriverVersion: "610.62", MemoryMiB: 8192, ComputeCap: Version{7, 5}}}},
}

func readCorpus(t testing.TB, dir, file string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(corpusDir, dir, file))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// proofColumns are the query columns the proof reads, in QueryArgs' order.
var proofColumns = []string{"name", "driver_version", "memory.total", "compute_cap"}

// queryRows reads a --query-gpu capture into one map per GPU, column name
// to value, a value's unit removed where the header names one (what
// nounits prints).
func queryRows(t testing.TB, data []byte, columns []string) []map[string]string {
	t.Helper()
	r := csv.NewReader(bytes.NewReader(data))
	r.TrimLeadingSpace = true
	records, err := r.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	units := make([]string, len(columns))
	if columns == nil {
		if len(records) == 0 {
			t.Fatal("a capture without rows")
		}
		for _, h := range records[0] {
			name, unit, _ := strings.Cut(h, " [")
			columns, units = append(columns, name), append(units, strings.TrimSuffix(unit, "]"))
		}
		records = records[1:]
	}
	var rows []map[string]string
	for _, rec := range records {
		if len(rec) != len(columns) {
			t.Fatalf("a row of %d values under %d columns", len(rec), len(columns))
		}
		row := map[string]string{}
		for i, v := range rec {
			if units[i] != "" {
				v = strings.TrimSuffix(v, " "+units[i])
			}
			row[columns[i]] = v
		}
		rows = append(rows, row)
	}
	return rows
}

// proofQuery is what nvidia-smi QueryArgs prints on the host of a capture
// that has all the proof's columns; ok is false for one that lacks any.
func proofQuery(rows []map[string]string) (query []byte, ok bool) {
	var b strings.Builder
	for _, row := range rows {
		var values []string
		for _, c := range proofColumns {
			v, has := row[c]
			if !has {
				return nil, false
			}
			values = append(values, v)
		}
		b.WriteString(strings.Join(values, ", ") + "\n")
	}
	return []byte(b.String()), true
}

// corpusSeed is a banner of the corpus, with the query its host answered
// where the capture has one.
type corpusSeed struct{ query, banner []byte }

// corpusSeeds are fuzz seeds from every banner of the corpus: with its
// host's own query where the capture has one, else a GB10's
// unified-memory row.
func corpusSeeds(t testing.TB) []corpusSeed {
	t.Helper()
	var seeds []corpusSeed
	for dir := range allBanners() {
		seed := corpusSeed{query: []byte("NVIDIA GB10, 580.126.09, [N/A], 12.1\n"), banner: readCorpus(t, dir, "banner.txt")}
		if q, has := corpusQueries[dir]; has {
			if query, ok := proofQuery(queryRows(t, readCorpus(t, dir, "query-gpu.csv"), q.columns)); ok {
				seed.query = query
			}
		}
		seeds = append(seeds, seed)
	}
	slices.SortFunc(seeds, func(a, b corpusSeed) int { return bytes.Compare(a.banner, b.banner) })
	return seeds
}

// corpusBannerData is every banner of the corpus, for seeds.
func corpusBannerData(t testing.TB) [][]byte {
	t.Helper()
	var out [][]byte
	for _, s := range corpusSeeds(t) {
		out = append(out, s.banner)
	}
	return out
}

func allBanners() map[string]bool {
	dirs := map[string]bool{}
	for dir := range corpusBanners {
		dirs[dir] = true
	}
	for dir := range corpusUnreadable {
		dirs[dir] = true
	}
	return dirs
}

// Real banners from every driver series the proof meets, R470 to R610, in
// both layouts: the CUDA version and the kernel-mode driver's.
func TestParseBanner_EveryBannerOfTheCorpus(t *testing.T) {
	for dir, want := range corpusBanners {
		t.Run(dir, func(t *testing.T) {
			got, err := ParseBanner(readCorpus(t, dir, "banner.txt"))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	for dir, want := range corpusUnreadable {
		t.Run(dir, func(t *testing.T) {
			_, err := ParseBanner(readCorpus(t, dir, "banner.txt"))
			var got *BannerError
			if !errors.As(err, &got) || !errors.Is(err, ErrSMI) {
				t.Fatalf("err = %v, want a *BannerError", err)
			}
			if diff := cmp.Diff(want, *got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// Real --query-gpu captures: every column the proof reads parses as the
// proof parses it, and a capture with all of them, projected to the
// proof's query (QueryArgs), parses with its own host's banner.
func TestParseNvidiaSMI_EveryQueryOfTheCorpus(t *testing.T) {
	for dir, q := range corpusQueries {
		t.Run(dir, func(t *testing.T) {
			rows := queryRows(t, readCorpus(t, dir, "query-gpu.csv"), q.columns)
			if len(rows) != len(q.want) {
				t.Fatalf("%d rows, want %d", len(rows), len(q.want))
			}
			for i, row := range rows {
				want := q.want[i]
				if v, has := row["name"]; has && v != want.Name {
					t.Errorf("GPU %d name %q, want %q", i, v, want.Name)
				}
				if v, has := row["driver_version"]; has && v != want.DriverVersion {
					t.Errorf("GPU %d driver_version %q, want %q", i, v, want.DriverVersion)
				}
				if v, has := row["memory.total"]; has {
					mib, unreported, err := parseMemory(v)
					if err != nil || mib != want.MemoryMiB || unreported != want.MemoryUnreported {
						t.Errorf("GPU %d memory.total %q = %d MiB, unreported %v, %v; want %d, %v", i, v, mib, unreported, err, want.MemoryMiB, want.MemoryUnreported)
					}
				}
				if v, has := row["compute_cap"]; has {
					if cc, err := ParseVersion(v); err != nil || cc != want.ComputeCap {
						t.Errorf("GPU %d compute_cap %q = %v, %v; want %v", i, v, cc, err, want.ComputeCap)
					}
				}
			}
			query, ok := proofQuery(rows)
			if !ok {
				return
			}
			b, has := corpusBanners[dir]
			if !has {
				t.Fatal("a capture with the proof's whole query needs its host's banner")
			}
			got, err := ParseNvidiaSMI(query, readCorpus(t, dir, "banner.txt"))
			if err != nil {
				t.Fatal(err)
			}
			want := SMI{CUDAVersion: b.CUDAVersion, KMDVersion: b.KMDVersion}
			for i, g := range q.want {
				g.Index = i
				want.GPUs = append(want.GPUs, g)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// Every file of the corpus is tested above, and SOURCES.md says where it
// came from; nothing the tables name is missing.
func TestParseNvidiaSMI_EveryCorpusFileIsTestedAndSourced(t *testing.T) {
	sources := string(readCorpus(t, ".", "SOURCES.md"))
	tested := map[string]bool{}
	for dir := range allBanners() {
		tested[path.Join(dir, "banner.txt")] = true
	}
	for dir := range corpusQueries {
		tested[path.Join(dir, "query-gpu.csv")] = true
	}
	seen := map[string]bool{}
	err := fs.WalkDir(os.DirFS(corpusDir), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || p == "SOURCES.md" {
			return err
		}
		seen[p] = true
		if !tested[p] {
			t.Errorf("%s: no test reads it", p)
		}
		if !strings.Contains(sources, "`"+p+"`") {
			t.Errorf("%s: SOURCES.md does not say where it came from", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for p := range tested {
		if !seen[p] {
			t.Errorf("%s: tested but not in %s", p, corpusDir)
		}
	}
	if len(seen) == 0 {
		t.Fatalf("no file in %s", corpusDir)
	}
}

// The R610 drivers print "KMD Version: 610.xx.xx     CUDA UMD Version:
// 13.x" where older ones print "Driver Version" and "CUDA Version": the
// proof reads both, on real R610 hosts (Linux and Windows), and the
// whole of a real R610 host's output passes.
func TestParseNvidiaSMI_R610BannerReadsKMDAndUMDVersions(t *testing.T) {
	r610 := 0
	for dir, want := range corpusBanners {
		if !strings.HasPrefix(dir, "610.") {
			continue
		}
		r610++
		got, err := ParseBanner(readCorpus(t, dir, "banner.txt"))
		if err != nil || got != want || got.KMDVersion == "" || got.CUDAVersion != (Version{13, 3}) {
			t.Errorf("%s: %+v, %v; want %+v", dir, got, err, want)
		}
	}
	if r610 < 6 {
		t.Fatalf("%d R610 banners in the corpus", r610)
	}
	const dir = "610.57.04-linux-geforce-rtx-2080-super"
	query, _ := proofQuery(queryRows(t, readCorpus(t, dir, "query-gpu.csv"), nil))
	got, err := ParseNvidiaSMI(query, readCorpus(t, dir, "banner.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := SMI{CUDAVersion: Version{13, 3}, KMDVersion: "610.57.04", GPUs: []GPU{
		{Index: 0, Name: "NVIDIA GeForce RTX 2080 SUPER", DriverVersion: "610.57.04", MemoryMiB: 8192, ComputeCap: Version{7, 5}}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// The tier for CUDA 13.3 is chosen as for any other driver.
	if tier, err := SelectTier(got.CUDAVersion, tiers()); err != nil || tier.Name != "full" {
		t.Errorf("tier %+v, %v", tier, err)
	}
}

// A banner the proof cannot read fails with what it saw: the line with
// the unreadable value, or the banner's first line, cut to BannerLineMax,
// never a guess at why.
func TestParseNvidiaSMI_UnreadableBannerNamesItsFirstLine(t *testing.T) {
	// What nvidia-smi prints on a host whose driver is not loaded
	// (linux-surface/linux-surface#374, 2021-01-07).
	const failed = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."
	long := strings.Repeat("é", 60) // 120 bytes, two to a character
	tests := map[string]struct {
		banner string
		want   BannerError
	}{
		"the driver is not loaded":           {failed + "\n\n", BannerError{Line: failed[:BannerLineMax] + "…"}},
		"empty":                              {"", BannerError{}},
		"blank lines first":                  {"\n   \n\tNo devices were found\n", BannerError{Line: "No devices were found"}},
		"a long line":                        {long, BannerError{Line: long[:BannerLineMax] + "…"}},
		"a long line cut inside a character": {"x" + long, BannerError{Line: "x" + long[:BannerLineMax-2] + "…"}},
		"CUDA Version garbled":               {"| NVIDIA-SMI 570.124.06  Driver Version: 570.124.06  CUDA Version: 12.x |", BannerError{Label: "CUDA Version:", Value: "12.x", Line: "| NVIDIA-SMI 570.124.06  Driver Version: 570.124.06  CUDA Version: 12.x |"}},
		"CUDA UMD Version garbled":           {"Sun Jun  7 08:16:57 2026\n| KMD Version: 610.43.02     CUDA UMD Version: thirteen |\n", BannerError{Label: "CUDA UMD Version:", Value: "thirteen", Line: "| KMD Version: 610.43.02     CUDA UMD Version: thirteen |"}},
		"only the driver's version":          {"| NVIDIA-SMI 331.62     Driver Version: 331.62         |", BannerError{Line: "| NVIDIA-SMI 331.62     Driver Version: 331.62         |"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseNvidiaSMI([]byte(query), []byte(tt.banner))
			var got *BannerError
			if !errors.As(err, &got) || !errors.Is(err, ErrSMI) {
				t.Fatalf("err = %v, want a *BannerError", err)
			}
			if diff := cmp.Diff(tt.want, *got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// A banner with both CUDA labels that disagree gets the older version:
// no NVRTC newer than either is chosen.
func TestParseBanner_TwoCUDALabelsThatDisagreeGetTheOlder(t *testing.T) {
	got, err := ParseBanner([]byte("KMD Version: 610.57.04  CUDA UMD Version: 13.3\nDriver Version: 610.57.04  CUDA Version: 12.8\n"))
	if err != nil || got != (Banner{Version{12, 8}, "610.57.04"}) {
		t.Errorf("%+v, %v", got, err)
	}
}

// A unified-memory device (DGX Spark's GB10) reports memory.total as
// [N/A]: the proof reads it as unreported, never as a bad value, and
// never advises nounits for it.
func TestParseNvidiaSMI_UnifiedMemoryIsUnreportedNotRejected(t *testing.T) {
	got, err := ParseNvidiaSMI([]byte("NVIDIA GB10, 580.126.09, [N/A], 12.1\n"), readCorpus(t, "580.126.09-linux-gb10", "banner.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := SMI{CUDAVersion: Version{13, 0}, KMDVersion: "580.126.09", GPUs: []GPU{
		{Index: 0, Name: "NVIDIA GB10", DriverVersion: "580.126.09", MemoryUnreported: true, ComputeCap: Version{12, 1}}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// gb10 is a DGX Spark: a real GB10 banner, the query nvidia-smi answers
// there (memory.total [N/A]), and a driver that reports mib MiB of
// unified memory by cuDeviceTotalMem.
func gb10(mib uint64) *fakeEnv {
	env := healthy()
	env.query = "NVIDIA GB10, 580.126.09, [N/A], 12.1\n"
	data, err := os.ReadFile(filepath.Join(corpusDir, "580.126.09-linux-gb10", "banner.txt"))
	if err != nil {
		panic(err)
	}
	env.banner = string(data)
	env.cuda.driver, env.cuda.nvrtc = Version{13, 0}, Version{12, 8}
	env.cuda.totalMem = []uint64{mib << 20}
	return env
}

// On a unified-memory device nvidia-smi has no memory.total; the VRAM
// floor holds the device to the memory the driver says it can address
// (cuDeviceTotalMem, the pool it shares with the host).
func TestRun_UnifiedMemoryVRAMFloorUsesDeviceTotalMemory(t *testing.T) {
	env := gb10(124546) // 121.6 GiB
	res, err := run(t, env, func(c *Config) { c.MinVRAMGB = 100 })
	if err != nil {
		t.Fatal(err)
	}
	if last := res.Steps[len(res.Steps)-1]; last.Step != StepVRAM || !cmp.Equal(env.cuda.totalMemAsked, []int{0}) {
		t.Errorf("last step %+v, asked the driver for %v", last, env.cuda.totalMemAsked)
	}
	env = gb10(124546)
	_, err = run(t, env, func(c *Config) { c.MinVRAMGB = 128 })
	if failedStep(t, err) != StepVRAM || !errors.Is(err, ErrVRAM) {
		t.Errorf("a floor above the driver's figure: %v", err)
	}
}

// nvidia-smi's GPU order need not be CUDA's: once any GPU's memory is
// unreported, every CUDA ordinal the GPUs occupy is held to the floor,
// and a driver that cannot answer fails the step by its error's name.
func TestRun_UnifiedMemoryHoldsEveryCUDADeviceToTheFloor(t *testing.T) {
	env := gb10(124546)
	env.query = "NVIDIA GeForce RTX 4090, 580.126.09, 24564, 8.9\nNVIDIA GB10, 580.126.09, [N/A], 12.1\n"
	env.cuda.totalMem = []uint64{124546 << 20, 8192 << 20}
	_, err := run(t, env, func(c *Config) { c.MinVRAMGB = 20 })
	if failedStep(t, err) != StepVRAM || !errors.Is(err, ErrVRAM) || !cmp.Equal(env.cuda.totalMemAsked, []int{0, 1}) {
		t.Errorf("err %v, asked %v", err, env.cuda.totalMemAsked)
	}
	env = gb10(124546)
	env.cuda.totalMemErr = &CUDAError{Call: "cuDeviceTotalMem", Code: 801}
	_, err = run(t, env, func(c *Config) { c.MinVRAMGB = 20 })
	var ce *CUDAError
	if failedStep(t, err) != StepVRAM || !errors.As(err, &ce) || ce.Name() != "CUDA_ERROR_NOT_SUPPORTED" {
		t.Errorf("err = %v", err)
	}
	// A host whose nvidia-smi reports every GPU's memory never asks.
	env = healthy()
	if _, err := run(t, env, nil); err != nil || env.cuda.totalMemAsked != nil {
		t.Errorf("err %v, asked %v", err, env.cuda.totalMemAsked)
	}
}

// nvidia-smi on a host whose driver is not loaded exits nonzero and says
// why on its standard output: the proof's error carries that line, not
// an empty standard error.
func TestRealEnv_AFailingNvidiaSMIsErrorNamesItsFirstLine(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip(err)
	}
	const failed = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "nvidia-smi"), []byte("#!/bin/sh\necho \""+failed+"\"\necho\nexit 9\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	_, _, err := RealEnv{}.NvidiaSMI(context.Background())
	var ce *CommandError
	var exit *exec.ExitError
	if !errors.As(err, &ce) || !errors.As(err, &exit) || exit.ExitCode() != 9 {
		t.Fatalf("err = %v, want a *CommandError for nvidia-smi's exit status 9", err)
	}
	if want := (CommandError{Command: "nvidia-smi", Err: ce.Err, Said: failed[:BannerLineMax] + "…"}); *ce != want {
		t.Errorf("%+v, want %+v", *ce, want)
	}
}
