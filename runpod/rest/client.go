package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpugate/gpugate/internal/secret"
)

// DefaultBaseURL is RunPod's API server; paths carry the /v2 prefix.
const DefaultBaseURL = "https://api.runpod.io"

// ErrNoAPIKey is returned by NewClient without WithAPIKey.
var ErrNoAPIKey = errors.New("runpod: no API key: pass WithAPIKey (for example from RUNPOD_API_KEY)")

// Client calls RunPod's REST v2 API. Every call of one client shares a
// process-local cooldown: a 429 on one call pauses the others. A Client is
// safe for concurrent use.
type Client struct {
	base     *url.URL
	hc       *http.Client
	key      Secret
	retry    RetryPolicy
	cool     *cooldown
	log      *slog.Logger
	capacity *regexp.Regexp
	maxPages int
	create   RetryPolicy
	maxAfter time.Duration
}

// Format prints the client without its API key, for every verb: fmt
// prints unexported fields raw, so a Secret among them would show.
func (c Client) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "rest.Client{base: %s, key: %s}", c.base, secret.Redacted)
}

// Option configures a Client.
type Option func(*Client) error

// WithAPIKey sets the bearer API key.
func WithAPIKey(key Secret) Option {
	return func(c *Client) error { c.key = key; return nil }
}

// ErrBaseURL is matched by the errors of a base URL the client refuses.
var ErrBaseURL = errors.New("runpod: unusable base URL")

// WithBaseURL points the client at another server (a fake, a proxy).
func WithBaseURL(raw string) Option {
	return func(c *Client) error {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%w: %q: want http(s)://host[:port]", ErrBaseURL, redactURL(raw))
		}
		u.Path = strings.TrimSuffix(u.Path, "/")
		c.base = u
		return nil
	}
}

// redactURL hides a password a URL may carry, for an error message.
func redactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return "(unparsable)"
}

// The environment ClientFromEnv reads.
const (
	EnvAPIKey = "RUNPOD_API_KEY" // the API key (required)
	EnvAPIURL = "RUNPOD_API_URL" // another server than DefaultBaseURL (optional)
)

// ClientFromEnv builds a client from the environment getenv reads: the key
// from RUNPOD_API_KEY and, when RUNPOD_API_URL is set, that server instead
// of DefaultBaseURL (a proxy, or a test's loopback fake); opts follow. The
// key travels to that server, so it must be https, or plain http only on
// a loopback address.
func ClientFromEnv(getenv func(string) string, opts ...Option) (*Client, error) {
	base := []Option{WithAPIKey(Secret(getenv(EnvAPIKey)))}
	if raw := getenv(EnvAPIURL); raw != "" {
		if u, err := url.Parse(raw); err == nil && u.Scheme == "http" && !loopback(u.Hostname()) {
			return nil, fmt.Errorf("%w: %s %q is plain http, which would send the API key unencrypted: use https (plain http only for a loopback test server)", ErrBaseURL, EnvAPIURL, u.Redacted())
		}
		base = append(base, WithBaseURL(raw))
	}
	return NewClient(append(base, opts...)...)
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// WithHTTPClient sets the HTTP client (its transport, proxies, TLS).
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) error {
		if hc == nil {
			return errors.New("runpod: WithHTTPClient(nil)")
		}
		c.hc = hc
		return nil
	}
}

// WithRetryPolicy replaces DefaultRetryPolicy.
func WithRetryPolicy(p RetryPolicy) Option {
	return func(c *Client) error {
		if err := p.validate(); err != nil {
			return err
		}
		c.retry = p
		return nil
	}
}

// WithCreateRetryPolicy replaces DefaultCreateRetryPolicy, the policy of
// one CreatePod call.
func WithCreateRetryPolicy(p RetryPolicy) Option {
	return func(c *Client) error {
		if err := p.validate(); err != nil {
			return err
		}
		c.create = p
		return nil
	}
}

// DefaultMaxRetryAfter caps the pause one Retry-After header can impose.
// A server may ask for less and is obeyed; one that asks for more (a stale
// date, a proxy's 999999) is held to this, so a single header can never
// stop cleanup from trying.
const DefaultMaxRetryAfter = 30 * time.Second

// WithMaxRetryAfter replaces DefaultMaxRetryAfter. The pause a Retry-After
// asks for is still a minimum between requests, up to this cap.
func WithMaxRetryAfter(d time.Duration) Option {
	return func(c *Client) error {
		if d <= 0 {
			return errors.New("runpod: WithMaxRetryAfter needs a positive duration")
		}
		c.maxAfter = d
		return nil
	}
}

// WithLogger logs each request (method, path, status, attempt, duration;
// never a body or a credential). nil discards.
func WithLogger(l *slog.Logger) Option {
	return func(c *Client) error { c.log = l; return nil }
}

// WithCapacityPattern replaces DefaultCapacityPattern, the text that makes a
// 400 a capacity miss.
func WithCapacityPattern(re *regexp.Regexp) Option {
	return func(c *Client) error { c.capacity = re; return nil }
}

// WithMaxPages bounds how many pages ListPods follows (default 20).
func WithMaxPages(n int) Option {
	return func(c *Client) error {
		if n < 1 {
			return errors.New("runpod: WithMaxPages needs at least 1")
		}
		c.maxPages = n
		return nil
	}
}

// NewClient builds a client. It needs WithAPIKey.
func NewClient(opts ...Option) (*Client, error) {
	base, _ := url.Parse(DefaultBaseURL)
	c := &Client{
		base:     base,
		hc:       &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()},
		retry:    DefaultRetryPolicy(),
		cool:     &cooldown{},
		capacity: DefaultCapacityPattern,
		maxPages: 20,
		create:   DefaultCreateRetryPolicy(),
		maxAfter: DefaultMaxRetryAfter,
	}
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, err
		}
	}
	if c.key == "" {
		return nil, ErrNoAPIKey
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	// The API key, the JIT config and the startup command go only to the
	// server this client was built for: a redirect is never followed (Go's
	// default re-sends a body on 307/308 and turns POST into GET on
	// 301/302, to any host, https or not).
	hc := *c.hc
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c.hc = &hc
	return c, nil
}

// ErrRedirect is matched by the error of a request the server redirected.
// The client never follows a redirect: the request carried the API key
// (and a create, the runner's JIT config), which go only to the server
// the client was built for.
var ErrRedirect = errors.New("runpod: the server redirected the request; redirects are never followed")

// RedirectError names where the server redirected a request to.
type RedirectError struct {
	Method, Path string
	StatusCode   int
	Location     string // the Location header, credentials and query removed
}

// Error names the request, the status and the location.
func (e *RedirectError) Error() string {
	return fmt.Sprintf("runpod: %s %s: %d redirect to %q not followed (the request carries the API key): point the client at the API server itself (%s)", e.Method, e.Path, e.StatusCode, e.Location, EnvAPIURL)
}

// Is matches ErrRedirect.
func (e *RedirectError) Is(target error) bool { return target == ErrRedirect }

// location reduces a Location header to what may be printed: the scheme,
// the host and the escaped path; no credentials, no query (a signed URL's
// token), no fragment. A value that does not parse as an absolute URL
// with a host prints as "(unparsable)".
func location(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "(unparsable)"
	}
	return u.Scheme + "://" + u.Host + u.EscapedPath()
}

// Cooldown reports how long the shared cooldown still pauses this client's
// calls; runpod.Delete waits it out before each attempt but the first.
func (c *Client) Cooldown() time.Duration { return c.cool.remaining() }

// request is one HTTP exchange.
type request struct {
	method, path string
	query        url.Values
	body         any
	secrets      []Secret // scrubbed from any error text
	expect       int      // the one success status that confirms the request; 0: any 2xx
	urgent       bool     // sent without waiting out the shared cooldown (a pod's first DELETE)
}

// send performs one request: it waits out the shared cooldown, then sends,
// and decodes a 2xx body into out (nil: ignore). A non-2xx is an *APIError;
// a transport failure or malformed body matches ErrTransient.
func (c *Client) send(ctx context.Context, r request, out any) error {
	if !r.urgent {
		if err := c.cool.wait(ctx); err != nil {
			return err
		}
	}
	u := *c.base
	u.Path += r.path
	u.RawQuery = r.query.Encode()
	var body io.Reader
	if r.body != nil {
		data, err := json.Marshal(r.body)
		if err != nil {
			return fmt.Errorf("runpod: encode %s %s: %w", r.method, r.path, err)
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u.String(), body)
	if err != nil {
		return fmt.Errorf("runpod: %s %s: %w", r.method, r.path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.key.Reveal())
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	start := time.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctxErr := context.Cause(ctx); ctxErr != nil && ctx.Err() != nil && !errors.Is(ctxErr, context.DeadlineExceeded) {
			return fmt.Errorf("runpod: %s %s: %w", r.method, r.path, ctxErr)
		}
		c.log.LogAttrs(ctx, slog.LevelWarn, "runpod request failed", slog.String("method", r.method), slog.String("path", r.path), slog.String("error", c.scrub(err.Error(), r)))
		return fmt.Errorf("runpod: %s %s: %w: %s", r.method, r.path, ErrTransient, c.scrub(err.Error(), r))
	}
	defer resp.Body.Close()
	data, readErr := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if readErr == nil && len(data) > MaxResponseBytes {
		// Permanent: asking again returns the same listing.
		return fmt.Errorf("runpod: %s %s: %w: the response is over %d bytes (MaxResponseBytes)", r.method, r.path, ErrMalformed, MaxResponseBytes)
	}
	c.log.LogAttrs(ctx, slog.LevelDebug, "runpod request", slog.String("method", r.method), slog.String("path", r.path), slog.Int("status", resp.StatusCode), slog.Duration("elapsed", time.Since(start)))
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		return &RedirectError{Method: r.method, Path: r.path, StatusCode: resp.StatusCode, Location: string(c.scrubBody([]byte(location(resp.Header.Get("Location"))), r))}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// Scrub the whole body before anything cuts it: a secret across
		// the cut would keep its prefix.
		e := parseError(r.method, r.path, resp.StatusCode, c.scrubBody(data, r), resp.Header.Get("Retry-After"), time.Now(), c.capacity)
		e.Title, e.Detail = c.scrub(e.Title, r), c.scrub(e.Detail, r) // as decoded from JSON escapes
		for i := range e.Errors {
			e.Errors[i] = c.scrub(e.Errors[i], r)
		}
		e.RetryAfter = min(e.RetryAfter, c.maxAfter)
		if retryableStatus(e.StatusCode) {
			c.cool.extend(e.RetryAfter)
		}
		return e
	}
	if readErr != nil {
		return fmt.Errorf("runpod: %s %s: %w: reading the response: %s", r.method, r.path, ErrTransient, c.scrub(readErr.Error(), r))
	}
	if r.expect != 0 && resp.StatusCode != r.expect {
		return fmt.Errorf("runpod: %s %s: %w (%w): status %d, the contract answers %d: outcome unknown", r.method, r.path, ErrMalformed, ErrTransient, resp.StatusCode, r.expect)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("runpod: %s %s: %w (%w): %v", r.method, r.path, ErrMalformed, ErrTransient, err)
	}
	return nil
}

func (c *Client) scrub(s string, r request) string {
	return secret.Scrub(s, append(r.secrets, c.key)...)
}

// scrubBody removes every secret the request carried from a response body,
// before it is parsed or cut: as sent, JSON-escaped (with and without HTML
// escaping, with escaped slashes as some encoders write them) and
// URL-encoded (either case of hex). Then every run of 16 letters and
// digits of a secret (up to 8 KiB) is removed too, so a part of one that
// an unknown encoding echoes, or a cut would have kept, is never printed.
func (c *Client) scrubBody(data []byte, r request) []byte {
	var all []Secret
	for _, s := range append(r.secrets, c.key) {
		v := s.Reveal()
		if len(v) < 4 {
			continue
		}
		all = append(all, s)
		for _, e := range encodings(v) {
			all = append(all, Secret(e))
		}
	}
	text := secret.Scrub(string(data), all...)
	for _, s := range append(r.secrets, c.key) {
		text = scrubRuns(text, s.Reveal())
	}
	return []byte(text)
}

// encodings are the forms a server may echo a value in.
func encodings(v string) []string {
	out := []string{strings.ReplaceAll(v, "/", `\/`), url.QueryEscape(v), url.PathEscape(v)}
	out = append(out, strings.ToLower(url.QueryEscape(v)), strings.ToLower(url.PathEscape(v)))
	if q, err := json.Marshal(v); err == nil && len(q) > 2 {
		q := string(q[1 : len(q)-1])
		out = append(out, q, strings.ReplaceAll(q, "/", `\/`))
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) == nil {
		q := strings.TrimSuffix(b.String(), "\n")
		if len(q) > 2 {
			q = q[1 : len(q)-1]
			out = append(out, q, strings.ReplaceAll(q, "/", `\/`))
		}
	}
	return out
}

// scrubRuns removes from text every 16-character window of each run of
// letters and digits in v (v of at most 8 KiB).
func scrubRuns(text, v string) string {
	const window, most = 16, 8 << 10
	if len(v) > most || len(text) < window {
		return text
	}
	alnum := func(r rune) bool {
		return r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
	}
	for _, run := range strings.FieldsFunc(v, func(r rune) bool { return !alnum(r) }) {
		for i := 0; i+window <= len(run); i++ {
			if w := run[i : i+window]; strings.Contains(text, w) {
				text = strings.ReplaceAll(text, w, secret.Redacted)
			}
		}
	}
	return text
}

// call is send under the retry policy.
func (c *Client) call(ctx context.Context, r request, out any) error {
	return c.retry.Run(ctx, c.cool.remaining, func(ctx context.Context, _ int) error {
		return c.send(ctx, r, out)
	})
}

// ListGPUTypes reads the GPU catalog with availability for pods:
// GET /v2/catalog/gpus?include=AVAILABILITY&product=POD&cloud=…&count=…&minCudaVersion=…
// (https://docs.runpod.io/api-reference-v2/catalog/list-gpu-types).
func (c *Client) ListGPUTypes(ctx context.Context, q CatalogQuery) ([]GPUType, error) {
	v := url.Values{"include": {"AVAILABILITY"}, "product": {"POD"}}
	if q.Cloud != "" {
		v.Set("cloud", q.Cloud)
	}
	if q.Count > 0 {
		v.Set("count", strconv.Itoa(q.Count))
	}
	if q.MinCUDAVersion != "" {
		v.Set("minCudaVersion", q.MinCUDAVersion)
	}
	var resp struct {
		GPUs *[]wireGPUType `json:"gpus"`
	}
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v2/catalog/gpus", query: v}, &resp); err != nil {
		return nil, err
	}
	if resp.GPUs == nil {
		return nil, fmt.Errorf("runpod: GET /v2/catalog/gpus: %w: no gpus list", ErrMalformed)
	}
	out := make([]GPUType, 0, len(*resp.GPUs))
	for _, g := range *resp.GPUs {
		out = append(out, GPUType{ID: g.ID, Name: g.Name, MemoryGB: g.Memory, Secure: g.Secure, Community: g.Community,
			SecurePrice: g.Price.Secure, CommunityPrice: g.Price.Community, Availability: g.Availability})
	}
	return out, nil
}

// CreatePod creates one pod: POST /v2/pods
// (https://docs.runpod.io/api-reference-v2/pods/create-pod). A transient
// failure that cannot have created the pod (408, 429, a refused
// connection) is retried within the policy; after one that may have (a
// lost response, a 5xx, a malformed answer) it only looks the pod up by its
// unique name, and never sends the create again, so that nothing is
// created, and paid for, twice. When the retries end while a pod may
// exist, the error matches ErrCreateUnknown: the caller must find and
// delete the pod by name.
func (c *Client) CreatePod(ctx context.Context, req CreatePodRequest) (*Pod, error) {
	if req.Name == "" || req.Image == "" || req.GPU.ID == "" {
		return nil, fmt.Errorf("%w: name, image and gpu.id are required", ErrInvalidRequest)
	}
	if req.GPU.MinCUDAVersion != "" && len(req.GPU.AllowedCUDAVersions) > 0 {
		return nil, fmt.Errorf("%w: gpu.minCudaVersion and gpu.allowedCudaVersions are mutually exclusive", ErrRejected)
	}
	if err := req.CheckEnv(); err != nil {
		return nil, err
	}
	r := request{method: http.MethodPost, path: "/v2/pods", body: req.wire(), secrets: req.secrets()}
	var (
		created      *Pod
		maybeCreated bool // an earlier attempt may have created the pod
	)
	err := c.create.Run(ctx, c.cool.remaining, func(ctx context.Context, n int) error {
		if maybeCreated {
			// Never POST again after a create that may have taken
			// effect: a listing that lags behind it would not show the
			// pod, and a second POST would buy a second one under the
			// same name (and the same single-use runner config). Only
			// look; the caller sweeps by name when this runs out.
			p, err := c.findByName(ctx, req.Name)
			if err != nil {
				return fmt.Errorf("%w: looking for pod %q after an ambiguous create: %w", ErrTransient, req.Name, err)
			}
			if p != nil {
				created = p
				return nil
			}
			return fmt.Errorf("%w: pod %q is not listed after an ambiguous create", ErrTransient, req.Name)
		}
		var w wirePod
		if err := c.send(ctx, r, &w); err != nil {
			maybeCreated = Ambiguous(err)
			return err
		}
		p := w.pod()
		created = &p
		return nil
	})
	if err != nil {
		if maybeCreated {
			return nil, fmt.Errorf("%w: pod %q may exist: %w", ErrCreateUnknown, req.Name, err)
		}
		return nil, err
	}
	if created.ID == "" {
		return nil, fmt.Errorf("runpod: POST /v2/pods: %w: the created pod has no id", ErrMalformed)
	}
	c.log.LogAttrs(ctx, slog.LevelInfo, "runpod pod created", slog.String("pod", created.ID), slog.String("name", created.Name), slog.String("gpu", req.GPU.ID), slog.Float64("cost_per_hr", created.Cost))
	return created, nil
}

// Ambiguous reports whether a failed request may still have taken effect
// (created or deleted the pod): the response was lost or unreadable, or the
// server failed midway. Such a request is looked at before it is sent
// again: CreatePod looks the pod up by name, and a deletion reads the pod.
// A redirect was answered without being processed: never ambiguous.
func Ambiguous(err error) bool {
	if errors.Is(err, ErrRedirect) {
		return false // answered without being processed here
	}
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.StatusCode >= 500
	}
	return err != nil
}

// findByName returns the live pod with this exact name, or nil.
func (c *Client) findByName(ctx context.Context, name string) (*Pod, error) {
	pods, err := c.listPods(ctx, c.send)
	if err != nil {
		return nil, err
	}
	for i := range pods {
		if pods[i].Name == name && pods[i].Status != StatusTerminated {
			return &pods[i], nil
		}
	}
	return nil, nil
}

// GetPod reads one pod: GET /v2/pods/{id}
// (https://docs.runpod.io/api-reference-v2/pods/get-pod). A gone pod is an
// error matching ErrNotFound.
func (c *Client) GetPod(ctx context.Context, id string) (*Pod, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	var w wirePod
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v2/pods/" + url.PathEscape(id)}, &w); err != nil {
		return nil, err
	}
	p := w.pod()
	if p.ID == "" || !p.Status.Known() {
		return nil, fmt.Errorf("runpod: GET /v2/pods/%s: %w (%w): pod id %q, status %q", id, ErrMalformed, ErrTransient, p.ID, p.Status)
	}
	return &p, nil
}

// errConnectTimeout ends a request whose connection took too long.
var errConnectTimeout = errors.New("runpod: connecting took too long")

// GetPodOnce is GetPod as a single request: no retry, no wait for the
// shared cooldown, and at most connect to get a connection (dial and TLS),
// for a read that must not delay what follows it (the billing record read
// right before a deletion).
func (c *Client) GetPodOnce(ctx context.Context, id string, connect time.Duration) (*Pod, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		mu    sync.Mutex
		timer *time.Timer
	)
	stop := func() {
		mu.Lock()
		defer mu.Unlock()
		if timer != nil {
			timer.Stop()
		}
	}
	defer stop()
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GetConn: func(string) {
			mu.Lock()
			defer mu.Unlock()
			timer = time.AfterFunc(connect, func() { cancel(fmt.Errorf("%w (%s)", errConnectTimeout, connect)) })
		},
		GotConn: func(httptrace.GotConnInfo) { stop() },
	})
	var w wirePod
	if err := c.send(ctx, request{method: http.MethodGet, path: "/v2/pods/" + url.PathEscape(id), urgent: true}, &w); err != nil {
		if cause := context.Cause(ctx); errors.Is(cause, errConnectTimeout) {
			return nil, fmt.Errorf("runpod: GET /v2/pods/%s: %w", id, cause)
		}
		return nil, err
	}
	p := w.pod()
	if p.ID == "" || !p.Status.Known() {
		return nil, fmt.Errorf("runpod: GET /v2/pods/%s: %w: pod id %q, status %q", id, ErrMalformed, p.ID, p.Status)
	}
	return &p, nil
}

// MaxResponseBytes bounds what one response may take in memory. Pods
// return their environment, and a pod started with the packed CUDA proof
// (smoke.PackProof) carries about 1.6 MB of it, so a page of pods can be
// tens of megabytes.
const MaxResponseBytes = 64 << 20

// ListPods lists every pod: GET /v2/pods
// (https://docs.runpod.io/api-reference-v2/pods/list-pods), following a
// cursor when a response carries one, up to the page bound. A listing that
// would stop early is an error, never a partial list.
func (c *Client) ListPods(ctx context.Context) ([]Pod, error) {
	return c.listPods(ctx, c.call)
}

// ListPodsOnce is ListPods without the client's retries: one request per
// page, for a caller that retries under its own budget (a cleanup that
// resolves a pod by its name).
func (c *Client) ListPodsOnce(ctx context.Context) ([]Pod, error) { return c.listPods(ctx, c.send) }

func (c *Client) listPods(ctx context.Context, do func(context.Context, request, any) error) ([]Pod, error) {
	var pods []Pod
	q := url.Values{}
	for page := 1; ; page++ {
		var resp struct {
			Pods       *[]wirePod `json:"pods"`
			NextCursor string     `json:"nextCursor"`
		}
		if err := do(ctx, request{method: http.MethodGet, path: "/v2/pods", query: q}, &resp); err != nil {
			return nil, err
		}
		if resp.Pods == nil {
			return nil, fmt.Errorf("runpod: GET /v2/pods: %w (%w): no pods list", ErrMalformed, ErrTransient)
		}
		for _, w := range *resp.Pods {
			pods = append(pods, w.pod())
		}
		if resp.NextCursor == "" {
			return pods, nil
		}
		if page >= c.maxPages {
			return nil, fmt.Errorf("runpod: GET /v2/pods: more than %d pages; raise WithMaxPages rather than decide on a partial list", c.maxPages)
		}
		q = url.Values{"cursor": {resp.NextCursor}}
	}
}

// DeletePod sends one DELETE /v2/pods/{id}
// (https://docs.runpod.io/api-reference-v2/pods/delete-pod). Only the
// contract's 204 confirms deletion; any other success status is an unknown
// outcome (ErrMalformed). A 404 is returned as an error matching
// ErrNotFound: the caller decides that it confirms deletion. Use
// runpod.Delete for the bounded, idempotent cleanup.
func (c *Client) DeletePod(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	// A DELETE stops the billing: it is sent even while the shared
	// cooldown pauses the other calls (its own 429 extends the cooldown,
	// which runpod.Delete waits out before any retry).
	if err := c.send(ctx, request{method: http.MethodDelete, path: "/v2/pods/" + url.PathEscape(id), expect: http.StatusNoContent, urgent: true}, nil); err != nil {
		return err
	}
	c.log.LogAttrs(ctx, slog.LevelInfo, "runpod pod deleted", slog.String("pod", id))
	return nil
}

func checkID(id string) error {
	if id == "" || strings.ContainsAny(id, "/?#") {
		return fmt.Errorf("runpod: pod id %q: want a bare pod id", id)
	}
	return nil
}
