package changepolicy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestWritePeerCorpus writes the benchmark's policy, set by set
// (sets.json), and changed paths (paths.json) for scripts/bench-peers.sh,
// which matches them with picomatch (the matcher dorny/paths-filter uses)
// beside BenchmarkClassify, and how many paths each set holds as Classify
// matches them (want.json), so that the script can check that both sides
// did the same work and reached the same answer. A path is in a set when
// one of its patterns matches and none of its ! patterns does. It runs
// only when GPUGATE_PEER_CORPUS names the directory to write.
func TestWritePeerCorpus(t *testing.T) {
	dir := os.Getenv("GPUGATE_PEER_CORPUS")
	if dir == "" {
		t.Skip("set GPUGATE_PEER_CORPUS to write the peer benchmark's corpus (scripts/bench-peers.sh does)")
	}
	p := benchPolicy(t, 200)
	type set struct {
		Name  string   `json:"name"`
		Globs []string `json:"globs"`
	}
	var sets []set
	for i, globs := range [][]Glob{p.Code, p.Docs, p.CI, p.GPU.DeviceControl, p.GPU.HostedOnly} {
		sets = append(sets, set{Name: setNames[i]})
		for _, g := range globs {
			sets[i].Globs = append(sets[i].Globs, string(g))
		}
	}
	for _, lane := range p.sortedLanes() {
		sets = append(sets, set{Name: "lanes." + lane + ".triggers"})
		for _, g := range p.Lanes[lane].Triggers {
			sets[len(sets)-1].Globs = append(sets[len(sets)-1].Globs, string(g))
		}
	}
	var paths []string
	want := map[string]int{}
	for _, s := range sets {
		want[s.Name] = 0
	}
	out := make([]setMatch, p.idx.sets())
	for _, c := range benchChanges(100_000) {
		paths = append(paths, c.Path)
		p.idx.match(c.Path, out)
		for i, m := range out {
			if m.member() {
				want[sets[i].Name]++
			}
		}
	}
	for _, s := range sets {
		if want[s.Name] == 0 {
			t.Fatalf("no path of the corpus is in %s: the comparison would not exercise its globs", s.Name)
		}
	}
	for name, v := range map[string]any{"sets.json": sets, "paths.json": paths, "want.json": want} {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
