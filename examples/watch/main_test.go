package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"testing/synctest"
)

func TestSimulateDeletesThenCancels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{"-simulate"}, func(string) string { return "" }, &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		for _, want := range []string{"pods left running: 0; runs cancelled: [1]", "outcome: obsolete", "deleted: true; run cancelled: true"} {
			if !strings.Contains(stdout.String(), want) {
				t.Errorf("output lacks %q:\n%s", want, stdout.String())
			}
		}
	})
}

func TestRealModeNeedsArguments(t *testing.T) {
	env := map[string]string{"RUNPOD_API_KEY": "k", "GITHUB_TOKEN": "t"}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), nil, func(k string) string { return env[k] }, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "-pod") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}
