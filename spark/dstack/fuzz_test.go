package dstack

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gpugate/gpugate/internal/secret"
	"github.com/gpugate/gpugate/spark"
)

const fuzzToken = secret.Secret("fuzz-token-9c1d7e")

// FuzzDecodeAnswers feeds arbitrary bytes to every parser of dstack's
// answers: a Run, a Fleet, a runs/list page, a logs/poll page and an
// error answer. None may panic; a decoded Run or Fleet has what the
// backend relies on; a decoded logs page's events each have a source of
// stdout or stderr; an error answer's detail is bounded, valid UTF-8 and
// free of the token.
func FuzzDecodeAnswers(f *testing.F) {
	for _, name := range []string{"run_dev_env.json", "fleet_ssh.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		`{"detail": [{"msg": "Run not found", "code": "resource_not_exists"}]}`,
		`{"detail": {"msg": "Invalid token", "code": null}}`,
		`{"detail": "Not authenticated"}`,
		`{"detail": [{"type": "missing", "loc": ["body", "force"], "msg": "Field required", "input": {}}]}`,
		`{"msg": "Access denied", "code": null}`,
		`[{"id": "1", "status": "running", "submitted_at": "2023-01-02T03:04:00Z", "run_spec": {"run_name": "x", "configuration": {"type": "task", "env": ["A=b", "C"], "fleets": ["p/f", {"project": null, "name": "g"}]}}, "jobs": []}]`,
		`{"id": "f", "name": "n", "status": "active", "spec": {"configuration": {"ssh_config": null}}, "instances": [{"id": "i", "name": "n-0", "instance_num": 0, "status": "idle", "hostname": null}]}`,
		"Internal Server Error " + string(fuzzToken),
		`{"detail": "` + string(fuzzToken) + `"}`,
		"\xff\xfe",
		`{"logs": [{"timestamp": "2023-01-02T03:04:05.123456+00:00", "log_source": "stdout", "message": "eyJwYXNzZWQiOjF9Cg=="}], "external_url": null, "next_token": "1"}`,
		`{"logs": [{"timestamp": "2023-01-02T03:04:05Z", "log_source": "stderr", "message": "!!"}]}`,
		`{"logs": [], "next_token": null}`,
		`[{"id": "1", "status": "done", "termination_reason": "all_jobs_done", "submitted_at": "2023-01-02T03:04:00Z", "run_spec": {"run_name": "x", "configuration": {"type": "task"}}, "jobs": [{"job_spec": {"job_num": 0}, "job_submissions": [{"id": "s", "status": "done", "termination_reason": "done_by_runner", "job_provisioning_data": {"hostname": "h"}}]}]}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r Run
		if err := json.Unmarshal(data, &r); err == nil {
			if r.ID == "" || r.Name == "" || r.Type == "" || r.Status == "" {
				t.Fatalf("decoded a run without id, name, type or status: %+v", r)
			}
		} else if !errors.Is(err, ErrMalformed) && !isJSONError(err) {
			t.Fatalf("a run's decoding error is neither ErrMalformed nor JSON's: %v", err)
		}
		var fl Fleet
		if err := json.Unmarshal(data, &fl); err == nil {
			if fl.ID == "" || fl.Name == "" {
				t.Fatalf("decoded a fleet without id or name: %+v", fl)
			}
			for _, in := range fl.Instances {
				if in.ID == "" || in.Name == "" || in.Status == "" {
					t.Fatalf("decoded an instance without id, name or status: %+v", in)
				}
			}
		}
		var page []Run
		_ = json.Unmarshal(data, &page)
		var logs LogsPage
		if err := json.Unmarshal(data, &logs); err == nil {
			for _, e := range logs.Events {
				if e.Source != LogStdout && e.Source != LogStderr {
					t.Fatalf("decoded a log event of source %q", e.Source)
				}
			}
		} else if !errors.Is(err, ErrMalformed) && !isJSONError(err) {
			t.Fatalf("a logs page's decoding error is neither ErrMalformed nor JSON's: %v", err)
		}
		if line, _, long := lastLine([][]byte{data}); len(line) > spark.MaxReceipt != long {
			t.Fatalf("a last line of %d bytes is long: %v", len(line), long)
		}
		e := parseAPIError(400, "/api/x", data, fuzzToken)
		msg := e.Error()
		if len(e.Detail) > maxDetail || !utf8.ValidString(e.Detail) {
			t.Fatalf("detail of %d bytes (valid UTF-8: %v)", len(e.Detail), utf8.ValidString(e.Detail))
		}
		if strings.Contains(msg, string(fuzzToken)) {
			t.Fatalf("the token is in %q", msg)
		}
		if !strings.HasPrefix(msg, "dstack: ") {
			t.Fatalf("error %q lacks the package prefix", msg)
		}
	})
}

func isJSONError(err error) bool {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	return errors.As(err, &syn) || errors.As(err, &typ)
}
