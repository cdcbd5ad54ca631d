package spark

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/gpugate/gpugate/internal/textlimit"
)

// HostConfig declares a fleet member.
type HostConfig struct {
	Name    string `yaml:"name"`
	Managed bool   `yaml:"managed"` // explicitly adopted
	Service bool   `yaml:"service"` // the resident service lives here
	// Agent: the host runs the host agent (sparkctl agent). When a lease
	// ends there, the host is Cleaning, and takes no work, until its agent
	// acknowledges the cleanup (Controller.AckCleanup).
	Agent bool `yaml:"agent"`
}

// Options configure the controller. The default two-host fleet is
// DefaultOptions.
type Options struct {
	Hosts         []HostConfig
	PreferredHost string        // one-host requests prefer it (spark-2 in the default fleet)
	Priorities    map[Class]int // default DefaultPriorities
	// Durations is the lease length per class (default DefaultDurations):
	// what a request gets when it names none, and the most it may ask for.
	Durations map[Class]time.Duration
	// PairTest declares that a real distributed test exists; until then
	// pair requests of CI classes are refused.
	PairTest bool
	// LendMinPriority is the lowest priority that may borrow the service
	// host (default 70: merge CI and above). Development, pairs and
	// requests naming the host always may.
	LendMinPriority int
	// PairMaxWait bounds a queued pair's wait (default 1 h): once it has
	// waited this long, the pair goes ahead of all work but development,
	// holding each host that frees up until it has both. Priority is
	// non-preemptive, so the pair is granted at most PairMaxWait plus
	// what remains of the leases running at that moment after it was
	// queued, whatever one-host work keeps arriving.
	PairMaxWait      time.Duration
	HeartbeatTimeout time.Duration // default 90 s
	// CleanupTimeout is how long a host's agent may take to acknowledge
	// its cleanup after a lease ended (default 15 min): past it the
	// controller alerts once, and the host stays out until the agent
	// acknowledges or an operator clears it (ClearCleanup).
	CleanupTimeout  time.Duration
	Service         ResidentService
	RestoreAttempts int           // bounded restore policy (default 5)
	RestoreBackoff  time.Duration // first retry delay, doubling (default 30 s)
	EmergencyKey    string        // authorizes Terminate; empty disables it
	Log             *slog.Logger
	// OnGrant is called after a grant is committed (e.g. to create a
	// one-job runner and dispatch the workflow).
	OnGrant func(Request)
	// OnAlert is called with each alert event (a failed lend, a failed
	// restore of the resident service) after it is committed, to reach
	// an operator; it should return quickly. Alerts are also logged at
	// error level and kept in the event log.
	OnAlert func(Event)
	// DashboardQueue is how many queued reservations, from the head of
	// the queue, the dashboard lists (default 100); it counts them all.
	DashboardQueue int
}

// DefaultOptions is the default fleet: two hosts, the service on spark-1,
// spark-2 preferred.
func DefaultOptions() Options {
	return Options{
		Hosts:         []HostConfig{{Name: "spark-1", Managed: true, Service: true}, {Name: "spark-2", Managed: true}},
		PreferredHost: "spark-2",
	}
}

func (o *Options) defaults() {
	if o.Priorities == nil {
		o.Priorities = DefaultPriorities()
	}
	// A class the configuration leaves out keeps its default length: a
	// zero-length lease would expire as it is granted.
	durations := DefaultDurations()
	for class, d := range o.Durations {
		if d > 0 {
			durations[class] = d
		}
	}
	o.Durations = durations
	if o.LendMinPriority == 0 {
		o.LendMinPriority = 70
	}
	if o.PairMaxWait <= 0 {
		o.PairMaxWait = time.Hour
	}
	if o.HeartbeatTimeout == 0 {
		o.HeartbeatTimeout = 90 * time.Second
	}
	if o.CleanupTimeout <= 0 {
		o.CleanupTimeout = 15 * time.Minute
	}
	if o.RestoreAttempts == 0 {
		o.RestoreAttempts = 5
	}
	if o.RestoreBackoff == 0 {
		o.RestoreBackoff = 30 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.DashboardQueue <= 0 {
		o.DashboardQueue = 100
	}
}

// Controller owns physical admission of the fleet.
type Controller struct {
	store Store
	opts  Options
	// overduePriority is an overdue pair's priority in a pass: one above
	// every class but development.
	overduePriority int
}

// New opens a controller over store, adopting the configured hosts (their
// persisted state is kept across restarts).
func New(store Store, opts Options) (*Controller, error) {
	opts.defaults()
	if len(opts.Hosts) == 0 {
		return nil, fmt.Errorf("%w: no hosts configured", ErrInvalid)
	}
	names := map[string]bool{}
	for _, h := range opts.Hosts {
		if h.Name == "" || names[h.Name] {
			return nil, fmt.Errorf("%w: host names must be unique and non-empty", ErrInvalid)
		}
		names[h.Name] = true
		if h.Service && opts.Service == nil {
			return nil, fmt.Errorf("%w: host %s runs the resident service but no ResidentService is configured", ErrInvalid, h.Name)
		}
	}
	if opts.PreferredHost != "" && !names[opts.PreferredHost] {
		return nil, fmt.Errorf("%w: preferred host %s is not in the fleet", ErrInvalid, opts.PreferredHost)
	}
	c := &Controller{store: store, opts: opts}
	for class, prio := range opts.Priorities {
		if class != Development {
			c.overduePriority = max(c.overduePriority, prio+1)
		}
	}
	err := store.Tx(context.Background(), func(tx Tx) error {
		have, err := tx.Hosts()
		if err != nil {
			return err
		}
		byName := map[string]Host{}
		for _, h := range have {
			byName[h.Name] = h
		}
		for _, hc := range opts.Hosts {
			h, ok := byName[hc.Name]
			if !ok {
				h = Host{Name: hc.Name, Mode: Idle}
				if hc.Service {
					h.Mode = Restoring // the service is started and verified before it is advertised
				}
			}
			h.Managed, h.Service = hc.Managed, hc.Service
			if err := tx.PutHost(h); err != nil {
				return err
			}
		}
		for _, h := range have {
			if !names[h.Name] && h.Managed {
				h.Managed = false // no longer configured: never schedulable
				if err := tx.PutHost(h); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return c, nil
}

// SubmitRequest asks for fleet time.
type SubmitRequest struct {
	Class    Class
	Topology Topology // default Single
	Host     string   // a specific host (e.g. the service start)
	PR       *PRRef
	Owner    string
	Suite    string
	Duration time.Duration // default per class
	// Annotations are stored with the request (see Request.Annotations).
	Annotations map[string]string
}

func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return "r-" + hex.EncodeToString(b[:])
}

func (c *Controller) tx(ctx context.Context, fn func(Tx) error) error {
	var alerts []Event
	run := fn
	if c.opts.OnAlert != nil { // collect the alerts only for a hook
		run = func(tx Tx) error {
			alerts = alerts[:0] // a store may run fn again
			return fn(&alertingTx{Tx: tx, alerts: &alerts})
		}
	}
	err := c.store.Tx(ctx, run)
	if err == nil {
		for _, e := range alerts { // committed: no rolled-back alert escapes
			c.opts.OnAlert(e)
		}
	}
	if err != nil {
		if errors.Is(err, errRollback) || errors.Is(err, ErrActive) || errors.Is(err, ErrNotQueued) || errors.Is(err, ErrNotFound) ||
			errors.Is(err, ErrStaleToken) || errors.Is(err, ErrInvalid) || errors.Is(err, ErrPairRefused) || errors.Is(err, ErrUnauthorized) {
			return err
		}
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

// alertingTx collects the alert events of one transaction, for OnAlert
// once it commits.
type alertingTx struct {
	Tx
	alerts *[]Event
}

func (c *Controller) event(tx Tx, e Event) error {
	e.At = time.Now()
	if at, ok := tx.(*alertingTx); ok && e.Alert {
		*at.alerts = append(*at.alerts, e)
	}
	attrs := []slog.Attr{slog.String("kind", e.Kind), slog.String("request", e.Request), slog.String("host", e.Host), slog.String("detail", e.Detail)}
	level := slog.LevelInfo
	if e.Alert {
		level = slog.LevelError
	}
	c.opts.Log.LogAttrs(context.Background(), level, "spark."+e.Kind, attrs...)
	return tx.AppendEvent(e)
}

// Submit queues a request. A new commit supersedes a queued request for
// the same pull request; development puts its target host(s) into draining.
func (c *Controller) Submit(ctx context.Context, s SubmitRequest) (Request, error) {
	prio, ok := c.opts.Priorities[s.Class]
	switch {
	case !ok:
		return Request{}, fmt.Errorf("%w: unknown class %q", ErrInvalid, s.Class)
	case s.Topology == "":
		s.Topology = Single
	}
	if s.Topology != Single && s.Topology != Pair {
		return Request{}, fmt.Errorf("%w: topology %q: single or pair", ErrInvalid, s.Topology)
	}
	if s.Topology == Pair && s.Class != Development && !c.opts.PairTest {
		return Request{}, fmt.Errorf("%w: refusing a %s pair request: no distributed test is configured, and two independent commands need two one-host requests, not a pair", ErrPairRefused, s.Class)
	}
	if s.Topology == Pair && len(c.opts.Hosts) < 2 {
		return Request{}, fmt.Errorf("%w: the fleet has fewer than two hosts", ErrInvalid)
	}
	if s.Class == ServiceStart {
		s.Host = c.serviceHost()
		if s.Host == "" {
			return Request{}, fmt.Errorf("%w: no host runs the resident service", ErrInvalid)
		}
	}
	if s.Host != "" && !slices.ContainsFunc(c.opts.Hosts, func(h HostConfig) bool { return h.Name == s.Host }) {
		return Request{}, fmt.Errorf("%w: unknown host %q", ErrInvalid, s.Host)
	}
	if s.PR != nil && (s.PR.Repo == "" || s.PR.Number <= 0 || s.PR.SHA == "") {
		return Request{}, fmt.Errorf("%w: a PR request needs repo, number and SHA", ErrInvalid)
	}
	switch limit := c.opts.Durations[s.Class]; {
	case s.Duration < 0:
		return Request{}, fmt.Errorf("%w: lease length %s is negative; ask for a positive length, or none for the %s default of %s", ErrInvalid, s.Duration, s.Class, limit)
	case s.Duration == 0:
		s.Duration = limit
	case limit > 0 && s.Duration > limit:
		return Request{}, fmt.Errorf("%w: lease length %s is longer than the %s limit of %s; ask for at most that, and request again when it ends", ErrInvalid, s.Duration, s.Class, limit)
	}
	r := Request{ID: newID(), Class: s.Class, Topology: s.Topology, Host: s.Host, PR: s.PR, Owner: s.Owner, Suite: s.Suite,
		Duration: s.Duration, Priority: prio, State: Queued, Submitted: time.Now(), Annotations: s.Annotations}
	err := c.tx(ctx, func(tx Tx) error {
		seq, err := tx.NextSeq()
		if err != nil {
			return err
		}
		r.Seq = seq
		if r.PR != nil {
			queued, err := tx.QueuedForPR(r.PR.Repo, r.PR.Number)
			if err != nil {
				return err
			}
			for _, q := range queued {
				if q.PR.SHA != r.PR.SHA {
					q.State, q.Ended, q.Reason = Superseded, time.Now(), "superseded by "+textlimit.ShortSHA(r.PR.SHA)
					if err := tx.PutRequest(q); err != nil {
						return err
					}
					if err := c.event(tx, Event{Kind: "superseded", Request: q.ID, Detail: "a new commit was pushed"}); err != nil {
						return err
					}
				}
			}
		}
		if r.Class == Development {
			if err := c.drainFor(tx, r); err != nil {
				return err
			}
		}
		if err := tx.PutRequest(r); err != nil {
			return err
		}
		return c.event(tx, Event{Kind: "submitted", Request: r.ID, Detail: fmt.Sprintf("%s %s", r.Class, r.Topology)})
	})
	if err != nil {
		return Request{}, err
	}
	return r, nil
}

func (c *Controller) serviceHost() string {
	for _, h := range c.opts.Hosts {
		if h.Service {
			return h.Name
		}
	}
	return ""
}

// targets are the hosts a development request will take.
func (c *Controller) targets(r Request) []string {
	switch {
	case r.Host != "":
		return []string{r.Host}
	case r.Topology == Pair:
		var all []string
		for _, h := range c.opts.Hosts {
			all = append(all, h.Name)
		}
		return all[:2]
	case c.opts.PreferredHost != "":
		return []string{c.opts.PreferredHost}
	}
	return []string{c.opts.Hosts[0].Name}
}

// drainFor marks development's target hosts draining: active work
// finishes, no new CI starts there.
func (c *Controller) drainFor(tx Tx, r Request) error {
	hosts, err := tx.Hosts()
	if err != nil {
		return err
	}
	want := c.targets(r)
	for _, h := range hosts {
		if slices.Contains(want, h.Name) && !h.Draining {
			h.Draining = true
			if err := tx.PutHost(h); err != nil {
				return err
			}
			if err := c.event(tx, Event{Kind: "draining", Host: h.Name, Request: r.ID, Detail: "development requested this host"}); err != nil {
				return err
			}
		}
	}
	return nil
}

// Cancel removes queued work. Active work returns ErrActive.
func (c *Controller) Cancel(ctx context.Context, id string) error {
	return c.endQueued(ctx, id, Canceled, "canceled while queued", "canceled")
}

// Supersede ends a queued request because the commit it would test is no
// longer the one to test ("New PR SHA: supersede a queued
// old-SHA request; never rewrite an active run's identity"), with why as
// its reason. Like Cancel, it refuses an active request (ErrActive) and
// one already ended (ErrNotQueued). Submitting a pull request's newer
// commit supersedes its queued older ones by itself; Supersede is for a
// push after which nothing new is asked for.
func (c *Controller) Supersede(ctx context.Context, id, why string) error {
	return c.endQueued(ctx, id, Superseded, why, "superseded")
}

// endQueued ends a queued request in state, with reason, and records
// an event of kind.
func (c *Controller) endQueued(ctx context.Context, id string, state State, reason, kind string) error {
	return c.tx(ctx, func(tx Tx) error {
		r, err := mustRequest(tx, id)
		switch {
		case err != nil:
			return err
		case r.State == Active:
			return fmt.Errorf("%w: %s", ErrActive, id)
		case r.State != Queued:
			return fmt.Errorf("%w: %s is %s", ErrNotQueued, id, r.State)
		}
		r.State, r.Ended, r.Reason = state, time.Now(), reason
		if err := tx.PutRequest(r); err != nil {
			return err
		}
		if err := c.undrain(tx); err != nil {
			return err
		}
		return c.event(tx, Event{Kind: kind, Request: id})
	})
}

// undrain clears draining on hosts no queued development request targets.
func (c *Controller) undrain(tx Tx) error {
	queued, err := tx.QueuedOf(Development)
	if err != nil {
		return err
	}
	wanted := map[string]bool{}
	for _, q := range queued {
		for _, h := range c.targets(q) {
			wanted[h] = true
		}
	}
	hosts, err := tx.Hosts()
	if err != nil {
		return err
	}
	for _, h := range hosts {
		if h.Draining && !wanted[h.Name] {
			h.Draining = false
			if err := tx.PutHost(h); err != nil {
				return err
			}
		}
	}
	return nil
}

// mustRequest reads a request; a missing one is ErrNotFound.
func mustRequest(tx Tx, id string) (Request, error) {
	r, ok, err := tx.Request(id)
	if err == nil && !ok {
		err = fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return r, err
}

// Annotate sets one annotation on a request.
func (c *Controller) Annotate(ctx context.Context, id, key, value string) error {
	return c.tx(ctx, func(tx Tx) error { return annotate(tx, id, key, value, nil) })
}

// annotate sets request id's annotation key to value in tx, when check
// (nil: none) finds the request as it is in tx fit for it.
func annotate(tx Tx, id, key, value string, check func(Request) error) error {
	r, err := mustRequest(tx, id)
	if err != nil {
		return err
	}
	if check != nil {
		if err := check(r); err != nil {
			return err
		}
	}
	r.Annotations = maps.Clone(r.Annotations) // never mutate the stored copy in place
	if r.Annotations == nil {
		r.Annotations = map[string]string{}
	}
	r.Annotations[key] = value
	return tx.PutRequest(r)
}

// Release ends an active lease. The token must be the lease's: a stale
// token is refused.
func (c *Controller) Release(ctx context.Context, id string, token int64) error {
	return c.tx(ctx, func(tx Tx) error {
		r, err := mustRequest(tx, id)
		switch {
		case err != nil:
			return err
		case r.State != Active:
			return fmt.Errorf("%w: %s is %s, not active", ErrStaleToken, id, r.State)
		case r.Token != token:
			return fmt.Errorf("%w: %s holds token %d, not %d", ErrStaleToken, id, r.Token, token)
		}
		return c.end(tx, r, Released, "released by its owner")
	})
}

// end finishes an active request and frees (or fences) its hosts.
func (c *Controller) end(tx Tx, r Request, state State, reason string) error {
	r.State, r.Ended, r.Reason = state, time.Now(), reason
	if err := tx.PutRequest(r); err != nil {
		return err
	}
	hosts, err := tx.Hosts()
	if err != nil {
		return err
	}
	for _, h := range hosts {
		if h.Lease != r.ID {
			continue
		}
		h.Lease, h.Token = "", 0
		switch {
		case c.hostConfig(h.Name).Agent:
			// Its agent cleans the work directory and confirms no process
			// of the lease remains before the host is schedulable again.
			h.Mode, h.Ended, h.CleaningSince, h.CleanupOverdue = Cleaning, r.ID, r.Ended, false
		case state == Failed, state == Terminated, h.GPUProcesses > 0:
			h.Mode = ReleaseRequired
		case h.Service:
			h.Mode, h.NextRestore, h.RestoreAttempts = Restoring, time.Time{}, 0 // recreate the service before advertising it
		default:
			h.Mode = Idle
		}
		if err := tx.PutHost(h); err != nil {
			return err
		}
	}
	return c.event(tx, Event{Kind: string(state), Request: r.ID, Detail: reason})
}

// hostConfig is the fleet configuration of host name (zero when unknown).
func (c *Controller) hostConfig(name string) HostConfig {
	for _, h := range c.opts.Hosts {
		if h.Name == name {
			return h
		}
	}
	return HostConfig{}
}

// AckCleanup is the host agent's cleanup acknowledgement after lease
// ended on host: the agent cleaned the lease's work directory and counted
// gpuProcesses compute processes left on the GPU. With none the host is
// schedulable again (the service host goes back to its resident service);
// with any it is ReleaseRequired until a heartbeat shows it clean. An
// acknowledgement for another lease, or for a host that is not cleaning,
// is ErrStaleToken: it changes nothing.
func (c *Controller) AckCleanup(ctx context.Context, host, lease string, gpuProcesses int) error {
	return c.tx(ctx, func(tx Tx) error {
		h, err := cleaningHost(tx, host, lease)
		if err != nil {
			return err
		}
		h.Ended, h.CleaningSince, h.CleanupOverdue = "", time.Time{}, false
		h.GPUProcesses, h.LastHeartbeat = gpuProcesses, time.Now()
		detail := "the host agent cleaned up after " + lease
		switch {
		case gpuProcesses > 0:
			h.Mode = ReleaseRequired
			detail = fmt.Sprintf("%d GPU process(es) outlived %s: no work is admitted until a heartbeat shows the host clean", gpuProcesses, lease)
		case h.Service:
			h.Mode, h.RestoreAttempts, h.NextRestore = Restoring, 0, time.Time{}
		default:
			h.Mode = Idle
		}
		if err := tx.PutHost(h); err != nil {
			return err
		}
		return c.event(tx, Event{Kind: "cleanup-acknowledged", Host: host, Request: lease, Detail: detail, Alert: gpuProcesses > 0})
	})
}

// cleaningHost is host while it cleans up after lease: an unknown host is
// ErrNotFound, one not cleaning up after lease ErrStaleToken.
func cleaningHost(tx Tx, host, lease string) (Host, error) {
	hosts, err := tx.Hosts()
	if err != nil {
		return Host{}, err
	}
	h := hostByName(hosts, host)
	switch {
	case h.Name == "":
		return h, fmt.Errorf("%w: host %s", ErrNotFound, host)
	case h.Mode != Cleaning || h.Ended != lease:
		return h, fmt.Errorf("%w: host %s is %s, not cleaning up after %s", ErrStaleToken, host, h.Mode, lease)
	}
	return h, nil
}

// ClearCleanup is the operator's way out for a host whose agent never
// acknowledged its cleanup after lease (the agent is gone, or cannot
// count the GPU's processes): the host becomes ReleaseRequired, so it
// still takes no work until a heartbeat shows its GPU clean. The operator
// has made sure the lease's work directory and processes are gone. A host
// that is not cleaning up after lease is ErrStaleToken.
func (c *Controller) ClearCleanup(ctx context.Context, host, lease, by string) error {
	return c.tx(ctx, func(tx Tx) error {
		h, err := cleaningHost(tx, host, lease)
		if err != nil {
			return err
		}
		h.Mode, h.Ended, h.CleaningSince, h.CleanupOverdue = ReleaseRequired, "", time.Time{}, false
		if err := tx.PutHost(h); err != nil {
			return err
		}
		return c.event(tx, Event{Kind: "cleanup-cleared", Host: host, Request: lease,
			Detail: "cleared by " + by + " without the agent's acknowledgement: no work is admitted until a heartbeat shows the GPU clean"})
	})
}

// overdueCleanups alerts once for each host cleaning up for longer than
// Options.CleanupTimeout.
func (c *Controller) overdueCleanups(tx Tx, hosts []Host, now time.Time) error {
	for _, h := range hosts {
		if h.Mode != Cleaning || h.CleanupOverdue || h.CleaningSince.IsZero() || now.Sub(h.CleaningSince) < c.opts.CleanupTimeout {
			continue
		}
		h.CleanupOverdue = true
		if err := tx.PutHost(h); err != nil {
			return err
		}
		if err := c.event(tx, Event{Kind: "cleanup-overdue", Host: h.Name, Request: h.Ended, Alert: true,
			Detail: fmt.Sprintf("no cleanup acknowledgement %s after the lease ended: the host takes no work; check its agent, or clear it once it is clean (sparkctl clear-cleanup)", c.opts.CleanupTimeout)}); err != nil {
			return err
		}
	}
	return nil
}

// HostReport is a host agent's heartbeat.
type HostReport struct {
	Host         string
	GPUProcesses int // compute processes present on the GPU
}

// Heartbeat records a host's liveness. A release-required host whose GPU
// is clean again returns to service. An idle host that reports GPU
// processes no lease holds (left behind by an expired lease, or started
// outside the controller) becomes release-required, with an alert, until
// a heartbeat shows it clean: admission never trusts a host running
// processes it does not know.
func (c *Controller) Heartbeat(ctx context.Context, hr HostReport) error {
	return c.tx(ctx, func(tx Tx) error {
		hosts, err := tx.Hosts()
		if err != nil {
			return err
		}
		for _, h := range hosts {
			if h.Name != hr.Host {
				continue
			}
			if !h.Managed {
				return fmt.Errorf("%w: host %s is not managed", ErrUnauthorized, hr.Host)
			}
			h.LastHeartbeat, h.GPUProcesses = time.Now(), hr.GPUProcesses
			if h.Mode == Idle && h.Lease == "" && hr.GPUProcesses > 0 {
				h.Mode = ReleaseRequired
				if err := c.event(tx, Event{Kind: "unknown-processes", Host: h.Name, Alert: true,
					Detail: fmt.Sprintf("%d GPU process(es) that no lease holds: no work is admitted until a heartbeat shows the host clean", hr.GPUProcesses)}); err != nil {
					return err
				}
			}
			if h.Mode == ReleaseRequired && hr.GPUProcesses == 0 && h.Lease == "" {
				h.Mode = Idle
				if h.Service {
					h.Mode, h.RestoreAttempts, h.NextRestore = Restoring, 0, time.Time{}
				}
				if err := c.event(tx, Event{Kind: "cleaned", Host: h.Name, Detail: "no GPU processes remain"}); err != nil {
					return err
				}
			}
			return tx.PutHost(h)
		}
		return fmt.Errorf("%w: unknown host %s", ErrUnauthorized, hr.Host)
	})
}

// CheckToken is the fencing check a host action presents: the token must
// be the current lease's on that host.
func (c *Controller) CheckToken(ctx context.Context, host string, token int64) error {
	return c.tx(ctx, func(tx Tx) error {
		hosts, err := tx.Hosts()
		if err != nil {
			return err
		}
		for _, h := range hosts {
			if h.Name == host {
				if h.Mode != Leased || h.Token == 0 || h.Token != token {
					return fmt.Errorf("%w: host %s is %s with token %d, not %d", ErrStaleToken, host, h.Mode, h.Token, token)
				}
				return nil
			}
		}
		return fmt.Errorf("%w: unknown host %s", ErrStaleToken, host)
	})
}

// HostState is what the controller knows of host, for its preflight: an
// unknown host is ErrNotFound.
func (c *Controller) HostState(ctx context.Context, host string) (HostState, error) {
	var st HostState
	err := c.tx(ctx, func(tx Tx) error {
		hosts, err := tx.Hosts()
		if err != nil {
			return err
		}
		h := hostByName(hosts, host)
		if h.Name == "" {
			return fmt.Errorf("%w: host %s", ErrNotFound, host)
		}
		st = HostState{Online: c.online(h, time.Now()), Service: h.Service, Mode: h.Mode, Lease: h.Lease, Ended: h.Ended}
		return errRollback
	})
	if errors.Is(err, errRollback) {
		err = nil
	}
	return st, err
}

// Terminate is the separately authorized emergency stop of active work.
func (c *Controller) Terminate(ctx context.Context, id, key string) error {
	if c.opts.EmergencyKey == "" || subtle.ConstantTimeCompare([]byte(key), []byte(c.opts.EmergencyKey)) != 1 {
		return fmt.Errorf("%w: emergency termination needs the emergency key", ErrUnauthorized)
	}
	return c.terminate(ctx, id)
}

// terminate ends active work now; the caller has authorized it.
func (c *Controller) terminate(ctx context.Context, id string) error {
	return c.tx(ctx, func(tx Tx) error {
		r, err := mustRequest(tx, id)
		switch {
		case err != nil:
			return err
		case r.State != Active:
			return fmt.Errorf("%w: %s is %s", ErrNotQueued, id, r.State)
		}
		return c.end(tx, r, Terminated, "emergency termination")
	})
}

// Status is a request with its queue position and pending reason.
type Status struct {
	Request  Request `json:"request"`
	Position int     `json:"position,omitempty"` // 1-based, in admission order, while queued
	Pending  string  `json:"pending,omitempty"`  // why it is not running yet
}

// Status reports a request's state, queue position and pending reason.
func (c *Controller) Status(ctx context.Context, id string) (Status, error) {
	var st Status
	err := c.tx(ctx, func(tx Tx) error {
		r, err := mustRequest(tx, id)
		if err != nil {
			return err
		}
		st.Request = r
		if r.State != Queued {
			return nil
		}
		p, err := c.plan(tx)
		if err != nil {
			return err
		}
		if st.Position, err = p.position(tx, r); err != nil {
			return err
		}
		st.Pending = p.reason(r)
		return errRollback
	})
	if errors.Is(err, errRollback) {
		err = nil
	}
	return st, err
}

var errRollback = errors.New("spark: read-only transaction")

func (c *Controller) online(h Host, now time.Time) bool {
	return h.Managed && !h.LastHeartbeat.IsZero() && now.Sub(h.LastHeartbeat) <= c.opts.HeartbeatTimeout
}

func rank(name, want string) int {
	if name == want {
		return 1
	}
	return 0
}

func (c *Controller) lendable(r Request) bool {
	return r.Class == Development || r.Topology == Pair || r.Host != "" || r.Priority >= c.opts.LendMinPriority
}
