package cachetrust

import (
	"errors"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

func TestEmbeds_FindsRustAndGoEmbeds(t *testing.T) {
	fsys := fstest.MapFS{
		"crates/cuda/Cargo.toml":          {Data: []byte("[package]")},
		"crates/cuda/tests/capability.rs": {Data: []byte("const GUIDE: &str = include_str!(\"../../../docs/guides/devices-and-gpu.md\");\nconst K: &[u8] = include_bytes!(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/kernels/add.ptx\"));\n")},
		"tool/main.go":                    {Data: []byte("package main\n\n//go:embed templates/*.tmpl \"with space.txt\"\nvar fs embed.FS\n")},
		"tool/templates/a.tmpl":           {Data: []byte("a")},
		"tool/with space.txt":             {Data: []byte("s")},
	}
	got, err := Embeds(fsys)
	if err != nil {
		t.Fatal(err)
	}
	want := []Embed{
		{Source: "crates/cuda/tests/capability.rs:1", Path: "docs/guides/devices-and-gpu.md", Macro: "include_str"},
		{Source: "crates/cuda/tests/capability.rs:2", Path: "crates/cuda/kernels/add.ptx", Macro: "include_bytes"},
		{Source: "tool/main.go:3", Path: "tool/templates/a.tmpl", Macro: "go:embed"},
		{Source: "tool/main.go:3", Path: "tool/with space.txt", Macro: "go:embed"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// A directory embeds what the go command embeds: without all:, names
// beginning with '.' or '_' are left out, at any depth; with all: they are
// in; a file named directly is in either way.
func TestEmbeds_ADirectoryEmbedsWhatTheGoCommandEmbeds(t *testing.T) {
	files := map[string]string{
		"web/static/app.js":        "a",
		"web/static/.hidden":       "h",
		"web/static/_draft.js":     "d",
		"web/static/img/logo.svg":  "l",
		"web/static/_old/logo.svg": "o",
		"web/static/.git/config":   "g",
	}
	for name, tc := range map[string]struct {
		directive string
		want      []string
	}{
		"a directory":      {"static", []string{"web/static/app.js", "web/static/img/logo.svg"}},
		"all: a directory": {"all:static", []string{"web/static/.git/config", "web/static/.hidden", "web/static/_draft.js", "web/static/_old/logo.svg", "web/static/app.js", "web/static/img/logo.svg"}},
		"a file by name":   {"static/_draft.js", []string{"web/static/_draft.js"}},
	} {
		t.Run(name, func(t *testing.T) {
			fsys := fstest.MapFS{"web/main.go": {Data: []byte("package web\n\n//go:embed " + tc.directive + "\nvar static embed.FS\n")}}
			for p, data := range files {
				fsys[p] = &fstest.MapFile{Data: []byte(data)}
			}
			embeds, err := Embeds(fsys)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range embeds {
				got = append(got, e.Path)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("embedded (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckEmbeds_AnEmbeddedGuideMustBeInTheKey(t *testing.T) {
	embeds := []Embed{{Source: "crates/cuda/tests/capability.rs:1", Path: "docs/guides/devices-and-gpu.md", Macro: "include_str"},
		{Source: "crates/cuda/src/lib.rs:3", Path: "crates/cuda/src/kernel.ptx", Macro: "include_bytes"}}
	s := RustWorkspaceSpec()
	err := CheckEmbeds(s, embeds)
	var ee *EmbedError
	if !errors.As(err, &ee) || len(ee.Missing) != 1 || ee.Missing[0].Path != "docs/guides/devices-and-gpu.md" {
		t.Fatalf("err = %v", err)
	}
	s.Include = append(s.Include, "docs/guides/devices-and-gpu.md")
	if err := CheckEmbeds(s, embeds); err != nil {
		t.Errorf("covered: %v", err)
	}
	if err := CheckEmbeds(s, []Embed{{Path: "../outside.md"}}); err == nil {
		t.Error("a path outside the tree must be refused")
	}
}

func FuzzScanRust(f *testing.F) {
	f.Add([]byte(`include_str!("../a.md"); include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/b"));`))
	f.Add([]byte(`include_str!("\u{41}\"q")`))
	f.Fuzz(func(t *testing.T, src []byte) {
		for _, e := range ScanRust("crate/src/lib.rs", "crate", src) {
			if e.Macro != "include_str" && e.Macro != "include_bytes" {
				t.Fatalf("%+v", e)
			}
		}
	})
}

func FuzzEmbedPatterns(f *testing.F) {
	f.Add(`a/*.tmpl "b c.txt" ` + "`d`")
	f.Fuzz(func(t *testing.T, args string) {
		for _, p := range EmbedPatterns(args) {
			if p == "" && args == "" {
				t.Fatal("empty pattern from empty args")
			}
		}
	})
}
