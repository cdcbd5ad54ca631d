package dstack

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
	"net/url"
	"strings"
	"time"

	"github.com/gpugate/gpugate/internal/secret"
	"github.com/gpugate/gpugate/internal/textlimit"
)

// Sentinels. Every error of this package starts with "dstack: " and wraps
// one of these, an *APIError, or the transport's error.
var (
	// ErrConfig: NewClient or NewBackend was given a setting it cannot
	// work with; the error names it.
	ErrConfig = errors.New("dstack: invalid configuration")
	// ErrNotFound: dstack answered that the run or fleet asked for does
	// not exist (400 with code resource_not_exists).
	ErrNotFound = errors.New("dstack: no such resource")
	// ErrProjectNotFound: dstack answered 404: the project does not exist,
	// or the base URL is not a dstack server's.
	ErrProjectNotFound = errors.New("dstack: no such project")
	// ErrUnauthorized: dstack refused the token (401 or 403).
	ErrUnauthorized = errors.New("dstack: the token was refused")
	// ErrRedirect: the server answered with a redirect, which the client
	// never follows (it would carry the token elsewhere).
	ErrRedirect = errors.New("dstack: the server redirected the request")
	// ErrMalformed: an answer that is not what dstack's API defines (not
	// JSON, too large, or without a required field).
	ErrMalformed = errors.New("dstack: malformed answer")
)

// DefaultTimeout bounds each request when the HTTP client given to
// NewClient has no timeout of its own.
const DefaultTimeout = 30 * time.Second

// maxAnswer is the largest answer read; dstack's run lists are at most 100
// runs a page.
const maxAnswer = 32 << 20

// maxDetail bounds the error detail kept from an answer.
const maxDetail = 1024

// APIError is a non-2xx answer from the dstack server.
type APIError struct {
	Status int    // the HTTP status
	Path   string // the API path called, e.g. /api/project/main/runs/get
	// Code is dstack's error code (resource_not_exists, resource_exists,
	// error, ...) when the answer carried one.
	Code string
	// Detail is dstack's message, scrubbed of the token and cut to 1 KiB.
	Detail string
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "dstack: POST %s: %d", e.Path, e.Status)
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	}
	if e.Detail != "" {
		b.WriteString(": " + e.Detail)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrNotFound), ErrProjectNotFound and
// ErrUnauthorized true for the answers they describe.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Status == http.StatusBadRequest && e.Code == "resource_not_exists"
	case ErrProjectNotFound:
		return e.Status == http.StatusNotFound
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden
	}
	return false
}

// Client calls one project of a dstack server's HTTP API: each call is a
// POST with a JSON body and the bearer token. Its methods are safe for
// concurrent use.
type Client struct {
	base    *url.URL
	token   secret.Secret
	project string
	hc      *http.Client
}

// NewClient returns a client of the dstack server at baseURL (https, or
// http to a loopback address) for project, authenticating with token (a
// dstack user token: never printed, logged or put in an error). hc may be
// nil; the client works on a copy that never follows a redirect and bounds
// each request to DefaultTimeout unless hc sets its own timeout.
func NewClient(baseURL, token, project string, hc *http.Client) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(strings.TrimSpace(baseURL), "/"))
	switch {
	case err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("%w: url: give the dstack server's address, e.g. https://dstack.example.com", ErrConfig)
	case u.Scheme == "http" && !loopback(u.Hostname()):
		return nil, fmt.Errorf("%w: url: %s is plain http to a host that is not loopback; use https so the token is not sent in the clear", ErrConfig, u.Redacted())
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%w: url: the scheme must be https (or http to a loopback address)", ErrConfig)
	case strings.TrimSpace(token) == "":
		return nil, fmt.Errorf("%w: token: give the dstack user's token", ErrConfig)
	case strings.ContainsFunc(strings.TrimSpace(token), func(r rune) bool { return r < 0x21 || r == 0x7f }):
		return nil, fmt.Errorf("%w: token: it holds spaces or control characters; give the token alone (dstack shows it in the user's settings)", ErrConfig)
	case project == "" || strings.ContainsAny(project, "/?#%") || strings.TrimSpace(project) != project:
		return nil, fmt.Errorf("%w: project: give the dstack project's name", ErrConfig)
	}
	c := &http.Client{}
	if hc != nil {
		*c = *hc
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Client{base: u, token: secret.Secret(strings.TrimSpace(token)), project: project, hc: c}, nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// String describes the client without its token.
func (c Client) String() string {
	u := ""
	if c.base != nil {
		u = c.base.Redacted()
	}
	return "dstack.Client{url: " + u + ", project: " + c.project + ", token: " + secret.Redacted + "}"
}

// Format prints String for every verb: the token never reaches fmt.
func (c Client) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, c.String()) }

// LogValue makes slog print String.
func (c Client) LogValue() slog.Value { return slog.StringValue(c.String()) }

// Project is the project the client calls.
func (c *Client) Project() string { return c.project }

func (c *Client) projectPath(resource, verb string) string {
	return "/api/project/" + url.PathEscape(c.project) + "/" + resource + "/" + verb
}

// post sends in as the JSON body of POST path and decodes a 2xx answer
// into out (when not nil).
func (c *Client) post(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("dstack: POST %s: encode the request: %w", path, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base.String()+path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("dstack: POST %s: %w", path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token.Reveal())
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("dstack: POST %s: %w", path, c.scrubErr(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return fmt.Errorf("dstack: POST %s: read the answer: %w", path, c.scrubErr(err))
	}
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return fmt.Errorf("%w: POST %s answered %d; give the server's own address as the URL (a redirect is never followed)", ErrRedirect, path, resp.StatusCode)
	case resp.StatusCode < 200 || resp.StatusCode >= 300:
		return parseAPIError(resp.StatusCode, path, data, c.token)
	case len(data) > maxAnswer:
		return malformed("POST %s: the answer is larger than %d bytes", path, maxAnswer)
	case out == nil:
		// runs/stop answers JSON null; anything that is not JSON (a
		// proxy's page, a cut answer) did not come from dstack.
		if !json.Valid(data) {
			return malformed("POST %s: the answer is not JSON", path)
		}
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		err = nest("POST "+path, err)
		return &decodeError{msg: secret.Scrub(err.(*decodeError).msg, c.token)}
	}
	return nil
}

// scrubErr keeps the token out of a transport error's text while keeping
// its identity (context.DeadlineExceeded, net errors) for errors.Is.
func (c *Client) scrubErr(err error) error {
	if msg := err.Error(); secret.Scrub(msg, c.token) != msg {
		return &scrubbed{msg: secret.Scrub(msg, c.token), err: err}
	}
	return err
}

type scrubbed struct {
	msg string
	err error
}

func (s *scrubbed) Error() string { return s.msg }
func (s *scrubbed) Unwrap() error { return s.err }

// parseAPIError reads dstack's error answer. The server sends one of
//
//	{"detail": [{"msg": ..., "code": ...}, ...]}  a ServerClientError (400)
//	{"detail": {"msg": ..., "code": ...}}         an HTTPException (403 invalid token, 404)
//	{"detail": "..."}                             FastAPI's own (403 not authenticated, 404 route)
//	{"detail": [{"loc": [...], "msg": ...}]}      a request validation error (422)
//	{"msg": ..., "code": ...}                     a ForbiddenError (403)
//
// and anything else is kept as text.
func parseAPIError(status int, path string, body []byte, token secret.Secret) *APIError {
	code, detail := errorDetail(body)
	detail = strings.Join(strings.Fields(secret.Scrub(detail, token)), " ")
	return &APIError{Status: status, Path: path, Code: textlimit.Cut(secret.Scrub(code, token), 64, "…"), Detail: textlimit.Cut(detail, maxDetail, "…")}
}

type errorItem struct {
	Msg  string `json:"msg"`
	Code string `json:"code"`
	Loc  []any  `json:"loc"`
}

func (e errorItem) text() string {
	if len(e.Loc) == 0 {
		return e.Msg
	}
	parts := make([]string, 0, len(e.Loc))
	for _, p := range e.Loc {
		parts = append(parts, fmt.Sprint(p))
	}
	return strings.Join(parts, ".") + ": " + e.Msg
}

func errorDetail(body []byte) (code, detail string) {
	var top struct {
		Detail json.RawMessage `json:"detail"`
		errorItem
	}
	if err := json.Unmarshal(body, &top); err != nil {
		return "", string(bytes.ToValidUTF8(body, []byte("?")))
	}
	if len(top.Detail) == 0 || string(top.Detail) == "null" {
		return top.Code, top.text()
	}
	var s string
	if json.Unmarshal(top.Detail, &s) == nil {
		return "", s
	}
	var one errorItem
	if json.Unmarshal(top.Detail, &one) == nil {
		return one.Code, one.text()
	}
	var many []errorItem
	if json.Unmarshal(top.Detail, &many) == nil {
		msgs := make([]string, 0, len(many))
		for _, it := range many {
			if code == "" {
				code = it.Code
			}
			if t := it.text(); t != "" {
				msgs = append(msgs, t)
			}
		}
		return code, strings.Join(msgs, "; ")
	}
	return "", string(top.Detail)
}
