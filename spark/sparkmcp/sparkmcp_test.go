package sparkmcp

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/sparktest"
)

const apiToken = "mcp-test-token-0123456789"

// handlerTransport serves requests with an http.Handler in process: the
// controller's real API, no network, inside the test's bubble.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if err := r.Context().Err(); err != nil {
		return nil, err
	}
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// fleet is the seed's two-host fleet behind its API, with an admission
// loop, and an agent's MCP session to it.
type fleet struct {
	ctrl    *spark.Controller
	session *mcp.ClientSession
	down    func() // makes the controller's store fail
}

func newFleet(t *testing.T, ctx context.Context, o Options) *fleet {
	t.Helper()
	store := sparktest.NewStore()
	opts := spark.DefaultOptions()
	opts.Service = &sparktest.Service{}
	c, err := spark.New(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	h, err := spark.NewHandler(c, apiToken)
	if err != nil {
		t.Fatal(err)
	}
	api, err := spark.NewAPIClient("http://spark.invalid", apiToken, &http.Client{Transport: handlerTransport{h}})
	if err != nil {
		t.Fatal(err)
	}
	go sparktest.RunAdmission(ctx, c, time.Second, "spark-1", "spark-2")
	server := NewServer(api, o)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	return &fleet{ctrl: c, session: cs, down: func() { store.SetFail(true) }}
}

// call calls a tool and decodes its structured result into out; it
// returns the tool's error text, if it failed.
func (f *fleet) call(t *testing.T, ctx context.Context, tool string, args map[string]any, out any) string {
	t.Helper()
	res, err := f.session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v", tool, err)
	}
	if res.IsError {
		var text []string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text = append(text, tc.Text)
			}
		}
		return strings.Join(text, " ")
	}
	data, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("%s: %v: %s", tool, err, data)
	}
	return ""
}

// The Spark seed: agents "request a lease through the shared sparkctl/MCP
// interface, wait for active, and attach to the dstack development
// environment assigned to that lease"; "I'm done with the Sparks" is a
// release. Through the MCP tools, over the controller's real API: a
// one-host development lease on the preferred host, active after a wait,
// released with its fencing token.
func TestAgentsRequestWaitAndReleaseThroughTheSameQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		f := newFleet(t, ctx, Options{Owner: "agent:alice"})
		var l Lease
		if msg := f.call(t, ctx, "spark_request", map[string]any{}, &l); msg != "" || l.State != "queued" || l.Class != "development" || l.Topology != "single" || !strings.Contains(l.Next, "spark_wait") {
			t.Fatalf("request: %q %+v", msg, l)
		}
		id := l.ID
		if msg := f.call(t, ctx, "spark_wait", map[string]any{"id": id}, &l); msg != "" || l.State != "active" || !slices.Equal(l.Hosts, []string{"spark-2"}) || l.Token == 0 || l.Expires == "" {
			t.Fatalf("wait: %q %+v: want active on the preferred host with a token", msg, l)
		}
		st, err := f.ctrl.Status(ctx, id)
		if err != nil || st.Request.Owner != "agent:alice" {
			t.Errorf("the controller records owner %q (%v)", st.Request.Owner, err)
		}
		var d Done
		if msg := f.call(t, ctx, "spark_release", map[string]any{"id": id, "token": l.Token + 1}, &d); !strings.Contains(msg, "stale") || !strings.Contains(msg, "spark_status") {
			t.Errorf("a wrong token: %q", msg)
		}
		if msg := f.call(t, ctx, "spark_cancel", map[string]any{"id": id}, &d); !strings.Contains(msg, "release it with its token") {
			t.Errorf("cancelling an active lease: %q", msg)
		}
		if msg := f.call(t, ctx, "spark_release", map[string]any{"id": id, "token": l.Token}, &d); msg != "" || !strings.HasPrefix(d.Result, "released") ||
			d.Hosts["spark-2"] != "idle" || !strings.Contains(d.Result, "spark-2 is clean") {
			t.Fatalf("release: %q %+v: want the host's cleanup acknowledged", msg, d)
		}
		if msg := f.call(t, ctx, "spark_status", map[string]any{"id": id}, &l); msg != "" || l.State != "released" || !strings.Contains(l.Next, "ended") {
			t.Errorf("status after release: %q %+v", msg, l)
		}
	})
}

// "Reserve both Sparks for development" is one atomic two-host lease;
// "Start Deckard" is a service start on its host; a queued lease can be
// cancelled; a wait that runs out returns the lease still queued, with its
// position, instead of failing.
func TestThePairTheServiceStartAndABoundedWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		f := newFleet(t, ctx, Options{})
		var pair, second, service Lease
		if msg := f.call(t, ctx, "spark_request", map[string]any{"topology": "pair"}, &pair); msg != "" {
			t.Fatal(msg)
		}
		if msg := f.call(t, ctx, "spark_wait", map[string]any{"id": pair.ID}, &pair); msg != "" || pair.State != "active" || len(pair.Hosts) != 2 {
			t.Fatalf("pair: %q %+v: want both hosts at once", msg, pair)
		}
		// Both hosts are taken: the next request waits its turn.
		if msg := f.call(t, ctx, "spark_request", map[string]any{"host": "spark-1", "duration_minutes": 30}, &second); msg != "" {
			t.Fatal(msg)
		}
		start := time.Now()
		if msg := f.call(t, ctx, "spark_wait", map[string]any{"id": second.ID, "timeout_seconds": 5}, &second); msg != "" || second.State != "queued" || second.Position != 1 || second.Pending == "" {
			t.Errorf("a wait that ran out: %q %+v: want still queued, first in line, with its reason", msg, second)
		}
		if waited := time.Since(start); waited < 5*time.Second || waited > 10*time.Second {
			t.Errorf("the wait took %s, want about the 5 s asked for", waited)
		}
		// Without a timeout the wait stays inside a client's one-minute
		// tool-call timeout; a huge one is capped.
		for _, tc := range []struct {
			args map[string]any
			want time.Duration
		}{{map[string]any{"id": second.ID}, 55 * time.Second}, {map[string]any{"id": second.ID, "timeout_seconds": 1 << 40}, 10 * time.Minute}} {
			start := time.Now()
			if msg := f.call(t, ctx, "spark_wait", tc.args, &second); msg != "" || second.State != "queued" {
				t.Errorf("wait %v: %q %+v", tc.args, msg, second)
			}
			if waited := time.Since(start); waited < tc.want || waited > tc.want+5*time.Second {
				t.Errorf("wait %v took %s, want about %s", tc.args, waited, tc.want)
			}
		}
		var d Done
		if msg := f.call(t, ctx, "spark_cancel", map[string]any{"id": second.ID}, &d); msg != "" || d.Result != "canceled while queued" {
			t.Errorf("cancel queued: %q %+v", msg, d)
		}
		if msg := f.call(t, ctx, "spark_start_service", map[string]any{}, &service); msg != "" || service.Class != "service-start" {
			t.Errorf("service start: %q %+v", msg, service)
		}
		// Once the pair is released, the service starts on its host and
		// comes online; the agent follows it with spark_status.
		if msg := f.call(t, ctx, "spark_release", map[string]any{"id": pair.ID, "token": pair.Token}, &d); msg != "" {
			t.Fatal(msg)
		}
		for i := 0; service.State == "queued" || service.State == "active"; i++ {
			if i == 600 {
				var hosts HostsOutput
				f.call(t, ctx, "spark_hosts", map[string]any{}, &hosts)
				t.Fatalf("the service start did not end in 600 admission rounds: %+v; hosts %v", service, hosts.Hosts)
			}
			sparktest.Admit(ctx, f.ctrl, "spark-1", "spark-2") // what the admission loop does on its next tick
			if msg := f.call(t, ctx, "spark_status", map[string]any{"id": service.ID}, &service); msg != "" {
				t.Fatal(msg)
			}
			if service.State == "active" && !strings.Contains(service.Next, "the resident service is starting on [spark-1]") {
				t.Errorf("a starting service: %+v", service)
			}
		}
		if service.State != "released" || service.Next != "the resident service is online" {
			t.Errorf("the service start ended as %+v", service)
		}
		var hosts HostsOutput
		if msg := f.call(t, ctx, "spark_hosts", map[string]any{}, &hosts); msg != "" || len(hosts.Hosts) != 2 {
			t.Errorf("hosts: %q %+v", msg, hosts)
		}
	})
}

// "If the controller, host heartbeat, or fencing check is unavailable,
// automation fails closed": with the controller's state unreadable every
// tool fails, says no host may be used, and nothing was granted.
func TestAutomationFailsClosedWhenTheControllerIsUnavailable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		f := newFleet(t, ctx, Options{})
		f.down()
		var l Lease
		for tool, args := range map[string]map[string]any{
			"spark_request": {}, "spark_start_service": {}, "spark_status": {"id": "x"}, "spark_wait": {"id": "x"}, "spark_hosts": {},
		} {
			if msg := f.call(t, ctx, tool, args, &l); !strings.Contains(msg, "no host may be used") {
				t.Errorf("%s with the controller down: %q", tool, msg)
			}
		}
	})
}

// Arguments an agent gets wrong are refused with what to do, before the
// controller is asked; agents cannot ask for CI, benchmark or PR classes
// (no tool takes a class).
func TestToolsRefuseBadArgumentsAndOfferNoOtherClass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		f := newFleet(t, ctx, Options{})
		var l Lease
		for name, tc := range map[string]struct {
			tool string
			args map[string]any
			want string
		}{
			"topology":                   {"spark_request", map[string]any{"topology": "triple"}, "single or pair"},
			"negative duration":          {"spark_request", map[string]any{"duration_minutes": -5}, "negative"},
			"pair with a host":           {"spark_request", map[string]any{"topology": "pair", "host": "spark-1"}, "omit host"},
			"too long":                   {"spark_request", map[string]any{"duration_minutes": 100000}, "longer than the development limit"},
			"wrapping when made seconds": {"spark_request", map[string]any{"duration_minutes": int64(1<<63-1) / 59}, "longer than any lease"},
			"unknown host":               {"spark_request", map[string]any{"host": "spark-9"}, "unknown host"},
			"no id":                      {"spark_status", map[string]any{"id": ""}, "id is required"},
			"unknown lease":              {"spark_status", map[string]any{"id": "nope"}, "no such lease"},
			"a class argument":           {"spark_request", map[string]any{"class": "merge-ci"}, ""},
		} {
			msg := f.call(t, ctx, tc.tool, tc.args, &l)
			if tc.want == "" {
				if msg == "" && l.Class != "development" {
					t.Errorf("%s: an agent got class %q", name, l.Class)
				}
				continue
			}
			if !strings.Contains(msg, tc.want) {
				t.Errorf("%s: %q, want %q", name, msg, tc.want)
			}
		}
		tools, err := f.session.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tool := range tools.Tools {
			names = append(names, tool.Name)
			if strings.Contains(string(mustJSON(tool.InputSchema)), `"class"`) {
				t.Errorf("%s takes a class", tool.Name)
			}
		}
		slices.Sort(names)
		if want := []string{"spark_cancel", "spark_hosts", "spark_release", "spark_request", "spark_start_service", "spark_status", "spark_wait"}; !slices.Equal(names, want) {
			t.Errorf("tools %v, want %v", names, want)
		}
	})
}

func mustJSON(v any) []byte {
	data, _ := json.Marshal(v)
	return data
}

// FuzzToolArguments sends every tool arbitrary arguments, as an agent's
// model may: the server never fails at the protocol level on a JSON object,
// and a request that succeeds is always a development lease.
func FuzzToolArguments(f *testing.F) {
	f.Add(uint8(0), []byte(`{"topology":"pair","duration_minutes":90}`))
	f.Add(uint8(2), []byte(`{"id":"r-1","timeout_seconds":-1}`))
	f.Add(uint8(4), []byte(`{"id":"r-1","token":9007199254740993}`))
	f.Add(uint8(0), []byte(`{"class":"merge-ci","host":"spark-1"}`))
	names := []string{"spark_request", "spark_start_service", "spark_wait", "spark_status", "spark_release", "spark_cancel", "spark_hosts"}
	ctx := context.Background()
	server := NewServer(echoQueue{}, Options{DefaultWait: time.Millisecond})
	st, ct := mcp.NewInMemoryTransports()
	if _, err := server.Connect(ctx, st, nil); err != nil {
		f.Fatal(err)
	}
	session, err := mcp.NewClient(&mcp.Implementation{Name: "fuzz", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, tool uint8, data []byte) {
		var args map[string]any
		if json.Unmarshal(data, &args) != nil || args == nil {
			return
		}
		name := names[int(tool)%len(names)]
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s(%s): a protocol error: %v", name, data, err)
		}
		if lease, ok := res.StructuredContent.(map[string]any); name == "spark_request" && !res.IsError && (!ok || lease["class"] != "development") {
			t.Fatalf("%s(%s) gave %v", name, data, res.StructuredContent)
		}
	})
}

// echoQueue answers every call at once: a request is queued as asked.
type echoQueue struct{}

func (echoQueue) Request(_ context.Context, lr spark.LeaseRequest) (spark.Status, error) {
	return spark.Status{Request: spark.Request{ID: "r-1", Class: lr.Class, Topology: lr.Topology, State: spark.Queued}}, nil
}
func (echoQueue) Status(_ context.Context, id string) (spark.Status, error) {
	return spark.Status{Request: spark.Request{ID: id, State: spark.Queued}}, nil
}
func (q echoQueue) Wait(ctx context.Context, id string) (spark.Status, error) {
	return q.Status(ctx, id)
}
func (echoQueue) Release(context.Context, string, int64) error    { return nil }
func (echoQueue) Cancel(context.Context, string) error            { return nil }
func (echoQueue) Hosts(context.Context) ([]map[string]any, error) { return nil, nil }

// "I'm done with the Sparks" is a "release request followed by host
// cleanup acknowledgement": each host the lease held, and what became of
// it.
func TestTheReleaseAcknowledgesEachHostsCleanup(t *testing.T) {
	hosts := []map[string]any{{"name": "spark-1", "mode": "restoring"}, {"name": "spark-2", "mode": "release-required"}, {"name": "spark-3", "mode": "idle"}}
	ack, text := Acknowledge([]string{"spark-1", "spark-2"}, hosts)
	if want := map[string]string{"spark-1": "restoring", "spark-2": "release-required"}; !maps.Equal(ack, want) {
		t.Errorf("ack %v, want %v", ack, want)
	}
	if !strings.Contains(text, "spark-1 goes back to the resident service") || !strings.Contains(text, "spark-2 still runs processes from this lease") || strings.Contains(text, "spark-3") {
		t.Errorf("%q", text)
	}
	if ack, text := Acknowledge([]string{"spark-9"}, hosts); ack != nil || text != "the hosts' state could not be read" {
		t.Errorf("unknown hosts: %v %q", ack, text)
	}
}
