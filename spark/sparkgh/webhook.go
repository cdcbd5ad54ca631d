package sparkgh

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/google/go-github/v66/github"

	"github.com/gpugate/gpugate/internal/retry"
	"github.com/gpugate/gpugate/internal/textlimit"
	"github.com/gpugate/gpugate/spark"
)

// delivery is one verified webhook waiting to be processed.
type delivery struct {
	id      string // X-GitHub-Delivery
	event   string
	payload []byte
	at      time.Time // when it arrived
}

// redeliverHint is what the log says of a delivery that was not handled:
// GitHub records the failure but never redelivers on its own.
const redeliverHint = "GitHub does not redeliver on its own: a Redeliverer sends it again (sparkd does when it runs as the App); otherwise redeliver it from the App's settings (Advanced, Recent Deliveries) or the API"

// Webhook receives GitHub webhooks: it verifies X-Hub-Signature-256,
// de-duplicates by delivery ID, answers at once, and processes
// asynchronously (Run).
type Webhook struct {
	in    *Integration
	queue chan delivery
	// MaxBody bounds a delivery's size (GitHub caps payloads at 25 MiB);
	// a larger body is refused with 413 before it is read whole.
	MaxBody int64
	// QueueWait is how long a delivery waits for room in a full queue
	// before it is refused with 503; GitHub gives up on a response after
	// 10 seconds.
	QueueWait time.Duration

	// Journal, when set, receives the whole of Unprocessed each time it
	// changes, so a restart can Restore it; it runs under the receiver's
	// lock, and changes are rare (a failure, its redelivery). An error is
	// logged.
	Journal func(unprocessed map[string]time.Time) error

	mu          sync.Mutex
	seen        map[string]bool
	ring        []string
	unprocessed map[string]time.Time // accepted, then failed: when each arrived
}

// Restore seeds Unprocessed with what an earlier run's Journal recorded;
// call it before Run.
func (wh *Webhook) Restore(unprocessed map[string]time.Time) {
	wh.mu.Lock()
	defer wh.mu.Unlock()
	for id, at := range unprocessed {
		if id != "" && len(wh.unprocessed) < maxUnprocessed {
			wh.unprocessed[id] = at
		}
	}
}

// journal hands Unprocessed to Journal; wh.mu is held.
func (wh *Webhook) journal() {
	if wh.Journal == nil {
		return
	}
	if err := wh.Journal(maps.Clone(wh.unprocessed)); err != nil {
		wh.in.log.Error("sparkgh.journal_failed", "error", err, "why", "deliveries not processed would not be redelivered after a restart")
	}
}

// maxUnprocessed bounds what a Webhook remembers of deliveries it could
// not process; the oldest is forgotten first.
const maxUnprocessed = 1000

// NewWebhook builds the receiver; Run must be running to process.
func (in *Integration) NewWebhook(queue int) *Webhook {
	if queue <= 0 {
		queue = 256
	}
	return &Webhook{in: in, queue: make(chan delivery, queue), seen: map[string]bool{}, unprocessed: map[string]time.Time{},
		MaxBody: 25 << 20, QueueWait: 5 * time.Second}
}

// ServeHTTP verifies and enqueues a delivery: 202 when queued, 200 for a
// duplicate, 401 for a bad signature (nothing is queued), 413 for a body
// over MaxBody, 503 when the queue stays full for QueueWait. GitHub never
// redelivers a failed delivery by itself, so a refused one is logged with
// its delivery ID, for an operator to redeliver.
func (wh *Webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, wh.MaxBody)
	payload, err := validate(r, wh.in.cfg.WebhookSecret.Reveal())
	if tooLarge := new(http.MaxBytesError); errors.As(err, &tooLarge) {
		http.Error(w, "payload too large", http.StatusRequestEntityTooLarge)
		return
	}
	if err != nil {
		http.Error(w, "invalid signature", http.StatusUnauthorized)
		return
	}
	if !json.Valid(payload) || len(bytes.TrimSpace(payload)) == 0 || bytes.TrimSpace(payload)[0] != '{' {
		// Signed, but nothing GitHub sends: answered now, never queued.
		wh.in.log.Error("sparkgh.webhook_refused", "delivery", github.DeliveryID(r), "event", github.WebHookType(r), "why", "the signed body is not a JSON object")
		http.Error(w, "the body is not a JSON object", http.StatusBadRequest)
		return
	}
	id := github.DeliveryID(r)
	wh.mu.Lock()
	dup := id != "" && wh.seen[id]
	if !dup && id != "" {
		if _, ok := wh.unprocessed[id]; ok {
			delete(wh.unprocessed, id) // back for another try
			wh.journal()
		}
		wh.seen[id] = true
		wh.ring = append(wh.ring, id)
		if len(wh.ring) > 10000 {
			delete(wh.seen, wh.ring[0])
			wh.ring = wh.ring[1:]
		}
	}
	wh.mu.Unlock()
	if dup {
		w.WriteHeader(http.StatusOK)
		return
	}
	d := delivery{id, github.WebHookType(r), payload, time.Now()}
	select {
	case wh.queue <- d:
		w.WriteHeader(http.StatusAccepted)
		return
	default:
	}
	wait := time.NewTimer(wh.QueueWait)
	defer wait.Stop()
	select {
	case wh.queue <- d:
		w.WriteHeader(http.StatusAccepted)
	case <-wait.C:
		wh.mu.Lock()
		delete(wh.seen, id) // let the redelivery through
		wh.mu.Unlock()
		wh.in.log.Error("sparkgh.webhook_refused", "delivery", id, "event", d.event, "why", "the queue stayed full", "hint", redeliverHint)
		http.Error(w, "busy", http.StatusServiceUnavailable)
	}
}

// validate reads the body and checks its X-Hub-Signature-256, the HMAC
// SHA-256 of the body under the webhook secret. Only that header counts: a
// delivery signed only with the legacy SHA-1 X-Hub-Signature is refused,
// and so is a SHA-256 header whose value names another algorithm.
func validate(r *http.Request, key string) ([]byte, error) {
	sig := r.Header.Get(github.SHA256SignatureHeader)
	if !strings.HasPrefix(sig, "sha256=") {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return nil, err // a body over MaxBody still answers 413
		}
		return nil, fmt.Errorf("sparkgh: the delivery has no %s sha256= signature (SHA-1 alone is not accepted)", github.SHA256SignatureHeader)
	}
	// GitHub sends the bare media type; a relay may add parameters
	// (charset) or change its case.
	ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		ct = r.Header.Get("Content-Type")
	}
	return github.ValidatePayloadFromBody(strings.ToLower(ct), r.Body, sig, []byte(key))
}

// Run processes deliveries until ctx ends. A delivery whose processing
// failed, was cut short by the end, or was still queued then is
// remembered in Unprocessed: GitHub logged each as delivered.
func (wh *Webhook) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			for {
				select {
				case d := <-wh.queue:
					wh.failed(d)
				default:
					return
				}
			}
		case d := <-wh.queue:
			err := wh.process(ctx, d)
			switch {
			case err == nil:
			case ctx.Err() != nil:
				wh.in.log.Warn("sparkgh.process_interrupted", "delivery", d.id, "event", d.event, "why", "the receiver is stopping; the delivery is redelivered after the restart")
				wh.failed(d)
			default:
				wh.in.log.Error("sparkgh.process", "delivery", d.id, "event", d.event, "error", err, "hint", redeliverHint)
				if !errors.Is(err, ErrPayload) {
					wh.failed(d)
				}
			}
		}
	}
}

// failed remembers d as accepted but not processed, and lets its
// redelivery through the de-duplication.
func (wh *Webhook) failed(d delivery) {
	if d.id == "" {
		return
	}
	wh.mu.Lock()
	defer wh.mu.Unlock()
	delete(wh.seen, d.id)
	if len(wh.unprocessed) >= maxUnprocessed {
		oldest := ""
		for id, at := range wh.unprocessed {
			if oldest == "" || at.Before(wh.unprocessed[oldest]) {
				oldest = id
			}
		}
		delete(wh.unprocessed, oldest)
	}
	wh.unprocessed[d.id] = d.at
	wh.journal()
}

// Unprocessed returns the deliveries this receiver answered with a 2xx
// but could not process, even after its own retries (GitHub failing for
// longer), each with when it arrived. GitHub's delivery log shows them as
// delivered, so only the receiver knows to send them again: a
// Redeliverer with this Webhook as its Unprocessed redelivers them.
func (wh *Webhook) Unprocessed() map[string]time.Time {
	wh.mu.Lock()
	defer wh.mu.Unlock()
	return maps.Clone(wh.unprocessed)
}

// Forget drops a delivery from Unprocessed: it was redelivered, or given
// up on.
func (wh *Webhook) Forget(guid string) {
	wh.mu.Lock()
	defer wh.mu.Unlock()
	if _, ok := wh.unprocessed[guid]; ok {
		delete(wh.unprocessed, guid)
		wh.journal()
	}
}

// processRetries bounds the retries of a delivery whose processing failed
// (GitHub or the controller briefly unavailable): 2 s, then 4 s.
// processTimeout bounds each attempt: a GitHub request that never answers
// would otherwise hold every later delivery behind it.
const (
	processRetries = 2
	processTimeout = time.Minute
)

// process processes d, retrying a failure other than an undecodable
// payload: GitHub recorded the delivery as received, so nothing else
// would. Each action is safe to repeat: it reads the pull request again,
// and a lane already queued at that commit is not queued twice.
func (wh *Webhook) process(ctx context.Context, d delivery) error {
	return backoff.Retry(func() error {
		actx, cancel := context.WithTimeout(ctx, processTimeout)
		defer cancel()
		err := wh.in.Process(actx, d.event, d.payload)
		if errors.Is(err, ErrPayload) {
			return backoff.Permanent(err)
		}
		if err != nil {
			wh.in.log.Warn("sparkgh.process_retry", "delivery", d.id, "event", d.event, "error", err)
		}
		return err
	}, retry.Policy{Initial: 2 * time.Second, Multiplier: 2, Retries: processRetries}.Context(ctx))
}

// ErrBehind is matched by Process errors when GitHub's API shows a pull
// request as it was before the delivery being processed (replication
// lag); the delivery is retried.
var ErrBehind = errors.New("sparkgh: GitHub's view of the pull request is behind the delivery")

// ErrPayload is matched by Process errors for undecodable payloads.
var ErrPayload = errors.New("sparkgh: undecodable webhook payload")

// Events are the webhook events the integration acts on, for the App's
// subscription: merge_group only when it serves the merge queue.
func (in *Integration) Events() []string {
	events := []string{"pull_request", "issue_comment", "workflow_job", "check_run", "check_suite"}
	if in.cfg.MergeQueue != nil {
		events = append(events, "merge_group")
	}
	return events
}

// Process handles one verified delivery.
func (in *Integration) Process(ctx context.Context, event string, payload []byte) error {
	if !slices.Contains(in.Events(), event) {
		return nil // not ours (ping and others)
	}
	acted, err := actedOn(event, payload)
	if err != nil {
		return err
	}
	ev, err := github.ParseWebHook(event, acted)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrPayload, event, err)
	}
	switch e := ev.(type) {
	case *github.PullRequestEvent:
		if e.PullRequest == nil || e.GetRepo().GetFullName() == "" {
			return fmt.Errorf("%w: pull_request: the payload lacks pull_request or repository.full_name", ErrPayload)
		}
		return in.pullRequest(ctx, e)
	case *github.IssueCommentEvent:
		if e.GetRepo().GetFullName() == "" {
			return fmt.Errorf("%w: issue_comment: the payload lacks repository.full_name", ErrPayload)
		}
		return in.comment(ctx, e)
	case *github.WorkflowJobEvent:
		return in.workflowJob(ctx, e)
	case *github.CheckRunEvent:
		if e.CheckRun == nil || e.GetRepo().GetFullName() == "" {
			return fmt.Errorf("%w: check_run: the payload lacks check_run or repository.full_name", ErrPayload)
		}
		return in.rerun(ctx, e)
	case *github.CheckSuiteEvent:
		if e.CheckSuite == nil || e.GetRepo().GetFullName() == "" {
			return fmt.Errorf("%w: check_suite: the payload lacks check_suite or repository.full_name", ErrPayload)
		}
		return in.rerunSuite(ctx, e)
	case *github.MergeGroupEvent:
		if e.MergeGroup == nil || e.GetRepo().GetFullName() == "" {
			return fmt.Errorf("%w: merge_group: the payload lacks merge_group or repository.full_name", ErrPayload)
		}
		return in.mergeGroup(ctx, e)
	}
	return nil
}

// actedFields are the payload fields the integration acts on, per event
// (a path per line; [] descends into every element of a list). Only these
// are decoded: a field the integration does not use, in a form go-github
// does not expect (an old-style timestamp inside app, a new enum), never
// drops a delivery.
var actedFields = map[string][]string{
	"*":             {"action", "repository.full_name", "sender.login"},
	"pull_request":  {"label.name", "pull_request.number", "pull_request.state", "pull_request.updated_at", "pull_request.head.sha", "pull_request.head.repo.id", "pull_request.base.repo.id", "pull_request.labels[].name"},
	"issue_comment": {"issue.number", "issue.pull_request.url", "comment.body", "comment.created_at"},
	"workflow_job":  {"workflow_job.runner_name", "workflow_job.conclusion", "workflow_job.html_url"},
	"check_run":     {"check_run.name", "check_run.external_id", "check_run.head_sha"},
	"check_suite":   {"check_suite.id"},
	"merge_group":   {"merge_group.head_sha", "merge_group.head_ref", "merge_group.base_ref"},
}

// actedOn keeps only the fields of payload the integration acts on for
// event (actedFields), re-encoded. A payload that is not a JSON object is
// ErrPayload.
func actedOn(event string, payload []byte) ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(payload, &doc); err != nil || doc == nil {
		return nil, fmt.Errorf("%w: %s: the body is not a JSON object", ErrPayload, event)
	}
	keep := map[string]any{}
	for _, path := range append(actedFields["*"], actedFields[event]...) {
		copyPath(doc, keep, strings.Split(path, "."))
	}
	return json.Marshal(keep)
}

// copyPath copies the value at path from src into dst, creating the
// objects (and lists, for a [] step) on the way; a missing step copies
// nothing.
func copyPath(src, dst map[string]any, path []string) {
	key, list := strings.CutSuffix(path[0], "[]")
	v, ok := src[key]
	if !ok {
		return
	}
	if len(path) == 1 {
		dst[key] = v
		return
	}
	if list {
		items, ok := v.([]any)
		if !ok {
			return
		}
		out, _ := dst[key].([]any)
		if out == nil {
			out = make([]any, len(items))
		}
		for i, item := range items {
			obj, ok := item.(map[string]any)
			if !ok {
				continue
			}
			o, _ := out[i].(map[string]any)
			if o == nil {
				o = map[string]any{}
				out[i] = o
			}
			copyPath(obj, o, path[1:])
		}
		dst[key] = out
		return
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return
	}
	o, _ := dst[key].(map[string]any)
	if o == nil {
		o = map[string]any{}
		dst[key] = o
	}
	copyPath(obj, o, path[1:])
}

func prOf(repo string, p *github.PullRequest) PR {
	out := PR{Repo: repo, Number: p.GetNumber(), HeadSHA: p.GetHead().GetSHA(), Open: p.GetState() == "open",
		HeadRepoID: p.GetHead().GetRepo().GetID(), BaseRepoID: p.GetBase().GetRepo().GetID(), UpdatedAt: p.GetUpdatedAt().Time}
	for _, l := range p.Labels {
		out.Labels = append(out.Labels, l.GetName())
	}
	return out
}

// refuse reports a refusal on the PR.
func (in *Integration) refuse(ctx context.Context, pr PR, why string) error {
	return in.gh.Comment(ctx, pr.Repo, pr.Number, "Spark request refused: "+why)
}

func (in *Integration) pullRequest(ctx context.Context, e *github.PullRequestEvent) error {
	repo := e.GetRepo().GetFullName()
	pr := prOf(repo, e.GetPullRequest())
	actor := e.GetSender().GetLogin()
	switch e.GetAction() {
	case "labeled":
		label := e.GetLabel().GetName()
		lane, ok := in.cfg.Labels[label]
		if !ok {
			return nil
		}
		if !pr.Open {
			return nil
		}
		// A push since is the synchronize delivery's to handle: the label
		// was a decision about the commit it was applied to.
		if _, ok, err := in.still(ctx, pr, "labeled", func(cur PR) bool {
			return cur.Open && cur.HeadSHA == pr.HeadSHA && slices.Contains(cur.Labels, label)
		}); !ok {
			return err
		}
		if err := in.authorize(ctx, pr, actor); err != nil {
			return in.refuse(ctx, pr, err.Error())
		}
		return in.askFor(ctx, pr, lane, label)
	case "unlabeled":
		label := e.GetLabel().GetName()
		if _, ok := in.cfg.Labels[label]; !ok {
			return nil
		}
		if _, ok, err := in.still(ctx, pr, "unlabeled", func(cur PR) bool { return !slices.Contains(cur.Labels, label) }); !ok {
			return err
		}
		return in.cancelQueued(ctx, pr, func(r spark.Request) bool { return r.Annotations[keyLabel] == label }, "label "+label+" removed")
	case "closed":
		if _, ok, err := in.still(ctx, pr, "closed", func(cur PR) bool { return !cur.Open }); !ok {
			return err
		}
		return in.cancelQueued(ctx, pr, func(spark.Request) bool { return true }, "the pull request was closed")
	case "synchronize":
		// Nothing labelled and nothing queued: nothing to do, and no API
		// call spent on the push.
		if len(in.lanes(pr.Labels)) == 0 {
			queued, err := in.hasQueued(ctx, pr)
			if err != nil || !queued {
				return err
			}
		}
		// A later push's delivery handles the later commit; this one
		// must not supersede it.
		cur, ok, err := in.still(ctx, pr, "synchronize", func(cur PR) bool { return cur.HeadSHA == pr.HeadSHA })
		if !ok {
			return err
		}
		if !cur.Open {
			// Closed since: its closed delivery may have been handled
			// while it was still open, so end its queued work here.
			return in.cancelQueued(ctx, pr, func(spark.Request) bool { return true }, "the pull request was closed")
		}
		// The labels as they are now: one removed since the push was
		// delivered (and its removal handled) asks for nothing.
		lanes := in.lanes(cur.Labels)
		if len(lanes) == 0 {
			// Work asked for by command at an earlier commit is not
			// asked for again: the command approved that commit.
			return in.supersedeQueued(ctx, pr, func(r spark.Request) bool { return r.PR.SHA != pr.HeadSHA },
				fmt.Sprintf("superseded by %s; ask again to test it", textlimit.ShortSHA(pr.HeadSHA)))
		}
		if err := in.authorize(ctx, pr, actor); err != nil {
			// The new commit was not reviewed by someone who may spend
			// fleet time: drop the queued old-SHA work and say so.
			if cerr := in.supersedeQueued(ctx, pr, func(r spark.Request) bool { return r.PR.SHA != pr.HeadSHA },
				fmt.Sprintf("superseded by %s, pushed by someone who cannot request fleet time", textlimit.ShortSHA(pr.HeadSHA))); cerr != nil {
				return cerr
			}
			return in.refuse(ctx, pr, fmt.Sprintf("the new commit %s was pushed by someone who cannot request fleet time (%v); a maintainer can label the PR again", textlimit.ShortSHA(pr.HeadSHA), err))
		}
		for _, l := range lanes {
			if err := in.request(ctx, pr, in.cfg.Labels[l], l); err != nil && !errors.Is(err, spark.ErrPairRefused) {
				return err
			}
		}
	}
	return nil
}

// still reads the pull request as it is now and reports whether what a
// delivery says of it still holds. A delivery can be acted on late
// (redelivered hours afterwards, or queued behind others), and one that no
// longer holds is ignored: the deliveries for what changed since handle
// it. An unreadable pull request is an error: nothing is done.
func (in *Integration) still(ctx context.Context, pr PR, action string, holds func(PR) bool) (PR, bool, error) {
	cur, err := in.gh.PullRequest(ctx, pr.Repo, pr.Number)
	if err != nil {
		return cur, false, fmt.Errorf("sparkgh: read %s#%d before acting on its %s delivery: %w", pr.Repo, pr.Number, action, err)
	}
	if !holds(cur) {
		// A view no newer than the delivery is GitHub's replication lag,
		// not a stale delivery (updated_at counts whole seconds, so a
		// view from the delivery's own second may still lack it): read
		// again (Webhook.process retries).
		if !cur.UpdatedAt.IsZero() && !pr.UpdatedAt.IsZero() && !cur.UpdatedAt.After(pr.UpdatedAt) {
			return cur, false, fmt.Errorf("%w: %s#%d as read (updated %s) is no newer than its %s delivery (%s)", ErrBehind, pr.Repo, pr.Number,
				cur.UpdatedAt.UTC().Format(time.RFC3339), action, pr.UpdatedAt.UTC().Format(time.RFC3339))
		}
		in.log.Info("sparkgh.stale_delivery", "repo", pr.Repo, "pr", pr.Number, "action", action, "sha", textlimit.ShortSHA(pr.HeadSHA), "now", textlimit.ShortSHA(cur.HeadSHA), "open", cur.Open)
		return cur, false, nil
	}
	return cur, true, nil
}

// lanes are the configured labels among labels, in order.
func (in *Integration) lanes(labels []string) []string {
	var out []string
	for _, l := range labels {
		if _, ok := in.cfg.Labels[l]; ok {
			out = append(out, l)
		}
	}
	return out
}

// hasQueued reports whether pr has queued work.
func (in *Integration) hasQueued(ctx context.Context, pr PR) (bool, error) {
	live, err := in.ctrl.LiveForPR(ctx, pr.Repo, pr.Number)
	return slices.ContainsFunc(live, func(r spark.Request) bool {
		return r.State == spark.Queued && r.PR != nil && r.PR.Repo == pr.Repo && r.PR.Number == pr.Number
	}), err
}

// cancelQueued cancels this PR's queued requests that match; active work
// finishes.
func (in *Integration) cancelQueued(ctx context.Context, pr PR, match func(spark.Request) bool, reason string) error {
	return in.endQueued(ctx, ofPR(pr, match), reason, false)
}

// supersedeQueued supersedes pr's queued requests that match: a newer
// commit was pushed ("New PR SHA: supersede a queued old-SHA
// request").
func (in *Integration) supersedeQueued(ctx context.Context, pr PR, match func(spark.Request) bool, reason string) error {
	return in.endQueued(ctx, ofPR(pr, match), reason, true)
}

// ofPR narrows match to pr's requests.
func ofPR(pr PR, match func(spark.Request) bool) func(spark.Request) bool {
	return func(r spark.Request) bool {
		return r.PR != nil && r.PR.Repo == pr.Repo && r.PR.Number == pr.Number && match(r)
	}
}

// endQueued cancels, or supersedes, the queued requests match selects;
// running work is never stopped.
func (in *Integration) endQueued(ctx context.Context, match func(spark.Request) bool, reason string, supersede bool) error {
	_, live, err := in.ctrl.Snapshot(ctx)
	if err != nil {
		return err
	}
	for _, r := range live {
		if r.State != spark.Queued || !match(r) {
			continue
		}
		if supersede {
			err = in.ctrl.Supersede(ctx, r.ID, reason)
		} else {
			// The check says why; a request granted meanwhile ignores it.
			if err := in.ctrl.Annotate(ctx, r.ID, keyCancel, reason); err != nil {
				return err
			}
			err = in.ctrl.Cancel(ctx, r.ID)
		}
		if err != nil && !errors.Is(err, spark.ErrNotQueued) && !errors.Is(err, spark.ErrActive) {
			return err
		}
		in.log.Info("sparkgh.ended_queued", "request", r.ID, "superseded", supersede, "reason", reason)
	}
	return in.Sync(ctx)
}

// CommandMaxAge is how old a comment command may be when it is processed:
// older, it is refused rather than acted on (GitHub delivers in seconds;
// a redelivery can be hours late).
const CommandMaxAge = 10 * time.Minute

func (in *Integration) comment(ctx context.Context, e *github.IssueCommentEvent) error {
	if e.GetAction() != "created" || !e.GetIssue().IsPullRequest() {
		return nil
	}
	cmds := ParseCommands(e.GetComment().GetBody(), in.cfg.CommandPrefix)
	if len(cmds) == 0 {
		return nil
	}
	repo := e.GetRepo().GetFullName()
	pr, err := in.gh.PullRequest(ctx, repo, e.GetIssue().GetNumber())
	if err != nil {
		return err
	}
	// A comment carries no commit: acted on late (a redelivery), "test"
	// would test whatever was pushed since, under an approval given
	// before it, and "cancel" would cancel work asked for since.
	if at := e.GetComment().GetCreatedAt().Time; !at.IsZero() && time.Since(at) > CommandMaxAge {
		return in.refuse(ctx, pr, fmt.Sprintf("the command from %s arrived %s late, and the pull request may have changed since; repeat it if it still applies", at.UTC().Format(time.RFC3339), time.Since(at).Round(time.Minute)))
	}
	actor := e.GetSender().GetLogin()
	if err := in.authorize(ctx, pr, actor); err != nil {
		return in.refuse(ctx, pr, err.Error())
	}
	for _, c := range cmds {
		switch {
		case !c.Known:
			if err := in.gh.Comment(ctx, repo, pr.Number, fmt.Sprintf("Unknown command `%s`. Commands: `%[2]s test` (one host), `%[2]s test --pair` (both hosts), `%[2]s status`, `%[2]s cancel` (queued work only).", c.Line, in.cfg.CommandPrefix)); err != nil {
				return err
			}
		case c.Verb == "test" && !pr.Open:
			if err := in.refuse(ctx, pr, "the pull request is closed"); err != nil {
				return err
			}
		case c.Verb == "test":
			lane := Lane{Suite: "smoke", Topology: spark.Single}
			if c.Pair {
				lane.Topology = spark.Pair
			}
			if err := in.askFor(ctx, pr, lane, ""); err != nil {
				return err
			}
		case c.Verb == "status":
			if err := in.gh.Comment(ctx, repo, pr.Number, in.statusText(ctx, pr)); err != nil {
				return err
			}
		case c.Verb == "cancel":
			if err := in.cancelQueued(ctx, pr, func(spark.Request) bool { return true }, "cancelled by a comment"); err != nil {
				return err
			}
		}
	}
	return nil
}

func (in *Integration) statusText(ctx context.Context, pr PR) string {
	live, err := in.ctrl.LiveForPR(ctx, pr.Repo, pr.Number)
	if err != nil {
		return "The Spark controller is unavailable; nothing new starts until it is back."
	}
	var b strings.Builder
	for _, r := range live {
		if r.PR == nil || r.PR.Repo != pr.Repo || r.PR.Number != pr.Number {
			continue
		}
		st, err := in.ctrl.Status(ctx, r.ID)
		if err != nil {
			continue
		}
		c := in.render(st)
		fmt.Fprintf(&b, "- %s (%s, %s, SHA %s)\n", c.Title, r.Suite, r.Topology, textlimit.ShortSHA(r.PR.SHA))
	}
	if b.Len() == 0 {
		return "No Spark request is queued or running for this pull request."
	}
	return "Spark requests for this pull request:\n" + b.String()
}

func (in *Integration) workflowJob(ctx context.Context, e *github.WorkflowJobEvent) error {
	runner := e.GetWorkflowJob().GetRunnerName()
	id, ok := RunnerRequest(runner)
	if !ok {
		return nil
	}
	st, err := in.ctrl.Status(ctx, id)
	if errors.Is(err, spark.ErrNotFound) {
		return nil
	}
	if err != nil || st.Request.State != spark.Active || st.Request.Annotations[keyRunner] != runner {
		return err
	}
	switch e.GetAction() {
	case "in_progress":
		if err := in.ctrl.Annotate(ctx, id, keyPhase, phaseRunning); err != nil {
			return err
		}
	case "completed":
		phase := phasePassed
		if c := e.GetWorkflowJob().GetConclusion(); c != "success" {
			phase = phaseConcluded + c
		}
		if u := e.GetWorkflowJob().GetHTMLURL(); strings.HasPrefix(u, "https://") {
			if err := in.ctrl.Annotate(ctx, id, keyJobURL, u); err != nil {
				return err
			}
		}
		if err := in.ctrl.Annotate(ctx, id, keyPhase, phase); err != nil {
			return err
		}
		if err := in.ctrl.Release(ctx, id, st.Request.Token); err != nil {
			return err
		}
	default:
		return nil
	}
	return in.Sync(ctx)
}
