package rest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/gpugate/gpugate/internal/faketime"
	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/rest"
	"github.com/gpugate/gpugate/runpod/runpodtest"
)

// contract validates requests and responses against the published OpenAPI
// document (testdata/openapi-v2.json, OpenAPI 3.1: JSON Schema 2020-12).
type contract struct {
	doc      map[string]any
	compiler *jsonschema.Compiler
	mu       sync.Mutex
	cache    map[string]*jsonschema.Schema
}

const docURL = "https://runpod.invalid/openapi-v2.json"

func loadContract(t *testing.T) *contract {
	t.Helper()
	data, err := os.ReadFile("testdata/openapi-v2.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(docURL, doc); err != nil {
		t.Fatal(err)
	}
	return &contract{doc: doc.(map[string]any), compiler: c, cache: map[string]*jsonschema.Schema{}}
}

// schema compiles the schema at a JSON pointer into the document.
func (c *contract) schema(pointer string) (*jsonschema.Schema, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.cache[pointer]; ok {
		return s, nil
	}
	s, err := c.compiler.Compile(docURL + "#" + pointer)
	if err != nil {
		return nil, err
	}
	c.cache[pointer] = s
	return s, nil
}

// resolve follows a local $ref and returns the target object and pointer.
func (c *contract) resolve(v any, pointer string) (map[string]any, string) {
	m, _ := v.(map[string]any)
	for m != nil {
		ref, ok := m["$ref"].(string)
		if !ok {
			break
		}
		pointer = strings.TrimPrefix(ref, "#")
		m = c.at(pointer)
	}
	return m, pointer
}

func (c *contract) at(pointer string) map[string]any {
	var cur any = c.doc
	for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, _ := cur.(map[string]any)
		cur = m[tok]
	}
	m, _ := cur.(map[string]any)
	return m
}

func escape(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1") }

// operation finds the OpenAPI operation for a method and concrete path.
func (c *contract) operation(method, path string) (map[string]any, string, error) {
	paths := c.doc["paths"].(map[string]any)
	for tmpl := range paths {
		re := "^" + regexp.MustCompile(`\\\{[^}]+\\\}`).ReplaceAllString(regexp.QuoteMeta(tmpl), `[^/]+`) + "$"
		if !regexp.MustCompile(re).MatchString(path) {
			continue
		}
		item := paths[tmpl].(map[string]any)
		op, ok := item[strings.ToLower(method)].(map[string]any)
		if !ok {
			return nil, "", fmt.Errorf("%s %s: the contract has no %s operation on %s", method, path, method, tmpl)
		}
		return op, "/paths/" + escape(tmpl) + "/" + strings.ToLower(method), nil
	}
	return nil, "", fmt.Errorf("%s %s: no such path in the contract", method, path)
}

func validateJSON(s *jsonschema.Schema, body []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return s.Validate(v)
}

// checkRequest validates method, path, query parameters and body.
func (c *contract) checkRequest(r *http.Request, body []byte) error {
	op, opPtr, err := c.operation(r.Method, r.URL.Path)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		return fmt.Errorf("%s %s: no bearer token", r.Method, r.URL.Path)
	}
	declared := map[string]bool{}
	params, _ := op["parameters"].([]any)
	for i, p := range params {
		param, ptr := c.resolve(p, fmt.Sprintf("%s/parameters/%d", opPtr, i))
		if param["in"] != "query" {
			continue
		}
		name := param["name"].(string)
		declared[name] = true
		if !r.URL.Query().Has(name) {
			continue
		}
		s, err := c.schema(ptr + "/schema")
		if err != nil {
			return err
		}
		raw := r.URL.Query().Get(name)
		var v any = raw
		if typ, _ := c.resolveSchemaType(ptr + "/schema"); typ == "array" {
			var items []any
			for _, x := range strings.Split(raw, ",") {
				items = append(items, x)
			}
			v = items
		} else if typ == "integer" {
			v = json.Number(raw)
		}
		if err := s.Validate(v); err != nil {
			return fmt.Errorf("%s %s: query %s=%q: %w", r.Method, r.URL.Path, name, raw, err)
		}
	}
	for name := range r.URL.Query() {
		if !declared[name] {
			return fmt.Errorf("%s %s: query parameter %q is not in the contract", r.Method, r.URL.Path, name)
		}
	}
	rb, _ := op["requestBody"].(map[string]any)
	switch {
	case rb == nil && len(body) > 0:
		return fmt.Errorf("%s %s: sends a body the contract does not take", r.Method, r.URL.Path)
	case rb != nil:
		s, err := c.schema(opPtr + "/requestBody/content/application~1json/schema")
		if err != nil {
			return err
		}
		if err := validateJSON(s, body); err != nil {
			return fmt.Errorf("%s %s: body: %w", r.Method, r.URL.Path, err)
		}
	}
	return nil
}

func (c *contract) resolveSchemaType(ptr string) (string, error) {
	m, _ := c.resolve(c.at(ptr), ptr)
	t, _ := m["type"].(string)
	return t, nil
}

// checkResponse validates that the status is declared and the body matches.
func (c *contract) checkResponse(r *http.Request, status int, contentType string, body []byte) error {
	op, opPtr, err := c.operation(r.Method, r.URL.Path)
	if err != nil {
		return err
	}
	responses := op["responses"].(map[string]any)
	key := fmt.Sprint(status)
	if _, ok := responses[key]; !ok {
		if status < 400 {
			return fmt.Errorf("%s %s: status %d is not in the contract", r.Method, r.URL.Path, status)
		}
		key = "default"
	}
	resp, ptr := c.resolve(responses[key], opPtr+"/responses/"+key)
	content, _ := resp["content"].(map[string]any)
	if len(content) == 0 {
		if len(body) > 0 {
			return fmt.Errorf("%s %s: %d carries a body the contract does not have", r.Method, r.URL.Path, status)
		}
		return nil
	}
	mt := strings.TrimSpace(strings.Split(contentType, ";")[0])
	if _, ok := content[mt]; !ok {
		return fmt.Errorf("%s %s: %d with content type %q, the contract has %v", r.Method, r.URL.Path, status, mt, keys(content))
	}
	s, err := c.schema(ptr + "/content/" + escape(mt) + "/schema")
	if err != nil {
		return err
	}
	if err := validateJSON(s, body); err != nil {
		return fmt.Errorf("%s %s: %d body: %w", r.Method, r.URL.Path, status, err)
	}
	return nil
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// checked wraps a transport and records every contract violation.
type checked struct {
	c     *contract
	next  http.RoundTripper
	mu    sync.Mutex
	fails []string
	n     int
}

func (t *checked) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	t.record(t.c.checkRequest(r, body))
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body = io.NopCloser(bytes.NewReader(data))
	t.record(t.c.checkResponse(r, resp.StatusCode, resp.Header.Get("Content-Type"), data))
	return resp, nil
}

func (t *checked) record(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n++
	if err != nil {
		t.fails = append(t.fails, err.Error())
	}
}

// TestConformance_ClientAndFakeFollowThePublishedContract drives every
// client operation, including error paths, and validates each request the
// client sends and each response the fake returns against openapi-v2.json.
func TestConformance_ClientAndFakeFollowThePublishedContract(t *testing.T) {
	ct := loadContract(t)
	var chk *checked
	synctest.Test(t, func(t *testing.T) {
		srv := runpodtest.New()
		chk = &checked{c: ct, next: srv.Client().Transport}
		c, err := rest.NewClient(rest.WithAPIKey(runpodtest.APIKey), rest.WithBaseURL(runpodtest.BaseURL), rest.WithHTTPClient(&http.Client{Transport: chk}))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if _, err := c.ListGPUTypes(ctx, rest.CatalogQuery{Cloud: "SECURE", Count: 1, MinCUDAVersion: "12.6"}); err != nil {
			t.Fatal(err)
		}
		srv.AddFault(runpodtest.Fault{Method: "POST", Path: "/v2/pods", Status: 429, RetryAfter: "2"})
		p, err := c.CreatePod(ctx, podRequest("gate-c1", "NVIDIA GeForce RTX 4090"))
		if err != nil {
			t.Fatal(err)
		}
		faketime.Advance(2 * time.Minute)
		if _, err := c.GetPod(ctx, p.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := c.ListPods(ctx); err != nil {
			t.Fatal(err)
		}
		srv.SetStock("NVIDIA L40S", 0)
		if _, err := c.CreatePod(ctx, podRequest("gate-c2", "NVIDIA L40S")); err == nil {
			t.Fatal("want a capacity error")
		}
		for _, status := range []int{402, 403, 422} {
			srv.AddFault(runpodtest.Fault{Method: "POST", Path: "/v2/pods", Status: status})
			c.CreatePod(ctx, podRequest("gate-c3", "NVIDIA L4"))
		}
		if err := runpod.Delete(ctx, c, p.ID); err != nil {
			t.Fatal(err)
		}
		if err := c.DeletePod(ctx, p.ID); err == nil {
			t.Fatal("want a 404 for a deleted pod")
		}
		if _, err := c.GetPod(ctx, p.ID); err == nil {
			t.Fatal("want a 404 for a deleted pod")
		}
	})
	if chk.n < 20 {
		t.Errorf("only %d checks ran", chk.n)
	}
	for _, f := range chk.fails {
		t.Error(f)
	}
}

// TestConformance_ValidatorRejectsWhatTheAPIWould shows the validator can
// fail: bodies and parameters the published contract forbids.
func TestConformance_ValidatorRejectsWhatTheAPIWould(t *testing.T) {
	ct := loadContract(t)
	req := func(method, target, body string) (*http.Request, []byte) {
		r, _ := http.NewRequest(method, runpodtest.BaseURL+target, strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer k")
		return r, []byte(body)
	}
	bad := map[string][3]string{
		"unknown body field":      {"POST", "/v2/pods", `{"name":"a","image":"i","gpu":{"id":"x"},"bogus":1}`},
		"no name":                 {"POST", "/v2/pods", `{"image":"i","gpu":{"id":"x"}}`},
		"no image nor template":   {"POST", "/v2/pods", `{"name":"a","gpu":{"id":"x"}}`},
		"bad minCudaVersion":      {"POST", "/v2/pods", `{"name":"a","image":"i","gpu":{"id":"x","minCudaVersion":"12"}}`},
		"zero count":              {"POST", "/v2/pods", `{"name":"a","image":"i","gpu":{"id":"x","count":0}}`},
		"unknown query parameter": {"GET", "/v2/pods?limit=5", ""},
		"bad include":             {"GET", "/v2/catalog/gpus?include=PRICES", ""},
		"unknown path":            {"GET", "/v2/pod", ""},
		"body on a GET":           {"GET", "/v2/pods", `{}`},
	}
	for name, tc := range bad {
		t.Run(name, func(t *testing.T) {
			r, body := req(tc[0], tc[1], tc[2])
			if err := ct.checkRequest(r, body); err == nil {
				t.Error("the validator accepted it")
			}
		})
	}
	r, _ := req("GET", "/v2/pods/abc", "")
	if err := ct.checkResponse(r, 200, "application/json", []byte(`{"id":"abc"}`)); err == nil {
		t.Error("a pod without its required fields was accepted")
	}
	if err := ct.checkResponse(r, 404, "application/problem+json", []byte(`{"title":"Not Found","status":404,"detail":"pod not found"}`)); err != nil {
		t.Errorf("a valid problem document was rejected: %v", err)
	}
}
