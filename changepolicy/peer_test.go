package changepolicy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestWritePeerCorpus writes the benchmark's policy globs and changed
// paths for scripts/bench-peers.sh, which matches them with picomatch (the
// matcher dorny/paths-filter uses) beside BenchmarkClassify. It runs only
// when GPUGATE_PEER_CORPUS names the directory to write.
func TestWritePeerCorpus(t *testing.T) {
	dir := os.Getenv("GPUGATE_PEER_CORPUS")
	if dir == "" {
		t.Skip("set GPUGATE_PEER_CORPUS to write the peer benchmark's corpus (scripts/bench-peers.sh does)")
	}
	p := benchPolicy(t, 200)
	var globs []string
	for _, set := range [][]Glob{p.Docs, p.CI, p.Code, p.GPU.DeviceControl, p.GPU.HostedOnly} {
		for _, g := range set {
			globs = append(globs, string(g))
		}
	}
	var paths []string
	for _, c := range benchChanges(100_000) {
		paths = append(paths, c.Path)
	}
	for name, v := range map[string]any{"globs.json": globs, "paths.json": paths} {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
