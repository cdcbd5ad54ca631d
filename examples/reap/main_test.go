package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
)

func TestSimulateDryRunThenExecute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "decisions.json")
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{"-simulate", "-out", out}, func(string) string { return "" }, &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		if !strings.Contains(stdout.String(), "dry run") || !strings.Contains(stdout.String(), "pods still running in the simulation: 6") {
			t.Errorf("dry run output:\n%s", stdout.String())
		}
		var doc Document
		data, _ := os.ReadFile(out)
		if err := json.Unmarshal(data, &doc); err != nil || len(doc.Decisions) != 6 {
			t.Fatalf("decisions document %s (%v)", data, err)
		}
		rules := map[string]int{}
		for _, d := range doc.Decisions {
			rules[d.Rule]++
		}
		if rules["untagged"] != 1 || rules["active"] != 1 || rules["superseded"] != 1 || rules["run-completed"] != 1 || rules["retained"] != 1 || rules["lifetime"] != 1 {
			t.Errorf("rules %v", rules)
		}
		stdout.Reset()
		if code := run(context.Background(), []string{"-simulate", "-execute"}, func(string) string { return "" }, &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		if !strings.Contains(stdout.String(), "pods still running in the simulation: 3") {
			t.Errorf("execute output:\n%s", stdout.String())
		}
	})
}

func TestRealModeNeedsCredentials(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), nil, func(string) string { return "" }, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "RUNPOD_API_KEY") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}
