package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpugate/gpugate/smoke/tiers"
)

// Made-up checksums in the Packages format.
var (
	sum128 = strings.Repeat("a1", 32)
	sum126 = strings.Repeat("b2", 32)
)

func stanza(name, version, sum string) string {
	return fmt.Sprintf("Package: %s\nVersion: %s\nArchitecture: amd64\nFilename: ./%s_%s_amd64.deb\nSize: 40123456\nSHA256: %s\nDescription: NVRTC\n runtime\n\n", name, version, name, version, sum)
}

func TestPinsTheTableInPlaceFromAGzippedIndexAndStdin(t *testing.T) {
	dir := t.TempDir()
	table := filepath.Join(dir, "nvrtc-tiers.yml")
	os.WriteFile(table, tiers.Example, 0o644)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(stanza("cuda-nvrtc-12-8", "12.8.93-1", sum128)))
	zw.Close()
	index := filepath.Join(dir, "Packages.gz")
	os.WriteFile(index, gz.Bytes(), 0o644)

	var stdout, stderr bytes.Buffer
	code := run([]string{"-tiers", table, "-o", table, index, "-"}, strings.NewReader(stanza("cuda-nvrtc-12-6", "12.6.85-1", sum126)), &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	data, _ := os.ReadFile(table)
	cfg, err := tiers.Load(data)
	if err != nil || cfg.RequirePinned() != nil || cfg.Tiers[0].SHA256 != sum128 || cfg.Tiers[1].SHA256 != sum126 {
		t.Fatalf("the pinned table: %v %v\n%s", err, cfg.RequirePinned(), data)
	}
	if !bytes.HasPrefix(data, []byte("# NVRTC runtime tiers")) || stdout.Len() != 0 {
		t.Errorf("the table lost its comments, or -o also printed it:\n%s", data)
	}
	for _, want := range []string{"full: cuda-nvrtc-12-8 12.8.93-1 sha256 " + sum128 + " (pinned)", "baseline: cuda-nvrtc-12-6 12.6.85-1 sha256 " + sum126 + " (pinned)"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}

func TestWithoutATableItPrintsThePinnedExample(t *testing.T) {
	var stdout, stderr bytes.Buffer
	in := stanza("cuda-nvrtc-12-8", "12.8.93-1", sum128) + stanza("cuda-nvrtc-12-6", "12.6.85-1", sum126)
	if code := run([]string{"-"}, strings.NewReader(in), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if cfg, err := tiers.Load(stdout.Bytes()); err != nil || cfg.RequirePinned() != nil {
		t.Errorf("printed table: %v\n%s", err, stdout.String())
	}
}

func TestExitStatuses(t *testing.T) {
	only128 := stanza("cuda-nvrtc-12-8", "12.8.93-1", sum128)
	for name, tc := range map[string]struct {
		args   []string
		stdin  string
		code   int
		stderr string
	}{
		"no index":            {nil, "", 2, "name the repository's Packages index"},
		"an unknown flag":     {[]string{"-nope", "-"}, "", 2, "flag provided but not defined"},
		"a tier not in it":    {[]string{"-"}, only128, 1, "no cuda-nvrtc-12-6 at version 12.6.85-1"},
		"a malformed index":   {[]string{"-"}, "not an index\n", 1, "malformed Packages index: line 1"},
		"a missing index":     {[]string{filepath.Join(t.TempDir(), "Packages")}, "", 1, "no such file"},
		"a missing tier file": {[]string{"-tiers", filepath.Join(t.TempDir(), "t.yml"), "-"}, only128, 1, "-tiers"},
	} {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tc.args, strings.NewReader(tc.stdin), &stdout, &stderr)
			if code != tc.code || !strings.Contains(stderr.String(), tc.stderr) || stdout.Len() != 0 {
				t.Errorf("exit %d, stderr %q, stdout %q; want %d and %q", code, stderr.String(), stdout.String(), tc.code, tc.stderr)
			}
		})
	}
}
