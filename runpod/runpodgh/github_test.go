package runpodgh_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-github/v66/github"

	"github.com/gpugate/gpugate/internal/githubtest"
	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/runpodgh"
)

func TestGitHubRegistry_MintsJITAndFindsTheRunnerOnALaterPage(t *testing.T) {
	mux := http.NewServeMux()
	var minted github.GenerateJITConfigRequest
	mux.HandleFunc("POST /orgs/acme/actions/runners/generate-jitconfig", func(w http.ResponseWriter, r *http.Request) {
		json.NewDecoder(r.Body).Decode(&minted)
		w.WriteHeader(201)
		fmt.Fprint(w, `{"runner":{"id":1,"name":"gpugate-1-1-c1"},"encoded_jit_config":"ENCODED"}`)
	})
	var srvURL string
	mux.HandleFunc("GET /orgs/acme/actions/runners", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("name") != "gpugate-1-1-c1" {
			t.Errorf("runner lookup without the exact name filter: %s", r.URL.RawQuery)
		}
		if r.URL.Query().Get("page") != "2" {
			w.Header().Set("Link", fmt.Sprintf(`<%s/orgs/acme/actions/runners?name=gpugate-1-1-c1&page=2>; rel="next"`, srvURL))
			fmt.Fprint(w, `{"total_count":2,"runners":[{"id":9,"name":"someone-else","status":"online"}]}`)
			return
		}
		fmt.Fprint(w, `{"total_count":2,"runners":[{"id":1,"name":"gpugate-1-1-c1","status":"online","busy":false,"labels":[{"name":"self-hosted"},{"name":"gpugate-1-1-c1"}]}]}`)
	})
	c, srv := githubtest.New(t, mux)
	srvURL = srv.URL
	reg := &runpodgh.Registry{Client: c, Owner: "acme"}
	jit, err := reg.MintJIT(context.Background(), "gpugate-1-1-c1", []string{"gpugate-1-1-c1"})
	if err != nil || jit.Reveal() != "ENCODED" {
		t.Fatalf("MintJIT = %v, %v", jit, err)
	}
	if minted.Name != "gpugate-1-1-c1" || minted.RunnerGroupID != 1 || len(minted.Labels) != 1 {
		t.Errorf("mint request %+v", minted)
	}
	r, found, err := reg.Runner(context.Background(), "gpugate-1-1-c1")
	if err != nil || !found || !r.Online || len(r.Labels) != 2 {
		t.Errorf("Runner = %+v, %v, %v", r, found, err)
	}
}

// Remove finds the runner's ID by its exact name, then deletes it; a
// runner already gone (it removed itself after its one job), before the
// lookup or between it and the delete, is not an error; any other
// failure is.
func TestGitHubRegistry_RemoveDeletesTheNamedRunnerAndAcceptsOneAlreadyGone(t *testing.T) {
	for name, tc := range map[string]struct {
		listed     string // the runners list
		deleteCode int
		deleted    string // the ID deleted, "" for none
		fails      bool
	}{
		"listed":                    {`[{"id":77,"name":"gpugate-1-1-c1","status":"offline"}]`, 204, "77", false},
		"gone before the lookup":    {`[]`, 0, "", false},
		"gone before the delete":    {`[{"id":77,"name":"gpugate-1-1-c1","status":"offline"}]`, 404, "77", false},
		"busy (GitHub refuses)":     {`[{"id":77,"name":"gpugate-1-1-c1","status":"online","busy":true}]`, 422, "77", true},
		"a prefix match is ignored": {`[{"id":78,"name":"gpugate-1-1-c10","status":"offline"}]`, 0, "", false},
	} {
		t.Run(name, func(t *testing.T) {
			mux := http.NewServeMux()
			mux.HandleFunc("GET /orgs/acme/actions/runners", func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintf(w, `{"total_count":1,"runners":%s}`, tc.listed)
			})
			deleted := ""
			mux.HandleFunc("DELETE /orgs/acme/actions/runners/{id}", func(w http.ResponseWriter, r *http.Request) {
				deleted = r.PathValue("id")
				w.WriteHeader(tc.deleteCode)
				if tc.deleteCode >= 400 {
					fmt.Fprint(w, `{"message":"Bad request - Runner \"gpugate-1-1-c1\" is still running a job\""}`)
				}
			})
			c, _ := githubtest.New(t, mux)
			err := (&runpodgh.Registry{Client: c, Owner: "acme"}).Remove(context.Background(), "gpugate-1-1-c1")
			if deleted != tc.deleted || (err != nil) != tc.fails {
				t.Errorf("deleted %q (want %q), err %v (want failure %v)", deleted, tc.deleted, err, tc.fails)
			}
		})
	}
}

func TestGitHubPR_Current(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /repos/o/r/pulls/5", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"number":5,"state":"closed","head":{"sha":"abc"}}`)
	})
	c, _ := githubtest.New(t, mux)
	pr := &runpodgh.PR{Client: c, Owner: "o", Repo: "r", Number: 5}
	got, err := pr.Current(context.Background())
	if err != nil || got.Open || got.HeadSHA != "abc" {
		t.Errorf("Current = %+v, %v", got, err)
	}
	missing, _ := githubtest.New(t, http.NewServeMux())
	if _, err := (&runpodgh.PR{Client: missing, Owner: "o", Repo: "r", Number: 6}).Current(context.Background()); err == nil {
		t.Error("a 404 must be an error (unknown state)")
	}
}

// The run adapter reads what the reaper decides on: the workflow path,
// event, attempt, and a completion time only for a completed run.
func TestGitHubRuns_ReadsTheRunAndCancelsOnA202(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /repos/o/r/actions/runs/7", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"id":7,"path":".github/workflows/runpod-gpu-test.yml","event":"workflow_run","status":"completed","run_attempt":2,
			"updated_at":"2026-11-29T10:00:00Z","repository":{"full_name":"o/r"}}`)
	})
	mux.HandleFunc("GET /repos/o/r/actions/runs/8", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"id":8,"path":".github/workflows/runpod-gpu-test.yml","event":"workflow_dispatch","status":"in_progress","run_attempt":1,
			"updated_at":"2026-11-29T10:00:00Z","repository":{"full_name":"o/r"}}`)
	})
	cancels := 0
	mux.HandleFunc("POST /repos/o/r/actions/runs/7/cancel", func(w http.ResponseWriter, r *http.Request) {
		cancels++
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprint(w, `{}`)
	})
	mux.HandleFunc("POST /repos/o/r/actions/runs/8/cancel", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusConflict)
		fmt.Fprint(w, `{"message":"Cannot cancel a workflow run that is completed."}`)
	})
	c, _ := githubtest.New(t, mux)
	runs := &runpodgh.Runs{Client: c, Owner: "o", Repo: "r"}
	got, err := runs.Run(context.Background(), 7)
	want := runpod.RunInfo{ID: 7, Repository: "o/r", Workflow: ".github/workflows/runpod-gpu-test.yml", Event: "workflow_run",
		Status: "completed", Attempt: 2, CompletedAt: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("completed run (-want +got):\n%s", diff)
	}
	if got, err := runs.Run(context.Background(), 8); err != nil || !got.CompletedAt.IsZero() || got.Status != "in_progress" {
		t.Errorf("a running run: %+v, %v; it has no completion time", got, err)
	}
	if _, err := runs.Run(context.Background(), 9); err == nil {
		t.Error("an unreadable run must be an error")
	}
	if err := runs.Cancel(context.Background(), 7); err != nil || cancels != 1 {
		t.Errorf("a 202 is success: %v (%d calls)", err, cancels)
	}
	if err := runs.Cancel(context.Background(), 8); err == nil {
		t.Error("a 409 must be an error")
	}
}

// Retention records are the run's unexpired artifact names, over every
// page.
func TestGitHubRetention_ListsUnexpiredArtifactNamesOnEveryPage(t *testing.T) {
	mux := http.NewServeMux()
	var srvURL string
	mux.HandleFunc("GET /repos/o/r/actions/runs/11/artifacts", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("page") != "2" {
			w.Header().Set("Link", fmt.Sprintf(`<%s/repos/o/r/actions/runs/11/artifacts?page=2>; rel="next"`, srvURL))
			fmt.Fprint(w, `{"total_count":3,"artifacts":[{"name":"cuda-archive","expired":false},{"name":"old-retention","expired":true}]}`)
			return
		}
		fmt.Fprint(w, `{"total_count":3,"artifacts":[{"name":"runpod-retain-11-1-pod1","expired":false}]}`)
	})
	c, srv := githubtest.New(t, mux)
	srvURL = srv.URL
	names, err := (&runpodgh.Retention{Client: c, Owner: "o", Repo: "r"}).Records(context.Background(), 11)
	if diff := cmp.Diff([]string{"cuda-archive", "runpod-retain-11-1-pod1"}, names); err != nil || diff != "" {
		t.Errorf("records (-want +got):\n%s %v", diff, err)
	}
}

// The watchdog's progress: the GPU job of this attempt, found by name on
// any page, and whether its test step has begun.
func TestGitHubProgress_FindsTheJobAndItsTestStep(t *testing.T) {
	mux := http.NewServeMux()
	var srvURL string
	step := "queued"
	mux.HandleFunc("GET /repos/o/r/actions/runs/42/attempts/2/jobs", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("page") != "2" {
			w.Header().Set("Link", fmt.Sprintf(`<%s/repos/o/r/actions/runs/42/attempts/2/jobs?page=2>; rel="next"`, srvURL))
			fmt.Fprint(w, `{"total_count":2,"jobs":[{"name":"start-runpod","status":"completed","conclusion":"success"}]}`)
			return
		}
		fmt.Fprintf(w, `{"total_count":2,"jobs":[{"name":"Run GPU tests","status":"in_progress","steps":[
			{"name":"Set up job","status":"completed"},{"name":"Run CUDA tests from archive","status":%q}]}]}`, step)
	})
	c, srv := githubtest.New(t, mux)
	srvURL = srv.URL
	p := &runpodgh.Progress{Client: c, Owner: "o", Repo: "r", RunID: 42, Attempt: 2, Job: "Run GPU tests", TestStep: "Run CUDA tests from archive"}
	got, err := p.JobProgress(context.Background())
	if err != nil || got.TestsStarted || got.Completed {
		t.Errorf("before the test step: %+v, %v", got, err)
	}
	step = "in_progress"
	if got, err = p.JobProgress(context.Background()); err != nil || !got.TestsStarted {
		t.Errorf("the test step began: %+v, %v", got, err)
	}
	p.Job = "Another job"
	if got, err = p.JobProgress(context.Background()); err != nil || got != (runpod.JobProgress{}) {
		t.Errorf("a job not yet listed has not started: %+v, %v", got, err)
	}
	p.Job = "GPU tests" // a suffix of the name, but not the job
	if got, err = p.JobProgress(context.Background()); err != nil || got != (runpod.JobProgress{}) {
		t.Errorf("only the whole job name matches: %+v, %v", got, err)
	}
}

// The adoption workflow runs the GPU job inside the called paid lifecycle,
// and GitHub lists a called workflow's job as "<caller job> / <job>".
func TestGitHubProgress_FindsTheJobInsideACalledWorkflow(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /repos/o/r/actions/runs/42/attempts/1/jobs", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"total_count":2,"jobs":[{"name":"execute / start-runpod","status":"completed","conclusion":"success"},
			{"name":"execute / Run GPU tests","status":"completed","conclusion":"failure","started_at":"2026-11-29T10:00:05Z","steps":[
				{"name":"Run CUDA tests from archive","status":"completed","started_at":"2026-11-29T10:02:35Z","completed_at":"2026-11-29T10:20:00Z"}]}]}`)
	})
	c, _ := githubtest.New(t, mux)
	p := &runpodgh.Progress{Client: c, Owner: "o", Repo: "r", RunID: 42, Attempt: 1, Job: "Run GPU tests", TestStep: "Run CUDA tests from archive"}
	got, err := p.JobProgress(context.Background())
	at := func(s string) time.Time { t, _ := time.Parse(time.RFC3339, s); return t }
	want := runpod.JobProgress{TestsStarted: true, Completed: true, Conclusion: "failure", TestStepListed: true,
		JobStartedAt: at("2026-11-29T10:00:05Z"), TestsStartedAt: at("2026-11-29T10:02:35Z"), TestsEndedAt: at("2026-11-29T10:20:00Z")}
	if err != nil || !cmp.Equal(got, want) {
		t.Errorf("got %+v, %v; want %+v", got, err, want)
	}
}

// One repository's adapters read that repository; the runner registry is
// the organization's when one is named, else the repository's own.
func TestRepo_EveryAdapterReadsTheOneRepository(t *testing.T) {
	c := github.NewClient(nil)
	r := runpodgh.Repo{Client: c, Owner: "o", Name: "r"}
	if got, want := *r.Registry(""), (runpodgh.Registry{Client: c, Owner: "o", Repo: "r"}); got != want {
		t.Errorf("repository runners: %+v", got)
	}
	if got, want := *r.Registry("acme"), (runpodgh.Registry{Client: c, Owner: "acme"}); got != want {
		t.Errorf("organization runners: %+v", got)
	}
	if got, want := *r.PR(5), (runpodgh.PR{Client: c, Owner: "o", Repo: "r", Number: 5}); got != want {
		t.Errorf("PR: %+v", got)
	}
	if got, want := *r.Runs(), (runpodgh.Runs{Client: c, Owner: "o", Repo: "r"}); got != want {
		t.Errorf("runs: %+v", got)
	}
	if got, want := *r.Retention(), (runpodgh.Retention{Client: c, Owner: "o", Repo: "r"}); got != want {
		t.Errorf("retention: %+v", got)
	}
	want := runpodgh.Progress{Client: c, Owner: "o", Repo: "r", RunID: 42, Attempt: 2, Job: "Run GPU tests", TestStep: "Run CUDA tests from archive"}
	if got := *r.Progress(42, 2, "Run GPU tests", "Run CUDA tests from archive"); got != want {
		t.Errorf("progress: %+v", got)
	}
}
