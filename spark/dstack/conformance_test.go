package dstack_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpugate/gpugate/spark/dstack"
	"github.com/gpugate/gpugate/spark/dstack/dstacktest"
)

// The fixtures are dstack's own: JSON its router tests send or expect
// (testdata/SOURCES.md says from where).

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func object(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func keys(v any) []string {
	m, _ := v.(map[string]any)
	return slices.Sorted(maps.Keys(m))
}

func subset(t *testing.T, what string, got, of []string) {
	t.Helper()
	for _, k := range got {
		if !slices.Contains(of, k) {
			t.Errorf("%s: the client sends %q, which dstack's request has no field for (it forbids unknown fields)", what, k)
		}
	}
}

func TestConformance_DstacksOwnAnswersDecodeWithTheClient(t *testing.T) {
	var r dstack.Run
	if err := json.Unmarshal(readFixture(t, "run_dev_env.json"), &r); err != nil {
		t.Fatal(err)
	}
	if r.Name != "test-run" || r.Type != "dev-environment" || r.Status != dstack.RunSubmitted || r.ID != "1b0e1b45-2f8c-4ab6-8010-a0d1a3e44e0e" || len(r.Jobs) != 1 || r.Jobs[0].Status != "submitted" {
		t.Errorf("decoded run %+v", r)
	}
	var f dstack.Fleet
	if err := json.Unmarshal(readFixture(t, "fleet_ssh.json"), &f); err != nil {
		t.Fatal(err)
	}
	if f.Name != "test-ssh-fleet" || !f.SSH || f.Placement != "" || len(f.Instances) != 1 {
		t.Fatalf("decoded fleet %+v", f)
	}
	if in := f.Instances[0]; in.Hostname != "1.1.1.1" || in.Status != dstack.InstancePending || in.Name != "test-ssh-fleet-0" {
		t.Errorf("decoded instance %+v", in)
	}
}

// fakeAnswer calls the fake as the client does and returns its JSON.
func fakeAnswer(t *testing.T, srv *dstacktest.Server, path, body string) []byte {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, dstacktest.BaseURL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+dstacktest.Token)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("POST %s = %d %s", path, resp.StatusCode, b)
	}
	return b
}

func TestConformance_TheFakesAnswersHaveDstacksShapeAndDecode(t *testing.T) {
	f := newFixture(t, "cluster")
	name, err := f.b.Start(ctx, ciWork("r-00000000000000c9", "spark-1", "spark-2"))
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Progress()
	run := object(t, fakeAnswer(t, f.srv, getPath, `{"run_name": "`+name+`"}`))
	want := object(t, readFixture(t, "run_dev_env.json"))
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"run", run, want},
		{"job", run["jobs"].([]any)[0], want["jobs"].([]any)[0]},
		{"job_spec", run["jobs"].([]any)[0].(map[string]any)["job_spec"], want["jobs"].([]any)[0].(map[string]any)["job_spec"]},
		{"job submission", run["latest_job_submission"], want["latest_job_submission"]},
	} {
		if g, w := keys(c.got), keys(c.want); !slices.Equal(g, w) {
			t.Errorf("the fake's %s has fields %v, dstack's %v", c.what, g, w)
		}
	}
	fleet := object(t, fakeAnswer(t, f.srv, fleetPath, `{"name": "spark"}`))
	wantFleet := object(t, readFixture(t, "fleet_ssh.json"))
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"fleet", fleet, wantFleet},
		{"fleet spec", fleet["spec"], wantFleet["spec"]},
		{"fleet configuration", fleet["spec"].(map[string]any)["configuration"], wantFleet["spec"].(map[string]any)["configuration"]},
		{"fleet profile", fleet["spec"].(map[string]any)["profile"], wantFleet["spec"].(map[string]any)["profile"]},
		{"ssh_config", fleet["spec"].(map[string]any)["configuration"].(map[string]any)["ssh_config"], wantFleet["spec"].(map[string]any)["configuration"].(map[string]any)["ssh_config"]},
		{"instance", fleet["instances"].([]any)[0], wantFleet["instances"].([]any)[0]},
	} {
		if g, w := keys(c.got), keys(c.want); !slices.Equal(g, w) {
			t.Errorf("the fake's %s has fields %v, dstack's %v", c.what, g, w)
		}
	}
	// And the client reads them.
	r, err := f.c.GetRun(ctx, name)
	if err != nil || r.Name != name || r.Status != dstack.RunRunning || !slices.Equal(sorted(r.Hostnames()), leasedHostnames("spark-1", "spark-2")) {
		t.Fatalf("GetRun = %+v, %v", r, err)
	}
	fl, err := f.c.GetFleet(ctx, fleetName)
	if err != nil || !fl.SSH || fl.Placement != "cluster" || len(fl.Instances) != 3 || fl.Instances[0].Status != dstack.InstanceBusy {
		t.Fatalf("GetFleet = %+v, %v", fl, err)
	}
}

func TestConformance_TheClientsRequestsLookLikeDstacksOwn(t *testing.T) {
	f := newFixture(t, "cluster")
	name, err := f.b.Start(ctx, ciWork("r-00000000000000ca", "spark-1", "spark-2"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.b.Start(ctx, devWork("r-00000000000000cb", "spark-3")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.b.Sweep(ctx, func(string) (bool, error) { return true, nil }); err != nil {
		t.Fatal(err)
	}
	if err := f.b.Stop(ctx, name); err != nil {
		t.Fatal(err)
	}
	apply := object(t, readFixture(t, "apply_request_dev_env.json"))
	plan := apply["plan"].(map[string]any)
	spec := plan["run_spec"].(map[string]any)
	// The fixture is a dev environment; a task adds TaskConfiguration's
	// own fields and has none of DevEnvironmentConfigurationParams'
	// (core/models/configurations.py).
	devConf := keys(spec["configuration"])
	taskConf := append(slices.DeleteFunc(slices.Clone(devConf), func(k string) bool {
		return slices.Contains([]string{"ide", "version", "init", "inactivity_duration"}, k)
	}), "commands", "nodes", "groups")
	listFields := []string{"project_name", "repo_id", "username", "only_active", "include_jobs", "job_submissions_limit", "prev_submitted_at", "prev_run_id", "limit", "ascending"}
	subset(t, "the fixture's runs/list", keys(object(t, readFixture(t, "list_runs_request.json"))), listFields)
	seen := map[string]bool{}
	for _, r := range f.srv.Requests() {
		var body map[string]any
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatalf("%s: the body is not a JSON object: %s", r.Path, r.Body)
		}
		seen[r.Path] = true
		switch r.Path {
		case applyPath:
			if g, w := keys(body), keys(apply); !slices.Equal(g, w) {
				t.Errorf("apply: fields %v, dstack's test sends %v", g, w)
			}
			if g, w := keys(body["plan"]), keys(plan); !slices.Equal(g, w) {
				t.Errorf("apply plan: fields %v, dstack's test sends %v", g, w)
			}
			rs := body["plan"].(map[string]any)["run_spec"].(map[string]any)
			subset(t, "run_spec", keys(rs), keys(spec))
			conf := rs["configuration"].(map[string]any)
			if conf["type"] == "task" {
				subset(t, "task configuration", keys(conf), taskConf)
			} else {
				subset(t, "dev-environment configuration", keys(conf), devConf)
			}
		case stopPath:
			if g, w := keys(body), keys(object(t, readFixture(t, "stop_request.json"))); !slices.Equal(g, w) {
				t.Errorf("stop: fields %v, dstack's test sends %v", g, w)
			}
		case getPath:
			if g, w := keys(body), keys(object(t, readFixture(t, "get_run_request.json"))); !slices.Equal(g, w) {
				t.Errorf("runs/get: fields %v, dstack's test sends %v", g, w)
			}
		case fleetPath:
			if g, w := keys(body), keys(object(t, readFixture(t, "get_fleet_request.json"))); !slices.Equal(g, w) {
				t.Errorf("fleets/get: fields %v, dstack's test sends %v", g, w)
			}
		case listPath:
			subset(t, "runs/list", keys(body), listFields)
		default:
			t.Errorf("unexpected call %s", r.Path)
		}
		if r.Status != 200 && (r.Path != getPath || r.Status != 400) { // runs/get: 400 before a lease's run exists
			t.Errorf("%s answered %d", r.Path, r.Status)
		}
	}
	for _, p := range []string{applyPath, stopPath, getPath, fleetPath, listPath} {
		if !seen[p] {
			t.Errorf("no %s call to compare", p)
		}
	}
}

// post sends body to the fake and returns the status and answer.
func post(t *testing.T, srv *dstacktest.Server, path, token string, body []byte) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, dstacktest.BaseURL+path, bytes.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func TestConformance_TheFakeAnswersDstacksOwnRequestsAsDstacksTestsExpect(t *testing.T) {
	srv := dstacktest.New()
	srv.AddProject("test_project")
	srv.AddRepo("test_project", "test_repo")
	// TestApplyPlan.test_submits_new_run_if_no_current_resource: 200 and
	// the run.
	status, body := post(t, srv, "/api/project/test_project/runs/apply", dstacktest.Token, readFixture(t, "apply_request_dev_env.json"))
	if status != 200 {
		t.Fatalf("apply = %d %s", status, body)
	}
	var r dstack.Run
	if err := json.Unmarshal(body, &r); err != nil || r.Name != "test-run" || r.Status != dstack.RunSubmitted || r.Type != "dev-environment" {
		t.Fatalf("apply answered %+v, %v", r, err)
	}
	got, want := object(t, body), object(t, readFixture(t, "run_dev_env.json"))
	if g, w := keys(got), keys(want); !slices.Equal(g, w) {
		t.Errorf("run fields %v, dstack's %v", g, w)
	}
	if g, w := keys(got["run_spec"]), keys(want["run_spec"]); !slices.Equal(g, w) {
		t.Errorf("run_spec fields %v, dstack's %v", g, w)
	}
	// TestGetRun.test_returns_run_given_name.
	if status, body := post(t, srv, "/api/project/test_project/runs/get", dstacktest.Token, readFixture(t, "get_run_request.json")); status != 200 || object(t, body)["id"] != r.ID {
		t.Errorf("runs/get = %d %s", status, body)
	}
	// TestListRuns.test_lists_runs_pagination's second page: no run is
	// older than the cursor.
	if status, body := post(t, srv, listPath, dstacktest.Token, readFixture(t, "list_runs_request.json")); status != 200 || string(bytes.TrimSpace(body)) != "[]" {
		t.Errorf("runs/list = %d %s, want 200 []", status, body)
	}
	// TestStopRuns.test_marks_submitted_run_as_terminating.
	if status, body := post(t, srv, "/api/project/test_project/runs/stop", dstacktest.Token, readFixture(t, "stop_request.json")); status != 200 {
		t.Errorf("runs/stop = %d %s", status, body)
	}
	if rec := srv.Runs()[0]; rec.Status != "terminating" || rec.TerminationReason != "stopped_by_user" {
		t.Errorf("after stop the run is %s (%s), want terminating (stopped_by_user)", rec.Status, rec.TerminationReason)
	}
	// TestGetFleet.test_not_returns_by_name_if_fleet_does_not_exist: 400.
	if status, body := post(t, srv, "/api/project/test_project/fleets/get", dstacktest.Token, readFixture(t, "get_fleet_request.json")); status != 400 {
		t.Errorf("fleets/get of a missing fleet = %d %s, want 400", status, body)
	}
}

func TestConformance_TheFakeRefusesWhatDstackRefuses(t *testing.T) {
	srv := dstacktest.New()
	task := `{"type": "task", "commands": ["true"]}`
	for name, tc := range map[string]struct {
		path, token, body string
		status            int
	}{
		"no token":                 {getPath, "", `{"run_name": "x"}`, 403},
		"a wrong token":            {getPath, "wrong", `{"run_name": "x"}`, 403},
		"an unknown project":       {"/api/project/nope/runs/get", dstacktest.Token, `{"run_name": "x"}`, 404},
		"an unknown path":          {"/api/project/main/runs/frobnicate", dstacktest.Token, `{}`, 404},
		"no body":                  {stopPath, dstacktest.Token, ``, 422},
		"no force":                 {applyPath, dstacktest.Token, `{"plan": {"run_spec": {"configuration": ` + task + `}}}`, 422},
		"an unknown field":         {applyPath, dstacktest.Token, `{"plan": {"run_spec": {"configuration": ` + task + `, "colour": "red"}}, "force": false}`, 422},
		"a task without commands":  {applyPath, dstacktest.Token, `{"plan": {"run_spec": {"configuration": {"type": "task"}}}, "force": false}`, 422},
		"an unknown type":          {applyPath, dstacktest.Token, `{"plan": {"run_spec": {"configuration": {"type": "job"}}}, "force": false}`, 422},
		"an empty instances list":  {applyPath, dstacktest.Token, `{"plan": {"run_spec": {"configuration": {"type": "task", "commands": ["true"], "instances": []}}}, "force": false}`, 422},
		"a selector with two keys": {applyPath, dstacktest.Token, `{"plan": {"run_spec": {"configuration": {"type": "task", "commands": ["true"], "instances": [{"hostname": "h", "name": "n"}]}}}, "force": false}`, 422},
		"a bad run name":           {applyPath, dstacktest.Token, `{"plan": {"run_spec": {"run_name": "Bad_Name", "configuration": ` + task + `}}, "force": false}`, 400},
		"no abort":                 {stopPath, dstacktest.Token, `{"runs_names": ["x"]}`, 422},
		"neither name nor id":      {getPath, dstacktest.Token, `{}`, 400},
		"a missing run":            {getPath, dstacktest.Token, `{"run_name": "nope"}`, 400},
		"a page too large":         {listPath, dstacktest.Token, `{"limit": 101}`, 422},
	} {
		status, body := post(t, srv, tc.path, tc.token, []byte(tc.body))
		if status != tc.status {
			t.Errorf("%s: %d %s, want %d", name, status, body, tc.status)
		}
	}
	// An active run of the same name cannot be applied over.
	body := []byte(`{"plan": {"run_spec": {"run_name": "same", "configuration": ` + task + `}, "current_resource": null}, "force": false}`)
	if status, b := post(t, srv, applyPath, dstacktest.Token, body); status != 200 {
		t.Fatalf("apply = %d %s", status, b)
	}
	if status, _ := post(t, srv, applyPath, dstacktest.Token, body); status != 400 {
		t.Errorf("a second apply of an active run = %d, want 400", status)
	}
	c, _ := dstack.NewClient(dstacktest.BaseURL, dstacktest.Token, dstacktest.Project, srv.Client())
	_, err := c.ApplyRun(ctx, dstack.RunSpec{RunName: "same", Configuration: dstack.RunConfiguration{Type: "task", Commands: []string{"true"}}})
	var apiErr *dstack.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 400 || apiErr.Code != "error" {
		t.Errorf("ApplyRun over an active run = %v, want dstack's 400", err)
	}
}
