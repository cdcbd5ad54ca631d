package cachetrust_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

func ExampleKeyDir() {
	dir, _ := os.MkdirTemp("", "checkout")
	defer os.RemoveAll(dir)
	os.MkdirAll(filepath.Join(dir, "src"), 0o755)
	os.WriteFile(filepath.Join(dir, "Cargo.lock"), []byte("# lock"), 0o644)
	os.WriteFile(filepath.Join(dir, "src/lib.rs"), []byte("pub fn f() {}"), 0o644)
	spec := cachetrust.RustWorkspaceSpec()
	spec.Toolchain = "rustc 1.95.0"
	fast, _ := cachetrust.KeyDir(dir, spec)
	same, _ := cachetrust.Key(os.DirFS(dir), spec)
	fmt.Println(len(fast.Records), fast.Key == same.Key)
	// Output:
	// 2 true
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
	// .github/workflows/gpu.yml:8:15: privileged-cache-save: job cuda-archive runs PR-controlled code in a privileged context (workflow_run) and Swatinem/rust-cache uses the cache and saves it: set save-if: false (it still restores)
}

// A restored CUDA runtime tree whose cuTENSOR soname link dangles (the
// cache held the link but not the library) is rejected, and reinstalled.
func ExampleCheckTree() {
	root, _ := os.MkdirTemp("", "runtime")
	defer os.RemoveAll(root)
	os.MkdirAll(filepath.Join(root, "lib64"), 0o755)
	os.WriteFile(filepath.Join(root, "lib64", "libcufft.so.11.3.3.83"), []byte("\x7fELF"), 0o644)
	os.Symlink("libcufft.so.11.3.3.83", filepath.Join(root, "lib64", "libcufft.so.11"))
	os.Symlink("libcutensor.so.2.1.0", filepath.Join(root, "lib64", "libcutensor.so.2"))

	_, err := cachetrust.CheckTree(root, cachetrust.TreeRules{Required: []string{"lib64/libcutensor.so.2", "lib64/libcufft.so*"}})
	fmt.Println(errors.Is(err, cachetrust.ErrIncompleteTree))
	fmt.Println(err)
	// Output:
	// true
	// cachetrust: incomplete runtime tree: lib64/libcutensor.so.2 -> libcutensor.so.2.1.0 does not resolve
	// cachetrust: incomplete runtime tree: no non-empty file matches the required lib64/libcutensor.so.2
}

// A key spec file pins what no hashed file records: the binding set and
// the PTX toolkit, and the manual version.
func ExampleLoadKeySpec() {
	spec, err := cachetrust.LoadKeySpec([]byte("components: [cudarc-cuda-12080, ptx-12.8]\nversion: v2\n"))
	fmt.Println(spec.Prefix, spec.Components, spec.Version, err)
	_, err = cachetrust.LoadKeySpec([]byte("componets: [ptx-12.8]\n"))
	fmt.Println(errors.Is(err, cachetrust.ErrSpec))
	// Output:
	// cuda-archive [cudarc-cuda-12080 ptx-12.8] v2 <nil>
	// true
}
