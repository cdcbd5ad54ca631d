package spark

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// ResidentService is the long-running service that normally owns one host
// (the default inference service). Lending its host means draining and
// stopping it completely and verifying its GPU allocation is gone (a pause
// is not a release); returning it means starting it and passing its
// model-ready health check before it is advertised.
type ResidentService interface {
	Drain(ctx context.Context) error
	Stop(ctx context.Context) error
	// VerifyReleased confirms the service holds no GPU memory or process.
	VerifyReleased(ctx context.Context) error
	Start(ctx context.Context) error
	// Healthy is the model-ready health check.
	Healthy(ctx context.Context) error
}

// serviceJob is service I/O decided in one transaction and done outside it.
type serviceJob struct {
	host    string
	lend    bool   // drain, stop, verify (else start and check health)
	request string // the grant waiting for a lending, or a service-start request
}

// Reconcile runs one admission pass: it marks stale hosts offline (they
// are never treated as idle), expires leases (on a host without the agent,
// a lease that expires while GPU processes remain leaves its host
// release-required, the controller killing nothing; on an agent's host the
// host is Cleaning until the agent acknowledges its cleanup), fails a pair
// whose host went offline as a unit, restores the resident service (also
// on its host when it is Idle with no lease and no grant pending), and
// grants queued requests in priority order. Service I/O runs between two
// transactions. Any store error fails closed: nothing is admitted.
func (c *Controller) Reconcile(ctx context.Context) error {
	var jobs []serviceJob
	var granted []Request
	err := c.tx(ctx, func(tx Tx) error {
		jobs, granted = nil, nil
		now := time.Now()
		if err := c.expire(tx, now); err != nil {
			return err
		}
		hosts, err := tx.Hosts()
		if err != nil {
			return err
		}
		if err := c.overdueCleanups(tx, hosts, now); err != nil {
			return err
		}
		if err := c.unlentServiceHosts(tx, hosts, now); err != nil {
			return err
		}
		for _, h := range hosts {
			if h.Service && h.Mode == Restoring && c.online(h, now) && h.Lease == "" && !now.Before(h.NextRestore) {
				jobs = append(jobs, serviceJob{host: h.Name})
			}
		}
		if err := c.settleServiceStarts(tx, hosts); err != nil {
			return err
		}
		p, err := c.plan(tx)
		if err != nil {
			return err
		}
		for _, r := range p.order {
			hostsFor, ok := p.grants[r.ID]
			if !ok {
				continue
			}
			lend := ""
			for _, name := range hostsFor {
				h := hostByName(hosts, name)
				if h.Mode == ServiceRunning {
					lend = name
				}
			}
			switch {
			case r.Class == ServiceStart:
				if err := c.startService(tx, r, hostsFor[0]); err != nil {
					return err
				}
				jobs = append(jobs, serviceJob{host: hostsFor[0], request: r.ID})
			case lend != "":
				h := hostByName(hosts, lend)
				h.Mode, h.Pending = Lending, r.ID
				if err := tx.PutHost(h); err != nil {
					return err
				}
				if err := c.event(tx, Event{Kind: "lending", Host: lend, Request: r.ID, Detail: "draining and stopping the resident service"}); err != nil {
					return err
				}
				jobs = append(jobs, serviceJob{host: lend, lend: true, request: r.ID})
			default:
				g, err := c.grant(tx, r, hostsFor)
				if err != nil {
					return err
				}
				granted = append(granted, g)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, g := range granted {
		if c.opts.OnGrant != nil {
			c.opts.OnGrant(g)
		}
	}
	for _, j := range jobs {
		jerr := c.runJob(ctx, j)
		done := time.Now()
		var g *Request
		if err := c.tx(ctx, func(tx Tx) error {
			var err error
			g, err = c.finishJob(tx, j, jerr, done)
			return err
		}); err != nil {
			return err
		}
		if g != nil && c.opts.OnGrant != nil {
			c.opts.OnGrant(*g)
		}
	}
	return nil
}

func hostByName(hosts []Host, name string) Host {
	for _, h := range hosts {
		if h.Name == name {
			return h
		}
	}
	return Host{}
}

// grant leases hosts to r under a fresh fencing token, allocated in the
// same transaction.
func (c *Controller) grant(tx Tx, r Request, hostNames []string) (Request, error) {
	tok, err := tx.NextToken()
	if err != nil {
		return Request{}, err
	}
	now := time.Now()
	r.State, r.Hosts, r.Token, r.Granted, r.Expires = Active, hostNames, tok, now, now.Add(r.Duration)
	hosts, err := tx.Hosts()
	if err != nil {
		return Request{}, err
	}
	for _, name := range hostNames {
		h := hostByName(hosts, name)
		h.Mode, h.Lease, h.Token, h.Pending = Leased, r.ID, tok, ""
		if r.Class == Development {
			h.Draining = false
		}
		if err := tx.PutHost(h); err != nil {
			return Request{}, err
		}
	}
	if err := tx.PutRequest(r); err != nil {
		return Request{}, err
	}
	if r.Class == Development {
		if err := c.undrain(tx); err != nil {
			return Request{}, err
		}
	}
	return r, c.event(tx, Event{Kind: "granted", Request: r.ID, Detail: fmt.Sprintf("%s %s on %v", r.Class, r.Topology, hostNames)})
}

func (c *Controller) startService(tx Tx, r Request, host string) error {
	hosts, err := tx.Hosts()
	if err != nil {
		return err
	}
	h := hostByName(hosts, host)
	h.Mode, h.Pending = Restoring, r.ID
	if err := tx.PutHost(h); err != nil {
		return err
	}
	r.State, r.Hosts, r.Granted = Active, []string{host}, time.Now()
	if err := tx.PutRequest(r); err != nil {
		return err
	}
	return c.event(tx, Event{Kind: "service-starting", Host: host, Request: r.ID})
}

// runJob performs service I/O outside any transaction.
func (c *Controller) runJob(ctx context.Context, j serviceJob) error {
	s := c.opts.Service
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if j.lend {
		for _, step := range []struct {
			name string
			fn   func(context.Context) error
		}{{"drain", s.Drain}, {"stop", s.Stop}, {"verify GPU released", s.VerifyReleased}} {
			if err := step.fn(ctx); err != nil {
				return fmt.Errorf("%s: %w", step.name, err)
			}
		}
		return nil
	}
	if err := s.Start(ctx); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	if err := s.Healthy(ctx); err != nil {
		return fmt.Errorf("model-ready health check: %w", err)
	}
	return nil
}

// settleServiceStarts ends each queued service start whose service is
// already online: what it asked for is done, and left queued it would
// wait for ever at the head of the queue.
func (c *Controller) settleServiceStarts(tx Tx, hosts []Host) error {
	reqs, err := tx.QueuedOf(ServiceStart)
	if err != nil {
		return err
	}
	for _, r := range reqs {
		if h := hostByName(hosts, r.Host); h.Name != "" && h.Mode == ServiceRunning {
			if err := c.end(tx, r, Released, "the resident service is already online"); err != nil {
				return err
			}
		}
	}
	return nil
}

// unlentServiceHosts sends back to Restoring each service host that is
// Idle with no lease and no grant pending for it (the request its lending
// was for went away, or the fleet file made an idle host the service's):
// the resident service owns its host whenever no lendable work holds it.
// hosts is updated in place.
func (c *Controller) unlentServiceHosts(tx Tx, hosts []Host, now time.Time) error {
	for i, h := range hosts {
		if !h.Service || h.Mode != Idle || h.Lease != "" {
			continue
		}
		if h.Pending != "" {
			r, ok, err := tx.Request(h.Pending)
			if err != nil {
				return err
			}
			if ok && r.State == Queued {
				continue // the lending's grant is still to be made
			}
		}
		h.Mode, h.Pending, h.RestoreAttempts, h.NextRestore = Restoring, "", 0, now
		if err := tx.PutHost(h); err != nil {
			return err
		}
		hosts[i] = h
		if err := c.event(tx, Event{Kind: "restoring", Host: h.Name, Detail: "no lease holds the service host and no grant is pending: restoring the resident service"}); err != nil {
			return err
		}
	}
	return nil
}

// finishJob records a service job's outcome, done when the job returned,
// and returns a grant it made. A lending whose steps all passed (the
// service drained, stopped and verified released) leaves the host Idle
// with none of the GPU processes it reported up to then: those were the
// service's, and the grant the lending was for is made at once when the
// request's hosts are free for it; when they are not, the service is
// restored rather than left stopped while the request waits.
func (c *Controller) finishJob(tx Tx, j serviceJob, jerr error, done time.Time) (*Request, error) {
	hosts, err := tx.Hosts()
	if err != nil {
		return nil, err
	}
	h := hostByName(hosts, j.host)
	now := time.Now()
	if j.lend {
		r, ok, err := tx.Request(j.request)
		if err != nil {
			return nil, err
		}
		switch {
		case jerr != nil:
			// The service may still hold the GPU: keep the host out and
			// restore the service.
			h.Mode, h.Pending, h.NextRestore = Restoring, "", now
			if err := tx.PutHost(h); err != nil {
				return nil, err
			}
			return nil, c.event(tx, Event{Kind: "lend-failed", Host: h.Name, Request: j.request, Detail: jerr.Error(), Alert: true})
		case !ok || r.State != Queued:
			// The request went away while the service stopped: restore it.
			h.Mode, h.Pending, h.NextRestore = Restoring, "", now
			return nil, tx.PutHost(h)
		}
		h.Mode = Idle
		if !h.LastHeartbeat.After(done) {
			// Reported while the service still ran: its own processes,
			// which the verify step found gone.
			h.GPUProcesses = 0
		}
		if err := tx.PutHost(h); err != nil {
			return nil, err
		}
		// Grant only if every host of the request is still free for it.
		p, err := c.plan(tx)
		if err != nil {
			return nil, err
		}
		if hostsFor, ok := p.grants[r.ID]; ok {
			g, err := c.grant(tx, r, hostsFor)
			if err != nil {
				return nil, err
			}
			return &g, nil
		}
		// Its other hosts are not free for it any more (a pair's second
		// host was taken, or reports processes): the service does not
		// stay down while the request waits. It is restored, and lent
		// again once all the request's hosts are free.
		h.Mode, h.Pending, h.RestoreAttempts, h.NextRestore = Restoring, "", 0, now
		if err := tx.PutHost(h); err != nil {
			return nil, err
		}
		return nil, c.event(tx, Event{Kind: "restoring", Host: h.Name, Request: r.ID,
			Detail: "the request the service was stopped for cannot start yet (its other hosts are not free): restoring the resident service until they are"})
	}
	var r Request
	var hasReq bool
	if j.request != "" {
		if r, hasReq, err = tx.Request(j.request); err != nil {
			return nil, err
		}
	}
	if jerr == nil {
		h.Mode, h.Pending, h.RestoreAttempts, h.NextRestore = ServiceRunning, "", 0, time.Time{}
		if err := tx.PutHost(h); err != nil {
			return nil, err
		}
		if hasReq && r.State == Active {
			r.State, r.Ended, r.Reason = Released, now, "the resident service is online"
			if err := tx.PutRequest(r); err != nil {
				return nil, err
			}
		}
		return nil, c.event(tx, Event{Kind: "service-online", Host: h.Name, Detail: "passed its model-ready health check"})
	}
	h.RestoreAttempts++
	h.Pending = ""
	if h.RestoreAttempts >= c.opts.RestoreAttempts {
		h.Mode = OutOfService
	} else {
		h.Mode = Restoring
		h.NextRestore = now.Add(c.opts.RestoreBackoff << (h.RestoreAttempts - 1))
	}
	if err := tx.PutHost(h); err != nil {
		return nil, err
	}
	if hasReq && r.State == Active {
		r.State, r.Ended, r.Reason = Failed, now, "the resident service failed its health check"
		if err := tx.PutRequest(r); err != nil {
			return nil, err
		}
	}
	return nil, c.event(tx, Event{Kind: "restore-failed", Host: h.Name, Alert: true,
		Detail: fmt.Sprintf("attempt %d of %d: %v; the host stays out of CI", h.RestoreAttempts, c.opts.RestoreAttempts, jerr)})
}

// expire ends leases past their time and fails pairs with an offline host.
func (c *Controller) expire(tx Tx, now time.Time) error {
	active, err := tx.Requests(Active)
	if err != nil {
		return err
	}
	hosts, err := tx.Hosts()
	if err != nil {
		return err
	}
	for _, r := range active {
		if r.Class == ServiceStart {
			continue
		}
		offline := ""
		for _, name := range r.Hosts {
			if r.Topology == Pair && !c.online(hostByName(hosts, name), now) {
				offline = name
			}
		}
		switch {
		case offline != "":
			err = c.end(tx, r, Failed, fmt.Sprintf("host %s of the pair went offline: the pair fails as a unit (evidence kept)", offline))
		case !r.Expires.IsZero() && !now.Before(r.Expires):
			err = c.end(tx, r, Expired, "the lease expired")
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// History returns, oldest first, at most limit events after the one with
// ID after (0: from the first), each with its ID: what a mirror reads to
// catch up with the event log.
func (c *Controller) History(ctx context.Context, after int64, limit int) ([]Event, error) {
	var out []Event
	err := c.tx(ctx, func(tx Tx) error {
		var err error
		if out, err = tx.EventsSince(after, limit); err == nil {
			err = errRollback
		}
		return err
	})
	if errors.Is(err, errRollback) {
		err = nil
	}
	return out, err
}

// Lineage names the event log's timeline (Tx.Lineage): a History event's
// ID is unique within it.
func (c *Controller) Lineage(ctx context.Context) (string, error) {
	var l string
	err := c.tx(ctx, func(tx Tx) error {
		var err error
		if l, err = tx.Lineage(); err == nil {
			err = errRollback
		}
		return err
	})
	if errors.Is(err, errRollback) {
		err = nil
	}
	return l, err
}

// Events returns the newest events, for a dashboard.
func (c *Controller) Events(ctx context.Context, limit int) ([]Event, error) {
	var out []Event
	err := c.tx(ctx, func(tx Tx) error {
		var err error
		out, err = tx.Events(limit)
		if err == nil {
			err = errRollback
		}
		return err
	})
	if errors.Is(err, errRollback) {
		err = nil
	}
	return out, err
}

// Hosts returns every host's state, reading no request.
func (c *Controller) Hosts(ctx context.Context) ([]Host, error) {
	var hosts []Host
	err := c.tx(ctx, func(tx Tx) error {
		var err error
		if hosts, err = tx.Hosts(); err == nil {
			err = errRollback
		}
		return err
	})
	if errors.Is(err, errRollback) {
		err = nil
	}
	return hosts, err
}

// LiveForPR returns the queued and active requests for one pull request,
// from the queue's index by pull request and the active leases: what a
// GitHub event for the PR needs, whatever the queue's length.
func (c *Controller) LiveForPR(ctx context.Context, repo string, number int) ([]Request, error) {
	var out []Request
	err := c.tx(ctx, func(tx Tx) error {
		active, err := tx.Requests(Active)
		if err != nil {
			return err
		}
		for _, r := range active {
			if r.PR != nil && r.PR.Repo == repo && r.PR.Number == number {
				out = append(out, r)
			}
		}
		queued, err := tx.QueuedForPR(repo, number)
		if err != nil {
			return err
		}
		out = append(out, queued...)
		slices.SortFunc(out, func(a, b Request) int { return cmp.Compare(a.Seq, b.Seq) })
		return errRollback
	})
	if errors.Is(err, errRollback) {
		err = nil
	}
	return out, err
}

// Snapshot returns hosts and live requests, for status pages. It reads
// the whole queue: admission and the API use the narrower reads.
func (c *Controller) Snapshot(ctx context.Context) ([]Host, []Request, error) {
	var hosts []Host
	var reqs []Request
	err := c.tx(ctx, func(tx Tx) error {
		var err error
		if hosts, err = tx.Hosts(); err != nil {
			return err
		}
		if reqs, err = tx.Requests(Queued, Active); err != nil {
			return err
		}
		return errRollback
	})
	if errors.Is(err, errRollback) {
		err = nil
	}
	return hosts, reqs, err
}

// LastSubmitted returns when owner last submitted a request, in any state:
// a scheduler restarting reads it to tell a run it missed while down from
// one it already asked for.
func (c *Controller) LastSubmitted(ctx context.Context, owner string) (time.Time, bool, error) {
	var last time.Time
	err := c.tx(ctx, func(tx Tx) error {
		reqs, err := tx.Requests()
		if err != nil {
			return err
		}
		for _, r := range reqs {
			if r.Owner == owner && r.Submitted.After(last) {
				last = r.Submitted
			}
		}
		return errRollback
	})
	if errors.Is(err, errRollback) {
		err = nil
	}
	return last, !last.IsZero(), err
}
