package spark

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpugate/gpugate/internal/secret"
)

// LeaseRequest is the API's request body for POST /v1/leases.
type LeaseRequest struct {
	Class           Class    `json:"class"`
	Topology        Topology `json:"topology,omitempty"`
	Host            string   `json:"host,omitempty"`
	Owner           string   `json:"owner,omitempty"`
	Suite           string   `json:"suite,omitempty"`
	DurationSeconds int      `json:"duration_seconds,omitempty"`
	PR              *PRRef   `json:"pr,omitempty"`
}

// HeartbeatReport is the API's request body for POST
// /v1/hosts/{host}/heartbeat.
type HeartbeatReport struct {
	// GPUProcesses counts the compute processes on the host's GPU. It is
	// required: absent is not zero.
	GPUProcesses *int `json:"gpu_processes"`
}

// APIError is the API's error body.
type APIError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"error"`
}

// Error renders the HTTP status, the error code and its message.
func (e *APIError) Error() string {
	return fmt.Sprintf("spark: %d %s: %s", e.Status, e.Code, e.Message)
}

var apiErrors = []struct {
	err    error
	status int
	code   string
}{
	{ErrNotFound, http.StatusNotFound, "not_found"},
	{ErrActive, http.StatusConflict, "active"},
	{ErrNotQueued, http.StatusConflict, "not_queued"},
	{ErrStaleToken, http.StatusConflict, "stale_token"},
	{ErrConflict, http.StatusConflict, "conflict"},
	{ErrPairRefused, http.StatusUnprocessableEntity, "pair_refused"},
	{ErrInvalid, http.StatusBadRequest, "invalid"},
	{ErrUnauthorized, http.StatusForbidden, "forbidden"},
	{ErrUnavailable, http.StatusServiceUnavailable, "unavailable"},
}

// Is lets a client-side APIError match the sentinel its code came from.
func (e *APIError) Is(target error) bool {
	for _, a := range apiErrors {
		if a.code == e.Code {
			return target == a.err
		}
	}
	return false
}

// maxLeaseSeconds bounds duration_seconds before it becomes a
// time.Duration, which a larger count would overflow; the class limit
// applies after.
const maxLeaseSeconds = 366 * 24 * 60 * 60

// NewHandler serves the API (NewAuthHandler) with one operator token.
func NewHandler(c *Controller, token string) (http.Handler, error) {
	if len(token) < 16 {
		return nil, fmt.Errorf("%w: the API token must be at least 16 characters", ErrInvalid)
	}
	return NewAuthHandler(c, Tokens{token: {Role: RoleOperator, Name: OwnerOperator}})
}

// NewAuthHandler serves the agent, host and CLI API over the controller,
// each bearer token resolved by creds to its holder and each request
// allowed only to the roles Role describes:
//
//	POST   /v1/leases               request a lease (201, a Status)
//	GET    /v1/leases/{id}          status with queue position and pending reason
//	GET    /v1/leases/{id}/wait     wait (long poll, ?timeout=60s) until it is no longer queued
//	POST   /v1/leases/{id}/release  {"token": N}: release an active lease
//	DELETE /v1/leases/{id}          cancel queued work (409 when active)
//	GET    /v1/hosts                sanitized host state
//	GET    /v1/hosts/{host}/fencing ?token=N: 204 when N is the host's current lease token
//	GET    /v1/hosts/{host}/state   the controller's view of the host (online, service) for its preflight
//	POST   /v1/hosts/{host}/heartbeat {"gpu_processes": N}: the host agent's liveness report
//	POST   /v1/leases/{id}/terminate the operator's emergency stop of active work
//
// and the host agent's routes (hostapi.go), served with the options'
// runner configs and agent-driven resident service.
func NewAuthHandler(c *Controller, creds Credentials, opts ...HandlerOption) (http.Handler, error) {
	if creds == nil {
		return nil, fmt.Errorf("%w: no credentials", ErrInvalid)
	}
	var o handlerOptions
	for _, opt := range opts {
		opt(&o)
	}
	mux := http.NewServeMux()
	write := func(w http.ResponseWriter, status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(v)
	}
	fail := func(w http.ResponseWriter, err error) {
		for _, a := range apiErrors {
			if errors.Is(err, a.err) {
				write(w, a.status, APIError{Code: a.code, Message: err.Error()})
				return
			}
		}
		write(w, http.StatusInternalServerError, APIError{Code: "internal", Message: err.Error()})
	}
	mux.HandleFunc("POST /v1/leases", func(w http.ResponseWriter, r *http.Request) {
		var lr LeaseRequest
		dec := json.NewDecoder(io.LimitReader(r.Body, 1<<16))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&lr); err != nil {
			fail(w, fmt.Errorf("%w: body: %v", ErrInvalid, err))
			return
		}
		cred := credentialOf(r.Context())
		switch {
		case cred.Role != RoleAgent && cred.Role != RoleOperator:
			fail(w, forbidden(cred, "ask for leases"))
			return
		case lr.PR != nil || lr.Class == ManualPR:
			fail(w, fmt.Errorf("%w: pull-request work enters only through the verified GitHub integration (a maintainer's label or command), never through the API", ErrUnauthorized))
			return
		case cred.Role == RoleAgent && lr.Class != Development && lr.Class != ServiceStart:
			fail(w, forbidden(cred, fmt.Sprintf("ask for %s work: agents ask for development and service-start leases", lr.Class)))
			return
		case cred.Role == RoleAgent || lr.Owner == "":
			lr.Owner = cred.Name // attributed to who asked
		}
		if lr.DurationSeconds < 0 || lr.DurationSeconds > maxLeaseSeconds {
			fail(w, fmt.Errorf("%w: duration_seconds %d: want 0 (the class default) up to the class limit", ErrInvalid, lr.DurationSeconds))
			return
		}
		req, err := c.Submit(r.Context(), SubmitRequest{Class: lr.Class, Topology: lr.Topology, Host: lr.Host, Owner: lr.Owner, Suite: lr.Suite,
			Duration: time.Duration(lr.DurationSeconds) * time.Second, PR: lr.PR})
		if err != nil {
			fail(w, err)
			return
		}
		st, err := c.Status(r.Context(), req.ID)
		if err != nil {
			fail(w, err)
			return
		}
		write(w, http.StatusCreated, st)
	})
	mux.HandleFunc("GET /v1/leases/{id}", func(w http.ResponseWriter, r *http.Request) {
		if cred := credentialOf(r.Context()); cred.Role == RoleJob && cred.Name != r.PathValue("id") {
			fail(w, forbidden(cred, "read lease "+r.PathValue("id")))
			return
		}
		st, err := c.Status(r.Context(), r.PathValue("id"))
		if err != nil {
			fail(w, err)
			return
		}
		write(w, http.StatusOK, shownTo(credentialOf(r.Context()), st))
	})
	mux.HandleFunc("GET /v1/leases/{id}/wait", func(w http.ResponseWriter, r *http.Request) {
		timeout := 60 * time.Second
		if v := r.URL.Query().Get("timeout"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 || d > 10*time.Minute {
				fail(w, fmt.Errorf("%w: timeout %q: a duration up to 10m", ErrInvalid, v))
				return
			}
			timeout = d
		}
		if cred := credentialOf(r.Context()); cred.Role == RoleJob && cred.Name != r.PathValue("id") {
			fail(w, forbidden(cred, "wait for lease "+r.PathValue("id")))
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		for {
			st, err := c.Status(r.Context(), r.PathValue("id"))
			if err != nil {
				fail(w, err)
				return
			}
			if st.Request.State != Queued {
				write(w, http.StatusOK, shownTo(credentialOf(r.Context()), st))
				return
			}
			t := time.NewTimer(time.Second)
			select {
			case <-ctx.Done():
				t.Stop()
				write(w, http.StatusOK, shownTo(credentialOf(r.Context()), st)) // still queued: the caller waits again
				return
			case <-t.C:
			}
		}
	})
	mux.HandleFunc("POST /v1/leases/{id}/release", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Token int64 `json:"token"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<12)).Decode(&body); err != nil {
			fail(w, fmt.Errorf("%w: body: %v", ErrInvalid, err))
			return
		}
		if err := allowed(r.Context(), c, r.PathValue("id"), "release"); err != nil {
			fail(w, err)
			return
		}
		if err := c.Release(r.Context(), r.PathValue("id"), body.Token); err != nil {
			fail(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /v1/leases/{id}/terminate", func(w http.ResponseWriter, r *http.Request) {
		if cred := credentialOf(r.Context()); cred.Role != RoleOperator {
			fail(w, forbidden(cred, "terminate work: that is the operator's"))
			return
		}
		if err := c.terminate(r.Context(), r.PathValue("id")); err != nil {
			fail(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("DELETE /v1/leases/{id}", func(w http.ResponseWriter, r *http.Request) {
		if err := allowed(r.Context(), c, r.PathValue("id"), "cancel"); err != nil {
			fail(w, err)
			return
		}
		if err := c.Cancel(r.Context(), r.PathValue("id")); err != nil {
			fail(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /v1/hosts/{host}/fencing", func(w http.ResponseWriter, r *http.Request) {
		token, err := strconv.ParseInt(r.URL.Query().Get("token"), 10, 64)
		if err != nil {
			fail(w, fmt.Errorf("%w: token %q: want the lease's numeric fencing token", ErrInvalid, r.URL.Query().Get("token")))
			return
		}
		if !onHost(r.Context(), c, r.PathValue("host")) {
			fail(w, forbidden(credentialOf(r.Context()), "check fencing on host "+r.PathValue("host")))
			return
		}
		if err := c.CheckToken(r.Context(), r.PathValue("host"), token); err != nil {
			fail(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /v1/hosts/{host}/state", func(w http.ResponseWriter, r *http.Request) {
		if !onHost(r.Context(), c, r.PathValue("host")) {
			fail(w, forbidden(credentialOf(r.Context()), "read the state of host "+r.PathValue("host")))
			return
		}
		st, err := c.HostState(r.Context(), r.PathValue("host"))
		if err != nil {
			fail(w, err)
			return
		}
		write(w, http.StatusOK, st)
	})
	mux.HandleFunc("POST /v1/hosts/{host}/heartbeat", func(w http.ResponseWriter, r *http.Request) {
		var body HeartbeatReport
		dec := json.NewDecoder(io.LimitReader(r.Body, 1<<12))
		dec.DisallowUnknownFields()
		switch err := dec.Decode(&body); {
		case err != nil:
			fail(w, fmt.Errorf("%w: body: %v", ErrInvalid, err))
			return
		case body.GPUProcesses == nil || *body.GPUProcesses < 0:
			// Absent is not zero: a host whose agent could not count its
			// GPU processes must not look clean.
			fail(w, fmt.Errorf("%w: gpu_processes is required and cannot be negative; an agent that cannot count them sends no heartbeat", ErrInvalid))
			return
		}
		if cred := credentialOf(r.Context()); cred.Role != RoleHost || cred.Name != r.PathValue("host") {
			// Only the host itself reports it clean.
			fail(w, forbidden(cred, "report the heartbeat of host "+r.PathValue("host")))
			return
		}
		if err := c.Heartbeat(r.Context(), HostReport{Host: r.PathValue("host"), GPUProcesses: *body.GPUProcesses}); err != nil {
			fail(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /v1/hosts", func(w http.ResponseWriter, r *http.Request) {
		if cred := credentialOf(r.Context()); cred.Role == RoleJob {
			fail(w, forbidden(cred, "list the hosts"))
			return
		}
		hosts, err := c.Hosts(r.Context())
		if err != nil {
			fail(w, err)
			return
		}
		out := make([]map[string]any, 0, len(hosts))
		for _, h := range hosts {
			out = append(out, map[string]any{"name": h.Name, "mode": h.Mode, "draining": h.Draining, "online": c.online(h, time.Now()), "managed": h.Managed})
		}
		write(w, http.StatusOK, out)
	})
	hostRoutes(mux, c, o, write, fail)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		cred, known := creds.Lookup(token)
		if !known && ok && token != "" {
			cred, known = o.runners.job(token) // a lease's job, while its config is held
		}
		if !ok || token == "" || !known {
			w.Header().Set("WWW-Authenticate", `Bearer realm="spark"`)
			write(w, http.StatusUnauthorized, APIError{Code: "unauthorized", Message: "a bearer token is required"})
			return
		}
		mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), credKey{}, cred)))
	}), nil
}

// onHost reports whether the request's credential may run a preflight's
// reads on host: the operator, the host itself, or the job of an active
// lease holding it.
func onHost(ctx context.Context, c *Controller, host string) bool {
	switch cred := credentialOf(ctx); cred.Role {
	case RoleOperator:
		return true
	case RoleHost:
		return cred.Name == host
	case RoleJob:
		st, err := c.Status(ctx, cred.Name)
		return err == nil && st.Request.State == Active && slices.Contains(st.Request.Hosts, host)
	}
	return false
}

// shownTo is lease status st as cred may read it: anyone may see a
// lease's state and place in the queue, but its fencing token, which
// releases the lease and passes the host's fencing check, only who may
// act on it: an operator, the agent that owns it, a host it holds.
func shownTo(cred Credential, st Status) Status {
	switch {
	case cred.Role == RoleOperator:
	case cred.Role == RoleAgent && st.Request.Owner == cred.Name:
	case cred.Role == RoleHost && slices.Contains(st.Request.Hosts, cred.Name):
	case cred.Role == RoleJob && cred.Name == st.Request.ID:
	default:
		st.Request.Token = 0
	}
	return st
}

// allowed says whether the request's credential may act (release,
// cancel) on lease id: an operator on any, an agent on its own, a host on
// the lease that holds it.
func allowed(ctx context.Context, c *Controller, id, act string) error {
	cred := credentialOf(ctx)
	if cred.Role == RoleOperator {
		return nil
	}
	st, err := c.Status(ctx, id)
	if err != nil {
		return err
	}
	switch {
	case cred.Role == RoleAgent && st.Request.Owner == cred.Name:
		return nil
	case cred.Role == RoleHost && act == "release" && slices.Contains(st.Request.Hosts, cred.Name):
		return nil
	}
	return forbidden(cred, act+" lease "+id)
}

// ClientToken is the API token a client presents: envToken (the
// SPARK_TOKEN variable) when set, else what file holds (SPARK_TOKEN_FILE,
// the file sparkd wrote it to). No token, or a file that cannot be read,
// is ErrInvalid, said before anything is sent: the controller would
// refuse every call without one.
func ClientToken(envToken, file string) (string, error) {
	if envToken == "" && file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("%w: -token-file: %w", ErrInvalid, err)
		}
		envToken = strings.TrimSpace(string(data))
	}
	if envToken == "" {
		return "", fmt.Errorf("%w: no API token: set SPARK_TOKEN, or SPARK_TOKEN_FILE (-token-file) to the file sparkd wrote it to", ErrInvalid)
	}
	return envToken, nil
}

// APIClient is the agent and CLI client of the API.
type APIClient struct {
	base *url.URL
	auth *bearer
	hc   *http.Client
}

// bearer is a client's token, and the file it is read again from.
type bearer struct {
	mu    sync.Mutex
	token secret.Secret // prints redacted: a logged client shows no token
	file  string
}

// ReadTokenFrom makes the client read its token from file again before
// each call, so a rotated token takes effect without a restart (the host
// agent runs for months); a file that cannot be read, or is empty, keeps
// the last token.
func (a *APIClient) ReadTokenFrom(file string) {
	a.auth.mu.Lock()
	defer a.auth.mu.Unlock()
	a.auth.file = file
}

// Addr is the API's address.
func (a *APIClient) Addr() string { return a.base.String() }

// current is the token for the next call.
func (b *bearer) current() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.file != "" {
		if data, err := os.ReadFile(b.file); err == nil {
			if tok := strings.TrimSpace(string(data)); tok != "" {
				b.token = secret.Secret(tok)
			}
		}
	}
	return b.token.Reveal()
}

// Format prints the client without its token, for every verb: fmt prints
// unexported fields raw, so a Secret among them would show.
func (a APIClient) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "spark.APIClient{base: %s, token: %s}", a.base, secret.Redacted)
}

// NewAPIClient builds a client; hc nil uses a client with a 15-minute
// timeout (long polls).
func NewAPIClient(base, token string, hc *http.Client) (*APIClient, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("%w: API address %q", ErrInvalid, base)
	}
	if hc == nil {
		hc = &http.Client{Timeout: 15 * time.Minute}
	}
	return &APIClient{base: u, auth: &bearer{token: secret.Secret(token)}, hc: hc}, nil
}

func (a *APIClient) do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(data)
	}
	return a.send(ctx, method, path, query, "application/json", rd, out)
}

// doRaw sends body as it is.
func (a *APIClient) doRaw(ctx context.Context, method, path string, body []byte, out any) error {
	return a.send(ctx, method, path, nil, "application/octet-stream", bytes.NewReader(body), out)
}

func (a *APIClient) send(ctx context.Context, method, path string, query url.Values, contentType string, rd io.Reader, out any) error {
	u := *a.base
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	u.RawQuery = query.Encode()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return fmt.Errorf("spark: %s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+a.auth.current())
	req.Header.Set("Content-Type", contentType)
	resp, err := a.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		e := &APIError{Status: resp.StatusCode}
		json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(e)
		return e
	}
	if out != nil {
		if err := json.NewDecoder(io.LimitReader(resp.Body, maxResponseBytes)).Decode(out); err != nil {
			return fmt.Errorf("spark: %s %s: read the controller's answer: %w", method, path, err)
		}
	}
	return nil
}

// maxResponseBytes bounds what the client reads of one answer.
const maxResponseBytes = 1 << 20

// Request asks for a lease.
func (a *APIClient) Request(ctx context.Context, lr LeaseRequest) (Status, error) {
	var st Status
	return st, a.do(ctx, http.MethodPost, "/v1/leases", nil, lr, &st)
}

// Status reads a lease.
func (a *APIClient) Status(ctx context.Context, id string) (Status, error) {
	var st Status
	return st, a.do(ctx, http.MethodGet, "/v1/leases/"+url.PathEscape(id), nil, nil, &st)
}

// Wait blocks until the lease is no longer queued or ctx ends, long
// polling.
func (a *APIClient) Wait(ctx context.Context, id string) (Status, error) {
	for {
		var st Status
		if err := a.do(ctx, http.MethodGet, "/v1/leases/"+url.PathEscape(id)+"/wait", url.Values{"timeout": {"60s"}}, nil, &st); err != nil {
			return st, err
		}
		if st.Request.State != Queued {
			return st, nil
		}
		if err := ctx.Err(); err != nil {
			return st, err
		}
	}
}

// Release releases an active lease with its fencing token.
func (a *APIClient) Release(ctx context.Context, id string, token int64) error {
	return a.do(ctx, http.MethodPost, "/v1/leases/"+url.PathEscape(id)+"/release", nil, map[string]int64{"token": token}, nil)
}

// Terminate is the operator's emergency stop of active work.
func (a *APIClient) Terminate(ctx context.Context, id string) error {
	return a.do(ctx, http.MethodPost, "/v1/leases/"+url.PathEscape(id)+"/terminate", nil, nil, nil)
}

// Cancel cancels queued work.
func (a *APIClient) Cancel(ctx context.Context, id string) error {
	return a.do(ctx, http.MethodDelete, "/v1/leases/"+url.PathEscape(id), nil, nil, nil)
}

// CheckToken asks the controller whether token is the current fencing
// token of host's lease; a stale one matches ErrStaleToken. It makes the
// client a TokenChecker for Preflight on the host.
func (a *APIClient) CheckToken(ctx context.Context, host string, token int64) error {
	return a.do(ctx, http.MethodGet, "/v1/hosts/"+url.PathEscape(host)+"/fencing", url.Values{"token": {strconv.FormatInt(token, 10)}}, nil, nil)
}

// HostState asks the controller what it knows of host (online, the
// resident service's host), for the host's preflight.
func (a *APIClient) HostState(ctx context.Context, host string) (HostState, error) {
	var st HostState
	return st, a.do(ctx, http.MethodGet, "/v1/hosts/"+url.PathEscape(host)+"/state", nil, nil, &st)
}

var (
	_ TokenChecker = (*APIClient)(nil)
	_ TokenChecker = (*Controller)(nil)
)

// Heartbeat reports the host's liveness and how many compute processes
// its GPU runs (Controller.Heartbeat). A host that stops reporting goes
// offline, never idle; an unknown or unmanaged host matches
// ErrUnauthorized.
func (a *APIClient) Heartbeat(ctx context.Context, host string, gpuProcesses int) error {
	return a.do(ctx, http.MethodPost, "/v1/hosts/"+url.PathEscape(host)+"/heartbeat", nil, HeartbeatReport{GPUProcesses: &gpuProcesses}, nil)
}

// Hosts lists sanitized host state.
func (a *APIClient) Hosts(ctx context.Context) ([]map[string]any, error) {
	out := []map[string]any{} // none is [], not null, when printed
	if err := a.do(ctx, http.MethodGet, "/v1/hosts", nil, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}
