package changepolicy

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The change-aware seed's fail-safe direction ("Unknown paths always fall
// back to code") does not cover a misspelt glob in a section that relaxes
// or narrows work: a device-control glob that matches nothing lets a change
// to what the paid pod runs skip the GPU gate, a code override that matches
// nothing lets executable code pass as documentation, a lane trigger that
// matches nothing skips the lane. Unmatched names each such glob.
func TestUnmatched_AMisspeltFailOpenGlobIsNamed(t *testing.T) {
	p, err := Load([]byte(`
docs: ["**/*.md", "docs/**"]
ci: [".github/workflows/**", "scripts/ci/**", "scripts/nothing-here/**"]
code: ["docs/tutorial_code/**"]
gpu:
  device_control: ["scripts/ci/runpod_provison.py", "scripts/ci/*_partition.tsv", "!scripts/ci/old_partition.tsv"]
  hosted_only: ["scripts/ci/runpod_cost.py"]
lanes:
  macos: {triggers: [".github/workflows/macos.yml"]}
  windows: {triggers: [".github/workflows/windows.yaml"]}
jobs:
  - {name: "CI GPU gate", runs_for: [gpu]}
`))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"docs/tutorial-code/main.rs", "scripts/ci/runpod_provision.py", "scripts/ci/cuda_partition.tsv",
		"scripts/ci/runpod_cost.py", ".github/workflows/macos.yml", ".github/workflows/windows.yml", "README.md"}
	want := []UnmatchedGlob{
		{"code", "docs/tutorial_code/**"},
		{"gpu.device_control", "scripts/ci/runpod_provison.py"},
		{"lanes.windows.triggers", ".github/workflows/windows.yaml"},
	}
	if diff := cmp.Diff(want, p.Unmatched(files)); diff != "" {
		t.Errorf("unmatched (-want +got):\n%s", diff)
	}
	if got := want[1].String(); got != `gpu.device_control: "scripts/ci/runpod_provison.py"` {
		t.Errorf("String() = %s", got)
	}
}

func TestTrackedFiles_ListsWhatGitTracks(t *testing.T) {
	dir := newRepo(t)
	writeFile(t, dir, "untracked.txt", "x\n")
	got, err := TrackedFiles(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"README.md", "docs/extra.md", "docs/old.md", "src/lib.rs", "src/main_only.rs"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tracked (-want +got):\n%s", diff)
	}
	outside := t.TempDir()
	t.Setenv("GIT_CEILING_DIRECTORIES", filepath.Dir(outside)) // even when the temporary directory is inside a checkout
	if _, err := TrackedFiles(context.Background(), outside); err == nil {
		t.Error("a directory outside any repository must be an error")
	}
}
