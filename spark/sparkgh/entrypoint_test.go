package sparkgh

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// runEntryPoint runs the example scripts/ci/spark-test.sh with env, in a
// fresh directory whose work and cache directories the controller
// provides.
func runEntryPoint(t *testing.T, topology string, env ...string) (string, string, int) {
	t.Helper()
	return runEntryPointIn(t, t.TempDir(), nil, topology, env...)
}

// runEntryPointIn runs the entry point in dir (SPARK_WORK_DIR dir/work,
// SPARK_CACHE_DIR dir/cache), under the command wrap when one is given.
func runEntryPointIn(t *testing.T, dir string, wrap []string, topology string, env ...string) (string, string, int) {
	t.Helper()
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("the entry point needs bash and flock (Linux runners)")
	}
	script, err := filepath.Abs("../../examples/workflows/spark-test.sh")
	if err != nil {
		t.Fatal(err)
	}
	args := append(wrap, "bash", script, topology)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + toolchainStandIns(t) + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + dir,
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

// toolchainStandIns is a directory of stand-ins for the toolchain the
// entry point prints: a real go would start its telemetry child, which
// can write under HOME after the script ended, while the test removes it.
func toolchainStandIns(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	for tool, version := range map[string]string{"go": "go version go1.99.0 linux/amd64", "rustc": "rustc 1.90.0 (0123abcd 2026-09-01)",
		"cargo": "cargo 1.90.0", "nvcc": "Cuda compilation tools, release 12.8, V12.8.93"} {
		os.WriteFile(filepath.Join(bin, tool), []byte("#!/bin/sh\necho '"+version+"'\n"), 0o755)
	}
	return bin
}

// receipt is the entry point's last line of output, a JSON object.
func receipt(t *testing.T, stdout string) map[string]any {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var r map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
		t.Fatalf("the last line is no receipt: %v\n%s", err, stdout)
	}
	return r
}

// The Spark seed's entry point must "print toolchain and source revisions".
func TestEntryPointPrintsToolchainAndSourceRevisions(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs git")
	}
	dir := t.TempDir()
	for _, args := range [][]string{{"init", "-q"}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "x"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	sha, _ := exec.Command("git", "-C", dir, "rev-parse", "HEAD").Output()
	out, stderr, code := runEntryPointIn(t, dir, nil, "single", "SPARK_SMOKE_CMD=true")
	if code != 0 || !strings.Contains(out, "source "+strings.TrimSpace(string(sha))) || !strings.Contains(out, "rustc rustc 1.90.0 (0123abcd 2026-09-01)") ||
		!strings.Contains(out, "nvcc Cuda compilation tools, release 12.8, V12.8.93") {
		t.Errorf("exit %d: want the source revision and the toolchain's version:\n%s%s", code, out, stderr)
	}
}

// "use the controller-provided work and cache directories", "emit a
// compact receipt", "clean its disposable work directory on successful
// release": logs go to the work directory, the lock to the cache, the last
// line is a one-line JSON receipt, and the work directory goes only after
// a pass (a failure keeps the log its receipt names).
func TestEntryPointUsesTheControllerDirectoriesAndCleansWorkOnlyAfterAPass(t *testing.T) {
	dir := t.TempDir()
	work, cache := filepath.Join(dir, "work"), filepath.Join(dir, "cache")
	out, stderr, code := runEntryPointIn(t, dir, nil, "single", "SPARK_SMOKE_CMD=echo in the log")
	if r := receipt(t, out); code != 0 || r["passed"] != true || r["suite"] != "smoke" || r["topology"] != "single" {
		t.Fatalf("exit %d, receipt %v:\n%s", code, r, stderr)
	}
	if _, err := os.Stat(work); err == nil {
		t.Error("the work directory outlived a passing run")
	}
	if _, err := os.Stat(filepath.Join(cache, "build.lock")); err != nil {
		t.Errorf("the build lock is not in the controller's cache directory: %v", err)
	}
	out, _, code = runEntryPointIn(t, dir, nil, "single", "SPARK_SMOKE_CMD=echo the failure; false")
	r := receipt(t, out)
	log, _ := r["log"].(string)
	if code != 1 || r["failed"] != "correctness" || filepath.Dir(log) != work {
		t.Fatalf("exit %d, receipt %v: want the failed lane and its log in the work directory", code, r)
	}
	if got, err := os.ReadFile(log); err != nil || !strings.Contains(string(got), "the failure") {
		t.Errorf("the failed lane's log was not kept: %q %v", got, err)
	}
}

// "serialize writes to shared build targets": each command runs holding
// the cache's build lock, and a lock another reservation holds past the
// bound fails the lane with a receipt instead of waiting out the job.
func TestEntryPointSerializesWritesToTheSharedBuildTarget(t *testing.T) {
	dir := t.TempDir()
	lock := filepath.Join(dir, "cache", "build.lock")
	// Inside the command the lock is taken: a second taker is refused.
	out, stderr, code := runEntryPointIn(t, dir, nil, "single", "SPARK_SMOKE_CMD=if flock -n "+lock+" true; then echo unlocked; exit 1; fi")
	if code != 0 {
		t.Errorf("the command ran without the build lock: exit %d\n%s%s", code, out, stderr)
	}
	// Held by another reservation (here, the wrapping flock) past the bound.
	os.MkdirAll(filepath.Dir(lock), 0o755)
	ran := filepath.Join(dir, "ran")
	out, _, code = runEntryPointIn(t, dir, []string{"flock", lock}, "single", "SPARK_LOCK_WAIT_SECONDS=0", "SPARK_SMOKE_CMD=touch "+ran)
	if r := receipt(t, out); code != 1 || r["failed"] != "correctness" || !strings.Contains(fmt.Sprint(r["reason"]), "stayed locked for 0 s") {
		t.Errorf("exit %d, receipt %v: want a bounded wait that fails the lane", code, r)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the command ran without the lock")
	}
	if _, stderr, code := runEntryPoint(t, "single", "SPARK_LOCK_WAIT_SECONDS=soon"); code != 2 || !strings.Contains(stderr, "whole number of seconds") {
		t.Errorf("a bad bound: exit %d %s", code, stderr)
	}
}

// "avoid downloading a model already present in the managed model cache";
// the label lanes "do not download models". With the managed cache, the
// commands read models from it offline; a cache that is not there stops
// the lane before anything runs.
func TestEntryPointNeverDownloadsAModelTheManagedCacheHolds(t *testing.T) {
	models := t.TempDir()
	out, stderr, code := runEntryPoint(t, "single", "SPARK_MODEL_CACHE="+models,
		`SPARK_SMOKE_CMD=test "$HF_HUB_CACHE" = "`+models+`" && test "$HF_HUB_OFFLINE" = 1 && test "$TRANSFORMERS_OFFLINE" = 1`)
	if code != 0 || !strings.Contains(out, "models from the managed cache "+models+" (offline)") {
		t.Errorf("exit %d: the commands did not see the managed cache offline:\n%s%s", code, out, stderr)
	}
	ran := filepath.Join(t.TempDir(), "ran")
	if _, stderr, code := runEntryPoint(t, "single", "SPARK_MODEL_CACHE="+filepath.Join(models, "missing"), "SPARK_SMOKE_CMD=touch "+ran); code != 2 || !strings.Contains(stderr, "is not a directory") {
		t.Errorf("a missing managed cache: exit %d %s", code, stderr)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the lane ran without its managed model cache")
	}
}

// The entry point "must be deterministic, bounded": each suite's limit is
// the seed's target ("spark-test (target: 30 minutes)", "spark-test-long
// (target: 60 minutes)"), every command runs under timeout with what is
// left of it, and a command stopped at the limit fails the lane with a
// receipt saying so. A stand-in timeout records what it was given.
func TestEntryPointIsBoundedByTheSuitesTarget(t *testing.T) {
	bin := t.TempDir()
	calls := filepath.Join(t.TempDir(), "calls")
	os.WriteFile(filepath.Join(bin, "timeout"), []byte(`#!/bin/sh
echo "$1 $2" >>"`+calls+`"
if [ -n "$EXPIRE" ]; then exit 124; fi
shift 2
exec "$@"
`), 0o755)
	path := "PATH=" + bin + string(os.PathListSeparator) + toolchainStandIns(t) + string(os.PathListSeparator) + os.Getenv("PATH")
	bounds := func() []string {
		data, _ := os.ReadFile(calls)
		os.Remove(calls)
		return strings.Fields(string(data))
	}
	near := func(got string, limit int) bool {
		s, err := strconv.Atoi(got)
		return err == nil && s <= limit && s > limit-60
	}
	for _, tc := range []struct {
		env      []string
		commands int
		limit    int // seconds
	}{
		{[]string{"SPARK_TEST_SUITE=smoke"}, 1, 30 * 60},
		{[]string{"SPARK_TEST_SUITE=performance"}, 2, 60 * 60},
		{[]string{"SPARK_TEST_SUITE=performance", "SPARK_SUITE_MINUTES=5"}, 2, 5 * 60},
	} {
		out, stderr, code := runEntryPoint(t, "single", append(tc.env, path, "SPARK_SMOKE_CMD=true", "SPARK_PERF_CMD=true")...)
		got := bounds()
		if code != 0 || len(got) != 2*tc.commands {
			t.Fatalf("%v: exit %d, timeout given %v\n%s%s", tc.env, code, got, out, stderr)
		}
		for i := 0; i < len(got); i += 2 {
			if got[i] != "--kill-after=30" || !near(got[i+1], tc.limit) {
				t.Errorf("%v: command %d ran under timeout %s %s, want what is left of %d s", tc.env, i/2, got[i], got[i+1], tc.limit)
			}
		}
	}
	out, _, code := runEntryPoint(t, "single", path, "EXPIRE=1", "SPARK_TEST_SUITE=performance", "SPARK_SMOKE_CMD=true", "SPARK_PERF_CMD=true")
	if r := receipt(t, out); code != 1 || r["failed"] != "correctness" || r["reason"] != "stopped at the suite's 60-minute limit" {
		t.Errorf("a command stopped at the limit: exit %d, receipt %v", code, r)
	}
	if got := bounds(); len(got) != 2 {
		t.Errorf("the lane went on after the limit: %v", got)
	}
	if _, stderr, code := runEntryPoint(t, "single", "SPARK_SUITE_MINUTES=0"); code != 2 || !strings.Contains(stderr, "at least 1") {
		t.Errorf("a zero limit: exit %d %s", code, stderr)
	}
}
