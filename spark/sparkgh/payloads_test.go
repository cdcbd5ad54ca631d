package sparkgh

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-github/v66/github"

	"github.com/gpugate/gpugate/spark"
)

// realPayloads reads the @octokit/webhooks-examples payloads of one event
// (testdata/octokit-webhooks-examples, see SOURCES.md there).
func realPayloads(t *testing.T, event string) []json.RawMessage {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "octokit-webhooks-examples", event+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var examples []json.RawMessage
	if err := json.Unmarshal(data, &examples); err != nil {
		t.Fatal(err)
	}
	if len(examples) == 0 {
		t.Fatalf("%s: no examples", event)
	}
	return examples
}

// Webhooks survive real payloads: every @octokit/webhooks-examples payload
// of every event the integration subscribes to is signed, posted to the
// receiver (202) and processed without being refused as undecodable.
func TestWebhook_EveryRealPayloadOfTheSubscribedEventsIsProcessed(t *testing.T) {
	w := newWorld(t, false)
	w.in.cfg.MergeQueue = &MergeQueue{Lane: Lane{Suite: "smoke", Topology: spark.Single}, Branches: []string{"main"}}
	wh := w.in.NewWebhook(1)
	total := 0
	for _, event := range w.in.Events() {
		for i, payload := range realPayloads(t, event) {
			total++
			id := fmt.Sprintf("%s-%d", event, i)
			if code := post(wh, "webhook-secret-123", id, event, payload); code != http.StatusAccepted {
				t.Errorf("%s: answered %d, want 202", id, code)
				continue
			}
			d := <-wh.queue
			if err := w.in.Process(ctx, d.event, d.payload); errors.Is(err, ErrPayload) {
				t.Errorf("%s: refused as undecodable: %v", id, err)
			}
		}
	}
	if total < 60 {
		t.Errorf("%d real payloads, want the whole corpus (%v)", total, w.in.Events())
	}
	t.Logf("%d real payloads of %v processed", total, w.in.Events())
}

// A field the integration does not act on, in a form go-github cannot
// decode (an old-style timestamp inside app), no longer drops the delivery.
func TestProcess_AnUndecodableFieldTheIntegrationDoesNotUseIsIgnored(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(realPayloads(t, "check_run")[0], &doc); err != nil {
		t.Fatal(err)
	}
	doc["check_run"].(map[string]any)["app"] = map[string]any{"id": 1, "created_at": "2018/05/04 01:14:52 +0000"}
	payload, _ := json.Marshal(doc)
	if _, err := github.ParseWebHook("check_run", payload); err == nil {
		t.Fatal("the hostile field no longer fails go-github's full decode: the test proves nothing")
	}
	w := newWorld(t, false)
	if err := w.in.Process(ctx, "check_run", payload); errors.Is(err, ErrPayload) {
		t.Errorf("refused as undecodable: %v", err)
	}
}

// A correctly signed delivery is accepted whatever parameters or case its
// Content-Type carries (a relay may add charset=utf-8).
func TestWebhook_ContentTypeParametersAreAccepted(t *testing.T) {
	w := newWorld(t, false)
	wh := w.in.NewWebhook(4)
	body := []byte(`{"zen":"x","hook_id":1}`)
	for i, ct := range []string{"application/json; charset=utf-8", "Application/JSON"} {
		r := httptest.NewRequest("POST", "/github/webhook", bytes.NewReader(body))
		r.Header.Set("Content-Type", ct)
		r.Header.Set("X-GitHub-Event", "ping")
		r.Header.Set("X-GitHub-Delivery", fmt.Sprint("ct-", i))
		r.Header.Set("X-Hub-Signature-256", sign(body, "webhook-secret-123"))
		rec := httptest.NewRecorder()
		wh.ServeHTTP(rec, r)
		if rec.Code != http.StatusAccepted {
			t.Errorf("%q: %d, want 202", ct, rec.Code)
		}
	}
}

// The check links the job that ran the suite: every real workflow_job
// payload keeps its job's html_url through the fields the integration
// decodes, and go-github reads it from there.
func TestWorkflowJob_TheRealPayloadsJobLinkSurvivesDecoding(t *testing.T) {
	for i, raw := range realPayloads(t, "workflow_job") {
		var want struct {
			WorkflowJob struct {
				HTMLURL string `json:"html_url"`
			} `json:"workflow_job"`
		}
		json.Unmarshal(raw, &want)
		kept, err := actedOn("workflow_job", raw)
		if err != nil {
			t.Fatal(err)
		}
		var e github.WorkflowJobEvent
		if err := json.Unmarshal(kept, &e); err != nil {
			t.Fatal(err)
		}
		if got := e.GetWorkflowJob().GetHTMLURL(); want.WorkflowJob.HTMLURL == "" || got != want.WorkflowJob.HTMLURL {
			t.Errorf("example %d: the job's link %q, want %q", i, got, want.WorkflowJob.HTMLURL)
		}
	}
}
