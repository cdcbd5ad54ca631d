package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/gpugate/gpugate/cost"
)

func TestCleanupDeletesThenReportsCost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		out := filepath.Join(dir, "cost-report.json")
		env := map[string]string{"GITHUB_OUTPUT": filepath.Join(dir, "out"), "GITHUB_STEP_SUMMARY": filepath.Join(dir, "summary")}
		var stdout, stderr strings.Builder
		code := run(context.Background(), []string{"-simulate", "-out", out, "-tested-ref", "abc", "-gate-kind", "paid"}, func(k string) string { return env[k] }, &stdout, &stderr)
		if code != 0 {
			t.Fatalf("exit %d: %s%s", code, stdout.String(), stderr.String())
		}
		if !strings.Contains(stdout.String(), "(confirmed)") {
			t.Errorf("%s", stdout.String())
		}
		var rep cost.Report
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &rep); err != nil || rep.DeletedAt == nil || rep.TestedRef != "abc" || !rep.Window.Known {
			t.Errorf("report %+v %v", rep, err)
		}
		outputs, _ := os.ReadFile(env["GITHUB_OUTPUT"])
		if !strings.Contains(string(outputs), "deleted<<") && !strings.Contains(string(outputs), "deleted=true") {
			t.Errorf("outputs: %s", outputs)
		}
	})
}

func TestCleanupRefusesWithoutKeyOrPod(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{{nil, "RUNPOD_API_KEY is not set"}, {map[string]string{"RUNPOD_API_KEY": "rpa_x"}, "-pod is required"}} {
		var stdout, stderr strings.Builder
		if code := run(context.Background(), nil, func(k string) string { return tc.env[k] }, &stdout, &stderr); code != 1 || !strings.Contains(stdout.String()+stderr.String(), tc.want) {
			t.Errorf("exit %d: %s%s", code, stdout.String(), stderr.String())
		}
	}
}
