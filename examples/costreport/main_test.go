package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
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
		"an inverted range":               {[]string{"collect", "-since", "2026-10-09", "-until", "2026-10-06", "-dir", "d"}, "costreport collect: -until 2026-10-06 is before -since 2026-10-09"},
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

// TestACollectThatFailsDoesNotSayItSaved: GitHub answering 500 to
// everything stops the collection, and the command says what it kept
// rather than "evidence saved".
func TestACollectThatFailsDoesNotSayItSaved(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"message": "down"}`, http.StatusInternalServerError)
	}))
	defer srv.Close()
	env := map[string]string{"GITHUB_TOKEN": "t", "GITHUB_API_URL": srv.URL}
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"collect", "-repo", "o/r", "-since", "2026-10-06", "-until", "2026-10-06", "-dir", dir}, func(k string) string { return env[k] }, &stdout, &stderr)
	if code != 1 || strings.Contains(stdout.String(), "evidence saved") || !strings.Contains(stderr.String(), "collect stopped; what it saved is under "+dir) {
		t.Errorf("exit %d\nstdout %s\nstderr %s", code, stdout.String(), stderr.String())
	}
}
