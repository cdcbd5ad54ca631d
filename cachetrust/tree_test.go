package cachetrust

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// runtimeTree is a minimal CUDA runtime tree as the seed stages it: one
// physical copy of each library behind its soname links.
func runtimeTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"lib", "lib64", "include"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	write := func(p, data string) {
		if err := os.WriteFile(filepath.Join(root, p), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, p string) {
		if err := os.Symlink(target, filepath.Join(root, p)); err != nil {
			t.Fatal(err)
		}
	}
	write("lib/libcutensor.so.2.1.0", "\x7fELF cutensor")
	link("libcutensor.so.2.1.0", "lib/libcutensor.so.2")
	link("libcutensor.so.2", "lib/libcutensor.so")
	write("lib64/libcufft.so.11.3.3.83", "\x7fELF cufft")
	link("libcufft.so.11.3.3.83", "lib64/libcufft.so.11")
	write("include/cuda_fp16.h", "#pragma once")
	link("lib64", "lib64-alias") // the include/lib64 aliases are links too
	return root
}

var seedRequired = []string{"lib/libcutensor.so.2", "lib64/libcufft.so*"}

// seedExcluded is what the seed's installers leave out of a runtime tree.
var seedExcluded = []string{"**/*.a", "bin/**", "**/stubs/**", "**/libcutensorMg*"}

// The cache-trust seed: "The installer requires a nonempty, resolvable
// libcutensor.so.2", "Hosted preparation rejects and rebuilds restored
// trees missing cuFFT", and (the change-aware seed) "A tree is marked
// complete only after its library links resolve".
func TestCheckTree_ARestoredTreeIsCompleteOnlyWhenItsLibrariesResolve(t *testing.T) {
	root := runtimeTree(t)
	rep, err := CheckTree(root, TreeRules{Required: seedRequired, Excluded: seedExcluded})
	if err != nil {
		t.Fatalf("a complete tree: %v", err)
	}
	if rep.Files != 3 || rep.Symlinks != 4 || rep.Required["lib/libcutensor.so.2"] != 1 || rep.Required["lib64/libcufft.so*"] != 2 {
		t.Errorf("report %+v", rep)
	}
	for name, tc := range map[string]struct {
		break_ func(root string)
		want   []string
	}{
		"cuFFT missing": {func(r string) {
			os.Remove(filepath.Join(r, "lib64/libcufft.so.11"))
			os.Remove(filepath.Join(r, "lib64/libcufft.so.11.3.3.83"))
		}, []string{"no non-empty file matches the required lib64/libcufft.so*"}},
		"an empty cuTENSOR": {func(r string) { os.WriteFile(filepath.Join(r, "lib/libcutensor.so.2.1.0"), nil, 0o644) },
			[]string{"required lib/libcutensor.so.2 (lib/libcutensor.so.2) is empty"}},
		"a dangling soname link": {func(r string) { os.Remove(filepath.Join(r, "lib/libcutensor.so.2.1.0")) },
			[]string{"lib/libcutensor.so.2 -> libcutensor.so.2.1.0 does not resolve", "no non-empty file matches the required lib/libcutensor.so.2"}},
		// Relocated: restored at another path, or staged for the pod.
		"an absolute link inside the tree": {func(r string) {
			os.Remove(filepath.Join(r, "lib/libcutensor.so.2"))
			os.Symlink(filepath.Join(r, "lib/libcutensor.so.2.1.0"), filepath.Join(r, "lib/libcutensor.so.2"))
		}, []string{"lib/libcutensor.so.2 -> ", "is an absolute link", "make it relative"}},
		"a link out of the tree": {func(r string) {
			outside := filepath.Join(t.TempDir(), "libcufft.so.11.3.3.83")
			os.WriteFile(outside, []byte("\x7fELF foreign"), 0o644)
			os.Remove(filepath.Join(r, "lib64/libcufft.so.11"))
			os.Symlink(outside, filepath.Join(r, "lib64/libcufft.so.11"))
		}, []string{"lib64/libcufft.so.11 resolves to", "outside the tree"}},
	} {
		t.Run(name, func(t *testing.T) {
			root := runtimeTree(t)
			tc.break_(root)
			_, err := CheckTree(root, TreeRules{Required: seedRequired, Excluded: seedExcluded})
			if !errors.Is(err, ErrIncompleteTree) {
				t.Fatalf("err = %v, want ErrIncompleteTree", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error lacks %q:\n%v", w, err)
				}
			}
		})
	}
	if _, err := CheckTree(filepath.Join(root, "missing"), TreeRules{}); !errors.Is(err, ErrIncompleteTree) {
		t.Errorf("a missing tree: %v", err)
	}
	if _, err := CheckTree(root, TreeRules{Required: []string{"lib/[.so"}}); !errors.Is(err, ErrIncompleteTree) || !strings.Contains(err.Error(), "not a valid glob") {
		t.Errorf("a bad pattern: %v", err)
	}
}

// The cache-trust seed: "Static archives and independent multi-GPU/MPI
// providers are excluded at installation, before cache publication;
// restoring them just to discard them wastes cache quota and transfer
// bytes"; the change-aware seed: runtime trees hold "shared runtime
// libraries ... Compiler binaries, static libraries and driver stubs are
// excluded." A tree carrying any of them is refused, each named once (an
// excluded directory, not each file in it).
func TestCheckTree_CompilerBinariesStaticLibrariesStubsAndMultiGPUProvidersAreExcluded(t *testing.T) {
	root := runtimeTree(t)
	os.MkdirAll(filepath.Join(root, "bin"), 0o755)
	os.WriteFile(filepath.Join(root, "bin", "nvcc"), []byte("\x7fELF nvcc"), 0o755)
	os.WriteFile(filepath.Join(root, "bin", "ptxas"), []byte("\x7fELF ptxas"), 0o755)
	os.WriteFile(filepath.Join(root, "lib64", "libcudart_static.a"), []byte("!<arch>"), 0o644)
	os.MkdirAll(filepath.Join(root, "lib64", "stubs"), 0o755)
	os.WriteFile(filepath.Join(root, "lib64", "stubs", "libcuda.so"), []byte("\x7fELF stub"), 0o644)
	os.WriteFile(filepath.Join(root, "lib", "libcutensorMg.so.2.1.0"), []byte("\x7fELF mg"), 0o644)
	os.Symlink("libcutensorMg.so.2.1.0", filepath.Join(root, "lib", "libcutensorMg.so.2"))
	_, err := CheckTree(root, TreeRules{Required: seedRequired, Excluded: seedExcluded})
	if !errors.Is(err, ErrIncompleteTree) {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{
		"bin matches the excluded bin/**", "lib64/libcudart_static.a matches the excluded **/*.a",
		"lib64/stubs matches the excluded **/stubs/**", "lib/libcutensorMg.so.2.1.0 matches the excluded **/libcutensorMg*",
		"lib/libcutensorMg.so.2 matches the excluded **/libcutensorMg*",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "bin/nvcc") || strings.Contains(err.Error(), "stubs/libcuda.so") {
		t.Errorf("an excluded directory is reported file by file:\n%v", err)
	}
	if _, err := CheckTree(runtimeTree(t), TreeRules{Excluded: []string{"lib/[.a"}}); !errors.Is(err, ErrIncompleteTree) || !strings.Contains(err.Error(), `excluded pattern "lib/[.a" is not a valid glob`) {
		t.Errorf("a bad excluded pattern: %v", err)
	}
}

// The change-aware seed: "Soname links and the include/lib64 aliases
// remain links to one physical copy." A library stored twice (an alias
// directory copied, a soname link dereferenced) is reported, not refused:
// the tree works, but every copy is cached and transferred again.
// TestCheckTree_AnEmptyTreeIsNeverComplete: with nothing required (a
// caller that forgot its -require), an empty directory, or one holding
// only directories, was "complete".
func TestCheckTree_AnEmptyTreeIsNeverComplete(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "lib64"), 0o755)
	if _, err := CheckTree(root, TreeRules{}); !errors.Is(err, ErrIncompleteTree) || !strings.Contains(err.Error(), "holds no file") {
		t.Errorf("err = %v", err)
	}
	if _, err := CheckTree(runtimeTree(t), TreeRules{}); err != nil {
		t.Errorf("a tree with files and nothing required: %v", err)
	}
}

func TestCheckTree_ReportsALibraryStoredTwiceInsteadOfLinked(t *testing.T) {
	root := runtimeTree(t)
	rep, err := CheckTree(root, TreeRules{Required: seedRequired})
	if err != nil || len(rep.Copies) != 0 {
		t.Fatalf("a linked tree: copies %v, %v", rep.Copies, err)
	}
	// A soname link dereferenced into a second file, and an unrelated
	// library of the same size that is not a copy.
	os.Remove(filepath.Join(root, "lib64", "libcufft.so.11"))
	os.WriteFile(filepath.Join(root, "lib64", "libcufft.so.11"), []byte("\x7fELF cufft"), 0o644)
	os.WriteFile(filepath.Join(root, "lib64", "libnvjitlink.so.12"), []byte("\x7fELF other"), 0o644)
	rep, err = CheckTree(root, TreeRules{Required: seedRequired})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"lib64/libcufft.so.11", "lib64/libcufft.so.11.3.3.83"}}
	if diff := cmp.Diff(want, rep.Copies); diff != "" {
		t.Errorf("copies (-want +got):\n%s", diff)
	}
}

// BenchmarkCheckTree checks a runtime tree shaped like the seed's: mostly
// JIT headers, shared libraries behind soname links (64 KiB each here) and
// an include/lib64 alias; the realistic size and 100 times it.
func BenchmarkCheckTree(b *testing.B) {
	for _, size := range []struct {
		name         string
		headers, lib int
	}{{"realistic-300", 280, 20}, {"100x-30000", 28_000, 2_000}} {
		b.Run(size.name, func(b *testing.B) {
			root := b.TempDir()
			for _, d := range []string{"include/crt", "include/cuda/std", "lib"} {
				os.MkdirAll(filepath.Join(root, d), 0o755)
			}
			for i := range size.headers {
				os.WriteFile(filepath.Join(root, "include", []string{"crt", "cuda/std", "."}[i%3], fmt.Sprintf("h%05d.h", i)), []byte("#pragma once\n"), 0o644)
			}
			for i := range size.lib {
				real := fmt.Sprintf("libx%04d.so.12.8.%d", i, i)
				os.WriteFile(filepath.Join(root, "lib", real), make([]byte, 64<<10+i), 0o644)
				os.Symlink(real, filepath.Join(root, "lib", fmt.Sprintf("libx%04d.so.12", i)))
			}
			os.Symlink("lib", filepath.Join(root, "lib64"))
			rules := TreeRules{Required: []string{"lib/libx0000.so.12", "lib64/libx0001.so*"}, Excluded: seedExcluded}
			for b.Loop() {
				if _, err := CheckTree(root, rules); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
