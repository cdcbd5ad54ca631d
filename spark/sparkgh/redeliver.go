package sparkgh

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/google/go-github/v66/github"

	"github.com/gpugate/gpugate/internal/ghpage"
)

// Delivery is one attempt in the GitHub App's webhook delivery log.
type Delivery struct {
	ID   int64     // this attempt
	GUID string    // the delivery (X-GitHub-Delivery), shared by its redeliveries
	At   time.Time // when GitHub sent it
	OK   bool      // the receiver answered 2xx
}

// DeliveryLog is the App's webhook delivery log, read and redelivered as
// the App itself (a JWT, never an installation token).
type DeliveryLog interface {
	// Deliveries lists attempts, newest first, one page per call: cursor
	// "" is the first page, and next is "" after the last.
	Deliveries(ctx context.Context, cursor string) (attempts []Delivery, next string, err error)
	// Redeliver asks GitHub to send attempt id again.
	Redeliver(ctx context.Context, id int64) error
}

// maxDeliveryPages is how many pages of the delivery log one sweep reads
// (100 attempts a page): the pager's bound.
const maxDeliveryPages = ghpage.MaxPages

// DefaultRedeliveries is Redeliverer.Max's default: GitHub's first attempt
// and two redeliveries.
const DefaultRedeliveries = 3

// ErrRedeliver is matched by Redeliverer.Sweep errors.
var ErrRedeliver = errors.New("sparkgh: redeliver failed webhook deliveries")

// Unprocessed is what a receiver knows that GitHub's delivery log does
// not: the deliveries it answered with a 2xx but could not process
// (Webhook implements it).
type Unprocessed interface {
	// Unprocessed returns each such delivery's GUID with when it arrived.
	Unprocessed() map[string]time.Time
	// Forget drops a delivery that was redelivered or given up on.
	Forget(guid string)
}

// unprocessedSlack is how much earlier than its arrival a delivery may be
// logged as sent; unprocessedKept is how long GitHub keeps deliveries.
const (
	unprocessedSlack = time.Minute
	unprocessedKept  = 72 * time.Hour
)

// Redeliverer asks GitHub to send again every webhook delivery that never
// reached the receiver with a 2xx (sparkd down or restarting, its queue
// full), and, with Unprocessed set, every one the receiver accepted but
// could not process. GitHub records a failed delivery but "does not
// automatically redeliver failed deliveries", so a label applied while
// the controller was down would otherwise be lost. The receiver
// de-duplicates by delivery ID, so a delivery is never processed twice.
type Redeliverer struct {
	Log DeliveryLog
	// Max bounds the attempts of one delivery, GitHub's first included
	// (0: DefaultRedeliveries), so one the receiver keeps failing is not
	// sent for ever.
	Max    int
	Logger *slog.Logger
	// Unprocessed, when set, names deliveries the log shows as delivered
	// that the receiver failed to process: they are redelivered too, and
	// the log is read back far enough to find them.
	Unprocessed Unprocessed

	known map[string]*known // by GUID, while still in view
}

// known is what a Redeliverer remembers of a delivery across sweeps, whose
// windows may no longer show its early attempts.
type known struct {
	attempts  int  // GitHub's and the redeliveries
	abandoned bool // logged
}

// Sweep reads the delivery log back to since (or further, to the oldest
// unprocessed delivery) and redelivers the newest attempt of each
// delivery whose newest attempt failed, or that the receiver could not
// process. It returns the GUIDs it redelivered; a delivery that used up
// its attempts is logged for an operator once.
func (r *Redeliverer) Sweep(ctx context.Context, since time.Time) ([]string, error) {
	log := r.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	maxAttempts := r.Max
	if maxAttempts <= 0 {
		maxAttempts = DefaultRedeliveries
	}
	if r.known == nil {
		r.known = map[string]*known{}
	}
	var unprocessed map[string]time.Time
	if r.Unprocessed != nil {
		unprocessed = r.Unprocessed.Unprocessed()
	}
	for guid, at := range unprocessed {
		switch from := at.Add(-unprocessedSlack); {
		case since.Sub(from) > unprocessedKept:
			log.Error("sparkgh.delivery_abandoned", "delivery", guid, "why", "not processed, and older than GitHub keeps deliveries", "hint", redeliverHint)
			r.Unprocessed.Forget(guid)
			delete(unprocessed, guid)
		case from.Before(since):
			since = from
		}
	}
	type delivery struct {
		attempts int
		latest   Delivery
	}
	byGUID := map[string]*delivery{}
	err := ghpage.Cursor(func(cursor string) (string, bool, error) {
		attempts, next, err := r.Log.Deliveries(ctx, cursor)
		if err != nil {
			return "", false, fmt.Errorf("%w: list deliveries: %w", ErrRedeliver, err)
		}
		older := false
		for _, a := range attempts {
			if a.At.Before(since) {
				older = true
				continue
			}
			d := byGUID[a.GUID]
			if d == nil {
				d = &delivery{}
				byGUID[a.GUID] = d
			}
			d.attempts++
			if d.attempts == 1 || a.ID > d.latest.ID {
				d.latest = a
			}
		}
		return next, older, nil // the log is newest first: a page reaching past since ends it
	})
	truncated := errors.Is(err, ghpage.ErrTooManyPages)
	switch {
	case truncated:
		// A busy App logs more than a sweep reads: the newest are
		// handled, and the next sweep's window starts later, so the
		// sweeps do not fail for ever on the same backlog.
		log.Warn("sparkgh.redeliver_truncated", "pages", ghpage.MaxPages, "since", since.UTC().Format(time.RFC3339),
			"why", "the delivery log holds more than a sweep reads; older failed deliveries are not redelivered", "hint", redeliverHint)
	case err != nil:
		return nil, err
	}
	for guid := range r.known {
		if byGUID[guid] == nil {
			delete(r.known, guid) // out of view: never sent again
		}
	}
	for guid := range unprocessed {
		if byGUID[guid] == nil {
			why := "not processed, and not in the App's delivery log"
			if truncated {
				why = "not processed, and older than a sweep reads of the App's delivery log"
			}
			log.Error("sparkgh.delivery_abandoned", "delivery", guid, "why", why, "hint", redeliverHint)
			r.Unprocessed.Forget(guid)
		}
	}
	var done []string
	var errs []error
	for _, guid := range slices.Sorted(maps.Keys(byGUID)) {
		d := byGUID[guid]
		k := r.known[guid]
		if k == nil {
			k = &known{}
			r.known[guid] = k
		}
		// Attempts that fell out of the window still count.
		k.attempts = max(k.attempts, d.attempts)
		_, failedThere := unprocessed[guid]
		switch {
		// Its newest attempt decides: a redelivery this sweeper asked for
		// (of one the receiver could not process) that then failed to
		// arrive follows an attempt that did.
		case d.latest.OK && !failedThere:
		case k.attempts >= maxAttempts:
			if !k.abandoned {
				log.Error("sparkgh.delivery_abandoned", "delivery", guid, "attempts", k.attempts, "hint", "the receiver failed it every time: see sparkgh.process in the log, then redeliver it from the App's settings")
				k.abandoned = true
			}
			if failedThere {
				r.Unprocessed.Forget(guid)
			}
		default:
			if err := r.Log.Redeliver(ctx, d.latest.ID); err != nil {
				errs = append(errs, fmt.Errorf("delivery %s: %w", guid, err))
				continue
			}
			if failedThere {
				r.Unprocessed.Forget(guid)
			}
			k.attempts++
			log.Info("sparkgh.redelivered", "delivery", guid, "attempt", k.attempts)
			done = append(done, guid)
		}
	}
	if len(errs) > 0 {
		return done, fmt.Errorf("%w: %w", ErrRedeliver, errors.Join(errs...))
	}
	return done, nil
}

// AppDeliveries is the go-github adapter of DeliveryLog. Its client must
// authenticate as the App (ghclient.NewApp).
type AppDeliveries struct {
	Client *github.Client
}

var _ DeliveryLog = AppDeliveries{}

// Deliveries calls GET /app/hook/deliveries
// (https://docs.github.com/rest/apps/webhooks#list-deliveries-for-an-app-webhook).
func (a AppDeliveries) Deliveries(ctx context.Context, cursor string) ([]Delivery, string, error) {
	ds, resp, err := a.Client.Apps.ListHookDeliveries(ctx, &github.ListCursorOptions{PerPage: 100, Cursor: cursor})
	if err != nil {
		return nil, "", err
	}
	out := make([]Delivery, 0, len(ds))
	for _, d := range ds {
		code := d.GetStatusCode()
		out = append(out, Delivery{ID: d.GetID(), GUID: d.GetGUID(), At: d.GetDeliveredAt().Time,
			OK: code >= 200 && code < 300 || code == 0 && strings.EqualFold(d.GetStatus(), "OK")})
	}
	return out, resp.Cursor, nil
}

// Redeliver calls POST /app/hook/deliveries/{delivery_id}/attempts
// (https://docs.github.com/rest/apps/webhooks#redeliver-a-delivery-for-an-app-webhook).
func (a AppDeliveries) Redeliver(ctx context.Context, id int64) error {
	_, _, err := a.Client.Apps.RedeliverHookDelivery(ctx, id)
	var accepted *github.AcceptedError
	if errors.As(err, &accepted) {
		return nil // 202: GitHub queued the attempt
	}
	return err
}
