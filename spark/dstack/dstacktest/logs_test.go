package dstacktest_test

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/gpugate/gpugate/spark/dstack/dstacktest"
)

const logsPath = "/api/project/main/logs/poll"

func post(t *testing.T, srv *dstacktest.Server, path, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, dstacktest.BaseURL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+dstacktest.Token)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out map[string]any
	json.Unmarshal(data, &out)
	return resp.StatusCode, out
}

// logs/poll answers a job submission's output as dstack's file log
// storage does (base64 messages, pages following next_token, oldest first
// or newest first), an empty page for output it does not have, and
// refuses what PollLogsRequest refuses (422) or the storage does (400).
func TestPollLogs_AnswersAJobsOutputAsDstackDoes(t *testing.T) {
	srv := newServer("")
	if got, err := apply(t, srv, task("ra", "")); err != nil || got != 200 {
		t.Fatalf("apply: %d %v", got, err)
	}
	srv.Progress()
	srv.Output("ra", 0, "stdout", "one\n")
	srv.Output("ra", 0, "stderr", "two\n")
	srv.Output("ra", 0, "stdout", "three\n")
	srv.Finish("ra", false)
	_, run := post(t, srv, "/api/project/main/runs/get", `{"run_name": "ra"}`)
	sub := run["jobs"].([]any)[0].(map[string]any)["job_submissions"].([]any)[0].(map[string]any)["id"].(string)
	page := func(body string) (int, []string, any) {
		t.Helper()
		status, out := post(t, srv, logsPath, body)
		var msgs []string
		logs, _ := out["logs"].([]any)
		for _, e := range logs {
			m, _ := base64.StdEncoding.DecodeString(e.(map[string]any)["message"].(string))
			msgs = append(msgs, e.(map[string]any)["log_source"].(string)+":"+string(m))
		}
		return status, msgs, out["next_token"]
	}
	q := func(extra string) string {
		return `{"run_name": "ra", "job_submission_id": "` + sub + `"` + extra + `}`
	}
	for name, tc := range map[string]struct {
		body   string
		status int
		msgs   string
		next   any
	}{
		"oldest first":           {q(""), 200, "stdout:one\n|stderr:two\n|stdout:three\n", nil},
		"newest first, a page":   {q(`, "descending": true, "limit": 2`), 200, "stdout:three\n|stderr:two\n", "2"},
		"newest first, the next": {q(`, "descending": true, "limit": 2, "next_token": "2"`), 200, "stdout:one\n", nil},
		"the runner's":           {q(`, "diagnose": true`), 200, "", nil},
		"another submission":     {`{"run_name": "ra", "job_submission_id": "00000000-0000-4000-8000-0000000000ff"}`, 200, "", nil},
		"no run of that name":    {`{"run_name": "rz", "job_submission_id": "` + sub + `"}`, 200, "", nil},
		"an unknown field":       {q(`, "follow": true`), 422, "", nil},
		"no submission":          {`{"run_name": "ra"}`, 422, "", nil},
		"not a UUID":             {`{"run_name": "ra", "job_submission_id": "ra-0"}`, 422, "", nil},
		"a limit over 1000":      {q(`, "limit": 1001`), 422, "", nil},
		"a bad next_token":       {q(`, "next_token": "x"`), 400, "", nil},
	} {
		t.Run(name, func(t *testing.T) {
			status, msgs, next := page(tc.body)
			if status != tc.status || strings.Join(msgs, "|") != strings.TrimSuffix(tc.msgs, "|") || next != tc.next {
				t.Errorf("= %d %q next %v; want %d %q next %v", status, msgs, next, tc.status, tc.msgs, tc.next)
			}
		})
	}
}

// End finishes a run with the status and reasons a test names; Delete
// makes it disappear.
func TestEndAndDelete_FinishARunAsToldOrMakeItDisappear(t *testing.T) {
	srv := newServer("")
	apply(t, srv, task("ra", ""))
	srv.Progress()
	srv.End("ra", dstacktest.Ending{Status: "terminated", Reason: "aborted_by_user", JobStatus: "aborted", JobReason: "aborted_by_user"})
	if r, _ := srv.Run("ra"); r.Status != "terminated" || r.TerminationReason != "aborted_by_user" {
		t.Errorf("after End: %+v", r)
	}
	if srv.InstanceStatus("h1") != dstacktest.Idle {
		t.Errorf("End left its instance %s", srv.InstanceStatus("h1"))
	}
	srv.Delete("ra")
	if status, out := post(t, srv, "/api/project/main/runs/get", `{"run_name": "ra"}`); status != 400 || !strings.Contains(toJSON(out), "resource_not_exists") {
		t.Errorf("a deleted run: %d %v", status, out)
	}
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
