package cachetrust

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
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

// The cache-trust seed: "The installer requires a nonempty, resolvable
// libcutensor.so.2", "Hosted preparation rejects and rebuilds restored
// trees missing cuFFT", and (the change-aware seed) "A tree is marked
// complete only after its library links resolve".
func TestCheckTree_ARestoredTreeIsCompleteOnlyWhenItsLibrariesResolve(t *testing.T) {
	root := runtimeTree(t)
	rep, err := CheckTree(root, seedRequired)
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
			_, err := CheckTree(root, seedRequired)
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
	if _, err := CheckTree(filepath.Join(root, "missing"), nil); !errors.Is(err, ErrIncompleteTree) {
		t.Errorf("a missing tree: %v", err)
	}
	if _, err := CheckTree(root, []string{"lib/[.so"}); !errors.Is(err, ErrIncompleteTree) || !strings.Contains(err.Error(), "not a valid glob") {
		t.Errorf("a bad pattern: %v", err)
	}
}
