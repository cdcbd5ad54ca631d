package cachetrust_test

import (
	"fmt"
	"testing/fstest"

	"github.com/gpugate/gpugate/cachetrust"
)

func ExampleKey() {
	spec := cachetrust.RustWorkspaceSpec()
	spec.Toolchain = "rustc 1.95.0"
	repo := fstest.MapFS{
		"Cargo.lock":               {Data: []byte("# lock")},
		"src/lib.rs":               {Data: []byte("pub fn f() {}")},
		".github/workflows/ci.yml": {Data: []byte("on: push")}, // excluded
	}
	before, _ := cachetrust.Key(repo, spec)
	repo["src/lib.rs"] = &fstest.MapFile{Data: []byte("pub fn f() { todo!() }")}
	after, _ := cachetrust.Key(repo, spec)
	fmt.Println(len(before.Records), before.Key != after.Key)
	for _, d := range cachetrust.Explain(before, after) {
		fmt.Println(d.Path, d.Change)
	}
	// Output:
	// 2 true
	// src/lib.rs content changed
}

func ExampleCheckWorkflows() {
	rules, _ := cachetrust.LoadRules(cachetrust.ExampleRules)
	rules.KeyPairs = nil
	wf := []byte(`on:
  workflow_run: {workflows: [ci], types: [in_progress]}
permissions: {contents: read}
jobs:
  cuda-archive:
    runs-on: ubuntu-24.04
    steps:
      - uses: Swatinem/rust-cache@v2
`)
	for _, f := range cachetrust.CheckWorkflows(map[string][]byte{".github/workflows/gpu.yml": wf}, rules) {
		fmt.Println(f)
	}
	// Output:
	// .github/workflows/gpu.yml:8:15: privileged-cache-save: job cuda-archive runs PR-controlled code in a privileged context (workflow_run) and Swatinem/rust-cache saves a cache by default: set save-if: false
}
