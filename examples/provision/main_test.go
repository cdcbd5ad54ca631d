package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/smoke/tiers"
)

// The simulation runs on the fake's clock: inside a synctest bubble its
// seconds pass instantly.
func TestSimulateRunsTheBundledScenario(t *testing.T) {
	synctest.Test(t, testSimulate)
}

func testSimulate(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"GITHUB_OUTPUT": filepath.Join(dir, "out"), "GITHUB_STEP_SUMMARY": filepath.Join(dir, "sum")}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"-simulate"}, func(k string) string { return env[k] }, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"no-capacity", "exited", "accepted: pod", "deleted pod", "1 answered 429", "pods left running: 0"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	got, _ := os.ReadFile(env["GITHUB_OUTPUT"])
	if !strings.Contains(string(got), "runner_label=gpugate-1-1-c3\n") || !strings.Contains(string(got), "gpu=NVIDIA RTX 6000 Ada Generation\n") {
		t.Errorf("GITHUB_OUTPUT:\n%s", got)
	}
	if sum, _ := os.ReadFile(env["GITHUB_STEP_SUMMARY"]); !strings.Contains(string(sum), "**Accepted:**") {
		t.Errorf("summary:\n%s", sum)
	}
}

func TestSimulateJSON(t *testing.T) {
	synctest.Test(t, testSimulateJSON)
}

func testSimulateJSON(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"-simulate", "-json"}, func(string) string { return "" }, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var res runpod.Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || res.PodID == "" || len(res.Attempts) != 3 {
		t.Errorf("-json printed %q (%v)", out.String(), err)
	}
}

// pinnedTiers writes the example NVRTC tier table with its checksums
// filled in.
func pinnedTiers(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tiers.yml")
	pinned := strings.ReplaceAll(string(tiers.Example), `sha256: ""`, "sha256: "+strings.Repeat("ab", 32))
	if err := os.WriteFile(p, []byte(pinned), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRealModeNeedsCredentials(t *testing.T) {
	env := map[string]string{"GITHUB_ACTIONS": "true"}
	args := []string{"-proof-path", "/usr/local/bin/gpugate-smoke", "-nvrtc-tiers", pinnedTiers(t), "-repo", "o/r", "-run-id", "9"}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), args, func(k string) string { return env[k] }, &out, &errOut); code != 1 || !strings.Contains(out.String(), "::error::provision: RUNPOD_API_KEY is not set") {
		t.Errorf("exit %d, stdout %q", code, out.String())
	}
	env["RUNPOD_API_KEY"] = "k"
	out.Reset()
	if code := run(context.Background(), args, func(k string) string { return env[k] }, &out, &errOut); code != 1 || !strings.Contains(out.String(), "GITHUB_TOKEN") {
		t.Errorf("exit %d, stdout %q", code, out.String())
	}
}

// The seed: the proof runs "BEFORE the GitHub runner registers — so an
// incompatible host is rejected before any dependency setup or test
// execution". A real run that could not start the proof, or whose proof
// would refuse an unpinned NVRTC package on every pod, buys nothing: no
// proof, two proofs, or no ownership tags are a refused command line
// (exit 2, one line on stderr); a proof that cannot run fails (exit 1).
func TestRealModeRefusesToBuyPodsThatCannotProveCUDA(t *testing.T) {
	env := map[string]string{"GITHUB_ACTIONS": "true", "RUNPOD_API_KEY": "k", "GITHUB_TOKEN": "t"}
	owner := []string{"-repo", "o/r", "-run-id", "9"}
	for name, tc := range map[string]struct {
		args []string
		code int
		want string
	}{
		"no proof":        {owner, 2, "needs the CUDA proof"},
		"both proofs":     {append([]string{"-proof-path", "/p", "-proof", "f", "-nvrtc-tiers", pinnedTiers(t)}, owner...), 2, "alternatives"},
		"no ownership":    {[]string{"-proof-path", "/p", "-nvrtc-tiers", pinnedTiers(t)}, 2, "-repo and -run-id are required"},
		"no run":          {[]string{"-proof-path", "/p", "-nvrtc-tiers", pinnedTiers(t), "-repo", "o/r"}, 2, "-run-id is required"},
		"unpinned NVRTC":  {append([]string{"-proof-path", "/usr/local/bin/gpugate-smoke"}, owner...), 1, "pin its sha256"},
		"not an ELF file": {append([]string{"-proof", pinnedTiers(t), "-nvrtc-tiers", pinnedTiers(t)}, owner...), 1, "not an ELF executable"},
	} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), tc.args, func(k string) string { return env[k] }, &out, &errOut)
		said := out.String() // a failure is an annotation in Actions
		if tc.code == 2 {
			said = errOut.String() // a refusal is one line on stderr
			if out.Len() != 0 || strings.Count(strings.TrimSpace(said), "\n") != 0 {
				t.Errorf("%s: stdout %q, stderr %q; want one line on stderr only", name, out.String(), said)
			}
		}
		if code != tc.code || !strings.Contains(said, tc.want) || strings.Contains(out.String(), "image:") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want %d naming %q before anything is resolved or bought", name, code, out.String(), errOut.String(), tc.code, tc.want)
		}
	}
}

func TestSimulatePacksTheProofIntoTheCreateRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		proof := filepath.Join(t.TempDir(), "gpugate-smoke")
		os.WriteFile(proof, append([]byte("\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x3e\x00"), make([]byte, 64<<10)...), 0o755)
		var out, errOut bytes.Buffer
		if code := run(context.Background(), []string{"-simulate", "-proof", proof}, func(string) string { return "" }, &out, &errOut); code != 0 {
			t.Fatalf("exit %d\n%s%s", code, out.String(), errOut.String())
		}
		if !strings.Contains(out.String(), "CUDA proof in the create request: proof 65556 B") {
			t.Errorf("%s", out.String())
		}
	})
}

// "start-runpod reads the label itself and publishes paid_path_skipped":
// a PR labelled for local validation after authorization buys nothing.
func TestALabelledPRBuysNothingAndSaysPaidPathSkipped(t *testing.T) {
	head := strings.Repeat("a", 40)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v3/repos/o/r/pulls/{n}", func(w http.ResponseWriter, r *http.Request) {
		label := map[string]string{"7": "gpu-validated-locally", "8": "gpu"}[r.PathValue("n")]
		if label == "" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, `{"number":7,"state":"open","head":{"sha":%q,"repo":{"id":1}},"base":{"repo":{"id":1}},"labels":[{"name":%q}]}`, head, label)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("unexpected GitHub call %s %s: nothing may be prepared for a labelled PR", r.Method, r.URL.Path)
		http.NotFound(w, r)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	dir := t.TempDir()
	env := map[string]string{"GITHUB_ACTIONS": "true", "RUNPOD_API_KEY": "k", "GITHUB_TOKEN": "t", "GITHUB_API_URL": srv.URL,
		"GITHUB_OUTPUT": filepath.Join(dir, "out"), "GITHUB_STEP_SUMMARY": filepath.Join(dir, "summary")}
	args := []string{"-proof-path", "/usr/local/bin/gpugate-smoke", "-nvrtc-tiers", pinnedTiers(t), "-repo", "o/r", "-run-id", "9", "-pr", "7", "-head", head}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), args, func(k string) string { return env[k] }, &out, &errOut); code != 0 || !strings.Contains(out.String(), "paid path skipped") {
		t.Fatalf("exit %d: %s%s", code, out.String(), errOut.String())
	}
	outputs, _ := os.ReadFile(env["GITHUB_OUTPUT"])
	if !strings.Contains(string(outputs), "paid_path_skipped=true\n") || strings.Contains(string(outputs), "pod_id") {
		t.Errorf("outputs:\n%s", outputs)
	}
	// An unreadable PR is an error, never a skip.
	args[len(args)-3] = "9"
	out.Reset()
	if code := run(context.Background(), args, func(k string) string { return env[k] }, &out, &errOut); code != 1 || !strings.Contains(out.String(), "re-read PR #9") {
		t.Errorf("unreadable PR: exit %d: %s", code, out.String())
	}
}

// Seed 000: the configured GPU IDs are validated against RunPod's live
// list before any pod is allocated: a misspelled type is refused, not
// tried (and paid for in attempts) candidate by candidate.
func TestAnUnknownGPUTypeIsRefusedBeforeAnyPodIsCreated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := filepath.Join(t.TempDir(), "runpod.yml")
		data := strings.Replace(string(runpod.ExampleConfig), `"NVIDIA L40S"`, `"NVIDIA L40SX"`, 1)
		if data == string(runpod.ExampleConfig) {
			t.Fatal("the example config no longer names NVIDIA L40S")
		}
		os.WriteFile(cfg, []byte(data), 0o644)
		var out, errOut bytes.Buffer
		code := run(context.Background(), []string{"-simulate", "-config", cfg}, func(string) string { return "" }, &out, &errOut)
		if code != 1 || !strings.Contains(out.String()+errOut.String(), `tier "premium" names "NVIDIA L40SX"`) {
			t.Errorf("exit %d:\n%s%s", code, out.String(), errOut.String())
		}
		if strings.Contains(out.String(), "plan (") || strings.Contains(out.String(), "accepted") {
			t.Errorf("it planned or bought before refusing:\n%s", out.String())
		}
	})
}

// The repository is an ownership tag the reaper matches as owner/name:
// anything else is a refused command line (exit 2, one line on stderr),
// before any credential is read or anything is bought.
func TestRealMode_ARepositoryThatIsNotOwnerSlashNameIsRefused(t *testing.T) {
	env := map[string]string{"RUNPOD_API_KEY": "k", "GITHUB_TOKEN": "t"}
	for _, repo := range []string{"o", "o/", "/r", "o/r/x"} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), []string{"-proof-path", "/p", "-repo", repo, "-run-id", "9"}, func(k string) string { return env[k] }, &out, &errOut)
		if code != 2 || out.Len() != 0 || !strings.Contains(errOut.String(), "want owner/name") || strings.Count(strings.TrimSpace(errOut.String()), "\n") != 0 {
			t.Errorf("-repo %q: exit %d, stdout %q, stderr %q; want 2 and one line", repo, code, out.String(), errOut.String())
		}
	}
}
