package runpod_test

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpugate/gpugate/internal/workflowtest"
	"github.com/gpugate/gpugate/runpod"
)

// Every job of the paid lifecycle holds the paid lock (and every job of
// the gate its head's concurrency group), and cleanup waits for the watch: none may take the platform's 360-minute default, or one
// hung step would hold every other paid run, or a pod, for six hours. The
// watch job outlasts the watchdog's own lifetime backstop, so the backstop
// fires first; the reaper is bounded too.
func TestEveryPaidLifecycleJobHasItsOwnTimeout(t *testing.T) {
	wf := workflowtest.Read(t, "runpod-gpu-execute.yml")
	lifetime := runpod.DefaultWatchOptions().Lifetime
	jobs := maps.Clone(wf.Jobs)
	// The gate's jobs hold the head's concurrency group.
	for name, job := range workflowtest.Read(t, "runpod-gpu-test.yml").Jobs {
		jobs["runpod-gpu-test.yml "+name] = job
	}
	for name, job := range jobs {
		if job.Uses != "" {
			continue // a called workflow bounds its own jobs
		}
		limit := time.Duration(job.TimeoutMinutes * float64(time.Minute))
		switch {
		case limit <= 0 || limit >= 360*time.Minute:
			t.Errorf("job %s has no timeout-minutes below the 360-minute default", name)
		case name == "watch" && limit <= lifetime:
			t.Errorf("the watch job's %s does not outlast the watchdog's %s lifetime backstop", limit, lifetime)
		}
	}
	if reap := workflowtest.Read(t, "runpod-reap.yml").Jobs["reap"]; reap.TimeoutMinutes <= 0 || reap.TimeoutMinutes >= 360 {
		t.Errorf("the reaper's job has timeout-minutes %v", reap.TimeoutMinutes)
	}
}

// Seed: "Every step before Run CUDA tests from archive has its own
// timeout-minutes; the aggregate watchdog below is stricter than the sum of
// those individual limits ... the archive artifact download is retried once
// with the same bound." The job and step are the ones the watch step
// watches, and the watchdog is Watch's default setup deadline.
func TestEveryStepBeforeTheTestsHasItsOwnTimeoutAndTheSetupWatchdogIsStricter(t *testing.T) {
	wf := workflowtest.Read(t, "runpod-gpu-execute.yml")
	var jobName, testStep string
	for _, job := range wf.Jobs {
		for _, s := range job.Steps {
			if s.With["step"] == "watch" {
				jobName, testStep = s.With["job"], s.With["test-step"]
			}
		}
	}
	if jobName == "" || testStep == "" {
		t.Fatal("no watch step names the GPU job and its test step")
	}
	found := false
	for _, job := range wf.Jobs {
		if job.Name != jobName {
			continue
		}
		found = true
		var sum time.Duration
		downloads := map[string][]int{} // artifact name -> step indexes
		reached := false
		for i, s := range job.Steps {
			if s.Name == testStep {
				reached = true
				break
			}
			if s.TimeoutMinutes <= 0 {
				t.Errorf("step %d (%s) before %q has no timeout-minutes", i, s.Uses, testStep)
			}
			sum += time.Duration(s.TimeoutMinutes * float64(time.Minute))
			if strings.HasPrefix(s.Uses, "actions/download-artifact@") {
				downloads[s.Artifact()] = append(downloads[s.Artifact()], i)
			}
		}
		if !reached {
			t.Fatalf("job %q has no step %q", jobName, testStep)
		}
		if deadline := runpod.DefaultWatchOptions().SetupDeadline; deadline >= sum {
			t.Errorf("the setup watchdog (%v) must be stricter than the steps' sum (%v)", deadline, sum)
		}
		if len(downloads) == 0 {
			t.Error("the GPU job downloads no archive")
		}
		for name, at := range downloads {
			if len(at) != 2 {
				t.Errorf("artifact %s is downloaded %d time(s) before the tests, want once plus one retry", name, len(at))
				continue
			}
			first, retry := job.Steps[at[0]], job.Steps[at[1]]
			if !first.ContinueOnError || first.ID == "" {
				t.Errorf("the first download of %s must have an id and continue on error, so its failure reaches the retry", name)
			}
			want := "steps." + first.ID + ".outcome == 'failure'"
			if first.If != "" { // a conditional download's retry keeps its condition
				want = first.If + " && " + want
			}
			if retry.If != want {
				t.Errorf("the retry of %s runs if %q, want %q", name, retry.If, want)
			}
			if retry.TimeoutMinutes != first.TimeoutMinutes {
				t.Errorf("the retry of %s is bounded by %v minutes, the first try by %v: want the same bound", name, retry.TimeoutMinutes, first.TimeoutMinutes)
			}
		}
	}
	if !found {
		t.Fatalf("no job is named %q", jobName)
	}
}

// Seed: "The parent workflow has a concurrency group per PR head ... Manual
// dispatches use their own run id as the group." GitHub keeps only the
// newest waiting run of a group, so a dispatch sharing a group with
// deliveries could displace one.
func TestManualDispatchesUseTheirOwnRunIDAsTheConcurrencyGroup(t *testing.T) {
	group := workflowtest.Read(t, "runpod-gpu-test.yml").Concurrency.Group
	if !strings.Contains(group, "github.event.workflow_run.head_sha || github.run_id") {
		t.Errorf("concurrency group %q: want one group per PR head, and the run id for a manual dispatch", group)
	}
}

// Seed 000: the paid lifecycle's repository-wide concurrency group holds
// "from head revalidation through provisioning, execution and cleanup; it
// uses queue: max so a third request cannot evict the second pending
// request". By default GitHub keeps one pending job per group and cancels
// it when another arrives: that PR's lifecycle would be cancelled and its
// gate published as failed. The gate calls the whole lifecycle as one job
// under the lock, and publishes only after it.
func TestThePaidLockHoldsTheWholeLifecycleAndQueuesEveryRequest(t *testing.T) {
	gate, lifecycle := workflowtest.Read(t, "runpod-gpu-test.yml"), workflowtest.Read(t, "runpod-gpu-execute.yml")
	caller := ""
	for name, job := range gate.Jobs {
		if job.Uses == "./.github/workflows/runpod-gpu-execute.yml" {
			caller = name
			if c := job.Concurrency; c.Group == "" || c.CancelInProgress || c.Queue != "max" {
				t.Errorf("job %s calls the lifecycle under concurrency %+v: want a repository-wide group, cancel-in-progress false and queue max", name, c)
			}
		}
		for _, s := range job.Steps {
			if s.With["step"] == "provision" || s.With["step"] == "cleanup" || s.With["step"] == "watch" {
				t.Errorf("job %s runs %s outside the lifecycle's lock", name, s.With["step"])
			}
		}
	}
	if caller == "" {
		t.Fatal("the gate never calls runpod-gpu-execute.yml")
	}
	steps := map[string]bool{}
	for name, job := range lifecycle.Jobs {
		if job.Concurrency.Group != "" {
			t.Errorf("job %s has its own concurrency group inside the lock", name)
		}
		for _, s := range job.Steps {
			steps[s.With["step"]] = true
		}
	}
	for _, want := range []string{"reuse", "provision", "watch", "cleanup"} {
		if !steps[want] {
			t.Errorf("the lifecycle has no %s step", want)
		}
	}
}

// Seed 001: "Decide whether the paid path runs, inside the global paid
// lock and right before any spend, asks ... for every gate on the PR
// head": a request that waited behind another lifecycle for the same tested
// merge ref reuses its gate instead of buying a second pod, and the gate
// publishes it as reused.
func TestTheReuseDecisionIsMadeInsideThePaidLockRightBeforeAnySpend(t *testing.T) {
	lifecycle := workflowtest.Read(t, "runpod-gpu-execute.yml")
	found := false
	for name, job := range lifecycle.Jobs {
		reuse := ""
		for _, s := range job.Steps {
			switch s.With["step"] {
			case "reuse":
				reuse = s.ID
			case "provision":
				found = true
				if want := "steps." + reuse + ".outputs.reuse != 'true'"; reuse == "" || s.If != want {
					t.Errorf("job %s provisions if %q: want a reuse step before it and if %q", name, s.If, want)
				}
			}
		}
	}
	if !found {
		t.Fatal("the lifecycle never provisions")
	}
	for name, job := range workflowtest.Read(t, "runpod-gpu-test.yml").Jobs {
		for _, s := range job.Steps {
			if s.With["step"] == "publish" && (!strings.Contains(s.With["kind"], "needs.execute.outputs.reused_from != '' && 'reused'") ||
				!strings.Contains(s.With["reused-from-id"], "needs.execute.outputs.reused_from")) {
				t.Errorf("job %s publishes kind %q (reused-from-id %q): a reuse found inside the lock must publish as reused, naming the gate", name, s.With["kind"], s.With["reused-from-id"])
			}
		}
	}
}

// Seed 001: "The accepted pod's GPU, tier, price ... go to the job summary
// and gpu_cost_per_hr output; the pod-side "Check machine" step echoes them
// next to nvidia-smi." The GPU job prints what provisioning bought (passed
// through the environment, never spliced into the script) before anything
// else runs on the pod.
func TestTheGPUJobEchoesTheAcceptedPodNextToNvidiaSMI(t *testing.T) {
	lifecycle := workflowtest.Read(t, "runpod-gpu-execute.yml")
	job, ok := lifecycle.Jobs["gpu-tests"]
	if !ok || len(job.Steps) == 0 {
		t.Fatal("no gpu-tests job")
	}
	check := job.Steps[0]
	if check.Name != "Check machine" || !strings.Contains(check.Run, "nvidia-smi") || strings.Contains(check.Run, "${{") {
		t.Fatalf("the GPU job's first step is %q:\n%s\nwant Check machine running nvidia-smi, values through env", check.Name, check.Run)
	}
	for _, out := range []string{"gpu", "tier", "gpu_cost_per_hr"} {
		ref := "${{ needs.start-runpod.outputs." + out + " }}"
		found := false
		for _, v := range check.Env {
			found = found || v == ref
		}
		if !found {
			t.Errorf("Check machine does not receive %s", ref)
		}
		if got := lifecycle.Jobs["start-runpod"].Outputs[out]; got != "${{ steps.provision.outputs."+out+" }}" {
			t.Errorf("start-runpod output %s = %q, want the provision step's", out, got)
		}
	}
}

// Seed 001: "Decision artifacts retain pod/run identity, deletion time, and
// available cost estimates, excluding pod environment/credentials" and
// "Independent reaper decision artifacts provide the separate recovery
// record": the reaper workflow uploads its decisions even when the sweep
// failed in part, and cancels an expired pod's run only when executing.
func TestTheReaperUploadsItsDecisionsAsTheRecoveryRecord(t *testing.T) {
	reap := workflowtest.Read(t, "runpod-reap.yml")
	uploads := 0
	for _, job := range reap.Jobs {
		for _, s := range job.Steps {
			if strings.HasPrefix(s.Uses, "actions/upload-artifact@") && strings.HasSuffix(s.With["path"], "/reap-decisions.json") {
				uploads++
				if s.If != "always()" || !strings.Contains(s.With["name"], "${{ github.run_id }}") {
					t.Errorf("the decisions upload runs if %q as %q: want always(), one artifact per run", s.If, s.With["name"])
				}
			}
		}
	}
	if uploads != 1 {
		t.Errorf("%d decision uploads, want 1", uploads)
	}
	script, err := os.ReadFile("../scripts/action.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`args+=(-out "${RUNNER_TEMP:-/tmp}/reap-decisions.json")`, `[ "${GPUGATE_EXECUTE:-false}" != true ] || args+=(-execute -cancel-runs)`} {
		if !strings.Contains(string(script), want) {
			t.Errorf("the Action's reap step lacks %s", want)
		}
	}
}

// Seed 001: "keep_failed_pods alone does not exempt a pod: the provisioner
// records actual retained IDs in a small runpod-debug-retained artifact".
// The dispatch input reaches provisioning, and the record is uploaded under
// its name even when provisioning failed.
func TestKeepFailedPodsReachesProvisioningAndItsRecordIsUploaded(t *testing.T) {
	gate, lifecycle := workflowtest.Read(t, "runpod-gpu-test.yml"), workflowtest.Read(t, "runpod-gpu-execute.yml")
	if got := gate.Jobs["execute"].With["keep_failed_pods"]; got != "${{ inputs.keep_failed_pods == true }}" {
		t.Errorf("the gate passes keep_failed_pods = %q", got)
	}
	provision, upload := false, false
	for _, s := range lifecycle.Jobs["start-runpod"].Steps {
		switch {
		case s.With["step"] == "provision":
			provision = s.With["keep-failed-pods"] == "${{ inputs.keep_failed_pods }}"
		case strings.HasPrefix(s.Uses, "actions/upload-artifact@"):
			upload = provision && strings.HasPrefix(s.If, "always() && ") &&
				s.With["name"] == "${{ steps.provision.outputs.retention_record }}" && s.With["path"] == "${{ steps.provision.outputs.retention_file }}"
		}
	}
	if !provision || !upload {
		t.Errorf("provision gets keep-failed-pods: %v; the record is uploaded after it under its name, always: %v", provision, upload)
	}
}

// Seed 001: "if checkout fails, a bounded v2 curl fallback remains
// independent of Python files and reports the remaining Pod ID", with the
// shared cleanup bound: "at most five DELETE attempts within 180 seconds,
// with 20-second request timeouts ... A 404 confirms deletion; permanent
// errors stop retries." And: "A bounded inline deletion step also covers
// checkout/helper failures before the guard can finish". The lifecycle
// calls the curl deletion when cleanup did not succeed and when the
// watchdog failed or could not start; it needs nothing of gpugate, and its
// script is run here against a loopback server.
func TestTheCurlFallbackDeletesWhenCleanupOrTheWatchdogFailedAndIsBounded(t *testing.T) {
	lifecycle := workflowtest.Read(t, "runpod-gpu-execute.yml")
	for job, after := range map[string]struct{ needs, cond string }{
		"cleanup-fallback": {"cleanup", "needs.cleanup.result != 'success'"},
		// A job past its timeout-minutes is cancelled, not failed.
		"watch-fallback": {"watch", "(needs.watch.result == 'failure' || needs.watch.result == 'cancelled')"},
	} {
		j := lifecycle.Jobs[job]
		if want := "always() && needs.start-runpod.outputs.pod_id != '' && " + after.cond; j.If != want || !j.NeedsJob(after.needs) {
			t.Errorf("%s runs if %q (needs %v), want %q", job, j.If, j.Needs, want)
		}
		if j.Uses != "./.github/workflows/runpod-delete-fallback.yml" || j.With["pod_id"] != "${{ needs.start-runpod.outputs.pod_id }}" {
			t.Errorf("%s calls %q with %v, want the curl deletion of the accepted pod", job, j.Uses, j.With)
		}
	}
	job := workflowtest.Read(t, "runpod-delete-fallback.yml").Jobs["delete"]
	if len(job.Steps) != 1 {
		t.Fatal("no single-step delete job")
	}
	step := job.Steps[0]
	if step.Uses != "" || step.Env["RUNPOD_API"] != "https://api.runpod.io" || step.Env["RETRY_DELAY"] != "20" || !strings.Contains(step.Run, "--max-time 20") {
		t.Fatalf("the fallback step %+v: want a bare script against REST v2, 20 s per request, 20 s apart", step)
	}
	r := workflowtest.NewRunner(t, "curl")
	const key = "rpa_fallback_test_key"
	run := func(t *testing.T, api string) workflowtest.Result {
		t.Helper()
		res := r.Run(t, step, map[string]string{"RUNPOD_API_KEY": key, "POD_ID": "pod_x1", "WHY": "cleanup did not succeed", "RUNPOD_API": api, "RETRY_DELAY": "0"})
		if strings.Contains(res.Out, key) || strings.Contains(res.Summary, key) {
			t.Error("the script printed the API key")
		}
		return res
	}
	for name, tc := range map[string]struct {
		answers  []int // per request; the last repeats
		code     int
		requests int
	}{
		"deleted after two 503s":    {[]int{503, 503, 204}, 0, 3},
		"already gone":              {[]int{404}, 0, 1},
		"a permanent 403 stops":     {[]int{403}, 1, 1},
		"five failures and no more": {[]int{500}, 1, 5},
	} {
		t.Run(name, func(t *testing.T) {
			var requests int
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodDelete || r.URL.Path != "/v2/pods/pod_x1" || r.Header.Get("Authorization") != "Bearer "+key {
					t.Errorf("%s %s (authorization %q)", r.Method, r.URL.Path, r.Header.Get("Authorization"))
				}
				w.WriteHeader(tc.answers[min(requests, len(tc.answers)-1)])
				requests++
			}))
			defer srv.Close()
			res := run(t, srv.URL)
			if res.Code != tc.code || requests != tc.requests {
				t.Errorf("exit %d after %d request(s), want %d after %d:\n%s", res.Code, requests, tc.code, tc.requests, res.Out)
			}
			if tc.code != 0 && (!strings.Contains(res.Out, "::error::pod pod_x1 may still be running") || !strings.Contains(res.Summary, "pod_x1")) {
				t.Errorf("a failed fallback must name the pod:\n%s\nsummary: %s", res.Out, res.Summary)
			}
		})
	}
	t.Run("RunPod unreachable", func(t *testing.T) {
		closed := httptest.NewServer(http.NotFoundHandler())
		closed.Close()
		if res := run(t, closed.URL); res.Code != 1 || strings.Count(res.Out, "curl: ") != 5 || !strings.Contains(res.Out, "(last answer HTTP 000)") {
			t.Errorf("exit %d, want five failed attempts and a named pod:\n%s", res.Code, res.Out)
		}
	})
}
