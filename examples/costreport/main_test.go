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

func TestARefusedCommandLineExitsTwoAndSaysWhy(t *testing.T) {
	for name, tc := range map[string]struct {
		args   []string
		stderr string
	}{
		"collect without -until and -dir": {[]string{"collect", "-since", "2026-10-06"}, "costreport collect: -since and -until (YYYY-MM-DD) and -dir are required"},
		"summarize without -dir":          {[]string{"summarize"}, "costreport summarize: -dir is required"},
		"an unknown flag":                 {[]string{"summarize", "-nope"}, "flag provided but not defined: -nope"},
		"a stray argument":                {[]string{"summarize", "-dir", "d", "extra"}, `unexpected argument "extra"`},
		"an unknown subcommand":           {[]string{"publish"}, `unknown subcommand "publish"`},
	} {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), tc.args, func(string) string { return "" }, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr.String(), tc.stderr)
			}
		})
	}
}
