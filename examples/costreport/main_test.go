package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSummarizeTheFixtureOffline(t *testing.T) {
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"summarize", "-dir", "testdata/evidence", "-out", out}, func(string) string { return "" }, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "7 run attempts: 6 automatic, 1 manual confirmations") {
		t.Errorf("%s", stdout.String())
	}
	for _, f := range []string{"summary.json", "summary.md", "spend.svg"} {
		if fi, err := os.Stat(filepath.Join(out, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestCollectNeedsArguments(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"collect", "-since", "2026-10-06"}, func(string) string { return "" }, &stdout, &stderr); code != 1 {
		t.Errorf("exit %d", code)
	}
}
