package spark

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/gpugate/gpugate/internal/secret"
)

// The host agent's side of the API (sparkctl agent), every route for the
// named host's own credential only:
//
//	POST /v1/hosts/{host}/runner            the granted lease's one-job runner config
//	POST /v1/hosts/{host}/cleaned           {"lease": ID, "gpu_processes": N}: the cleanup acknowledgement
//	GET  /v1/hosts/{host}/order             the resident service's next step to run (204: none)
//	POST /v1/hosts/{host}/order/{id}        {"error": ""}: how the step ended
//	POST /v1/leases/{id}/receipt            the entry point's evidence receipt (a host of the lease)
//
// and the operator's:
//
//	POST /v1/hosts/{host}/clear-cleanup     {"lease": ID}: clear a cleanup its agent never acknowledged

// HandlerOption configures NewAuthHandler.
type HandlerOption func(*handlerOptions)

type handlerOptions struct {
	runners *RunnerConfigs
	service *AgentService
}

// WithRunnerConfigs serves v's runner configs to the leased hosts' agents.
func WithRunnerConfigs(v *RunnerConfigs) HandlerOption {
	return func(o *handlerOptions) { o.runners = v }
}

// WithAgentService serves s's orders to the service host's agent.
func WithAgentService(s *AgentService) HandlerOption {
	return func(o *handlerOptions) { o.service = s }
}

// RoleJob is the job a lease's runner runs. Its token is minted with the
// lease's runner config and handed by the host agent to the runner, never
// stored: it reads its own lease (the fencing token included), checks
// fencing and the host's state on the lease's hosts (the job's own
// preflight) and records the lease's evidence receipt, nothing else, and
// it stops working when the lease ends. The job never holds the host's
// credential, so code under test cannot report the host clean, take
// another lease's runner or release its own lease.
const RoleJob Role = "job"

// ErrConflict means another agent process for the same host already took
// the lease's runner config: two agents run on one host.
var ErrConflict = errors.New("spark: another agent process holds this")

// RunnerConfigs holds the one-job runner configs minted for granted
// leases in memory, never on disk, for the leased host's agent to take,
// until the lease ends (Sweep). Only that host's credential can take it,
// and only the agent process that took it first can take it again while
// the lease is active (an answer lost on the way): a second agent process
// for the host gets ErrConflict, so it never starts a second runner for
// the job and never releases the lease under the first one. A config is a
// credential: it prints redacted. Each config comes with its job's token
// (RoleJob).
type RunnerConfigs struct {
	mu   sync.Mutex
	m    map[string]RunnerAssignment // by lease
	by   map[string]string           // lease -> the agent process that took it
	jobs map[[sha256.Size]byte]string
}

// NewRunnerConfigs is an empty store.
func NewRunnerConfigs() *RunnerConfigs {
	return &RunnerConfigs{m: map[string]RunnerAssignment{}, by: map[string]string{}, jobs: map[[sha256.Size]byte]string{}}
}

// RunnerAssignment is what a leased host's agent needs to start the
// runner for exactly its lease's job.
type RunnerAssignment struct {
	Lease     string        `json:"lease"`
	Token     int64         `json:"token"`
	Topology  Topology      `json:"topology"`
	Runner    string        `json:"runner"`     // the runner's name, a label only this job asks for
	JITConfig secret.Secret `json:"jit_config"` // the encoded one-job config: never logged
	// JobToken is the job's own API credential (RoleJob), handed to the
	// runner as SPARK_TOKEN.
	JobToken secret.Secret `json:"job_token"`
}

// Put keeps runner's config for lease, with a fresh job token.
func (v *RunnerConfigs) Put(lease, runner string, cfg secret.Secret) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if old, ok := v.m[lease]; ok {
		delete(v.jobs, sha256.Sum256([]byte(old.JobToken.Reveal())))
	}
	job := NewToken()
	v.m[lease] = RunnerAssignment{Lease: lease, Runner: runner, JITConfig: cfg, JobToken: secret.Secret(job)}
	v.jobs[sha256.Sum256([]byte(job))] = lease
}

// take returns lease's config to agent process by: the first to take it,
// or the same one again.
func (v *RunnerConfigs) take(lease, by string) (RunnerAssignment, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	a, ok := v.m[lease]
	switch first, taken := v.by[lease]; {
	case !ok:
		return a, fmt.Errorf("%w: lease %s has no runner config (not minted yet, or a lease without a runner)", ErrNotFound, lease)
	case taken && first != by:
		return a, fmt.Errorf("%w: lease %s's runner config was taken by another agent process on its host; stop the duplicate agent", ErrConflict, lease)
	}
	v.by[lease] = by
	return a, nil
}

// has reports whether lease has a runner config.
func (v *RunnerConfigs) has(lease string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	_, ok := v.m[lease]
	return ok
}

// job is the lease whose job token is token.
func (v *RunnerConfigs) job(token string) (Credential, bool) {
	if v == nil {
		return Credential{}, false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	lease, ok := v.jobs[sha256.Sum256([]byte(token))]
	return Credential{Role: RoleJob, Name: lease}, ok
}

// Sweep drops the config of every lease that is no longer active (its
// runner never started: started later it would come online on a host no
// lease holds) and returns their leases. A lease the controller cannot
// read now is kept for the next sweep.
func (v *RunnerConfigs) Sweep(ctx context.Context, c *Controller) []string {
	v.mu.Lock()
	leases := make([]string, 0, len(v.m))
	for id := range v.m {
		leases = append(leases, id)
	}
	v.mu.Unlock()
	var dropped []string
	for _, id := range leases {
		st, err := c.Status(ctx, id)
		if (err == nil && st.Request.State != Active) || errors.Is(err, ErrNotFound) {
			v.mu.Lock()
			delete(v.jobs, sha256.Sum256([]byte(v.m[id].JobToken.Reveal())))
			delete(v.m, id)
			delete(v.by, id)
			v.mu.Unlock()
			dropped = append(dropped, id)
		}
	}
	return dropped
}

// AgentService is the ResidentService of a service host that runs the
// host agent: each step (drain, stop, verify released, start, healthy) is
// an order the agent takes from the API, runs with the host's own
// commands, and reports; the controller waits for the report, as long as
// its context allows. A pause is not a release: only the agent's verify
// step, run on the host, says the GPU is free.
//
// An order is taken once: a second agent polling for the same host (a
// duplicate process) gets nothing, so a step never runs twice at once.
// An order no agent takes within TakeWithin fails with ErrNoAgent, so an
// agent that is down costs admission that long, not the step's whole
// timeout.
type AgentService struct {
	Host string
	// TakeWithin is how long an order waits to be taken (default
	// DefaultTakeWithin). The agent polls without pause, so a live agent
	// takes an order at once.
	TakeWithin time.Duration
	mu         sync.Mutex
	seq        int
	pending    *serviceOrder
	ready      chan struct{} // closed when an order is posted
}

// DefaultTakeWithin is AgentService.TakeWithin's default: twice the
// longest poll the agent makes, so a live agent's next poll always comes
// within it.
const DefaultTakeWithin = time.Minute

type serviceOrder struct {
	ID    string `json:"id"`
	Step  string `json:"step"`
	taken bool
	done  chan error
}

// NewAgentService orders host's agent.
func NewAgentService(host string) *AgentService {
	return &AgentService{Host: host, ready: make(chan struct{})}
}

var _ ResidentService = (*AgentService)(nil)

// ErrServiceStep means the agent reported that a step of the resident service
// failed.
var ErrServiceStep = errors.New("spark: the host agent's resident-service step failed")

// ErrNoAgent means no host agent took a resident-service order in time:
// the service host's agent is down or not polling. Start it (sparkctl
// agent with -service commands) on that host.
var ErrNoAgent = errors.New("spark: no host agent took the resident service's order")

func (s *AgentService) order(ctx context.Context, step string) error {
	s.mu.Lock()
	s.seq++
	o := &serviceOrder{ID: strconv.Itoa(s.seq), Step: step, done: make(chan error, 1)}
	s.pending = o
	close(s.ready)
	s.ready = make(chan struct{})
	within := cmp.Or(s.TakeWithin, DefaultTakeWithin)
	s.mu.Unlock()
	untaken := time.NewTimer(within)
	defer untaken.Stop()
	drop := func() {
		if s.pending == o {
			s.pending = nil
		}
	}
	for {
		select {
		case err := <-o.done:
			return err
		case <-untaken.C:
			s.mu.Lock()
			if !o.taken {
				drop()
				s.mu.Unlock()
				return fmt.Errorf("%w: %s on %s was not taken within %s", ErrNoAgent, step, s.Host, within)
			}
			s.mu.Unlock()
		case <-ctx.Done():
			s.mu.Lock()
			drop()
			s.mu.Unlock()
			return fmt.Errorf("spark: %s on %s: the host agent did not report: %w", step, s.Host, ctx.Err())
		}
	}
}

// next takes the pending order, waiting up to wait for one; an order
// taken already is not handed out again.
func (s *AgentService) next(ctx context.Context, wait time.Duration) (*serviceOrder, bool) {
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		s.mu.Lock()
		o, ready := s.pending, s.ready
		if o != nil && !o.taken {
			o.taken = true
			s.mu.Unlock()
			return o, true
		}
		s.mu.Unlock()
		select {
		case <-ready:
		case <-t.C:
			return nil, false
		case <-ctx.Done():
			return nil, false
		}
	}
}

// report ends order id with the agent's error text ("" when it passed).
func (s *AgentService) report(id, failure string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.pending
	if o == nil || o.ID != id {
		return fmt.Errorf("%w: order %s is not pending on %s", ErrStaleToken, id, s.Host)
	}
	s.pending = nil
	if failure != "" {
		o.done <- fmt.Errorf("%w: %s", ErrServiceStep, failure)
	} else {
		o.done <- nil
	}
	return nil
}

// Drain orders the agent's drain step.
func (s *AgentService) Drain(ctx context.Context) error { return s.order(ctx, "drain") }

// Stop orders the agent's stop step.
func (s *AgentService) Stop(ctx context.Context) error { return s.order(ctx, "stop") }

// VerifyReleased orders the agent's verify_released step.
func (s *AgentService) VerifyReleased(ctx context.Context) error {
	return s.order(ctx, "verify_released")
}

// Start orders the agent's start step.
func (s *AgentService) Start(ctx context.Context) error { return s.order(ctx, "start") }

// Healthy orders the agent's healthy step.
func (s *AgentService) Healthy(ctx context.Context) error { return s.order(ctx, "healthy") }

// MaxReceipt bounds an evidence receipt: a compact summary, large logs
// stay in the work directory.
const MaxReceipt = 64 << 10

// receiptKey is the request annotation holding a receipt's digest.
const receiptKey = "receipt"

// ReceiptDigest is the digest the controller stored for lease r's
// evidence receipt ("sha256:<hex>"), "" when none was recorded.
func ReceiptDigest(r Request) string { return r.Annotations[receiptKey] }

// DigestReceipt is a receipt's digest as the controller stores it
// ("sha256:<hex>").
func DigestReceipt(receipt []byte) string {
	sum := sha256.Sum256(receipt)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// RecordReceipt stores the digest of active lease id's evidence receipt
// (what its test entry point printed, 1 byte to MaxReceipt) with the
// lease and returns it; a lease's check passes only with one. A lease has
// one receipt: the same one again is accepted (an answer lost on the way),
// another is ErrConflict.
func (c *Controller) RecordReceipt(ctx context.Context, id string, receipt []byte) (string, error) {
	if len(receipt) == 0 || len(receipt) > MaxReceipt {
		return "", fmt.Errorf("%w: a receipt is 1 byte to %d KiB (large logs stay in the work directory)", ErrInvalid, MaxReceipt>>10)
	}
	digest := DigestReceipt(receipt)
	same := false
	err := c.tx(ctx, func(tx Tx) error {
		same = false
		// Checked and written in one transaction: two uploads at once
		// cannot both win.
		return annotate(tx, id, receiptKey, digest, func(r Request) error {
			switch had := ReceiptDigest(r); {
			case r.State != Active:
				return fmt.Errorf("%w: lease %s is %s: a receipt is recorded while its job runs", ErrStaleToken, id, r.State)
			case had == digest:
				same = true
				return errRollback
			case had != "":
				return fmt.Errorf("%w: lease %s has its evidence receipt (%s) already; a lease has one", ErrConflict, id, had)
			}
			return nil
		})
	})
	if same && errors.Is(err, errRollback) {
		err = nil
	}
	if err != nil {
		return "", err
	}
	return digest, nil
}

// sendAssignment answers a runner assignment with its secrets revealed,
// never cached.
func sendAssignment(w http.ResponseWriter, a RunnerAssignment) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(struct {
		RunnerAssignment
		JITConfig string `json:"jit_config"`
		JobToken  string `json:"job_token"`
	}{a, a.JITConfig.Reveal(), a.JobToken.Reveal()})
}

// hostRoutes registers the host agent's routes.
func hostRoutes(mux *http.ServeMux, c *Controller, o handlerOptions, write func(http.ResponseWriter, int, any), fail func(http.ResponseWriter, error)) {
	self := func(w http.ResponseWriter, r *http.Request, what string) bool {
		if cred := credentialOf(r.Context()); cred.Role != RoleHost || cred.Name != r.PathValue("host") {
			fail(w, forbidden(cred, what+" for host "+r.PathValue("host")))
			return false
		}
		return true
	}
	decode := func(w http.ResponseWriter, r *http.Request, v any) bool {
		dec := json.NewDecoder(io.LimitReader(r.Body, 1<<12))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			fail(w, fmt.Errorf("%w: body: %v", ErrInvalid, err))
			return false
		}
		return true
	}
	mux.HandleFunc("POST /v1/hosts/{host}/runner", func(w http.ResponseWriter, r *http.Request) {
		// The agent's ID travels in the body, never the URL: URLs land in
		// access logs, and the ID is what lets a process take the config.
		var body struct {
			Agent string `json:"agent"`
		}
		if !self(w, r, "take the runner config") || !decode(w, r, &body) {
			return
		}
		if body.Agent == "" {
			fail(w, fmt.Errorf("%w: the agent's ID is required to take a runner config", ErrInvalid))
			return
		}
		st, err := c.HostState(r.Context(), r.PathValue("host"))
		if err != nil {
			fail(w, err)
			return
		}
		if st.Mode != Leased || st.Lease == "" || o.runners == nil {
			fail(w, fmt.Errorf("%w: no lease on host %s has a runner config", ErrNotFound, r.PathValue("host")))
			return
		}
		lease, err := c.Status(r.Context(), st.Lease)
		if err != nil {
			fail(w, err)
			return
		}
		if len(lease.Request.Hosts) == 0 || lease.Request.Hosts[0] != r.PathValue("host") {
			// A pair's job runs on its first host; the second is reached
			// over the interconnect, and its agent runs the preflight
			// there: its assignment has no runner config.
			if !o.runners.has(st.Lease) {
				fail(w, fmt.Errorf("%w: lease %s has no runner config", ErrNotFound, st.Lease))
				return
			}
			sendAssignment(w, RunnerAssignment{Lease: st.Lease, Token: lease.Request.Token, Topology: lease.Request.Topology})
			return
		}
		a, err := o.runners.take(st.Lease, body.Agent)
		if err != nil {
			fail(w, err)
			return
		}
		a.Token, a.Topology = lease.Request.Token, lease.Request.Topology
		sendAssignment(w, a)
	})
	mux.HandleFunc("POST /v1/hosts/{host}/cleaned", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Lease        string `json:"lease"`
			GPUProcesses *int   `json:"gpu_processes"`
		}
		if !decode(w, r, &body) {
			return
		}
		if body.GPUProcesses == nil || *body.GPUProcesses < 0 || body.Lease == "" {
			fail(w, fmt.Errorf("%w: lease and gpu_processes are required; an agent that cannot count the GPU's processes does not acknowledge", ErrInvalid))
			return
		}
		if !self(w, r, "acknowledge the cleanup") {
			return
		}
		if err := c.AckCleanup(r.Context(), r.PathValue("host"), body.Lease, *body.GPUProcesses); err != nil {
			fail(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /v1/hosts/{host}/clear-cleanup", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Lease string `json:"lease"`
		}
		if !decode(w, r, &body) {
			return
		}
		cred := credentialOf(r.Context())
		if cred.Role != RoleOperator {
			fail(w, forbidden(cred, "clear the cleanup of host "+r.PathValue("host")+": that is the operator's"))
			return
		}
		if body.Lease == "" {
			fail(w, fmt.Errorf("%w: lease is required: the lease whose cleanup is cleared", ErrInvalid))
			return
		}
		if err := c.ClearCleanup(r.Context(), r.PathValue("host"), body.Lease, cred.Name); err != nil {
			fail(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /v1/hosts/{host}/order", func(w http.ResponseWriter, r *http.Request) {
		if !self(w, r, "take the resident service's orders") {
			return
		}
		if o.service == nil || o.service.Host != r.PathValue("host") {
			fail(w, fmt.Errorf("%w: host %s runs no agent-driven resident service", ErrNotFound, r.PathValue("host")))
			return
		}
		wait, err := time.ParseDuration(r.URL.Query().Get("wait"))
		if err != nil || wait < 0 || wait > time.Minute {
			wait = 0
		}
		if ord, ok := o.service.next(r.Context(), wait); ok {
			write(w, http.StatusOK, ord)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /v1/hosts/{host}/order/{id}", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Error string `json:"error"`
		}
		if !decode(w, r, &body) || !self(w, r, "report the resident service's step") {
			return
		}
		if o.service == nil || o.service.Host != r.PathValue("host") {
			fail(w, fmt.Errorf("%w: host %s runs no agent-driven resident service", ErrNotFound, r.PathValue("host")))
			return
		}
		if err := o.service.report(r.PathValue("id"), body.Error); err != nil {
			fail(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /v1/leases/{id}/receipt", func(w http.ResponseWriter, r *http.Request) {
		cred := credentialOf(r.Context())
		if cred.Role != RoleHost && !(cred.Role == RoleJob && cred.Name == r.PathValue("id")) {
			fail(w, forbidden(cred, "record the evidence receipt of lease "+r.PathValue("id")))
			return
		}
		st, err := c.Status(r.Context(), r.PathValue("id"))
		if err != nil {
			fail(w, err)
			return
		}
		if !(cred.Role == RoleHost && slices.Contains(st.Request.Hosts, cred.Name)) && !(cred.Role == RoleJob && cred.Name == st.Request.ID) {
			fail(w, forbidden(cred, "record the evidence receipt of lease "+r.PathValue("id")))
			return
		}
		data, err := io.ReadAll(io.LimitReader(r.Body, MaxReceipt+1))
		if err != nil {
			fail(w, fmt.Errorf("%w: receipt: %v", ErrInvalid, err))
			return
		}
		digest, err := c.RecordReceipt(r.Context(), st.Request.ID, data)
		if err != nil {
			fail(w, err)
			return
		}
		write(w, http.StatusOK, map[string]string{"digest": digest})
	})
}

// TakeRunner takes the runner config of the lease granted on host, as the
// agent process agent (a name unique to the process: only it may take the
// config again); none is ErrNotFound, one another agent process took is
// ErrConflict.
func (a *APIClient) TakeRunner(ctx context.Context, host, agent string) (RunnerAssignment, error) {
	var out struct {
		RunnerAssignment
		JITConfig string `json:"jit_config"`
		JobToken  string `json:"job_token"`
	}
	err := a.do(ctx, http.MethodPost, "/v1/hosts/"+url.PathEscape(host)+"/runner", nil, map[string]string{"agent": agent}, &out)
	out.RunnerAssignment.JITConfig, out.RunnerAssignment.JobToken = secret.Secret(out.JITConfig), secret.Secret(out.JobToken)
	return out.RunnerAssignment, err
}

// AckCleanup acknowledges host's cleanup after lease
// (Controller.AckCleanup).
func (a *APIClient) AckCleanup(ctx context.Context, host, lease string, gpuProcesses int) error {
	return a.do(ctx, http.MethodPost, "/v1/hosts/"+url.PathEscape(host)+"/cleaned", nil,
		map[string]any{"lease": lease, "gpu_processes": gpuProcesses}, nil)
}

// ClearCleanup clears host's cleanup after lease, which its agent never
// acknowledged (Controller.ClearCleanup): the operator's credential only.
func (a *APIClient) ClearCleanup(ctx context.Context, host, lease string) error {
	return a.do(ctx, http.MethodPost, "/v1/hosts/"+url.PathEscape(host)+"/clear-cleanup", nil, map[string]string{"lease": lease}, nil)
}

// ServiceOrder is a resident-service step the controller ordered.
type ServiceOrder struct {
	ID   string `json:"id"`
	Step string `json:"step"` // drain, stop, verify_released, start or healthy
}

// NextOrder waits up to wait (at most a minute) for host's next
// resident-service order; ok false when none came.
func (a *APIClient) NextOrder(ctx context.Context, host string, wait time.Duration) (ServiceOrder, bool, error) {
	var o ServiceOrder
	err := a.do(ctx, http.MethodGet, "/v1/hosts/"+url.PathEscape(host)+"/order", url.Values{"wait": {wait.String()}}, nil, &o)
	if errors.Is(err, io.EOF) { // 204: no body
		return ServiceOrder{}, false, nil
	}
	return o, err == nil && o.ID != "", err
}

// ReportOrder reports how order id ended: failure "" when it passed.
func (a *APIClient) ReportOrder(ctx context.Context, host, id, failure string) error {
	return a.do(ctx, http.MethodPost, "/v1/hosts/"+url.PathEscape(host)+"/order/"+url.PathEscape(id), nil, map[string]string{"error": failure}, nil)
}

// UploadReceipt records lease id's evidence receipt and returns the
// digest the controller stored.
func (a *APIClient) UploadReceipt(ctx context.Context, id string, receipt []byte) (string, error) {
	var out struct {
		Digest string `json:"digest"`
	}
	err := a.doRaw(ctx, http.MethodPost, "/v1/leases/"+url.PathEscape(id)+"/receipt", receipt, &out)
	return out.Digest, err
}
