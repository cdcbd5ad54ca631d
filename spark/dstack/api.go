package dstack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// InstanceStatus is a fleet instance's status (core/models/instances.py
// InstanceStatus).
type InstanceStatus string

// Instance statuses. Only idle and busy instances run work.
const (
	InstancePending      InstanceStatus = "pending"
	InstanceProvisioning InstanceStatus = "provisioning"
	InstanceIdle         InstanceStatus = "idle"
	InstanceBusy         InstanceStatus = "busy"
	InstanceTerminating  InstanceStatus = "terminating"
	InstanceTerminated   InstanceStatus = "terminated"
)

// Available reports whether the instance can run work: idle or busy.
func (s InstanceStatus) Available() bool { return s == InstanceIdle || s == InstanceBusy }

// RunStatus is a run's status (core/models/runs.py RunStatus).
type RunStatus string

// Run statuses.
const (
	RunPending      RunStatus = "pending"
	RunSubmitted    RunStatus = "submitted"
	RunProvisioning RunStatus = "provisioning"
	RunRunning      RunStatus = "running"
	RunTerminating  RunStatus = "terminating"
	RunTerminated   RunStatus = "terminated"
	RunFailed       RunStatus = "failed"
	RunDone         RunStatus = "done"
)

// Finished reports whether the run has ended (terminated, failed or done);
// an unknown status is not finished.
func (s RunStatus) Finished() bool { return s == RunTerminated || s == RunFailed || s == RunDone }

// Run termination reasons (core/models/runs.py RunTerminationReason): why
// a finished or terminating run ended. Only ReasonAllJobsDone is success.
const (
	ReasonAllJobsDone        = "all_jobs_done"        // status done
	ReasonJobFailed          = "job_failed"           // status failed
	ReasonRetryLimitExceeded = "retry_limit_exceeded" // status failed
	ReasonStoppedByUser      = "stopped_by_user"      // status terminated
	ReasonAbortedByUser      = "aborted_by_user"      // status terminated
	ReasonServerError        = "server_error"         // status failed
	ReasonGatewayError       = "gateway_error"        // status failed
)

// Job statuses (core/models/runs.py JobStatus): submitted, provisioning,
// pulling, running, terminating, then one of the finished ones below.
const (
	JobDone       = "done"
	JobFailed     = "failed"
	JobTerminated = "terminated"
	JobAborted    = "aborted"
)

// Instance is one fleet instance (the fields of dstack's Instance this
// package uses).
type Instance struct {
	ID          string
	Name        string
	InstanceNum int
	// Hostname is the address dstack reaches the host at (for an SSH
	// fleet, the host as listed in ssh_config.hosts); "" while unknown.
	Hostname    string
	Status      InstanceStatus
	Unreachable bool
}

// UnmarshalJSON decodes dstack's Instance: unknown fields are ignored;
// id, name, instance_num and status are required.
func (in *Instance) UnmarshalJSON(data []byte) error {
	if err := requireKeys(data, "instance", "id", "name", "instance_num", "status"); err != nil {
		return err
	}
	var w struct {
		ID          string         `json:"id"`
		Name        string         `json:"name"`
		InstanceNum int            `json:"instance_num"`
		Hostname    *string        `json:"hostname"`
		Status      InstanceStatus `json:"status"`
		Unreachable bool           `json:"unreachable"`
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return nest("instance", err)
	}
	if w.ID == "" || w.Name == "" || w.Status == "" {
		return malformed("instance: id, name and status must not be empty")
	}
	*in = Instance{ID: w.ID, Name: w.Name, InstanceNum: w.InstanceNum, Status: w.Status, Unreachable: w.Unreachable}
	if w.Hostname != nil {
		in.Hostname = *w.Hostname
	}
	return nil
}

// Fleet is a dstack fleet with its instances.
type Fleet struct {
	ID     string
	Name   string
	Status string // submitted, active, terminating, terminated, failed
	// Placement is spec.configuration.placement: "cluster" (what a
	// multi-node task needs), "any", or "" (unset).
	Placement string
	// SSH reports an SSH fleet (spec.configuration.ssh_config set): hosts
	// the operator owns, as opposed to instances dstack provisions.
	SSH       bool
	Instances []Instance
}

// UnmarshalJSON decodes dstack's Fleet: unknown fields are ignored; id,
// name, status, spec.configuration and instances are required.
func (f *Fleet) UnmarshalJSON(data []byte) error {
	if err := requireKeys(data, "fleet", "id", "name", "status", "spec", "instances"); err != nil {
		return err
	}
	var w struct {
		ID     string `json:"id"`
		Name   string `json:"name"`
		Status string `json:"status"`
		Spec   struct {
			Configuration json.RawMessage `json:"configuration"`
		} `json:"spec"`
		Instances []Instance `json:"instances"`
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return nest("fleet", err)
	}
	if len(w.Spec.Configuration) == 0 || string(w.Spec.Configuration) == "null" {
		return malformed("fleet %s: required spec.configuration missing", w.ID)
	}
	var conf struct {
		Placement *string          `json:"placement"`
		SSHConfig *json.RawMessage `json:"ssh_config"`
	}
	if err := json.Unmarshal(w.Spec.Configuration, &conf); err != nil {
		return nest("fleet "+w.ID+": spec.configuration", err)
	}
	if w.ID == "" || w.Name == "" {
		return malformed("fleet: id and name must not be empty")
	}
	*f = Fleet{ID: w.ID, Name: w.Name, Status: w.Status, Instances: w.Instances}
	if conf.Placement != nil {
		f.Placement = *conf.Placement
	}
	f.SSH = conf.SSHConfig != nil && string(*conf.SSHConfig) != "null"
	return nil
}

// Job is one job of a run (a node of a multi-node task), as of its latest
// submission.
type Job struct {
	Num    int
	Status string // submitted, provisioning, pulling, running, terminating, terminated, aborted, failed, done
	// Hostname is the host it was placed on; "" until it is provisioned.
	Hostname string
	// SubmissionID is the latest submission's id, which names its output
	// (PollLogs).
	SubmissionID string
	// TerminationReason says why a finished job ended (done_by_runner,
	// container_exited_with_error, terminated_by_user, ...:
	// JobTerminationReason).
	TerminationReason string
}

// Run is a dstack run (the fields of dstack's Run this package uses).
type Run struct {
	ID          string
	Name        string // run_spec.run_name
	Status      RunStatus
	SubmittedAt time.Time
	// Type is run_spec.configuration.type: task, dev-environment or
	// service.
	Type string
	// Fleets are run_spec.configuration.fleets, each "name" or
	// "project/name".
	Fleets []string
	// Env is run_spec.configuration.env (variables without a value are
	// left out).
	Env map[string]string
	// TerminationReason says why a finished or terminating run ended
	// (stopped_by_user, aborted_by_user, all_jobs_done, ...).
	TerminationReason string
	Jobs              []Job
}

// UnmarshalJSON decodes dstack's Run: unknown fields are ignored; id,
// status, submitted_at, run_spec.run_name and run_spec.configuration.type
// are required.
func (r *Run) UnmarshalJSON(data []byte) error {
	if err := requireKeys(data, "run", "id", "status", "submitted_at", "run_spec"); err != nil {
		return err
	}
	var w struct {
		ID                string    `json:"id"`
		Status            RunStatus `json:"status"`
		SubmittedAt       time.Time `json:"submitted_at"`
		TerminationReason *string   `json:"termination_reason"`
		RunSpec           struct {
			RunName       *string `json:"run_name"`
			Configuration *struct {
				Type   *string         `json:"type"`
				Fleets []fleetRef      `json:"fleets"`
				Env    json.RawMessage `json:"env"`
			} `json:"configuration"`
		} `json:"run_spec"`
		Jobs []struct {
			JobSpec struct {
				JobNum int `json:"job_num"`
			} `json:"job_spec"`
			JobSubmissions []struct {
				ID                  string  `json:"id"`
				Status              string  `json:"status"`
				TerminationReason   *string `json:"termination_reason"`
				JobProvisioningData *struct {
					Hostname *string `json:"hostname"`
				} `json:"job_provisioning_data"`
			} `json:"job_submissions"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return nest("run", err)
	}
	switch {
	case w.ID == "" || w.Status == "":
		return malformed("run: id and status must not be empty")
	case w.RunSpec.RunName == nil || *w.RunSpec.RunName == "":
		return malformed("run %s: required run_spec.run_name missing", w.ID)
	case w.RunSpec.Configuration == nil || w.RunSpec.Configuration.Type == nil || *w.RunSpec.Configuration.Type == "":
		return malformed("run %s: required run_spec.configuration.type missing", w.ID)
	}
	env, err := decodeEnv(w.RunSpec.Configuration.Env)
	if err != nil {
		return malformed("run %s: run_spec.configuration.env: %v", w.ID, err)
	}
	*r = Run{ID: w.ID, Name: *w.RunSpec.RunName, Status: w.Status, SubmittedAt: w.SubmittedAt, Type: *w.RunSpec.Configuration.Type, Env: env}
	if w.TerminationReason != nil {
		r.TerminationReason = *w.TerminationReason
	}
	for _, f := range w.RunSpec.Configuration.Fleets {
		r.Fleets = append(r.Fleets, string(f))
	}
	for _, j := range w.Jobs {
		job := Job{Num: j.JobSpec.JobNum}
		if n := len(j.JobSubmissions); n > 0 {
			last := j.JobSubmissions[n-1]
			job.Status, job.SubmissionID = last.Status, last.ID
			if last.TerminationReason != nil {
				job.TerminationReason = *last.TerminationReason
			}
			if last.JobProvisioningData != nil && last.JobProvisioningData.Hostname != nil {
				job.Hostname = *last.JobProvisioningData.Hostname
			}
		}
		r.Jobs = append(r.Jobs, job)
	}
	return nil
}

// Hostnames are the hosts the run's jobs were placed on, in job order
// ("" for a job not yet provisioned).
func (r Run) Hostnames() []string {
	out := make([]string, 0, len(r.Jobs))
	for _, j := range r.Jobs {
		out = append(out, j.Hostname)
	}
	return out
}

// fleetRef is a fleet reference: dstack sends {"project": ..., "name": ...}
// (or, to clients before 0.20.14, a "name" or "project/name" string).
type fleetRef string

func (f *fleetRef) UnmarshalJSON(data []byte) error {
	var s string
	if json.Unmarshal(data, &s) == nil {
		*f = fleetRef(s)
		return nil
	}
	var ref struct {
		Project *string `json:"project"`
		Name    string  `json:"name"`
	}
	if err := json.Unmarshal(data, &ref); err != nil || ref.Name == "" {
		return malformed("a fleet reference is neither a name nor {project, name}")
	}
	if ref.Project != nil && *ref.Project != "" {
		*f = fleetRef(*ref.Project + "/" + ref.Name)
	} else {
		*f = fleetRef(ref.Name)
	}
	return nil
}

// decodeEnv reads dstack's Env: a mapping (values are strings, or
// {"key": ...} placeholders for variables without a value) or a list of
// "NAME=value" / "NAME" strings.
func decodeEnv(data json.RawMessage) (map[string]string, error) {
	if len(data) == 0 || string(data) == "null" {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) == nil {
		out := map[string]string{}
		for k, v := range m {
			var s string
			if json.Unmarshal(v, &s) == nil {
				out[k] = s
			}
		}
		return out, nil
	}
	var list []string
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("neither a mapping nor a list of strings")
	}
	out := map[string]string{}
	for _, v := range list {
		if k, val, ok := strings.Cut(v, "="); ok {
			out[k] = val
		}
	}
	return out, nil
}

// decodeError is an answer that does not decode as dstack's API defines
// it; it is ErrMalformed.
type decodeError struct{ msg string }

func (e *decodeError) Error() string        { return "dstack: malformed answer: " + e.msg }
func (e *decodeError) Is(target error) bool { return target == ErrMalformed }

func malformed(format string, args ...any) error {
	return &decodeError{msg: fmt.Sprintf(format, args...)}
}

// nest says where in the answer err happened: a nested decodeError gets
// what as a prefix; another decoding error becomes one.
func nest(what string, err error) error {
	var d *decodeError
	if errors.As(err, &d) {
		return &decodeError{msg: what + ": " + d.msg}
	}
	return malformed("%s: %v", what, err)
}

// requireKeys fails unless data is a JSON object holding each key with a
// non-null value.
func requireKeys(data []byte, what string, keys ...string) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil || m == nil {
		return malformed("%s: not a JSON object", what)
	}
	var missing []string
	for _, k := range keys {
		if v, ok := m[k]; !ok || string(v) == "null" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return malformed("%s: required %s missing", what, strings.Join(missing, ", "))
	}
	return nil
}

// GetFleet returns the fleet named name with its instances
// (POST /api/project/{project}/fleets/get {"name": name}). A fleet that
// does not exist is ErrNotFound.
func (c *Client) GetFleet(ctx context.Context, name string) (Fleet, error) {
	var f Fleet
	err := c.post(ctx, c.projectPath("fleets", "get"), struct {
		Name string `json:"name"`
	}{name}, &f)
	return f, err
}

// GetRun returns the run named name, finished or not
// (POST /api/project/{project}/runs/get {"run_name": name}). A run that
// does not exist (or was deleted) is ErrNotFound.
func (c *Client) GetRun(ctx context.Context, name string) (Run, error) {
	var r Run
	err := c.post(ctx, c.projectPath("runs", "get"), struct {
		RunName string `json:"run_name"`
	}{name}, &r)
	return r, err
}

// listPageSize is dstack's largest page of runs/list.
const listPageSize = 100

// maxListPages bounds ListRuns (100 000 runs).
const maxListPages = 1000

type listRunsRequest struct {
	ProjectName     string  `json:"project_name"`
	OnlyActive      bool    `json:"only_active"`
	IncludeJobs     bool    `json:"include_jobs"`
	Limit           int     `json:"limit"`
	PrevSubmittedAt *string `json:"prev_submitted_at,omitempty"`
	PrevRunID       *string `json:"prev_run_id,omitempty"`
}

// ListRuns returns the project's runs, newest first, without their jobs;
// with onlyActive, finished runs are left out. It follows dstack's pages
// (POST /api/runs/list {"project_name", "only_active", "include_jobs":
// false, "limit": 100, "prev_submitted_at", "prev_run_id"}). dstack
// answers an empty list for a project the token's user is not a member of.
func (c *Client) ListRuns(ctx context.Context, onlyActive bool) ([]Run, error) {
	req := listRunsRequest{ProjectName: c.project, OnlyActive: onlyActive, Limit: listPageSize}
	var all []Run
	seen := map[string]bool{}
	for range maxListPages {
		var page []Run
		if err := c.post(ctx, "/api/runs/list", req, &page); err != nil {
			return nil, err
		}
		for _, r := range page {
			if seen[r.ID] {
				return nil, malformed("POST /api/runs/list: run %s came back on a later page", r.ID)
			}
			seen[r.ID] = true
		}
		all = append(all, page...)
		if len(page) < listPageSize {
			return all, nil
		}
		last := page[len(page)-1]
		at, id := last.SubmittedAt.UTC().Format(time.RFC3339Nano), last.ID
		req.PrevSubmittedAt, req.PrevRunID = &at, &id
	}
	return nil, malformed("POST /api/runs/list: more than %d pages", maxListPages)
}

// ApplyRun submits spec as a new run (POST /api/project/{project}/runs/apply
// {"plan": {"run_spec": spec, "current_resource": null}, "force": false}).
// dstack refuses (400) a spec whose run name belongs to an active run, and
// replaces a finished run of that name.
func (c *Client) ApplyRun(ctx context.Context, spec RunSpec) (Run, error) {
	var r Run
	body := struct {
		Plan struct {
			RunSpec         RunSpec `json:"run_spec"`
			CurrentResource *Run    `json:"current_resource"`
		} `json:"plan"`
		Force bool `json:"force"`
	}{}
	body.Plan.RunSpec = spec
	err := c.post(ctx, c.projectPath("runs", "apply"), body, &r)
	return r, err
}

// StopRuns stops the named runs (POST /api/project/{project}/runs/stop
// {"runs_names": names, "abort": abort}); abort skips the graceful
// shutdown. dstack ignores names of runs that are finished or do not exist.
func (c *Client) StopRuns(ctx context.Context, names []string, abort bool) error {
	if len(names) == 0 {
		return nil
	}
	return c.post(ctx, c.projectPath("runs", "stop"), struct {
		RunsNames []string `json:"runs_names"`
		Abort     bool     `json:"abort"`
	}{slices.Clone(names), abort}, nil)
}

// RunSpec is the run spec this package submits (core/models/runs.py
// RunSpec): the fields it sets, nothing else.
type RunSpec struct {
	RunName       string           `json:"run_name"`
	Configuration RunConfiguration `json:"configuration"`
	// SSHKeyPub is the public key that may attach to the run; omitted, the
	// dstack user's own key.
	SSHKeyPub string `json:"ssh_key_pub,omitempty"`
}

// RunConfiguration is a task or dev-environment configuration
// (core/models/configurations.py TaskConfiguration,
// DevEnvironmentConfiguration, with their profile parameters).
type RunConfiguration struct {
	Type string `json:"type"` // "task" or "dev-environment"
	Name string `json:"name,omitempty"`
	// Commands are a task's shell commands.
	Commands []string `json:"commands,omitempty"`
	// Nodes is a task's node count: 2 makes a multi-node task, which needs
	// a fleet with placement: cluster.
	Nodes int `json:"nodes,omitempty"`
	// IDE is a dev environment's IDE (vscode, cursor, windsurf, zed);
	// omitted, SSH only.
	IDE string `json:"ide,omitempty"`
	// Init are a dev environment's commands run on start.
	Init  []string          `json:"init,omitempty"`
	Image string            `json:"image,omitempty"`
	Env   map[string]string `json:"env,omitempty"`
	// Fleets are the fleets the run may use.
	Fleets []string `json:"fleets,omitempty"`
	// Instances pin the run to these existing fleet instances: dstack
	// places it only on matching instances, and fails the job rather than
	// use another.
	Instances []InstanceSelector `json:"instances,omitempty"`
	// CreationPolicy "reuse" never provisions a new instance.
	CreationPolicy string `json:"creation_policy,omitempty"`
	// MaxDuration, in seconds, makes dstack stop the run after it.
	MaxDuration int `json:"max_duration,omitempty"`
}

// InstanceSelector picks a fleet instance by hostname (profiles.py
// InstanceHostnameSelector): its provisioning hostname, internal IP or SSH
// host, compared without case.
type InstanceSelector struct {
	Hostname string `json:"hostname"`
}
