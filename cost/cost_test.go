package cost

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-github/v66/github"

	"github.com/gpugate/gpugate/internal/ghpage"
	"github.com/gpugate/gpugate/internal/githubtest"
	"github.com/gpugate/gpugate/internal/workflowtest"
)

func ts(s string) *time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return &t
}

func TestParsePodRecord_V2AndSavedV1(t *testing.T) {
	tests := map[string]struct {
		in   string
		want PodRecord
	}{
		"v2": {`{"id":"p1","name":"gate-c1","startedAt":"2026-10-06T10:05:00Z","createdAt":"2026-10-06T10:04:40Z","cost":0.43,"gpu":{"id":"NVIDIA L4","count":1}}`,
			PodRecord{APIVersion: 2, ID: "p1", Name: "gate-c1", GPUTypeID: "NVIDIA L4", StartedAt: ts("2026-10-06T10:05:00Z"), CreatedAt: ts("2026-10-06T10:04:40Z"), ListPrice: 0.43}},
		"v2 not started": {`{"id":"p2","startedAt":null,"createdAt":"2026-10-06T10:04:40Z","cost":0.43}`,
			PodRecord{APIVersion: 2, ID: "p2", CreatedAt: ts("2026-10-06T10:04:40Z"), ListPrice: 0.43}},
		"v1 Go time format": {`{"id":"p3","lastStartedAt":"2026-10-06 10:05:00.123456789 +0000 UTC","costPerHr":0.74,"adjustedCostPerHr":0.69,"machine":{"gpuTypeId":"NVIDIA RTX 6000 Ada Generation"}}`,
			PodRecord{APIVersion: 1, ID: "p3", GPUTypeID: "NVIDIA RTX 6000 Ada Generation", StartedAt: ts("2026-10-06T10:05:00.123456789Z"), ListPrice: 0.74, AdjustedPrice: 0.69}},
		"v1 Go time with monotonic reading": {`{"id":"p4","lastStartedAt":"2026-10-06 12:05:00 +0200 CEST m=+12.5","costPerHr":0.74}`,
			PodRecord{APIVersion: 1, ID: "p4", StartedAt: ts("2026-10-06T10:05:00Z"), ListPrice: 0.74}},
		"v1 ISO": {`{"id":"p5","lastStartedAt":"2024-07-12T19:14:40.144Z","costPerHr":0.74}`,
			PodRecord{APIVersion: 1, ID: "p5", StartedAt: ts("2024-07-12T19:14:40.144Z"), ListPrice: 0.74}},
		"v1 zero time": {`{"id":"p6","lastStartedAt":"0001-01-01 00:00:00 +0000 UTC","costPerHr":0.74}`,
			PodRecord{APIVersion: 1, ID: "p6", ListPrice: 0.74}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParsePodRecord([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	for name, in := range map[string]string{
		"garbage":       `nope`,
		"neither":       `{"id":"x"}`,
		"mixed":         `{"startedAt":"2026-10-06T10:05:00Z","costPerHr":1}`,
		"bad time":      `{"startedAt":"yesterday","cost":1}`,
		"negative cost": `{"startedAt":"2026-10-06T10:05:00Z","cost":-1}`,
	} {
		if _, err := ParsePodRecord([]byte(in)); !errors.Is(err, ErrRecord) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

// RunPod's own v1 schema writes costPerHr as a string ("0.74"): a saved v1
// record's prices may be numeric strings, read as the numbers they hold;
// any other string is an invalid record, never a zero price.
func TestParsePodRecord_V1CostPerHrAsString(t *testing.T) {
	got, err := ParsePodRecord([]byte(`{"id":"p7","lastStartedAt":"2024-07-12T19:14:40.144Z","costPerHr":"0.74","adjustedCostPerHr":"0.69"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := PodRecord{APIVersion: 1, ID: "p7", StartedAt: ts("2024-07-12T19:14:40.144Z"), ListPrice: 0.74, AdjustedPrice: 0.69}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, bad := range []string{`""`, `"abc"`, `" 0.74"`, `"0.74 "`, `"NaN"`, `"Infinity"`, `"1e400"`, `"0x1p-2"`, `"+0.74"`, `"0,74"`, `"-0.5"`, `true`, `{}`} {
		for _, field := range []string{"costPerHr", "adjustedCostPerHr"} {
			in := `{"id":"p8","lastStartedAt":"2024-07-12T19:14:40.144Z","` + field + `":` + bad + `}`
			if rec, err := ParsePodRecord([]byte(in)); !errors.Is(err, ErrRecord) {
				t.Errorf("%s %s: %+v, %v; want ErrRecord", field, bad, rec, err)
			}
		}
	}
}

// recordFixtures is RunPod's published OpenAPI documents' pod examples
// (testdata/SOURCES.md) and what each reads as.
var recordFixtures = map[string]PodRecord{
	"runpod-v1-pod-schema-example.json": {APIVersion: 1, ID: "xedezhzb9la3ye", StartedAt: ts("2024-07-12T19:14:40.144Z"), ListPrice: 0.74, AdjustedPrice: 0.69},
	"runpod-v2-pod-schema-example.json": {APIVersion: 2, ID: "pod_abc123", Name: "my-training-pod", GPUTypeID: "NVIDIA GeForce RTX 4090",
		StartedAt: ts("2026-03-13T20:00:00Z"), CreatedAt: ts("2026-03-13T20:00:00Z"), ListPrice: 0.35},
}

// Records as RunPod writes them: the pod examples of its published v1 and
// v2 schemas, each file of testdata read and sourced.
func TestParsePodRecord_TheRunPodSchemaExamples(t *testing.T) {
	sources, err := os.ReadFile(filepath.Join("testdata", "SOURCES.md"))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, e := range entries {
		if e.IsDir() || e.Name() == "SOURCES.md" {
			continue
		}
		seen++
		if !strings.Contains(string(sources), "`"+e.Name()+"`") {
			t.Errorf("%s: SOURCES.md does not say where it came from", e.Name())
		}
		want, ok := recordFixtures[e.Name()]
		if !ok {
			t.Errorf("%s: no test reads it", e.Name())
			continue
		}
		data, err := os.ReadFile(filepath.Join("testdata", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParsePodRecord(data)
		if err != nil {
			t.Errorf("%s: %v", e.Name(), err)
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", e.Name(), diff)
		}
	}
	if seen != len(recordFixtures) {
		t.Errorf("%d files in testdata, %d in the table", seen, len(recordFixtures))
	}
}

func FuzzParsePodRecord(f *testing.F) {
	f.Add([]byte(`{"id":"p1","startedAt":"2026-10-06T10:05:00Z","cost":0.43,"gpu":{"id":"NVIDIA L4"}}`))
	f.Add([]byte(`{"id":"p3","lastStartedAt":"2026-10-06 10:05:00.1 +0000 UTC","costPerHr":0.74,"adjustedCostPerHr":0.69}`))
	f.Add([]byte(`{"id":"p7","lastStartedAt":"2024-07-12T19:14:40.144Z","costPerHr":"0.74","adjustedCostPerHr":"1e-3"}`))
	for name := range recordFixtures {
		if data, err := os.ReadFile(filepath.Join("testdata", name)); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := ParsePodRecord(data)
		if err != nil {
			if !errors.Is(err, ErrRecord) {
				t.Fatal(err)
			}
			return
		}
		w, err := PaidWindow(rec, time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
		if err == nil && w.Known && (w.Seconds < 0 || math.IsNaN(w.Cost)) {
			t.Fatalf("%+v", w)
		}
	})
}

// The change-aware CI seed: the cleanup artifact carries "archive/
// cuTENSOR/CUDA cache-hit observations"; "Missing cache outputs remain
// unknown."
func TestMissingCacheOutputsRemainUnknown(t *testing.T) {
	hit, miss := true, false
	got, err := ParseCacheObservations("archive=true, cuda-toolkit= cuda-runtime=false,cutensor=unknown")
	want := map[string]*bool{"archive": &hit, "cuda-toolkit": nil, "cuda-runtime": &miss, "cutensor": nil}
	if diff := cmp.Diff(want, got); diff != "" || err != nil {
		t.Errorf("%v (-want +got):\n%s", err, diff)
	}
	if got, err := ParseCacheObservations("  "); got != nil || err != nil {
		t.Errorf("no observations: %v %v", got, err)
	}
	r := Report{Cache: got}
	if md := r.Markdown(); !strings.Contains(md, "Cache observations: archive hit, cuda-runtime miss, cuda-toolkit unknown, cutensor unknown.") {
		t.Errorf("markdown:\n%s", md)
	}
	data, _ := json.Marshal(Report{Cache: got})
	if !strings.Contains(string(data), `"cache":{"archive":true,"cuda-runtime":false,"cuda-toolkit":null,"cutensor":null}`) {
		t.Errorf("JSON %s: unknown must be null, never false", data)
	}
	for name, in := range map[string]string{
		"no value":              "archive",
		"a yes":                 "archive=yes",
		"twice":                 "archive=true,archive=false",
		"a bad name":            "-archive=true",
		"an expression left in": "archive=${{ steps.x.outputs.cache-hit }}",
	} {
		if _, err := ParseCacheObservations(in); !errors.Is(err, ErrCacheObservations) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func FuzzParseCacheObservations(f *testing.F) {
	f.Add("archive=true,cuda-toolkit=,cuda-runtime=false")
	f.Add("a=unknown b=true")
	f.Fuzz(func(t *testing.T, s string) {
		obs, err := ParseCacheObservations(s)
		if err != nil {
			if !errors.Is(err, ErrCacheObservations) {
				t.Fatal(err)
			}
			return
		}
		for name := range obs {
			if !cacheName.MatchString(name) || !strings.Contains(s, name+"=") {
				t.Fatalf("accepted name %q from %q", name, s)
			}
		}
	})
}

func TestPaidWindow_StartToConfirmedDeletionAtTheAdjustedPriceElseList(t *testing.T) {
	del := *ts("2026-10-06T11:05:00Z")
	rec := PodRecord{ID: "p", StartedAt: ts("2026-10-06T10:05:00Z"), ListPrice: 0.74, AdjustedPrice: 0.69}
	w, err := PaidWindow(rec, del)
	if err != nil || !w.Known || w.Seconds != 3600 || w.PriceSource != PriceAdjusted || math.Abs(w.Cost-0.69) > 1e-9 {
		t.Errorf("%+v %v", w, err)
	}
	rec.AdjustedPrice = 0
	if w, _ := PaidWindow(rec, del); w.PriceSource != PriceList || math.Abs(w.Cost-0.74) > 1e-9 {
		t.Errorf("list fallback: %+v", w)
	}
	rec.ListPrice = 0
	if w, _ := PaidWindow(rec, del); !w.Known || w.CostKnown() {
		t.Errorf("unknown price must leave the cost unknown: %+v", w)
	}
	if _, err := PaidWindow(PodRecord{StartedAt: ts("2026-10-06T12:00:00Z")}, del); !errors.Is(err, ErrWindow) {
		t.Errorf("deleted before start: %v", err)
	}
}

func TestPaidWindow_AnUnknownStartIsNeverReplacedByCreatedAt(t *testing.T) {
	rec := PodRecord{ID: "p", CreatedAt: ts("2026-10-06T10:00:00Z"), ListPrice: 0.43}
	w, err := PaidWindow(rec, *ts("2026-10-06T11:00:00Z"))
	if err != nil || w.Known || w.Cost != 0 || w.CostKnown() {
		t.Errorf("%+v %v: unknown, not zero and not from createdAt", w, err)
	}
	for _, s := range Stages(w, Marks{}) {
		if s.Seconds != nil || s.Cost != nil {
			t.Errorf("stage %+v of an unknown window must be unknown", s)
		}
	}
}

func TestStages_AddUpExactlyToThePaidWindow(t *testing.T) {
	w, _ := PaidWindow(PodRecord{StartedAt: ts("2026-10-06T10:00:00Z"), ListPrice: 0.36}, *ts("2026-10-06T10:30:00Z"))
	m := Marks{JobStarted: ts("2026-10-06T10:02:00Z"), TestsStarted: ts("2026-10-06T10:05:00Z"), TestsEnded: ts("2026-10-06T10:27:00Z")}
	got := Stages(w, m)
	want := map[string]float64{StageStartup: 120, StageSetup: 180, StageExecution: 1320, StageCleanup: 180, StageUnassigned: 0}
	total, cost := 0.0, 0.0
	for _, s := range got {
		if *s.Seconds != want[s.Name] {
			t.Errorf("%s = %v s, want %v", s.Name, *s.Seconds, want[s.Name])
		}
		total += *s.Seconds
		cost += *s.Cost
	}
	if total != w.Seconds || math.Abs(cost-w.Cost) > 1e-9 {
		t.Errorf("stages sum to %v s / $%v, window %v s / $%v", total, cost, w.Seconds, w.Cost)
	}
}

func TestStages_AMissingMarkIsUnknownNotZero(t *testing.T) {
	w, _ := PaidWindow(PodRecord{StartedAt: ts("2026-10-06T10:00:00Z"), ListPrice: 0.36}, *ts("2026-10-06T10:30:00Z"))
	got := Stages(w, Marks{JobStarted: ts("2026-10-06T10:02:00Z"), TestsEnded: ts("2026-10-06T10:27:00Z")})
	byName := map[string]Stage{}
	for _, s := range got {
		byName[s.Name] = s
	}
	if byName[StageSetup].Seconds != nil || byName[StageExecution].Seconds != nil {
		t.Errorf("stages next to the missing mark must be unknown: %+v", got)
	}
	if *byName[StageStartup].Seconds != 120 || *byName[StageCleanup].Seconds != 180 || *byName[StageUnassigned].Seconds != 1500 {
		t.Errorf("%+v", got)
	}
	// Out-of-order marks count nothing twice.
	got = Stages(w, Marks{JobStarted: ts("2026-10-06T10:20:00Z"), TestsStarted: ts("2026-10-06T10:10:00Z"), TestsEnded: ts("2026-10-06T10:25:00Z")})
	sum := 0.0
	for _, s := range got {
		if s.Seconds != nil {
			sum += *s.Seconds
		}
	}
	if sum != w.Seconds {
		t.Errorf("out-of-order marks: stages sum to %v, window %v", sum, w.Seconds)
	}
}

func TestStages_ReportingAfterDeletionIsNeverCounted(t *testing.T) {
	w, _ := PaidWindow(PodRecord{StartedAt: ts("2026-10-06T10:00:00Z"), ListPrice: 1}, *ts("2026-10-06T10:30:00Z"))
	got := Stages(w, Marks{JobStarted: ts("2026-10-06T10:01:00Z"), TestsStarted: ts("2026-10-06T10:02:00Z"), TestsEnded: ts("2026-10-06T10:45:00Z")})
	total := 0.0
	for _, s := range got {
		total += *s.Seconds
	}
	if total != 1800 || *got[3].Seconds != 0 {
		t.Errorf("%v", total)
	}
}

func TestReport_RejectedAttemptsApartAndStorageOutOfScope(t *testing.T) {
	rec := PodRecord{ID: "pod1", GPUTypeID: "NVIDIA L4", StartedAt: ts("2026-10-06T10:00:00Z"), ListPrice: 0.43}
	rej := []Attempt{{Name: "g-c1", GPUTypeID: "NVIDIA GeForce RTX 4090", Outcome: "exited", Seconds: 95, EstimatedCost: 0.0182}}
	r, err := NewReport(rec, *ts("2026-10-06T10:30:00Z"), Marks{}, rej)
	if err != nil {
		t.Fatal(err)
	}
	md := r.Markdown()
	for _, want := range []string{"$0.2150", "Rejected provisioning attempts (separate from the window above): 1, estimated $0.0182", NoteStorage, NoteEstimates, "| test-job setup | unknown | unknown |"} {
		if !strings.Contains(md, want) {
			t.Errorf("summary lacks %q:\n%s", want, md)
		}
	}
	if r.Window.Cost == r.Window.Cost+r.RejectedCost() {
		t.Error("rejected cost must stay apart from the window")
	}
	hit, miss := true, false
	r.Cache = map[string]*bool{"sccache": &miss, "cargo-registry": &hit, "nvrtc-deb": nil}
	if md := r.Markdown(); !strings.Contains(md, "Cache observations: cargo-registry hit, nvrtc-deb unknown, sccache miss.") {
		t.Errorf("cache observations, sorted, with unknown apart from miss:\n%s", md)
	}
}

func TestWriteBounded_AtomicAndNeverBlocks(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "cost-report.json")
	r := Report{Version: ReportVersion, PodID: "pod1", Notes: []string{NoteStorage}}
	if err := WriteBounded(context.Background(), time.Second, p, r); err != nil {
		t.Fatal(err)
	}
	var back Report
	data, _ := os.ReadFile(p)
	if err := json.Unmarshal(data, &back); err != nil || back.PodID != "pod1" {
		t.Errorf("%s %v", data, err)
	}
	if err := WriteBounded(context.Background(), time.Second, filepath.Join(dir, "missing-dir", "x.json"), r); err == nil {
		t.Error("an unwritable path must be an error, not a hang")
	}
	// A directory in the report's place: the rename fails, the error says
	// so with the package prefix, and no temporary file is left behind.
	taken := filepath.Join(dir, "taken")
	if err := os.MkdirAll(filepath.Join(taken, "inside"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := WriteBounded(context.Background(), time.Second, taken, r)
	if err == nil || !strings.HasPrefix(err.Error(), "cost: write taken: ") {
		t.Errorf("writing over a directory: %v", err)
	}
	// Gone by the time WriteBounded answers, not some time after.
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
	if info, err := os.Stat(p); err != nil || info.Mode().Perm() != 0o644 {
		t.Errorf("the report's mode: %v %v", info, err)
	}
}

func fixture(t testing.TB) string {
	t.Helper()
	return "../examples/costreport/testdata/evidence"
}

func TestSummarize_TheSavedEvidenceFixture(t *testing.T) {
	s, err := Summarize(fixture(t))
	if err != nil {
		t.Fatal(err)
	}
	l4 := 0.43 / 3600
	want := Spend{Useful: 1800*l4 + 2400*1.49/3600, Rejected: 95 * 0.69 / 3600, Retested: 1700 * l4}
	want.Total = want.Useful + want.Rejected + want.Retested
	if !cmp.Equal(want, s.Spend, cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-9 })) {
		t.Errorf("spend %+v, want %+v", s.Spend, want)
	}
	if s.Runs != 7 || s.Automatic != 6 || s.Manual != 1 || s.ReusedGates != 1 || s.RejectedCandidates != 1 {
		t.Errorf("%+v", s)
	}
	if len(s.RepeatedRefs) != 1 || s.RepeatedRefs[0].Ref != strings.Repeat("a", 40) || s.RepeatedRefs[0].PaidRuns != 2 {
		t.Errorf("repeated %+v", s.RepeatedRefs)
	}
	wantUnknown := Unknowns{NoCostReport: 1, NoLogs: 1, UnknownWindow: 1, NoDeletionEvidence: 1}
	if s.Unknown != wantUnknown {
		t.Errorf("unknowns %+v, want %+v", s.Unknown, wantUnknown)
	}
	if md := s.Markdown(); !strings.Contains(md, "not invoices") || !strings.Contains(md, "| re-tested refs | 0.20 |") {
		t.Errorf("%s", md)
	}
}

func TestSVG_WellFormedAndItsBarsSumToTheJSONTotals(t *testing.T) {
	s, err := Summarize(fixture(t))
	if err != nil {
		t.Fatal(err)
	}
	svg := s.SVG()
	dec := xml.NewDecoder(strings.NewReader(svg))
	sum := map[string]float64{}
	rects := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, svg)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "rect" {
			var series string
			var usd float64
			for _, a := range se.Attr {
				switch a.Name.Local {
				case "data-series":
					series = a.Value
				case "data-usd":
					usd, _ = strconv.ParseFloat(a.Value, 64)
					rects++
				}
			}
			switch series {
			case "rejected candidates", "re-tested refs":
				sum[series] += usd
			case "":
			default:
				sum["useful"] += usd
			}
		}
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-5 }
	if rects == 0 || !near(sum["useful"], s.Spend.Useful) || !near(sum["rejected candidates"], s.Spend.Rejected) || !near(sum["re-tested refs"], s.Spend.Retested) {
		t.Errorf("bars %v, JSON %+v", sum, s.Spend)
	}
}

// fakeGitHub serves one run with two attempts, logs and two artifacts (one
// small cost report, one large test archive that must not be downloaded).
func fakeGitHub(t *testing.T) (*github.Client, map[string]int) {
	t.Helper()
	hits := map[string]int{}
	mux := http.NewServeMux()
	var base string
	zipOf := func(name, body string) []byte {
		var b bytes.Buffer
		z := zip.NewWriter(&b)
		w, _ := z.Create(name)
		w.Write([]byte(body))
		z.Close()
		return b.Bytes()
	}
	mux.HandleFunc("GET /repos/o/r/actions/workflows/gpu.yml/runs", func(w http.ResponseWriter, r *http.Request) {
		hits["list"]++
		if r.URL.Query().Get("created") != "2026-10-06..2026-10-09" {
			t.Errorf("created %q", r.URL.Query().Get("created"))
		}
		fmt.Fprint(w, `{"total_count":1,"workflow_runs":[{"id":7,"run_attempt":2,"event":"workflow_run","head_sha":"abc","status":"completed","conclusion":"success","run_started_at":"2026-10-07T10:00:00Z"}]}`)
	})
	mux.HandleFunc("GET /repos/o/r/actions/runs/7/attempts/1", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"id":7,"run_attempt":1,"event":"workflow_run","head_sha":"abc","status":"completed","conclusion":"failure","run_started_at":"2026-10-07T09:00:00Z"}`)
	})
	for _, a := range []string{"1", "2"} {
		mux.HandleFunc("GET /repos/o/r/actions/runs/7/attempts/"+a+"/logs", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, base+"/blob/logs"+a, http.StatusFound)
		})
	}
	mux.HandleFunc("GET /blob/{name}", func(w http.ResponseWriter, r *http.Request) {
		hits[r.PathValue("name")]++
		if r.Header.Get("Authorization") != "" {
			hits["authorized blob"]++
		}
		switch r.PathValue("name") {
		case "cost":
			w.Write(zipOf("cost-report.json", `{"version":1,"pod_id":"p","window":{"known":false},"stages":[],"rejected_attempts":[],"notes":[]}`))
		case "reap":
			w.Write(zipOf("reap-decisions.json", `{"decisions":[{"pod_id":"p","action":"deleted","estimated_cost":0.5},{"pod_id":"q","action":"none"}]}`))
		default:
			w.Write(zipOf("log.txt", "log"))
		}
	})
	mux.HandleFunc("GET /repos/o/r/actions/runs/7/artifacts", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"total_count":2,"artifacts":[{"id":1,"name":"cost-report-2","size_in_bytes":900},{"id":2,"name":"cuda-tests","size_in_bytes":900000000}]}`)
	})
	mux.HandleFunc("GET /repos/o/r/actions/artifacts/1/zip", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, base+"/blob/cost", http.StatusFound)
	})
	mux.HandleFunc("GET /repos/o/r/actions/artifacts/2/zip", func(w http.ResponseWriter, r *http.Request) {
		hits["archive"]++
	})
	// The orphan reaper's workflow: one sweep with its decisions artifact.
	mux.HandleFunc("GET /repos/o/r/actions/workflows/reap.yml/runs", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"total_count":1,"workflow_runs":[{"id":9,"run_attempt":1,"event":"schedule","run_started_at":"2026-10-07T12:00:00Z"}]}`)
	})
	mux.HandleFunc("GET /repos/o/r/actions/runs/9/artifacts", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"total_count":1,"artifacts":[{"id":3,"name":"runpod-reap-decisions-9-1","size_in_bytes":400}]}`)
	})
	mux.HandleFunc("GET /repos/o/r/actions/artifacts/3/zip", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, base+"/blob/reap", http.StatusFound)
	})
	c, srv := githubtest.New(t, mux)
	base = srv.URL
	return c.WithAuthToken("ghs_TOKEN-FOR-GITHUB-ONLY"), hits
}

// Signed URLs get no GitHub token: the log and artifact downloads GitHub
// redirects to blob storage are fetched with a plain client, so the token
// never leaves GitHub (and blob storage, which refuses such requests,
// serves them).
func TestCollect_SignedURLsGetNoGitHubToken(t *testing.T) {
	c, hits := fakeGitHub(t)
	since, until := *ts("2026-10-06T00:00:00Z"), *ts("2026-10-09T00:00:00Z")
	if err := Collect(context.Background(), c, "o/r", "gpu.yml", since, until, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if err := CollectReaper(context.Background(), c, "o/r", "reap.yml", since, until, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if hits["logs1"] == 0 || hits["cost"] == 0 || hits["reap"] == 0 {
		t.Fatalf("downloads %v: the signed URLs were not fetched", hits)
	}
	if n := hits["authorized blob"]; n != 0 {
		t.Errorf("%d downloads from signed URLs carried the GitHub token", n)
	}
}

// Seed 001: "Independent reaper decision artifacts provide the separate
// recovery record when normal workflow logs cannot confirm deletion."
// CollectReaper saves them beside the GPU workflow's evidence, and the
// summary counts the reaper's deletions and the one that recovers run 7's
// report, which had no deletion evidence.
func TestCollectReaper_SavesTheRecoveryRecordBesideTheRuns(t *testing.T) {
	c, hits := fakeGitHub(t)
	dir := t.TempDir()
	since, until := *ts("2026-10-06T00:00:00Z"), *ts("2026-10-09T00:00:00Z")
	if err := Collect(context.Background(), c, "o/r", "gpu.yml", since, until, dir); err != nil {
		t.Fatal(err)
	}
	for range 2 { // resumable: the second pass downloads nothing
		if err := CollectReaper(context.Background(), c, "o/r", "reap.yml", since, until, dir); err != nil {
			t.Fatal(err)
		}
	}
	if hits["reap"] != 1 {
		t.Errorf("the decisions were downloaded %d times, want once", hits["reap"])
	}
	if _, err := os.Stat(filepath.Join(dir, "reaper", "9-1", "reap-decisions.json")); err != nil {
		t.Fatal(err)
	}
	s, err := Summarize(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := (ReaperSpend{Sweeps: 1, Deleted: 1, EstimatedCost: 0.5, Recovered: 1}); s.Reaper == nil || *s.Reaper != want {
		t.Errorf("reaper %+v, want %+v", s.Reaper, want)
	}
	if err := CollectReaper(context.Background(), c, "o/r", "reap.yml", until, since, dir); err == nil {
		t.Error("until before since must be refused")
	}
	if err := CollectReaper(context.Background(), c, "nope", "reap.yml", since, until, dir); err == nil {
		t.Error("a repository without owner must be refused")
	}
}

// Seed 001: "The existing keep_failed_pods dispatch input still retains
// rejected pods for manual dashboard inspection and continues billing." A
// debug pod the reaper keeps (rule retained) and never deletes is counted
// as still billing at its largest estimate; one it later deleted is
// counted once, with the deletion's estimate, which includes the
// retention.
func TestReaperSpend_RetainedDebugPodsKeepBillingUntilDeleted(t *testing.T) {
	cost := func(v float64) *float64 { return &v }
	type dec = struct {
		PodID         string   `json:"pod_id"`
		Rule          string   `json:"rule"`
		Action        string   `json:"action"`
		EstimatedCost *float64 `json:"estimated_cost"`
	}
	docs := []reaperDoc{
		{Decisions: []dec{{"kept", "retained", "none", cost(0.4)}, {"later", "retained", "none", cost(0.3)}, {"unpriced", "retained", "none", nil}}},
		// A later sweep: the estimates grew; "later" was reclaimed when its
		// retention record expired.
		{Decisions: []dec{{"kept", "retained", "none", cost(0.9)}, {"later", "run-completed", "deleted", cost(0.8)}}},
		// An older sweep's document read last: the largest estimate wins.
		{Decisions: []dec{{"kept", "retained", "none", cost(0.1)}, {"unpriced", "retained", "none", nil}}},
	}
	got := reaperSpend(docs, nil)
	want := ReaperSpend{Sweeps: 3, Deleted: 1, EstimatedCost: 0.8, Retained: 2, RetainedCost: 0.9, RetainedUnknown: 1}
	if *got != want {
		t.Errorf("%+v, want %+v", *got, want)
	}
	md := Summary{Reaper: got}.Markdown()
	if !strings.Contains(md, "Retained for inspection and not yet deleted when last swept: 2 debug pods, still billing, an estimated USD 0.90 so far (1 with an unknown start)") {
		t.Errorf("the Markdown summary does not show the retained pods:\n%s", md)
	}
	if md := (Summary{Reaper: &ReaperSpend{Sweeps: 1}}).Markdown(); strings.Contains(md, "Retained for inspection") {
		t.Errorf("a line for no retained pod:\n%s", md)
	}
}

func TestCollect_EveryAttemptLogsAndOnlySmallCostArtifactsResumably(t *testing.T) {
	c, hits := fakeGitHub(t)
	dir := t.TempDir()
	since, until := *ts("2026-10-06T00:00:00Z"), *ts("2026-10-09T00:00:00Z")
	if err := Collect(context.Background(), c, "o/r", "gpu.yml", since, until, dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"runs/7-1/run.json", "runs/7-1/logs.zip", "runs/7-2/run.json", "runs/7-2/logs.zip", "runs/7-2/cost/cost-report.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("missing %s", f)
		}
	}
	if hits["archive"] != 0 {
		t.Error("a large test archive was downloaded")
	}
	before := hits["logs1"] + hits["logs2"] + hits["cost"]
	if err := Collect(context.Background(), c, "o/r", "gpu.yml", since, until, dir); err != nil {
		t.Fatal(err)
	}
	if after := hits["logs1"] + hits["logs2"] + hits["cost"]; after != before {
		t.Errorf("a second collect downloaded again (%d -> %d)", before, after)
	}
	s, err := Summarize(dir)
	if err != nil || s.Runs != 2 || s.Unknown.NoCostReport != 1 {
		t.Errorf("%+v %v", s, err)
	}
}

// A history longer than the listing bound is an error, never a shorter
// history that a summary would take for the whole: the run listing stops
// at ghpage's bound (100 pages) and says so.
func TestCollect_AListingPastTheBoundIsAnErrorNotACut(t *testing.T) {
	mux := http.NewServeMux()
	var base string
	pages := 0
	mux.HandleFunc("GET /repos/o/r/actions/workflows/gpu.yml/runs", func(w http.ResponseWriter, r *http.Request) {
		pages++
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		if page <= ghpage.MaxPages {
			w.Header().Set("Link", fmt.Sprintf(`<%s/repos/o/r/actions/workflows/gpu.yml/runs?page=%d>; rel="next"`, base, max(page, 1)+1))
		}
		fmt.Fprint(w, `{"total_count":0,"workflow_runs":[]}`)
	})
	c, srv := githubtest.New(t, mux)
	base = srv.URL
	since, until := *ts("2026-10-06T00:00:00Z"), *ts("2026-10-09T00:00:00Z")
	err := Collect(context.Background(), c, "o/r", "gpu.yml", since, until, t.TempDir())
	if !errors.Is(err, ghpage.ErrTooManyPages) {
		t.Errorf("err = %v, want ErrTooManyPages for %d pages", err, ghpage.MaxPages+1)
	}
	if pages != ghpage.MaxPages {
		t.Errorf("%d pages read, want the bound, %d", pages, ghpage.MaxPages)
	}
}

// A run's cost artifact is saved wherever it is listed: the artifact
// listing is read over every page, not only the first.
func TestCollect_ACostArtifactOnALaterPageIsSaved(t *testing.T) {
	mux := http.NewServeMux()
	var base string
	mux.HandleFunc("GET /repos/o/r/actions/workflows/gpu.yml/runs", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"total_count":1,"workflow_runs":[{"id":7,"run_attempt":1,"event":"workflow_run","run_started_at":"2026-10-07T10:00:00Z"}]}`)
	})
	mux.HandleFunc("GET /repos/o/r/actions/runs/7/attempts/1/logs", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, base+"/blob/logs", http.StatusFound)
	})
	mux.HandleFunc("GET /repos/o/r/actions/runs/7/artifacts", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("page") != "2" {
			w.Header().Set("Link", fmt.Sprintf(`<%s/repos/o/r/actions/runs/7/artifacts?page=2>; rel="next"`, base))
			fmt.Fprint(w, `{"total_count":2,"artifacts":[{"id":2,"name":"runpod-retain-7-1-p","size_in_bytes":900}]}`)
			return
		}
		fmt.Fprint(w, `{"total_count":2,"artifacts":[{"id":1,"name":"cost-report-1","size_in_bytes":900}]}`)
	})
	mux.HandleFunc("GET /repos/o/r/actions/artifacts/1/zip", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, base+"/blob/cost", http.StatusFound)
	})
	mux.HandleFunc("GET /blob/{name}", func(w http.ResponseWriter, r *http.Request) {
		var b bytes.Buffer
		z := zip.NewWriter(&b)
		f, _ := z.Create(r.PathValue("name") + "-report.json")
		f.Write([]byte(`{"version":1}`))
		z.Close()
		w.Write(b.Bytes())
	})
	c, srv := githubtest.New(t, mux)
	base = srv.URL
	dir := t.TempDir()
	since, until := *ts("2026-10-06T00:00:00Z"), *ts("2026-10-09T00:00:00Z")
	if err := Collect(context.Background(), c, "o/r", "gpu.yml", since, until, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "runs/7-1/cost/cost-report.json")); err != nil {
		t.Errorf("the cost artifact on page 2 was not saved: %v", err)
	}
}

// BenchmarkSummarize reads a realistic history (100 saved runs) and the
// 100x case (10,000).
func BenchmarkSummarize(b *testing.B) {
	for _, n := range []int{100, 10_000} {
		b.Run(fmt.Sprintf("runs=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			for i := range n {
				d := filepath.Join(dir, "runs", fmt.Sprintf("%d-1", i))
				os.MkdirAll(filepath.Join(d, "cost"), 0o755)
				run, _ := json.Marshal(RunRecord{ID: int64(i), Attempt: 1, Event: "workflow_run", CreatedAt: time.Date(2026, 10, 1+i%28, 0, 0, 0, 0, time.UTC)})
				os.WriteFile(filepath.Join(d, "run.json"), run, 0o644)
				w, _ := PaidWindow(PodRecord{StartedAt: ts("2026-10-06T10:00:00Z"), ListPrice: 0.43}, *ts("2026-10-06T10:30:00Z"))
				rep, _ := json.Marshal(Report{Version: 1, TestedRef: fmt.Sprintf("%040d", i%(n/2+1)), GateKind: "paid", PodID: "p", GPUTypeID: []string{"NVIDIA L4", "NVIDIA A100-SXM4-80GB"}[i%2],
					DeletedAt: ts("2026-10-06T10:30:00Z"), Window: w, Stages: Stages(w, Marks{}), Rejected: []Attempt{{GPUTypeID: "NVIDIA GeForce RTX 4090", EstimatedCost: 0.01}}})
				os.WriteFile(filepath.Join(d, "cost", "cost-report.json"), rep, 0o644)
			}
			b.ResetTimer()
			for b.Loop() {
				if _, err := Summarize(dir); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The adoption workflow names its cost artifact the way Collect files it:
// cost-report-<run attempt>, so a re-run's report lands under its own
// attempt instead of the last one.
func TestTheAdoptionWorkflowNamesItsCostArtifactPerAttempt(t *testing.T) {
	wf := workflowtest.Read(t, "runpod-gpu-execute.yml") // the paid lifecycle, cleanup included
	found := 0
	for _, job := range wf.Jobs {
		for _, s := range job.Steps {
			if strings.HasPrefix(s.Uses, "actions/upload-artifact@") && strings.HasSuffix(s.With["path"], "cost-report.json") {
				found++
				if want := CostArtifactPrefix + "-${{ github.run_attempt }}"; s.With["name"] != want {
					t.Errorf("the cost artifact is named %q, want %q", s.With["name"], want)
				}
			}
		}
	}
	if found != 1 {
		t.Errorf("%d cost artifact uploads, want 1", found)
	}
}

// The change-aware CI seed: "the hosted cleanup job emits a best-effort
// JSON artifact with the tested ref, archive/cuTENSOR/CUDA cache-hit
// observations". The gate hands the hosted preparation's restore outputs
// to the lifecycle, whose cleanup writes them into the report.
func TestTheCostReportCarriesTheHostedPreparationsCacheObservations(t *testing.T) {
	gate, lifecycle := workflowtest.Read(t, "runpod-gpu-test.yml"), workflowtest.Read(t, "runpod-gpu-execute.yml")
	passed := gate.Jobs["execute"].With["cache_observations"]
	// The archive and the toolkit: each restore's cache-hit is a job output.
	prep := gate.Jobs["cuda-archive"]
	restores := 0
	for _, s := range prep.Steps {
		if !strings.HasPrefix(s.Uses, "actions/cache/restore@") {
			continue
		}
		restores++
		output := ""
		for name, v := range prep.Outputs {
			if v == "${{ steps."+s.ID+".outputs.cache-hit }}" {
				output = name
			}
		}
		if output == "" || !strings.Contains(passed, "=${{ needs.cuda-archive.outputs."+output+" }}") {
			t.Errorf("the cache-hit of restore %s (output %q) does not reach the lifecycle: %q", s.ID, output, passed)
		}
	}
	if restores != 2 {
		t.Errorf("cuda-archive restores %d caches, want the archive and the toolkit", restores)
	}
	// The runtime trees, one matrix cell per tier: each cell writes only
	// its own output (a shared one would be last-writer-wins).
	runtime := gate.Jobs["cuda-runtime"]
	for _, tier := range []string{"12_6", "12_8"} {
		out := "runtime_" + tier + "_cache_hit"
		if runtime.Outputs[out] != "${{ steps.observed.outputs.cache_hit_"+tier+" }}" || !strings.Contains(passed, "=${{ needs.cuda-runtime.outputs."+out+" }}") {
			t.Errorf("the %s runtime tree's cache-hit does not reach the lifecycle: output %q, passed %q", tier, runtime.Outputs[out], passed)
		}
	}
	observed := runtime.Step(t, "observed", func(s workflowtest.Step) bool { return s.ID == "observed" })
	r := workflowtest.NewRunner(t)
	for cuda, hit := range map[string]string{"12.6": "true", "12.8": ""} {
		res := r.Run(t, observed, map[string]string{"CUDA": cuda, "HIT": hit})
		if want := "cache_hit_" + strings.ReplaceAll(cuda, ".", "_") + "=" + hit + "\n"; res.Code != 0 || res.Outputs != want {
			t.Errorf("the %s cell writes %q, want %q", cuda, res.Outputs, want)
		}
	}
	// What the expressions expand to when every restore ran, and when none did.
	expand := regexp.MustCompile(`\$\{\{[^}]*\}\}`)
	for _, v := range []string{"true", ""} {
		if _, err := ParseCacheObservations(expand.ReplaceAllString(passed, v)); err != nil {
			t.Errorf("the expanded observations do not parse: %v", err)
		}
	}
	// The lifecycle adds the paid side's own observation: whether the pod
	// used its archive-cache restore.
	const podArchive = "pod-archive=${{ needs.gpu-tests.outputs.archive_cache_hit }}"
	if out := lifecycle.Jobs["gpu-tests"].Outputs["archive_cache_hit"]; out != "${{ steps.cached.outputs.archive }}" {
		t.Errorf("gpu-tests' archive_cache_hit output is %q, want the pod's own decision", out)
	}
	wired := false
	for _, s := range lifecycle.Jobs["cleanup"].Steps {
		if s.With["step"] != "cleanup" {
			continue
		}
		wired = s.With["cache-observations"] == "${{ inputs.cache_observations }},"+podArchive
		for _, v := range []string{"true", ""} {
			for _, hosted := range []string{passed, ""} { // a dispatch without observations
				all := strings.Replace(s.With["cache-observations"], "${{ inputs.cache_observations }}", hosted, 1)
				obs, err := ParseCacheObservations(expand.ReplaceAllString(all, v))
				if _, ok := obs["pod-archive"]; err != nil || !ok {
					t.Errorf("the lifecycle's observations %q do not parse with a pod-archive entry: %v", all, err)
				}
			}
		}
	}
	if !wired {
		t.Error("the lifecycle's cleanup does not pass the hosted and the pod's observations to the report")
	}
}

// FuzzReaperSpend feeds the summary arbitrary reaper decision documents
// (JSON records from artifacts): it never panics, counts each pod once,
// and every retained pod is either priced or counted unknown.
func FuzzReaperSpend(f *testing.F) {
	f.Add([]byte(`{"decisions":[{"pod_id":"p","rule":"retained","action":"none","estimated_cost":0.4},{"pod_id":"p","rule":"run-completed","action":"deleted","estimated_cost":0.9}]}`))
	f.Add([]byte(`{"decisions":[{"pod_id":"q","rule":"retained","action":"none"},{"pod_id":"r","action":"delete-failed"}]}`))
	f.Add([]byte(`{"decisions":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var d reaperDoc
		if json.Unmarshal(data, &d) != nil {
			return
		}
		pods := map[string]bool{}
		for _, dec := range d.Decisions {
			pods[dec.PodID] = true
		}
		rs := reaperSpend([]reaperDoc{d, d}, nil) // the same sweep saved twice
		if rs.Deleted+rs.Retained > len(pods) || rs.RetainedUnknown > rs.Retained || rs.UnknownCost > rs.Deleted {
			t.Fatalf("%+v from %d pods", *rs, len(pods))
		}
	})
}

// Every dollar is accounted for: whatever marks a run leaves (missing, out
// of order, before the start or after the deletion), the known stages are
// never negative and, with the unassigned overhead, add up to the paid
// window in seconds and in cost.
func FuzzStages_AlwaysReconcileToThePaidWindow(f *testing.F) {
	f.Add(uint32(1800), int32(120), int32(300), int32(1620), uint8(7), uint16(36))
	f.Add(uint32(1800), int32(1200), int32(600), int32(1500), uint8(7), uint16(36))
	f.Add(uint32(60), int32(-30), int32(90), int32(3600), uint8(5), uint16(0))
	f.Fuzz(func(t *testing.T, length uint32, job, tests, ended int32, present uint8, cents uint16) {
		start := time.Date(2026, 10, 6, 10, 0, 0, 0, time.UTC)
		w, err := PaidWindow(PodRecord{ID: "pod1", StartedAt: &start, ListPrice: float64(cents) / 100}, start.Add(time.Duration(length)*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		mark := func(bit uint8, ms int32) *time.Time {
			if present&bit == 0 {
				return nil
			}
			m := start.Add(time.Duration(ms) * time.Millisecond)
			return &m
		}
		stages := Stages(w, Marks{JobStarted: mark(1, job), TestsStarted: mark(2, tests), TestsEnded: mark(4, ended)})
		if len(stages) != 5 || stages[4].Name != StageUnassigned || stages[4].Seconds == nil {
			t.Fatalf("stages %+v: want four stages and a known unassigned overhead", stages)
		}
		seconds, cost := 0.0, 0.0
		for _, s := range stages {
			if s.Seconds == nil {
				continue
			}
			if *s.Seconds < 0 {
				t.Fatalf("%s is %v s", s.Name, *s.Seconds)
			}
			seconds += *s.Seconds
			if w.CostKnown() {
				if s.Cost == nil {
					t.Fatalf("%s has seconds but no cost at a known price", s.Name)
				}
				cost += *s.Cost
			}
		}
		if math.Abs(seconds-w.Seconds) > 1e-6 {
			t.Errorf("stages sum to %v s, the window is %v s", seconds, w.Seconds)
		}
		if w.CostKnown() && math.Abs(cost-w.Cost) > 1e-9 {
			t.Errorf("stages cost $%v, the window $%v", cost, w.Cost)
		}
	})
}

// A failed download from a signed URL never prints the signature.
func TestCollect_ASignedURLsSignatureIsNeverPrinted(t *testing.T) {
	_, err := fetch(context.Background(), "http://127.0.0.1:1/blob?sig=SIGNATURE-0123456789&se=2026", 10)
	if err == nil || strings.Contains(err.Error(), "SIGNATURE") {
		t.Errorf("err = %v", err)
	}
}
