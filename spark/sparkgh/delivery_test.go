package sparkgh

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpugate/gpugate/internal/faketime"
	"github.com/gpugate/gpugate/spark"
)

// hub is GitHub's side of webhook delivery: it sends each delivery to
// whatever receiver is up, logs every attempt (newest first, as the App's
// delivery log lists them), and sends one again when asked.
type hub struct {
	wh     *Webhook // nil while the receiver is down
	bodies map[string][]byte

	mu       sync.Mutex
	attempts []Delivery
	next     int64
}

func (h *hub) send(guid string) {
	ok := false
	if h.wh != nil {
		ok = post(h.wh, "webhook-secret-123", guid, "pull_request", h.body(guid)) < 300
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.next++
	h.attempts = append([]Delivery{{ID: h.next, GUID: guid, At: time.Now(), OK: ok}}, h.attempts...)
}

func (h *hub) body(guid string) []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.bodies[guid]
}

func (h *hub) Deliveries(_ context.Context, cursor string) ([]Delivery, string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	attempts, next := page(h.attempts, cursor, 100)
	return attempts, next, nil
}

func (h *hub) Redeliver(_ context.Context, id int64) error {
	h.mu.Lock()
	i := slices.IndexFunc(h.attempts, func(a Delivery) bool { return a.ID == id })
	guid := ""
	if i >= 0 {
		guid = h.attempts[i].GUID
	}
	h.mu.Unlock()
	if i < 0 {
		return fmt.Errorf("no attempt %d", id)
	}
	h.send(guid)
	return nil
}

// TestDeliveryIsNeverLostSilently: whatever fails (GitHub's API while a
// delivery is processed, the receiver being down, restarts with
// deliveries queued or in flight), every delivery GitHub sent is in the
// end either processed or given up on with a log line naming it, after
// its bounded attempts. The receiver's journal carries what it had not
// processed across each restart, as sparkd's file does.
func TestDeliveryIsNeverLostSilently(t *testing.T) {
	for seed := range 60 {
		synctest.Test(t, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 11))
			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			w := newWorld(t, false)
			busy(w, t) // processed work stays queued, where it can be seen
			w.in.log = log
			h := &hub{bodies: map[string][]byte{}}
			var journal map[string]time.Time
			var stop context.CancelFunc
			var stopped chan struct{}
			start := func() {
				wh := w.in.NewWebhook(8)
				wh.Restore(journal)
				wh.Journal = func(m map[string]time.Time) error { journal = m; return nil }
				ctx, cancel := context.WithCancel(context.Background())
				stop, stopped = cancel, make(chan struct{})
				done := stopped
				go func() { wh.Run(ctx); close(done) }()
				h.wh = wh
			}
			down := func() {
				h.wh = nil
				stop()
				<-stopped
			}
			start()
			r := &Redeliverer{Log: h, Logger: log, Unprocessed: h.wh}
			since := time.Now()
			var guids []string
			for step := range 40 {
				switch rng.IntN(6) {
				case 0, 1, 2: // a maintainer labels a new pull request
					n := 100 + step
					guid := fmt.Sprintf("label-%d", n)
					pr := prJSON(n, sha1, []string{"spark-test"}, false)
					w.setPR(pr)
					h.bodies[guid], _ = json.Marshal(map[string]any{"action": "labeled", "label": map[string]any{"name": "spark-test"}, "sender": map[string]any{"login": "maint"},
						"pull_request": pr, "repository": map[string]any{"full_name": "o/butter", "id": repoID}})
					guids = append(guids, guid)
					h.send(guid)
				case 3: // GitHub's API fails for a while
					w.gh.mu.Lock()
					w.gh.prFailures = rng.IntN(8)
					w.gh.mu.Unlock()
				case 4: // a restart, or the receiver down for a while
					if h.wh != nil {
						down()
					} else {
						start()
						r = &Redeliverer{Log: h, Logger: log, Unprocessed: h.wh}
					}
				case 5: // the redelivery sweep
					if h.wh != nil {
						r.Sweep(context.Background(), since)
						since = time.Now().Add(-10 * time.Minute)
					}
				}
				faketime.Advance(time.Duration(rng.IntN(90)) * time.Second)
			}
			// GitHub recovers and the receiver is up; sweeps run until
			// nothing is left to send.
			w.gh.mu.Lock()
			w.gh.prFailures = 0
			w.gh.mu.Unlock()
			if h.wh == nil {
				start()
				r = &Redeliverer{Log: h, Logger: log, Unprocessed: h.wh}
			}
			for range 5 {
				faketime.Advance(5 * time.Minute)
				if _, err := r.Sweep(context.Background(), since); err != nil {
					t.Fatal(err)
				}
				since = time.Now().Add(-10 * time.Minute)
			}
			faketime.Advance(5 * time.Minute)
			_, live, _ := w.c.Snapshot(ctx)
			processed := map[int]bool{}
			for _, q := range live {
				if q.PR != nil && q.State == spark.Queued {
					processed[q.PR.Number] = true
				}
			}
			for i, guid := range guids {
				var n int
				fmt.Sscanf(guid, "label-%d", &n)
				if !processed[n] && !strings.Contains(logs.String(), "sparkgh.delivery_abandoned delivery="+guid+" ") {
					t.Errorf("seed %d: %s (the %dth delivery) was neither processed nor given up on with a log line", seed, guid, i)
				}
			}
			if left := h.wh.Unprocessed(); len(left) != 0 {
				t.Errorf("seed %d: still remembered as unprocessed: %v", seed, left)
			}
			down()
		})
	}
}

// The receiver processes deliveries while sparkd's loop syncs checks and
// sweeps runners, and the redelivery sweep forgets what it sent: they
// share the integration's maps and the receiver's record. Run under the
// race detector (.ci/run does), this fails on an unguarded access.
func TestReceiverSyncAndSweepsRunConcurrently(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, false)
		wh := w.in.NewWebhook(16)
		h := &hub{wh: wh, bodies: map[string][]byte{}}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { wh.Run(ctx); close(done) }()
		loop := make(chan struct{})
		go func() {
			defer close(loop)
			r := &Redeliverer{Log: h, Unprocessed: wh}
			for range 20 {
				w.in.Sync(ctx)
				w.in.SweepRegisteredRunners(ctx)
				r.Sweep(ctx, time.Time{})
				faketime.Advance(time.Second)
			}
		}()
		for n := range 20 {
			guid := fmt.Sprintf("label-%d", n)
			pr := prJSON(200+n, sha1, []string{"spark-test"}, false)
			w.setPR(pr)
			body, _ := json.Marshal(map[string]any{"action": "labeled", "label": map[string]any{"name": "spark-test"}, "sender": map[string]any{"login": "maint"},
				"pull_request": pr, "repository": map[string]any{"full_name": "o/butter", "id": repoID}})
			h.mu.Lock()
			h.bodies[guid] = body
			h.mu.Unlock()
			w.gh.mu.Lock()
			w.gh.prFailures = n % 4 // some fail, and are remembered
			w.gh.mu.Unlock()
			h.send(guid)
			faketime.Advance(time.Second)
		}
		<-loop
		cancel()
		<-done
		// Nothing is lost silently: each delivery was processed, is
		// remembered as unprocessed, or its newest attempt failed in
		// GitHub's log (the next sweep sends it again).
		_, live, _ := w.c.Snapshot(context.Background())
		unprocessed := wh.Unprocessed()
		newest, _, _ := h.Deliveries(context.Background(), "")
		for n := range 20 {
			guid := fmt.Sprintf("label-%d", n)
			processed := slices.ContainsFunc(live, func(r spark.Request) bool { return r.PR != nil && r.PR.Number == 200+n })
			_, remembered := unprocessed[guid]
			i := slices.IndexFunc(newest, func(a Delivery) bool { return a.GUID == guid })
			if !processed && !remembered && (i < 0 || newest[i].OK) {
				t.Errorf("%s was neither processed, remembered, nor failed in GitHub's log", guid)
			}
		}
	})
}
