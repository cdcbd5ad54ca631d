// Package runpodtest is an in-process fake of RunPod's REST v2 API (the
// catalog and pod paths gpugate uses), following the published OpenAPI
// document: field names, status codes and RFC 9457 problem bodies. It has
// per-GPU stock, prices and host CUDA versions, a configurable pod start
// schedule, scripted faults, a request log and a ledger of every pod's
// billed lifetime and cost, so a test can assert "no pod left running" and
// "what was paid". Like a real container, a pod whose environment and
// startup command exceed Linux's exec limits (128 KiB a string, 2 MiB in
// all) exits as soon as it starts.
//
// Client returns an *http.Client whose transport calls the server in
// process (no sockets), so tests can run inside testing/synctest bubbles
// and exercise 420-second timeouts in microseconds; Start serves it on a
// loopback httptest.Server instead.
package runpodtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpugate/gpugate/runpod/rest"
	"github.com/gpugate/gpugate/smoke"
)

// CapacityDetail is RunPod's capacity-miss text, sent with a 400.
const CapacityDetail = "There are no longer any instances available with the requested specifications. Please refresh and try again."

// APIKey is the key the server accepts unless WithAPIKey changes it.
const APIKey = "rpa_test_key_0123456789"

// GPU is one GPU type the fake sells.
type GPU struct {
	ID             string
	Name           string
	MemoryGB       int
	SecurePrice    float64 // USD/hour per GPU; 0 with Secure false
	CommunityPrice float64
	Secure         bool // offered on secure cloud
	Community      bool
	Stock          int    // free single-GPU machines
	CUDAVersion    string // the hosts' driver CUDA version, e.g. "12.8"
}

// Behavior scripts what pods of one GPU type do after creation. Zero
// durations take the server's schedule.
type Behavior struct {
	ProvisionFor     time.Duration // PROVISIONING, before the container starts
	StartFor         time.Duration // STARTING, before RUNNING
	NeverRun         bool          // stays STARTING
	ExitAfter        time.Duration // RUNNING this long, then EXITED (0: never)
	ErrorAfter       time.Duration // RUNNING this long, then ERROR (0: never)
	LoseRuntimeAfter time.Duration // RUNNING this long, then runtime null (0: never)
}

// Fault is a scripted failure for matching requests.
type Fault struct {
	Method       string        // "" matches any method
	Path         string        // exact path, or a prefix ending in "*"; "" matches any
	Status       int           // answer with this status and a problem body
	Detail       string        // the problem's detail (defaults per status)
	RetryAfter   string        // Retry-After header value
	Drop         bool          // the connection drops before the request is handled
	LoseResponse bool          // the request is handled but its response is lost
	Malformed    bool          // answer 200 with a body that is not JSON
	Delay        time.Duration // wait before answering (the client's timeout may fire)
	ListLag      time.Duration // GET /v2/pods answers without the pods created this recently, as an eventually consistent listing may
	Times        int           // how many requests it hits (0: 1)
}

// Request is one logged request.
type Request struct {
	At     time.Time
	Method string
	Path   string
	Query  string
	Body   []byte
	Status int    // 0 when no response was delivered
	Fault  string // which fault hit it, if any
}

// LedgerEntry is one pod's billed lifetime.
type LedgerEntry struct {
	PodID, Name, GPUTypeID string
	Price                  float64 // USD/hour billed while running
	CreatedAt              time.Time
	StartedAt              time.Time // zero when the container never started
	EndedAt                time.Time // deletion or exit; zero while still billing
	Deleted                bool
}

// BilledSeconds is the time billed up to now (or the end).
func (e LedgerEntry) BilledSeconds(now time.Time) float64 {
	if e.StartedAt.IsZero() {
		return 0
	}
	end := now
	if !e.EndedAt.IsZero() {
		end = e.EndedAt
	}
	return max(end.Sub(e.StartedAt).Seconds(), 0)
}

// Cost is the billed cost in USD up to now.
func (e LedgerEntry) Cost(now time.Time) float64 {
	return e.BilledSeconds(now) / 3600 * e.Price
}

type pod struct {
	id, name, image, cloud, args string
	env                          map[string]string
	disk                         int
	gpu                          *GPU
	behavior                     Behavior
	created                      time.Time
	deleted                      time.Time
}

// Server is the fake. Its methods are safe for concurrent use.
type Server struct {
	mu        sync.Mutex
	key       string
	gpus      []*GPU
	behaviors map[string]Behavior
	schedule  Behavior
	pods      []*pod
	faults    []*Fault
	log       []Request
	nextID    int
	cursor    int // page size for GET /v2/pods; 0: one page
	httpSrv   *httptest.Server
}

// Option configures a Server.
type Option func(*Server)

// WithAPIKey sets the accepted key.
func WithAPIKey(key string) Option { return func(s *Server) { s.key = key } }

// WithGPUs replaces the default catalog.
func WithGPUs(gpus ...GPU) Option {
	return func(s *Server) {
		s.gpus = nil
		for _, g := range gpus {
			g := g
			s.gpus = append(s.gpus, &g)
		}
	}
}

// WithSchedule sets how long pods provision and start (default 20 s and
// 40 s).
func WithSchedule(provision, start time.Duration) Option {
	return func(s *Server) { s.schedule.ProvisionFor, s.schedule.StartFor = provision, start }
}

// WithPageSize makes GET /v2/pods return pages of n pods with a nextCursor
// (today's API returns one page; this exercises cursor handling).
func WithPageSize(n int) Option { return func(s *Server) { s.cursor = n } }

// DefaultGPUs is a small catalog shaped like RunPod's: the default reviewed
// types plus an H100 that must never be auto-selected.
func DefaultGPUs() []GPU {
	return []GPU{
		{ID: "NVIDIA GeForce RTX 4090", Name: "RTX 4090", MemoryGB: 24, SecurePrice: 0.69, CommunityPrice: 0.34, Secure: true, Community: true, Stock: 4, CUDAVersion: "12.8"},
		{ID: "NVIDIA L4", Name: "L4", MemoryGB: 24, SecurePrice: 0.43, CommunityPrice: 0.0, Secure: true, Stock: 6, CUDAVersion: "12.6"},
		{ID: "NVIDIA L40S", Name: "L40S", MemoryGB: 48, SecurePrice: 0.86, CommunityPrice: 0.79, Secure: true, Community: true, Stock: 3, CUDAVersion: "12.8"},
		{ID: "NVIDIA RTX 6000 Ada Generation", Name: "RTX 6000 Ada", MemoryGB: 48, SecurePrice: 0.77, CommunityPrice: 0.74, Secure: true, Community: true, Stock: 2, CUDAVersion: "12.8"},
		{ID: "NVIDIA A100-SXM4-80GB", Name: "A100 SXM", MemoryGB: 80, SecurePrice: 1.49, CommunityPrice: 0, Secure: true, Stock: 8, CUDAVersion: "13.2"},
		{ID: "NVIDIA H100 80GB HBM3", Name: "H100 SXM", MemoryGB: 80, SecurePrice: 2.69, CommunityPrice: 0, Secure: true, Stock: 8, CUDAVersion: "12.8"},
		{ID: "NVIDIA RTX A4000", Name: "RTX A4000", MemoryGB: 16, SecurePrice: 0.25, CommunityPrice: 0.17, Secure: true, Community: true, Stock: 9, CUDAVersion: "12.6"},
	}
}

// New builds a server with DefaultGPUs, unless WithGPUs says otherwise.
func New(opts ...Option) *Server {
	s := &Server{key: APIKey, behaviors: map[string]Behavior{}, schedule: Behavior{ProvisionFor: 20 * time.Second, StartFor: 40 * time.Second}}
	WithGPUs(DefaultGPUs()...)(s)
	for _, o := range opts {
		o(s)
	}
	return s
}

// BaseURL is the URL to give runpod.WithBaseURL with Client's transport.
const BaseURL = "http://runpod.invalid"

// Client returns an HTTP client whose transport serves requests in process.
// Use it with runpod.WithBaseURL(BaseURL) (or NewClient).
func (s *Server) Client() *http.Client { return &http.Client{Transport: transport{s}} }

// NewClient is a rest.Client wired to this server in process.
func (s *Server) NewClient(opts ...rest.Option) (*rest.Client, error) {
	base := []rest.Option{rest.WithAPIKey(rest.Secret(s.key)), rest.WithBaseURL(BaseURL), rest.WithHTTPClient(s.Client())}
	return rest.NewClient(append(base, opts...)...)
}

// Start serves the fake on a loopback httptest.Server and returns its URL.
func (s *Server) Start() string {
	s.httpSrv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch s.serve(w, r) {
		case outcomeDrop, outcomeLost:
			panic(http.ErrAbortHandler) // closes the connection without a response
		}
	}))
	return s.httpSrv.URL
}

// Close stops a started server.
func (s *Server) Close() {
	if s.httpSrv != nil {
		s.httpSrv.Close()
	}
}

// SetBehavior scripts pods of one GPU type.
func (s *Server) SetBehavior(gpuID string, b Behavior) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.behaviors[gpuID] = b
}

// SetStock changes a GPU type's free machines.
func (s *Server) SetStock(gpuID string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g := s.gpu(gpuID); g != nil {
		g.Stock = n
	}
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

// Requests returns the request log.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

// Count returns how many logged requests match method and path (path may
// end in "*").
func (s *Server) Count(method, path string) int {
	n := 0
	for _, r := range s.Requests() {
		if (method == "" || r.Method == method) && pathMatch(path, r.Path) {
			n++
		}
	}
	return n
}

// Running returns the IDs of pods not yet deleted (exited pods included:
// they still hold a machine until deleted).
func (s *Server) Running() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for _, p := range s.pods {
		if p.deleted.IsZero() {
			ids = append(ids, p.id)
		}
	}
	return ids
}

// Ledger returns every pod ever created, with its billed window.
func (s *Server) Ledger() []LedgerEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	out := make([]LedgerEntry, 0, len(s.pods))
	for _, p := range s.pods {
		st := s.state(p, now)
		e := LedgerEntry{PodID: p.id, Name: p.name, GPUTypeID: p.gpu.ID, Price: s.price(p), CreatedAt: p.created, Deleted: !p.deleted.IsZero()}
		if st.started != nil {
			e.StartedAt = *st.started
		}
		switch {
		case st.exitedAt != nil && (p.deleted.IsZero() || st.exitedAt.Before(p.deleted)):
			e.EndedAt = *st.exitedAt
		case !p.deleted.IsZero():
			e.EndedAt = p.deleted
		}
		out = append(out, e)
	}
	return out
}

// TotalCost sums the ledger up to now.
func (s *Server) TotalCost() float64 {
	now := time.Now()
	total := 0.0
	for _, e := range s.Ledger() {
		total += e.Cost(now)
	}
	return total
}

// Env returns a pod's environment as created (for asserting what a pod
// received).
func (s *Server) Env(podID string) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.pods {
		if p.id == podID {
			return copyEnv(p.env)
		}
	}
	return nil
}

// copyEnv copies an environment; nil becomes empty, which the API shows as {}.
func copyEnv(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	maps.Copy(out, m)
	return out
}

func (s *Server) gpu(id string) *GPU {
	for _, g := range s.gpus {
		if g.ID == id {
			return g
		}
	}
	return nil
}

func (s *Server) price(p *pod) float64 {
	if p.cloud == "COMMUNITY" {
		return p.gpu.CommunityPrice
	}
	return p.gpu.SecurePrice
}

func pathMatch(pattern, path string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(path, prefix)
	}
	return pattern == "" || pattern == path
}

// transport serves requests in process.
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
		return nil, fmt.Errorf("runpodtest: connection reset by peer")
	case outcomeLost:
		return nil, fmt.Errorf("runpodtest: connection closed before the response arrived")
	}
	if err := r.Context().Err(); err != nil {
		return nil, err
	}
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}

// serve handles one request, applying faults and logging it.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) outcome {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
	}
	s.mu.Lock()
	f := s.takeFault(r.Method, r.URL.Path)
	entry := Request{At: time.Now(), Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Body: body}
	if f != nil {
		entry.Fault = describe(f)
	}
	idx := len(s.log)
	s.log = append(s.log, entry)
	s.mu.Unlock()

	if f != nil && f.Delay > 0 {
		t := time.NewTimer(f.Delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return outcomeLost
		}
	}
	if f != nil && f.Drop {
		return outcomeDrop
	}
	rec := httptest.NewRecorder()
	switch {
	case f != nil && f.Status != 0:
		if f.RetryAfter != "" {
			rec.Header().Set("Retry-After", f.RetryAfter)
		}
		writeProblem(rec, f.Status, f.Detail)
	case f != nil && f.ListLag > 0 && r.Method == http.MethodGet && r.URL.Path == "/v2/pods":
		s.listPods(rec, r, f.ListLag)
	case f != nil && f.Malformed:
		rec.Header().Set("Content-Type", "application/json")
		rec.WriteHeader(http.StatusOK)
		rec.WriteString(`{"id": "truncated`)
	default:
		s.route(rec, r, body)
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

func describe(f *Fault) string {
	switch {
	case f.Drop:
		return "drop"
	case f.LoseResponse:
		return "lose-response"
	case f.Malformed:
		return "malformed"
	case f.ListLag > 0:
		return "list-lag"
	case f.Status != 0:
		return strconv.Itoa(f.Status)
	}
	return "delay"
}

func (s *Server) takeFault(method, path string) *Fault {
	for i, f := range s.faults {
		if (f.Method == "" || f.Method == method) && pathMatch(f.Path, path) {
			f.Times--
			if f.Times <= 0 {
				s.faults = slices.Delete(s.faults, i, i+1)
			}
			return f
		}
	}
	return nil
}

var defaultDetail = map[int]string{
	http.StatusBadRequest:          "request could not be processed",
	http.StatusUnauthorized:        "missing or invalid API key",
	http.StatusPaymentRequired:     "Insufficient balance to deploy this pod.",
	http.StatusForbidden:           "your account cannot access the requested pool",
	http.StatusNotFound:            "pod not found",
	http.StatusRequestTimeout:      "request timed out",
	http.StatusConflict:            "pod belongs to a cluster",
	http.StatusUnprocessableEntity: "Request validation failed.",
	http.StatusTooManyRequests:     "rate limit exceeded for the minute window",
	http.StatusInternalServerError: "internal error",
	http.StatusBadGateway:          "upstream unavailable",
	http.StatusServiceUnavailable:  "service unavailable",
}

func writeProblem(w http.ResponseWriter, status int, detail string, errs ...string) {
	if detail == "" {
		detail = defaultDetail[status]
	}
	if detail == "" {
		detail = http.StatusText(status)
	}
	p := map[string]any{"title": http.StatusText(status), "status": status, "detail": detail}
	if len(errs) > 0 {
		p["errors"] = errs
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(p)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

var podPath = regexp.MustCompile(`^/v2/pods/([^/]+)$`)

func (s *Server) route(w http.ResponseWriter, r *http.Request, body []byte) {
	if r.Header.Get("Authorization") != "Bearer "+s.key {
		writeProblem(w, http.StatusUnauthorized, "")
		return
	}
	switch path := r.URL.Path; {
	case path == "/v2/catalog/gpus":
		if r.Method != http.MethodGet {
			writeProblem(w, http.StatusMethodNotAllowed, "")
			return
		}
		s.catalog(w, r)
	case path == "/v2/pods":
		switch r.Method {
		case http.MethodGet:
			s.listPods(w, r, 0)
		case http.MethodPost:
			s.createPod(w, body)
		default:
			writeProblem(w, http.StatusMethodNotAllowed, "")
		}
	case podPath.MatchString(path):
		id := podPath.FindStringSubmatch(path)[1]
		switch r.Method {
		case http.MethodGet:
			s.getPod(w, id)
		case http.MethodDelete:
			s.deletePod(w, id)
		default:
			writeProblem(w, http.StatusMethodNotAllowed, "")
		}
	default:
		writeProblem(w, http.StatusNotFound, "no such route")
	}
}

var (
	cudaMajorMinor = regexp.MustCompile(`^\d+\.\d+$`)
	cudaFloor      = regexp.MustCompile(`^\d+(\.\d+)?$`)
)

// cudaAtLeast compares major.minor versions numerically (12.11 > 12.2).
func cudaAtLeast(have, floor string) bool {
	hMaj, hMin := splitVersion(have)
	fMaj, fMin := splitVersion(floor)
	if hMaj != fMaj {
		return hMaj > fMaj
	}
	return hMin >= fMin
}

func splitVersion(v string) (int, int) {
	maj, mn, _ := strings.Cut(v, ".")
	a, _ := strconv.Atoi(maj)
	b, _ := strconv.Atoi(mn)
	return a, b
}

func availability(stock int) string {
	switch {
	case stock <= 0:
		return rest.AvailabilityNone
	case stock <= 2:
		return rest.AvailabilityLow
	case stock <= 9:
		return rest.AvailabilityMedium
	}
	return rest.AvailabilityHigh
}

func (s *Server) catalog(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for k := range q {
		switch k {
		case "include", "product", "count", "cloud", "countryCodes", "cudaVersions", "minCudaVersion":
		default:
			writeProblem(w, http.StatusUnprocessableEntity, "", fmt.Sprintf("query: unknown parameter %q", k))
			return
		}
	}
	include := q.Get("include")
	if include != "" && include != "AVAILABILITY" {
		writeProblem(w, http.StatusUnprocessableEntity, "", fmt.Sprintf("include: %q is not one of [AVAILABILITY]", include))
		return
	}
	withAvail := include == "AVAILABILITY"
	for _, k := range []string{"product", "count", "cloud", "cudaVersions", "minCudaVersion", "countryCodes"} {
		if q.Has(k) && !withAvail {
			writeProblem(w, http.StatusBadRequest, k+" is valid only with include=AVAILABILITY")
			return
		}
	}
	if withAvail && !q.Has("product") {
		writeProblem(w, http.StatusBadRequest, "product is required with include=AVAILABILITY")
		return
	}
	for _, p := range strings.Split(q.Get("product"), ",") {
		if q.Has("product") && p != "POD" && p != "CLUSTER" && p != "SERVERLESS" {
			writeProblem(w, http.StatusUnprocessableEntity, "", fmt.Sprintf("product: %q is not one of [POD CLUSTER SERVERLESS]", p))
			return
		}
	}
	count := 1
	if q.Has("count") {
		n, err := strconv.Atoi(q.Get("count"))
		if err != nil || n < 1 {
			writeProblem(w, http.StatusUnprocessableEntity, "", "count: must be an integer >= 1")
			return
		}
		count = n
	}
	cloud := q.Get("cloud")
	if q.Has("cloud") && cloud != "SECURE" && cloud != "COMMUNITY" {
		writeProblem(w, http.StatusUnprocessableEntity, "", fmt.Sprintf("cloud: %q is not one of [SECURE COMMUNITY]", cloud))
		return
	}
	if cloud == "" {
		cloud = "SECURE"
	}
	floor := q.Get("minCudaVersion")
	if q.Has("minCudaVersion") && !cudaFloor.MatchString(floor) {
		writeProblem(w, http.StatusUnprocessableEntity, "", "minCudaVersion: does not match pattern ^\\d+(\\.\\d+)?$")
		return
	}
	if q.Has("minCudaVersion") && q.Has("cudaVersions") {
		writeProblem(w, http.StatusBadRequest, "minCudaVersion and cudaVersions are mutually exclusive")
		return
	}
	if !strings.Contains(floor, ".") && floor != "" {
		floor += ".0"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	gpus := []map[string]any{}
	for _, g := range s.gpus {
		e := map[string]any{
			"id": g.ID, "name": g.Name, "pool": nil, "manufacturer": "NVIDIA", "memory": g.MemoryGB,
			"secure": g.Secure, "community": g.Community,
			"price":    map[string]any{"secure": g.SecurePrice, "community": g.CommunityPrice},
			"maxCount": map[string]any{"secure": 8, "community": 8},
		}
		if withAvail {
			stock := g.Stock / count
			if (cloud == "SECURE" && !g.Secure) || (cloud == "COMMUNITY" && !g.Community) || (floor != "" && !cudaAtLeast(g.CUDAVersion, floor)) {
				stock = 0
			}
			e["availability"] = availability(stock)
			if g.CUDAVersion != "" && (floor == "" || cudaAtLeast(g.CUDAVersion, floor)) {
				e["cudaVersions"] = []map[string]any{{"version": g.CUDAVersion, "available": stock > 0}}
			}
		}
		gpus = append(gpus, e)
	}
	writeJSON(w, http.StatusOK, map[string]any{"gpus": gpus})
}

// createBody mirrors CreatePodRequest's properties; unknown ones are 422s.
type createBody struct {
	Name             *string           `json:"name"`
	Image            *string           `json:"image"`
	TemplateID       *string           `json:"templateId"`
	Env              map[string]string `json:"env"`
	Args             *string           `json:"args"`
	Disk             *int              `json:"disk"`
	Ports            []string          `json:"ports"`
	Registry         *string           `json:"registry"`
	Cloud            *string           `json:"cloud"`
	CPU              json.RawMessage   `json:"cpu"`
	DataCenterIDs    []string          `json:"dataCenterIds"`
	GlobalNetworking *bool             `json:"globalNetworking"`
	Mounts           json.RawMessage   `json:"mounts"`
	StartJupyter     *bool             `json:"startJupyter"`
	StartSSH         *bool             `json:"startSsh"`
	GPU              *struct {
		ID                  *string  `json:"id"`
		Count               *int     `json:"count"`
		MinCUDAVersion      *string  `json:"minCudaVersion"`
		AllowedCUDAVersions []string `json:"allowedCudaVersions"`
	} `json:"gpu"`
}

func (s *Server) createPod(w http.ResponseWriter, body []byte) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var b createBody
	if err := dec.Decode(&b); err != nil {
		writeProblem(w, http.StatusUnprocessableEntity, "", "$: "+err.Error())
		return
	}
	var errs []string
	if b.Name == nil || *b.Name == "" {
		errs = append(errs, "$.name: required, minLength 1")
	}
	if b.TemplateID == nil && (b.Image == nil || *b.Image == "") {
		errs = append(errs, "$.image: required unless templateId is set")
	}
	if b.Disk != nil && *b.Disk < 1 {
		errs = append(errs, "$.disk: minimum 1")
	}
	if b.Cloud != nil && *b.Cloud != "SECURE" && *b.Cloud != "COMMUNITY" {
		errs = append(errs, "$.cloud: not one of [SECURE COMMUNITY]")
	}
	if g := b.GPU; g != nil {
		if g.ID == nil || *g.ID == "" {
			errs = append(errs, "$.gpu.id: required")
		}
		if g.Count != nil && *g.Count < 1 {
			errs = append(errs, "$.gpu.count: minimum 1")
		}
		if g.MinCUDAVersion != nil && !cudaMajorMinor.MatchString(*g.MinCUDAVersion) {
			errs = append(errs, "$.gpu.minCudaVersion: does not match ^\\d+\\.\\d+$")
		}
		for _, v := range g.AllowedCUDAVersions {
			if !cudaMajorMinor.MatchString(v) {
				errs = append(errs, "$.gpu.allowedCudaVersions: item does not match ^\\d+\\.\\d+$")
			}
		}
	}
	if len(errs) > 0 {
		writeProblem(w, http.StatusUnprocessableEntity, "", errs...)
		return
	}
	switch {
	case (b.GPU == nil) == (b.CPU == nil):
		writeProblem(w, http.StatusBadRequest, "exactly one of gpu or cpu must be set")
		return
	case b.GPU == nil:
		writeProblem(w, http.StatusBadRequest, "this server sells GPU pods only")
		return
	case b.GPU.MinCUDAVersion != nil && len(b.GPU.AllowedCUDAVersions) > 0:
		writeProblem(w, http.StatusBadRequest, "gpu.minCudaVersion and a non-empty gpu.allowedCudaVersions are mutually exclusive")
		return
	}
	count := 1
	if b.GPU.Count != nil {
		count = *b.GPU.Count
	}
	cloud := "SECURE"
	if b.Cloud != nil {
		cloud = *b.Cloud
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.gpu(*b.GPU.ID)
	if g == nil {
		writeProblem(w, http.StatusBadRequest, fmt.Sprintf("unknown GPU type %q", *b.GPU.ID))
		return
	}
	placeable := g.Stock >= count && ((cloud == "SECURE" && g.Secure) || (cloud == "COMMUNITY" && g.Community))
	if b.GPU.MinCUDAVersion != nil && !cudaAtLeast(g.CUDAVersion, *b.GPU.MinCUDAVersion) {
		placeable = false
	}
	if len(b.GPU.AllowedCUDAVersions) > 0 && !slices.Contains(b.GPU.AllowedCUDAVersions, g.CUDAVersion) {
		placeable = false
	}
	if !placeable {
		writeProblem(w, http.StatusBadRequest, CapacityDetail)
		return
	}
	g.Stock -= count
	s.nextID++
	p := &pod{id: fmt.Sprintf("pod%06d", s.nextID), name: *b.Name, image: *b.Image, cloud: cloud, env: copyEnv(b.Env), gpu: g, created: time.Now(), disk: 20}
	if b.Args != nil {
		p.args = *b.Args
	}
	if b.Disk != nil {
		p.disk = *b.Disk
	}
	p.behavior = s.behaviorFor(g.ID)
	if !smoke.ExecFits([]string{p.args}, p.env) {
		// The container's entrypoint cannot be exec'd (E2BIG): it exits
		// as soon as it starts, and no runner ever appears.
		p.behavior.ExitAfter, p.behavior.NeverRun = time.Nanosecond, false
	}
	s.pods = append(s.pods, p)
	writeJSON(w, http.StatusCreated, s.render(p, time.Now()))
}

func (s *Server) behaviorFor(gpuID string) Behavior {
	b := s.behaviors[gpuID]
	if b.ProvisionFor == 0 {
		b.ProvisionFor = s.schedule.ProvisionFor
	}
	if b.StartFor == 0 {
		b.StartFor = s.schedule.StartFor
	}
	return b
}

type podState struct {
	status   rest.PodStatus
	started  *time.Time
	runtime  bool
	uptime   time.Duration
	exitedAt *time.Time
}

// state derives a pod's status at now from its schedule.
func (s *Server) state(p *pod, now time.Time) podState {
	if !p.deleted.IsZero() && !now.Before(p.deleted) {
		st := s.scheduled(p, p.deleted)
		st.status, st.runtime = rest.StatusTerminated, false
		return st
	}
	return s.scheduled(p, now)
}

// scheduled is the state the pod's behavior gives it at now, ignoring
// deletion.
func (s *Server) scheduled(p *pod, now time.Time) podState {
	b := p.behavior
	startAt := p.created.Add(b.ProvisionFor)
	if now.Before(startAt) {
		return podState{status: rest.StatusProvisioning}
	}
	started := startAt
	runAt := startAt.Add(b.StartFor)
	if b.NeverRun || now.Before(runAt) {
		return podState{status: rest.StatusStarting, started: &started}
	}
	up := now.Sub(runAt)
	if b.ExitAfter > 0 && up >= b.ExitAfter {
		t := runAt.Add(b.ExitAfter)
		return podState{status: rest.StatusExited, started: &started, exitedAt: &t}
	}
	if b.ErrorAfter > 0 && up >= b.ErrorAfter {
		t := runAt.Add(b.ErrorAfter)
		return podState{status: rest.StatusError, started: &started, exitedAt: &t}
	}
	lost := b.LoseRuntimeAfter > 0 && up >= b.LoseRuntimeAfter
	return podState{status: rest.StatusRunning, started: &started, runtime: !lost, uptime: up}
}

func actions(st rest.PodStatus) []string {
	switch st {
	case rest.StatusRunning:
		return []string{"stop", "restart", "terminate"}
	case rest.StatusExited, rest.StatusError:
		return []string{"start", "terminate"}
	case rest.StatusTerminated:
		return []string{}
	}
	return []string{"terminate"}
}

// render is the pod as the v2 Pod schema has it, every required field set.
func (s *Server) render(p *pod, now time.Time) map[string]any {
	st := s.state(p, now)
	cost := s.price(p)
	if st.status == rest.StatusExited || st.status == rest.StatusTerminated {
		cost = 0
	}
	var started, runtime any
	if st.started != nil {
		started = st.started.UTC().Format(time.RFC3339)
	}
	if st.runtime {
		runtime = map[string]any{"uptime": int(st.uptime.Seconds()), "gpus": []any{}, "ports": []any{}}
	}
	var cuda, dc any
	if st.status != rest.StatusProvisioning {
		cuda, dc = p.gpu.CUDAVersion, "US-TX-3"
	}
	env := copyEnv(p.env)
	return map[string]any{
		"id": p.id, "name": p.name, "status": string(st.status), "actions": actions(st.status),
		"image": p.image, "args": p.args, "disk": p.disk, "mounts": map[string]any{}, "ports": []string{},
		"env": env, "registry": nil, "cloud": p.cloud, "dataCenterId": dc, "cudaVersion": cuda,
		"ssh":      map[string]any{"proxy": nil, "direct": nil},
		"template": nil, "cost": cost, "locked": false, "runtime": runtime,
		"createdAt": p.created.UTC().Format(time.RFC3339), "startedAt": started,
		"globalNetworking": map[string]any{"enabled": false},
		"gpu":              map[string]any{"id": p.gpu.ID, "count": 1},
	}
}

func (s *Server) find(id string) *pod {
	for _, p := range s.pods {
		if p.id == id && p.deleted.IsZero() {
			return p
		}
	}
	return nil
}

func (s *Server) getPod(w http.ResponseWriter, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.find(id)
	if p == nil {
		writeProblem(w, http.StatusNotFound, "pod not found")
		return
	}
	writeJSON(w, http.StatusOK, s.render(p, time.Now()))
}

func (s *Server) listPods(w http.ResponseWriter, r *http.Request, lag time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	var live []*pod
	for _, p := range s.pods {
		if p.deleted.IsZero() && now.Sub(p.created) >= lag {
			live = append(live, p)
		}
	}
	start := 0
	if c := r.URL.Query().Get("cursor"); c != "" {
		start, _ = strconv.Atoi(c)
		start = min(max(start, 0), len(live))
	}
	end := len(live)
	if s.cursor > 0 {
		end = min(start+s.cursor, len(live))
	}
	pods := []map[string]any{}
	for _, p := range live[start:end] {
		pods = append(pods, s.render(p, now))
	}
	resp := map[string]any{"pods": pods}
	if end < len(live) {
		resp["nextCursor"] = strconv.Itoa(end)
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) deletePod(w http.ResponseWriter, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.find(id)
	if p == nil {
		writeProblem(w, http.StatusNotFound, "pod not found")
		return
	}
	p.deleted = time.Now()
	p.gpu.Stock++
	w.WriteHeader(http.StatusNoContent)
}

// ClearFaults removes every queued fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}
