package cachetrust

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// zizmor's published cache-poisoning fixtures (testdata/zizmor-cache-poisoning,
// see SOURCES.md there) and the lines its own snapshot tests report: every
// finding zizmor makes on them, cachecheck makes too, on the same line, as
// cache-in-release (a job that publishes artifacts uses the cache). Where
// cachecheck reports more, each extra line is an intended difference,
// listed in extraLines with its reason.
var extraLines = map[string]map[int]string{
	// setup-uv 10 leaves the cache off on release events by default;
	// cachecheck does not read versions from comments or refs, so it holds
	// every setup-uv step without enable-cache: false to its cache.
	"issue-2320-repro.yml": {36: "setup-uv version not read", 39: "setup-uv version not read", 47: "setup-uv version not read"},
	// docker/build-push-action with cache-to: type=gha writes the Actions
	// cache (mode=max writes every layer); zizmor lists it only as a
	// publisher.
	"issue-642-repro.yml": {21: "build-push-action cache-to type=gha", 38: "build-push-action cache-to type=gha"},
}

func TestCheckWorkflows_AgreesWithZizmorOnItsCachePoisoningFixtures(t *testing.T) {
	dir := filepath.Join("testdata", "zizmor-cache-poisoning")
	data, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var expected map[string][]int
	if err := json.Unmarshal(data, &expected); err != nil {
		t.Fatal(err)
	}
	var table []string
	agree := 0
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range expected {
			if !yield(k) {
				return
			}
		}
	}) {
		yml, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		path := ".github/workflows/" + filepath.Base(name)
		var got []int
		for _, f := range CheckWorkflows(map[string][]byte{path: yml}, Rules{DefaultBranch: "main"}) {
			if f.Rule == RuleReleaseCache {
				got = append(got, f.Line)
			}
		}
		want := expected[name]
		if want == nil {
			want = []int{}
		}
		if got == nil {
			got = []int{}
		}
		var extra []int
		for _, l := range got {
			if !slices.Contains(want, l) {
				extra = append(extra, l)
			}
		}
		missed := slices.DeleteFunc(slices.Clone(want), func(l int) bool { return slices.Contains(got, l) })
		ok := len(missed) == 0
		for _, l := range extra {
			if _, intended := extraLines[name][l]; !intended {
				ok = false
			}
		}
		if len(extra) != len(extraLines[name]) {
			ok = false
		}
		if ok {
			agree++
		} else {
			t.Errorf("%s: cache-in-release on lines %v, zizmor on %v (missed %v, unexplained extras among %v)", name, got, want, missed, extra)
		}
		table = append(table, fmt.Sprintf("| %s | %v | %v | %v |", name, want, got, ok))
	}
	t.Logf("agreement with zizmor: %d of %d fixtures (every zizmor line found; extras only where intended)\n| fixture | zizmor | cachecheck | agrees |\n|---|---|---|---|\n%s", agree, len(expected), strings.Join(table, "\n"))
}
