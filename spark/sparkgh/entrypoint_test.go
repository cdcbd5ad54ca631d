package sparkgh

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runEntryPoint runs the example scripts/ci/spark-test.sh with env.
func runEntryPoint(t *testing.T, topology string, env ...string) (string, string, int) {
	t.Helper()
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("the entry point needs bash and flock (Linux runners)")
	}
	script, err := filepath.Abs("../../examples/workflows/spark-test.sh")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command("bash", script, topology)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir,
		"SPARK_WORK_DIR=" + filepath.Join(dir, "work"), "SPARK_CACHE_DIR=" + filepath.Join(dir, "cache")}, env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

func TestEntryPointRefusesAPairUntilADistributedAssertionExists(t *testing.T) {
	order := filepath.Join(t.TempDir(), "order")
	_, stderr, code := runEntryPoint(t, "pair", "SPARK_SMOKE_CMD=echo smoke >>"+order)
	if code == 0 || !strings.Contains(stderr, "pair topology refused") {
		t.Errorf("pair without a distributed assertion: exit %d, %s", code, stderr)
	}
	if _, err := os.Stat(order); err == nil {
		t.Error("a refused pair must run nothing")
	}
	out, stderr, code := runEntryPoint(t, "pair", "SPARK_SMOKE_CMD=echo smoke >>"+order, "SPARK_DISTRIBUTED_CMD=echo collective >>"+order)
	if code != 0 || !strings.Contains(out, `"topology":"pair","passed":true`) {
		t.Errorf("configured pair: exit %d\n%s%s", code, out, stderr)
	}
	if got, _ := os.ReadFile(order); string(got) != "smoke\ncollective\n" {
		t.Errorf("order %q", got)
	}
}

func TestEntryPointRunsCorrectnessBeforePerformance(t *testing.T) {
	order := filepath.Join(t.TempDir(), "order")
	env := []string{"SPARK_TEST_SUITE=performance", "SPARK_SMOKE_CMD=echo smoke >>" + order, "SPARK_PERF_CMD=echo perf >>" + order}
	out, stderr, code := runEntryPoint(t, "single", env...)
	if code != 0 || !strings.Contains(out, `"suite":"performance","topology":"single","passed":true`) {
		t.Fatalf("exit %d\n%s%s", code, out, stderr)
	}
	if got, _ := os.ReadFile(order); string(got) != "smoke\nperf\n" {
		t.Errorf("order %q", got)
	}
	// A failing correctness lane stops before any measurement.
	os.Remove(order)
	env[1] = "SPARK_SMOKE_CMD=echo smoke >>" + order + "; false"
	out, _, code = runEntryPoint(t, "single", env...)
	if code != 1 || !strings.Contains(out, `"failed":"correctness"`) {
		t.Errorf("failing smoke: exit %d %s", code, out)
	}
	if got, _ := os.ReadFile(order); string(got) != "smoke\n" {
		t.Errorf("performance ran after a correctness failure: %q", got)
	}
}

func TestEntryPointRejectsUnknownTopologyAndSuite(t *testing.T) {
	if _, stderr, code := runEntryPoint(t, "triple"); code != 2 || !strings.Contains(stderr, `topology "triple"`) {
		t.Errorf("topology: %d %s", code, stderr)
	}
	if _, stderr, code := runEntryPoint(t, "single", "SPARK_TEST_SUITE=sweep"); code != 2 || !strings.Contains(stderr, `"sweep"`) {
		t.Errorf("suite: %d %s", code, stderr)
	}
}
