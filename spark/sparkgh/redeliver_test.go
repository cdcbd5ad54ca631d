package sparkgh

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-github/v66/github"
)

// fakeLog is a delivery log, newest first, served two attempts a page.
type fakeLog struct {
	attempts    []Delivery
	redelivered []int64
	listErr     error
	failID      int64
}

func (f *fakeLog) Deliveries(_ context.Context, cursor string) ([]Delivery, string, error) {
	if f.listErr != nil {
		return nil, "", f.listErr
	}
	attempts, next := page(f.attempts, cursor, 2)
	return attempts, next, nil
}

// page serves attempts as the delivery log does: the page the cursor
// names, size attempts long, and the next page's cursor ("" after the
// last).
func page(attempts []Delivery, cursor string, size int) ([]Delivery, string) {
	start := 0
	fmt.Sscan(cursor, &start)
	end := min(start+size, len(attempts))
	next := ""
	if end < len(attempts) {
		next = fmt.Sprint(end)
	}
	return slices.Clone(attempts[start:end]), next
}

func (f *fakeLog) Redeliver(_ context.Context, id int64) error {
	if id == f.failID {
		return errors.New("502 Bad Gateway")
	}
	f.redelivered = append(f.redelivered, id)
	return nil
}

// TestRedeliverer_DeliveriesSparkdMissedAreSentAgainABoundedNumberOfTimes:
// GitHub "does not automatically redeliver failed deliveries", so a label
// applied while sparkd was down or its queue full would be lost. Each
// delivery since the last sweep that never got a 2xx is redelivered (its
// newest attempt), one that later succeeded is not, one that failed
// DefaultRedeliveries times is abandoned with a log line, and the log is
// read only back to since.
func TestRedeliverer_DeliveriesSparkdMissedAreSentAgainABoundedNumberOfTimes(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)
	at := func(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }
	f := &fakeLog{attempts: []Delivery{ // newest first
		{ID: 9, GUID: "label-b", At: at(9), OK: true}, // b's redelivery succeeded
		{ID: 8, GUID: "stuck", At: at(8)},             // stuck's third failure
		{ID: 7, GUID: "label-a", At: at(7)},           // a failed twice
		{ID: 6, GUID: "stuck", At: at(6)},             //
		{ID: 5, GUID: "label-b", At: at(5)},           //
		{ID: 4, GUID: "stuck", At: at(4)},             //
		{ID: 3, GUID: "label-a", At: at(3)},           //
		{ID: 2, GUID: "fine", At: at(2), OK: true},    //
		{ID: 1, GUID: "before-since", At: at(-5)},     // older than since: never read past
		{ID: 0, GUID: "ancient", At: at(-600)},        //
	}}
	var logs bytes.Buffer
	r := &Redeliverer{Log: f, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	got, err := r.Sweep(context.Background(), at(0))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"label-a"}, got); diff != "" {
		t.Errorf("redelivered (-want +got):\n%s", diff)
	}
	if !slices.Equal(f.redelivered, []int64{7}) {
		t.Errorf("attempts sent again %v, want label-a's newest, 7", f.redelivered)
	}
	for _, want := range []string{"sparkgh.redelivered delivery=label-a attempt=3", "sparkgh.delivery_abandoned delivery=stuck attempts=3"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, logs.String())
		}
	}
	// The next sweep's window shows only the redelivery, which failed
	// too: the attempts it no longer shows still count, so label-a is
	// abandoned (logged once), not sent a fourth time.
	f.redelivered, logs = nil, bytes.Buffer{}
	f.attempts = append([]Delivery{{ID: 11, GUID: "label-a", At: at(11)}, {ID: 10, GUID: "label-c", At: at(10)}}, f.attempts...)
	if got, err := r.Sweep(context.Background(), at(10)); err != nil || !slices.Equal(got, []string{"label-c"}) {
		t.Errorf("second sweep: %v, %v", got, err)
	}
	if strings.Count(logs.String(), "sparkgh.delivery_abandoned delivery=label-a attempts=3") != 1 || strings.Contains(logs.String(), "delivery=stuck") {
		t.Errorf("second sweep's log:\n%s", logs.String())
	}
	// A failure to redeliver or to list is an error; the rest still go.
	f.failID = 12
	f.attempts = append([]Delivery{{ID: 13, GUID: "label-d", At: at(13)}, {ID: 12, GUID: "label-e", At: at(12)}}, f.attempts...)
	if got, err := r.Sweep(context.Background(), at(12)); !errors.Is(err, ErrRedeliver) || !slices.Equal(got, []string{"label-d"}) {
		t.Errorf("a failed redelivery: %v, %v", got, err)
	}
	f.listErr = errors.New("401 Bad credentials")
	if _, err := r.Sweep(context.Background(), at(0)); !errors.Is(err, ErrRedeliver) {
		t.Errorf("a failed listing: %v", err)
	}
}

// A redelivery the sweeper asked for, of a delivery the receiver had
// accepted but not processed, can itself fail to arrive (the receiver's
// queue full, or it down): the receiver no longer remembers it, and the
// log shows an accepted attempt before the failed one. The newest attempt
// decides, so it is sent again.
func TestRedeliverer_ARedeliveryThatFailedToArriveIsSentAgain(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)
	f := &fakeLog{attempts: []Delivery{ // newest first
		{ID: 2, GUID: "label-7", At: t0.Add(time.Minute)}, // the redelivery: 503
		{ID: 1, GUID: "label-7", At: t0, OK: true},        // accepted, then not processed
		{ID: 0, GUID: "fine", At: t0.Add(-time.Second), OK: true},
	}}
	got, err := (&Redeliverer{Log: f, Unprocessed: fakeUnprocessed{}}).Sweep(context.Background(), t0.Add(-time.Minute))
	if err != nil || !slices.Equal(got, []string{"label-7"}) || !slices.Equal(f.redelivered, []int64{2}) {
		t.Errorf("Sweep = %v (attempts %v), %v; want label-7's newest attempt sent again", got, f.redelivered, err)
	}
}

// A busy App's log holds more than the maxDeliveryPages a sweep reads:
// the sweep redelivers what it read (the newest) and succeeds, with a
// warning, so the next sweep's window moves on instead of failing on the
// same backlog for ever.
func TestRedeliverer_ALogLongerThanASweepReadsIsHandledNewestFirst(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)
	f := &fakeLog{} // two attempts a page
	for i := 2*maxDeliveryPages + 10; i > 0; i-- {
		f.attempts = append(f.attempts, Delivery{ID: int64(i), GUID: fmt.Sprintf("d%d", i), At: t0.Add(time.Duration(i) * time.Second), OK: i != 205 && i != 3})
	}
	var logs bytes.Buffer
	r := &Redeliverer{Log: f, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	got, err := r.Sweep(context.Background(), t0)
	if err != nil || !slices.Equal(got, []string{"d205"}) {
		t.Errorf("Sweep = %v, %v; want d205 (d3 is beyond what a sweep reads)", got, err)
	}
	if !strings.Contains(logs.String(), "sparkgh.redeliver_truncated pages=100") {
		t.Errorf("log:\n%s", logs.String())
	}
}

// fakeUnprocessed is a receiver's record of deliveries it failed to
// process.
type fakeUnprocessed map[string]time.Time

func (f fakeUnprocessed) Unprocessed() map[string]time.Time { return maps.Clone(f) }
func (f fakeUnprocessed) Forget(guid string)                { delete(f, guid) }

// TestRedeliverer_DeliveriesTheReceiverFailedToProcessAreSentAgain: the
// log shows them as delivered, so only the receiver's record finds them.
// The log is read back past since to the oldest one (a long queue or a
// long outage), and no further; one the log no longer holds, one older
// than GitHub keeps, and one that used up its attempts are given up with
// a log line and forgotten, so they do not stretch every later sweep.
func TestRedeliverer_DeliveriesTheReceiverFailedToProcessAreSentAgain(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)
	at := func(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }
	f := &fakeLog{attempts: []Delivery{ // newest first
		{ID: 9, GUID: "fine", At: at(55), OK: true},
		{ID: 8, GUID: "stuck", At: at(50), OK: true},
		{ID: 7, GUID: "stuck", At: at(45), OK: true},
		{ID: 6, GUID: "stuck", At: at(40), OK: true},
		{ID: 5, GUID: "comment-3", At: at(2), OK: true}, // read only because the receiver failed it
		{ID: 4, GUID: "label-2", At: at(-3), OK: true},  // out of the window: stops the reading
		{ID: 3, GUID: "label-1", At: at(-9), OK: true},
	}}
	u := fakeUnprocessed{"stuck": at(50), "comment-3": at(2), "gone": at(30), "ancient": at(-5000)}
	var logs bytes.Buffer
	r := &Redeliverer{Log: f, Logger: slog.New(slog.NewTextHandler(&logs, nil)), Unprocessed: u}
	got, err := r.Sweep(context.Background(), at(50))
	if err != nil || !slices.Equal(got, []string{"comment-3"}) || !slices.Equal(f.redelivered, []int64{5}) {
		t.Fatalf("redelivered %v (attempts %v), %v; want comment-3 (attempt 5)", got, f.redelivered, err)
	}
	if len(u) != 0 {
		t.Errorf("still remembered: %v", u)
	}
	for _, want := range []string{
		"sparkgh.delivery_abandoned delivery=stuck attempts=3",
		`sparkgh.delivery_abandoned delivery=gone why="not processed, and not in the App's delivery log"`,
		`sparkgh.delivery_abandoned delivery=ancient why="not processed, and older than GitHub keeps deliveries"`,
		"sparkgh.redelivered delivery=comment-3 attempt=2",
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, logs.String())
		}
	}
	if strings.Contains(logs.String(), "label-") {
		t.Errorf("a delivery the receiver processed was acted on:\n%s", logs.String())
	}
}

// TestAppDeliveries_FollowsTheCursorAndTreatsA202AsQueued: the adapter
// against a loopback stand-in of GitHub's documented endpoints (cursor
// pagination in the Link header, 202 for a queued redelivery).
func TestAppDeliveries_FollowsTheCursorAndTreatsA202AsQueued(t *testing.T) {
	var redelivered []string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /app/hook/deliveries", func(w http.ResponseWriter, r *http.Request) {
		page := []map[string]any{{"id": 12, "guid": "g2", "delivered_at": "2026-11-29T03:10:00Z", "status": "Invalid HTTP Response: 503", "status_code": 503}}
		if r.URL.Query().Get("cursor") == "" {
			w.Header().Set("Link", `<https://api.github.com/app/hook/deliveries?per_page=100&cursor=v1_11>; rel="next"`)
			page = []map[string]any{{"id": 13, "guid": "g1", "delivered_at": "2026-11-29T03:20:00Z", "status": "OK", "status_code": 200}}
		} else if r.URL.Query().Get("cursor") != "v1_11" {
			http.Error(w, "bad cursor", http.StatusBadRequest)
			return
		}
		json.NewEncoder(w).Encode(page)
	})
	mux.HandleFunc("POST /app/hook/deliveries/{id}/attempts", func(w http.ResponseWriter, r *http.Request) {
		redelivered = append(redelivered, r.PathValue("id"))
		w.WriteHeader(http.StatusAccepted)
		w.Write([]byte(`{}`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	client := github.NewClient(nil)
	client.BaseURL, _ = url.Parse(srv.URL + "/")
	dl := AppDeliveries{Client: client}
	got, err := (&Redeliverer{Log: dl}).Sweep(context.Background(), time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC))
	if err != nil || !slices.Equal(got, []string{"g2"}) || !slices.Equal(redelivered, []string{"12"}) {
		t.Errorf("redelivered %v (attempts %v), %v", got, redelivered, err)
	}
}
