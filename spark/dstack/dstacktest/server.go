// Package dstacktest is an in-process fake of the dstack server's HTTP API
// (the paths spark/dstack calls), following dstack's server routers and
// models: every call is a POST with a JSON body and a bearer token; bodies
// with unknown or missing fields are refused as FastAPI and pydantic
// refuse them (422), dstack's own errors are 400 with
// {"detail": [{"msg", "code"}]}, a wrong token 403 and an unknown project
// 404. It holds projects, SSH fleets with instances (idle, busy,
// terminated... as a test sets them), runs (submitted, running once
// Progress places them on instances the way dstack's targeting does,
// terminating on stop, terminated on the next Progress), scripted faults
// and a request log.
//
// Client returns an *http.Client whose transport calls the server in
// process (no sockets), so tests can run inside testing/synctest bubbles
// and exercise timeouts in microseconds; Start serves it on a loopback
// httptest.Server instead.
package dstacktest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// The fake's defaults.
const (
	// Token is the user token the server accepts unless WithToken changes
	// it.
	Token = "dstack-test-token-5f0c2a9e71b4"
	// Project is the project every server starts with.
	Project = "main"
	// User is the token's user, the owner of every run.
	User = "spark-controller"
	// BaseURL is the URL to give dstack.NewClient with Client's transport.
	BaseURL = "https://dstack.invalid"
)

// Instance statuses a test may set (dstack's InstanceStatus).
const (
	Pending      = "pending"
	Provisioning = "provisioning"
	Idle         = "idle"
	Busy         = "busy"
	Terminating  = "terminating"
	Terminated   = "terminated"
)

// Fault is a scripted failure for matching requests.
type Fault struct {
	// Path is the exact API path, or a prefix ending in "*"; "" matches
	// any path.
	Path string
	// Status answers with this status and dstack's error body for it.
	Status int
	Detail string // the error's message (a default per status)
	// Hang never answers: the call ends when the request's context does
	// (the client's timeout), and has no effect.
	Hang bool
	// LoseResponse handles the request (it takes effect) and then drops
	// the connection: the client sees an error.
	LoseResponse bool
	// Drop drops the connection before the request is handled.
	Drop bool
	// Malformed answers 200 with a body that is not JSON.
	Malformed bool
	Times     int // how many requests it hits (0: 1)
}

// Paths are the API paths spark/dstack calls, in project Project.
var Paths = []string{"/api/project/" + Project + "/runs/apply", "/api/project/" + Project + "/runs/get", "/api/project/" + Project + "/runs/stop",
	"/api/project/" + Project + "/fleets/get", "/api/runs/list", "/api/project/" + Project + "/logs/poll"}

// RandomFault is a fault on one of paths, drawn from rng, for randomized
// tests: an error status (500, 502, 503, 400, 403), a lost or dropped
// answer, a hung call or a malformed answer, hitting the next one or two
// calls.
func RandomFault(rng *rand.Rand, paths []string) Fault {
	f := Fault{Path: paths[rng.IntN(len(paths))], Times: 1 + rng.IntN(2)}
	switch rng.IntN(6) {
	case 0:
		f.Status = []int{500, 502, 503, 400, 403}[rng.IntN(5)]
	case 1:
		f.LoseResponse = true
	case 2:
		f.Drop = true
	case 3:
		f.Hang = true
	case 4:
		f.Malformed = true
	default:
		f.Status = 500
	}
	return f
}

// Request is one logged request.
type Request struct {
	At     time.Time
	Method string
	Path   string
	Body   []byte
	Status int    // 0 when no answer was delivered
	Fault  string // which fault hit it, if any
}

// FleetSpec describes an SSH fleet for AddFleet.
type FleetSpec struct {
	Project   string   // default Project
	Name      string   // the fleet's name
	Placement string   // "cluster", "any" or "" (unset)
	Hosts     []string // ssh_config.hosts: one instance each, idle
	// Cloud makes a backend fleet (no ssh_config) instead.
	Cloud bool
}

// RunRecord is what the server knows of a run.
type RunRecord struct {
	ID, Project, Name string
	Type              string // task, dev-environment, service
	Status            string
	TerminationReason string
	Nodes             int
	Commands          []string
	Env               map[string]string
	Fleets            []string // configuration.fleets, as names
	// Selectors are configuration.instances: "hostname=H", "name=N" or
	// "fleet=F/instance=I".
	Selectors []string
	// Hosts are the hostnames of the instances its jobs were placed on,
	// in job order (empty until placed).
	Hosts []string
	// StopRequested: runs/stop reached it while it was unfinished.
	StopRequested bool
	Aborted       bool
	Deleted       bool // replaced by a new run of the same name
	Submitted     time.Time
	Deployments   int // in-place updates
	// Spec is the run spec as submitted.
	Spec json.RawMessage
}

// Finished reports a terminated, failed or done run.
func (r RunRecord) Finished() bool { return finished(r.Status) }

func finished(status string) bool {
	return status == "terminated" || status == "failed" || status == "done"
}

type project struct {
	name   string
	fleets []*fleet
	runs   []*run
	repos  map[string]bool
}

type fleet struct {
	id, name, placement string
	ssh                 bool
	hosts               []string
	created             time.Time
	instances           []*instance
}

type instance struct {
	id, name    string
	num         int
	hostname    string
	status      string
	unreachable bool
	created     time.Time
	job         *job // the job placed on it
}

type run struct {
	id, name    string
	status      string
	termination string
	submitted   time.Time
	processed   time.Time
	spec        map[string]any
	raw         json.RawMessage
	typ         string
	nodes       int
	jobs        []*job
	stop, abort bool
	deleted     bool
	deployments int
	fleet       *fleet
}

type job struct {
	id          string
	num         int
	status      string
	termination string
	submitted   time.Time
	processed   time.Time
	inst        *instance
	hostname    string
	logs        []logEvent // its output, oldest first
}

// Server is the fake. Its methods are safe for concurrent use.
type Server struct {
	mu       sync.Mutex
	token    string
	projects map[string]*project
	faults   []*Fault
	log      []Request
	seq      int
	httpSrv  *httptest.Server
}

// Option configures a Server.
type Option func(*Server)

// WithToken sets the accepted user token.
func WithToken(token string) Option { return func(s *Server) { s.token = token } }

// New returns a server with the project Project and no fleets.
func New(opts ...Option) *Server {
	s := &Server{token: Token, projects: map[string]*project{}}
	s.projects[Project] = &project{name: Project, repos: map[string]bool{}}
	for _, o := range opts {
		o(s)
	}
	return s
}

// AddProject adds an empty project.
func (s *Server) AddProject(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.projects[name] == nil {
		s.projects[name] = &project{name: name, repos: map[string]bool{}}
	}
}

// AddRepo registers a repo (as POST repos/init would) so runs may name it.
func (s *Server) AddRepo(projectName, repoID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.projects[projectName]; p != nil {
		p.repos[repoID] = true
	}
}

// AddFleet adds a fleet, active, with one idle instance per host.
func (s *Server) AddFleet(spec FleetSpec) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if spec.Project == "" {
		spec.Project = Project
	}
	p := s.projects[spec.Project]
	if p == nil {
		p = &project{name: spec.Project, repos: map[string]bool{}}
		s.projects[spec.Project] = p
	}
	now := time.Now()
	f := &fleet{id: s.uuid(), name: spec.Name, placement: spec.Placement, ssh: !spec.Cloud, hosts: slices.Clone(spec.Hosts), created: now}
	for i, h := range spec.Hosts {
		f.instances = append(f.instances, &instance{id: s.uuid(), name: fmt.Sprintf("%s-%d", spec.Name, i), num: i, hostname: h, status: Idle, created: now})
	}
	p.fleets = append(p.fleets, f)
}

// SetInstanceStatus sets the status of every instance with this hostname.
func (s *Server) SetInstanceStatus(hostname, status string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range s.instances(hostname) {
		in.status = status
	}
}

// SetUnreachable marks the instances with this hostname unreachable (or
// reachable again).
func (s *Server) SetUnreachable(hostname string, unreachable bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range s.instances(hostname) {
		in.unreachable = unreachable
	}
}

// RemoveInstance deletes the instances with this hostname from their
// fleets (the host left the fleet's ssh_config).
func (s *Server) RemoveInstance(hostname string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.projects {
		for _, f := range p.fleets {
			f.instances = slices.DeleteFunc(f.instances, func(in *instance) bool { return strings.EqualFold(in.hostname, hostname) })
		}
	}
}

func (s *Server) instances(hostname string) []*instance {
	var out []*instance
	for _, p := range s.projects {
		for _, f := range p.fleets {
			for _, in := range f.instances {
				if strings.EqualFold(in.hostname, hostname) {
					out = append(out, in)
				}
			}
		}
	}
	return out
}

// InstanceStatus returns the status of the first instance with this
// hostname ("" when none).
func (s *Server) InstanceStatus(hostname string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ins := s.instances(hostname); len(ins) > 0 {
		return ins[0].status
	}
	return ""
}

// AddFault queues a scripted failure; faults match in the order added.
func (s *Server) AddFault(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.Times == 0 {
		f.Times = 1
	}
	s.faults = append(s.faults, &f)
}

// ClearFaults drops every queued fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// Requests returns the request log.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

// Count returns how many logged requests match path (exact, or a prefix
// ending in "*").
func (s *Server) Count(path string) int {
	n := 0
	for _, r := range s.Requests() {
		if pathMatch(path, r.Path) {
			n++
		}
	}
	return n
}

// Runs returns every run the server ever accepted, in submission order,
// replaced ones included (Deleted).
func (s *Server) Runs() []RunRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []RunRecord
	for _, name := range slices.Sorted(maps.Keys(s.projects)) {
		for _, r := range s.projects[name].runs {
			out = append(out, record(name, r))
		}
	}
	slices.SortStableFunc(out, func(a, b RunRecord) int { return a.Submitted.Compare(b.Submitted) })
	return out
}

// Run returns the run of project Project with this name that is not
// deleted.
func (s *Server) Run(name string) (RunRecord, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.projects[Project].byName(name); r != nil {
		return record(Project, r), true
	}
	return RunRecord{}, false
}

func record(projectName string, r *run) RunRecord {
	conf, _ := r.spec["configuration"].(map[string]any)
	rec := RunRecord{ID: r.id, Project: projectName, Name: r.name, Type: r.typ, Status: r.status, TerminationReason: r.termination,
		Nodes: r.nodes, Env: envOf(conf["env"]), Fleets: fleetNames(conf["fleets"]), StopRequested: r.stop, Aborted: r.abort,
		Deleted: r.deleted, Submitted: r.submitted, Deployments: r.deployments, Spec: slices.Clone(r.raw)}
	for _, c := range asList(conf["commands"]) {
		if c, ok := c.(string); ok {
			rec.Commands = append(rec.Commands, c)
		}
	}
	for _, sel := range selectors(conf) {
		rec.Selectors = append(rec.Selectors, sel.String())
	}
	for _, j := range r.jobs {
		if j.hostname != "" {
			rec.Hosts = append(rec.Hosts, j.hostname)
		}
	}
	return rec
}

// Progress moves every run one step, as dstack's background pipelines do:
// a submitted run is placed on matching idle instances (running), or
// fails when what it targets cannot run it; a terminating run becomes
// terminated and frees its instances.
func (s *Server) Progress() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for _, name := range slices.Sorted(maps.Keys(s.projects)) {
		p := s.projects[name]
		for _, r := range p.runs {
			switch r.status {
			case "submitted":
				p.place(r, now)
			case "terminating":
				r.status = "terminated"
				r.processed = now
				for _, j := range r.jobs {
					j.status, j.processed = "terminated", now
					if j.termination == "" {
						j.termination = "terminated_by_user"
					}
					free(j)
				}
			}
		}
	}
}

// Finish ends an unfinished run of project Project as done (all jobs
// done by their runner) or failed (a job's container exited with an
// error), freeing its instances.
func (s *Server) Finish(name string, failed bool) {
	e := Ending{Status: "done", Reason: "all_jobs_done", JobStatus: "done", JobReason: "done_by_runner"}
	if failed {
		e = Ending{Status: "failed", Reason: "job_failed", JobStatus: "failed", JobReason: "container_exited_with_error"}
	}
	s.End(name, e)
}

func free(j *job) {
	if j.inst != nil && j.inst.job == j {
		j.inst.job = nil
		if j.inst.status == Busy {
			j.inst.status = Idle
		}
	}
}

// place puts a submitted run's jobs on instances the way dstack's
// targeting does: only fleets in configuration.fleets (all the project's
// otherwise), only instances matching configuration.instances when set,
// one whole idle, reachable instance per job, a multi-node task only in a
// fleet with placement cluster. When the targeted instances can never
// hold it (too few exist or are available), the run fails with dstack's
// "Failed to use specified instances"; when they are only busy, it waits.
func (p *project) place(r *run, now time.Time) {
	conf, _ := r.spec["configuration"].(map[string]any)
	sels := selectors(conf)
	names := fleetNames(conf["fleets"])
	policy, _ := conf["creation_policy"].(string)
	possible := false
	for _, f := range p.fleets {
		if len(names) > 0 && !slices.Contains(names, f.name) {
			continue
		}
		if r.nodes > 1 && f.placement != "cluster" {
			continue
		}
		var matching, free []*instance
		for _, in := range f.instances {
			if len(sels) > 0 && !slices.ContainsFunc(sels, func(s selector) bool { return s.matches(f, in) }) {
				continue
			}
			if (in.status == Idle || in.status == Busy) && !in.unreachable {
				matching = append(matching, in)
				if in.status == Idle && in.job == nil {
					free = append(free, in)
				}
			}
		}
		if len(matching) >= r.nodes {
			possible = true
		}
		if len(free) < r.nodes {
			continue
		}
		for i, j := range r.jobs {
			in := free[i]
			in.job, in.status = j, Busy
			j.inst, j.hostname, j.status, j.processed = in, in.hostname, "running", now
		}
		r.status, r.fleet, r.processed = "running", f, now
		return
	}
	if possible || (len(sels) == 0 && policy != "reuse") {
		return // waits for capacity (or, in the real server, provisions)
	}
	r.status, r.termination, r.processed = "failed", "job_failed", now
	for _, j := range r.jobs {
		j.status, j.termination = "failed", "failed_to_start_due_to_no_capacity"
	}
}

func (p *project) byName(name string) *run {
	if p == nil {
		return nil
	}
	for _, r := range p.runs {
		if r.name == name && !r.deleted {
			return r
		}
	}
	return nil
}

func (s *Server) uuid() string {
	s.seq++
	return fmt.Sprintf("%08x-0000-4000-8000-%012x", s.seq, s.seq)
}

// Client returns an HTTP client whose transport serves requests in
// process; use it with BaseURL.
func (s *Server) Client() *http.Client { return &http.Client{Transport: transport{s}} }

// Handler is the fake as an http.Handler (a dropped or lost answer aborts
// the connection).
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.serve(w, r) != outcomeOK {
			panic(http.ErrAbortHandler)
		}
	})
}

// Start serves the fake on a loopback httptest.Server and returns its URL.
func (s *Server) Start() string {
	s.httpSrv = httptest.NewServer(s.Handler())
	return s.httpSrv.URL
}

// Close stops a started server.
func (s *Server) Close() {
	if s.httpSrv != nil {
		s.httpSrv.Close()
	}
}

type transport struct{ s *Server }

type outcome int

const (
	outcomeOK outcome = iota
	outcomeDrop
	outcomeLost
)

func (t transport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	switch t.s.serve(rec, r.Clone(r.Context())) {
	case outcomeDrop:
		return nil, fmt.Errorf("dstacktest: connection reset by peer")
	case outcomeLost:
		if err := r.Context().Err(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("dstacktest: connection closed before the answer arrived")
	}
	if err := r.Context().Err(); err != nil {
		return nil, err
	}
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}

func pathMatch(pattern, path string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(path, prefix)
	}
	return pattern == "" || pattern == path
}

func (s *Server) takeFault(path string) *Fault {
	for i, f := range s.faults {
		if pathMatch(f.Path, path) {
			f.Times--
			if f.Times <= 0 {
				s.faults = slices.Delete(s.faults, i, i+1)
			}
			return f
		}
	}
	return nil
}

func describe(f *Fault) string {
	switch {
	case f.Hang:
		return "hang"
	case f.Drop:
		return "drop"
	case f.LoseResponse:
		return "lose-response"
	case f.Malformed:
		return "malformed"
	}
	return fmt.Sprint(f.Status)
}

// serve handles one request, applying faults and logging it.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) outcome {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(io.LimitReader(r.Body, 8<<20))
	}
	s.mu.Lock()
	f := s.takeFault(r.URL.Path)
	entry := Request{At: time.Now(), Method: r.Method, Path: r.URL.Path, Body: body}
	if f != nil {
		entry.Fault = describe(f)
	}
	idx := len(s.log)
	s.log = append(s.log, entry)
	s.mu.Unlock()

	switch {
	case f != nil && f.Hang:
		<-r.Context().Done()
		return outcomeLost
	case f != nil && f.Drop:
		return outcomeDrop
	}
	rec := httptest.NewRecorder()
	switch {
	case f != nil && f.Status != 0:
		writeFault(rec, f.Status, f.Detail)
	case f != nil && f.Malformed:
		rec.Header().Set("Content-Type", "application/json")
		rec.WriteHeader(http.StatusOK)
		rec.WriteString(`{"id": "trunc`)
	default:
		s.mu.Lock()
		s.route(rec, r, body)
		s.mu.Unlock()
	}
	s.mu.Lock()
	if f == nil || !f.LoseResponse {
		s.log[idx].Status = rec.Code
	}
	s.mu.Unlock()
	if f != nil && f.LoseResponse {
		return outcomeLost
	}
	maps.Copy(w.Header(), rec.Header())
	w.WriteHeader(rec.Code)
	w.Write(rec.Body.Bytes())
	return outcomeOK
}

// writeFault answers status with the body dstack sends for it.
func writeFault(w http.ResponseWriter, status int, detail string) {
	switch {
	case status == http.StatusBadRequest:
		if detail == "" {
			detail = "Scripted failure"
		}
		clientError(w, "error", detail)
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		if detail == "" {
			detail = "Invalid token"
		}
		writeJSON(w, status, map[string]any{"detail": errorDetail(detail, nil)})
	case status == http.StatusNotFound:
		writeJSON(w, status, map[string]any{"detail": errorDetail("Not found", nil)})
	case status == http.StatusUnprocessableEntity:
		if detail == "" {
			detail = "Field required"
		}
		writeJSON(w, status, map[string]any{"detail": []any{map[string]any{"type": "missing", "loc": []any{"body"}, "msg": detail, "input": nil}}})
	case status >= 500:
		// uvicorn's answer to an unhandled exception.
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(status)
		if detail == "" {
			detail = "Internal Server Error"
		}
		io.WriteString(w, detail)
	default:
		writeJSON(w, status, map[string]any{"detail": detail})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // the fake's own values always encode
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// errorDetail is dstack's error_detail(msg, code).
func errorDetail(msg string, code any) map[string]any {
	return map[string]any{"msg": msg, "code": code}
}

// clientError is a ServerClientError: 400 {"detail": [{"msg", "code"}]}.
func clientError(w http.ResponseWriter, code, msg string) {
	writeJSON(w, http.StatusBadRequest, map[string]any{"detail": []any{errorDetail(msg, code)}})
}

var projectPath = regexp.MustCompile(`^/api/project/([^/]+)/(fleets|runs|logs)/([a-z_]+)$`)

// route serves an authenticated API call; s.mu is held.
func (s *Server) route(w http.ResponseWriter, r *http.Request, body []byte) {
	var handler func(http.ResponseWriter, *project, any)
	var proj *project
	var needBody bool
	if m := projectPath.FindStringSubmatch(r.URL.Path); m != nil {
		switch m[2] + "/" + m[3] {
		case "fleets/get":
			handler, needBody = s.getFleet, true
		case "runs/get":
			handler, needBody = s.getRun, true
		case "runs/apply":
			handler, needBody = s.applyRun, true
		case "runs/stop":
			handler, needBody = s.stopRuns, true
		case "logs/poll":
			handler, needBody = s.pollLogs, true
		}
		if handler != nil {
			if !s.method(w, r) || !s.authenticated(w, r) {
				return
			}
			if proj = s.projects[m[1]]; proj == nil {
				writeJSON(w, http.StatusNotFound, map[string]any{"detail": errorDetail("Not found", nil)})
				return
			}
		}
	} else if r.URL.Path == "/api/runs/list" {
		if !s.method(w, r) || !s.authenticated(w, r) {
			return
		}
		handler, needBody = s.listRuns, true
	}
	if handler == nil {
		writeJSON(w, http.StatusNotFound, map[string]any{"detail": "Not Found"})
		return
	}
	var v any
	if len(bytes.TrimSpace(body)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil || dec.More() {
			invalid(w, verr{Type: "json_invalid", Loc: []any{"body", 0}, Msg: "JSON decode error", Input: map[string]any{}})
			return
		}
	}
	if v == nil && needBody {
		invalid(w, verr{Type: "missing", Loc: []any{"body"}, Msg: "Field required", Input: nil})
		return
	}
	handler(w, proj, v)
}

func (s *Server) method(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"detail": "Method Not Allowed"})
		return false
	}
	return true
}

// authenticated checks the bearer token as dstack's HTTPBearer and
// log_in_with_token do.
func (s *Server) authenticated(w http.ResponseWriter, r *http.Request) bool {
	scheme, cred, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") || cred == "" {
		writeJSON(w, http.StatusForbidden, map[string]any{"detail": "Not authenticated"})
		return false
	}
	if cred != s.token {
		writeJSON(w, http.StatusForbidden, map[string]any{"detail": errorDetail("Invalid token", nil)})
		return false
	}
	return true
}
