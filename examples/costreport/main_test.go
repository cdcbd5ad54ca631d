package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
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

// summarize's stage table adds up to its total: the stages are the
// accepted pods' spend, the rejected candidates the rest. A run the total
// leaves out (the fixture's run 1006 has no deletion evidence, run 1005 an
// unknown start) is listed apart and left out of the stages too, never
// counted in one and not the other.
func TestSummarize_TheStageTableAddsUpToTheTotal(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"summarize", "-json", "-dir", "testdata/evidence"}, func(string) string { return "" }, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var s struct {
		Spend struct {
			Rejected, Total float64
		} `json:"spend"`
		Stages []struct {
			Stage string  `json:"stage"`
			Cost  float64 `json:"cost"`
		} `json:"stages"`
		Excluded []struct {
			RunID  int64  `json:"run_id"`
			PodID  string `json:"pod_id"`
			Reason string `json:"reason"`
		} `json:"excluded_runs"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &s); err != nil || len(s.Stages) == 0 {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	sum := s.Spend.Rejected
	for _, st := range s.Stages {
		sum += st.Cost
	}
	if math.Abs(sum-s.Spend.Total) > 1e-9 {
		t.Errorf("the stages and the rejected candidates add up to $%.6f, the total is $%.6f", sum, s.Spend.Total)
	}
	var apart []string
	for _, x := range s.Excluded {
		apart = append(apart, fmt.Sprintf("%d %s", x.RunID, x.PodID))
	}
	if want := []string{"1005 pod005", "1006 pod006"}; !slices.Equal(apart, want) {
		t.Errorf("listed apart: %v, want %v", apart, want)
	}
	// The Markdown table carries the same rows, and its total row.
	stdout.Reset()
	run(context.Background(), []string{"summarize", "-dir", "testdata/evidence"}, func(string) string { return "" }, &stdout, &stderr)
	if md := stdout.String(); !strings.Contains(md, fmt.Sprintf("| **total** | | | | **%.4f** |", s.Spend.Total)) || !strings.Contains(md, "| 1006 attempt 1 | `pod006` |") {
		t.Errorf("the Markdown summary:\n%s", md)
	}
}

func TestARefusedCommandLineExitsTwoAndSaysWhy(t *testing.T) {
	for name, tc := range map[string]struct {
		args   []string
		stderr string
	}{
		"collect without -until and -dir": {[]string{"collect", "-repo", "o/r", "-since", "2026-10-06"}, "costreport collect: -since and -until (YYYY-MM-DD) and -dir are required"},
		"collect without -repo":           {[]string{"collect", "-since", "2026-10-06", "-until", "2026-10-06", "-dir", "d"}, "costreport collect: -repo is required"},
		"a malformed -repo":               {[]string{"collect", "-repo", "o", "-since", "2026-10-06", "-until", "2026-10-06", "-dir", "d"}, `costreport collect: -repo "o": want owner/name`},
		"an inverted range":               {[]string{"collect", "-repo", "o/r", "-since", "2026-10-09", "-until", "2026-10-06", "-dir", "d"}, "costreport collect: -until 2026-10-06 is before -since 2026-10-09"},
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
