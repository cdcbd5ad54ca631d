package spark

import (
	"cmp"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"time"
)

// plan is one admission pass over the head of the queue, in priority
// order, then submission order.
type plan struct {
	c       *Controller
	now     time.Time
	order   []Request           // the queued requests the pass read, in admission order
	grants  map[string][]string // request -> hosts
	pending map[string]string   // request -> why it waits, for those read
	taken   map[string]Request  // host -> the request that takes or holds it
	byName  map[string]Host
	anyHost []string // the preferred host first, the resident service's last
	placed  map[string]bool
	// overdue are the queued pairs that have waited Options.PairMaxWait:
	// they go ahead of everything but development.
	overdue []Request
	// allOverdue keeps every overdue pair, for positions and listings.
	allOverdue []Request
}

// plan decides admission without writing anything. Priority is
// non-preemptive: only free hosts are placed. A pair request holds the
// free hosts it needs against lower-priority work until both are free; a
// higher-priority request may still take a held host (a waiting pair never
// blocks more important work: no priority inversion). A pair's wait is
// bounded all the same: once it has waited Options.PairMaxWait, it goes
// ahead of all work but development, so that a stream of one-host work
// cannot keep it waiting for ever.
//
// It reads the queue in admission order only while some host is still
// open to what follows: once every host is taken or unavailable it stops,
// and once the hosts left are open only to borrowers (a host draining for
// development, the service's host below the lending priority) it reads
// only borrowers. Its cost follows the hosts, not the queue's length.
func (c *Controller) plan(tx Tx) (*plan, error) {
	hosts, err := tx.Hosts()
	if err != nil {
		return nil, err
	}
	p := &plan{c: c, now: time.Now(), grants: map[string][]string{}, pending: map[string]string{},
		taken: map[string]Request{}, byName: map[string]Host{}, placed: map[string]bool{}}
	for _, h := range hosts {
		p.byName[h.Name] = h
		p.anyHost = append(p.anyHost, h.Name)
	}
	slices.SortStableFunc(p.anyHost, func(a, b string) int {
		return cmp.Or(-cmp.Compare(rank(a, c.opts.PreferredHost), rank(b, c.opts.PreferredHost)),
			cmp.Compare(rank(a, c.serviceHost()), rank(b, c.serviceHost())))
	})
	pairs, err := tx.QueuedPairs()
	if err != nil {
		return nil, err
	}
	for _, r := range pairs {
		if p.overduePair(r) {
			p.overdue = append(p.overdue, r)
		}
	}
	slices.SortFunc(p.overdue, func(a, b Request) int { return cmp.Compare(a.Seq, b.Seq) }) // all raised alike: by submission
	p.allOverdue = slices.Clone(p.overdue)
	stopped := !p.open(nil)
	if !stopped {
		err = p.merge(tx, false, func(r Request) bool {
			p.placeOverdueAhead(r)
			p.place(r)
			stopped = !p.open(&r)
			return !stopped
		})
		if err != nil {
			return nil, err
		}
	}
	if stopped && p.openToBorrowers() {
		err = p.merge(tx, true, func(r Request) bool {
			p.placeOverdueAhead(r)
			p.place(r)
			return p.openToBorrowers()
		})
		if err != nil {
			return nil, err
		}
	}
	return p, nil
}

// merge calls fn, in admission order, with the queued requests that name
// no host and those that name a host free now, until fn returns false. A
// request naming a host that is not free could take nothing: it is not
// read (its reason, when asked, is worked out alone). Each part of the
// queue comes from its own index, so the pass reads only what it places.
func (p *plan) merge(tx Tx, borrowersOnly bool, fn func(Request) bool) error {
	hosts := []string{""}
	for _, name := range p.anyHost {
		if p.free(p.byName[name]) {
			hosts = append(hosts, name)
		}
	}
	type stream struct {
		next func() (Request, bool)
		stop func()
		head Request
		ok   bool
	}
	var errs []error
	streams := make([]*stream, 0, len(hosts))
	defer func() {
		for _, s := range streams {
			s.stop()
		}
	}()
	for _, h := range hosts {
		next, stop := iter.Pull(func(yield func(Request) bool) {
			if err := tx.QueueFor(h, borrowersOnly, yield); err != nil {
				errs = append(errs, err)
			}
		})
		s := &stream{next: next, stop: stop}
		s.head, s.ok = next()
		streams = append(streams, s)
	}
	for {
		var first *stream
		for _, s := range streams {
			if s.ok && (first == nil || Before(s.head, first.head)) {
				first = s
			}
		}
		if first == nil {
			break
		}
		r := first.head
		first.head, first.ok = first.next()
		if !fn(r) {
			break
		}
	}
	for _, s := range streams {
		s.stop()
	}
	return errors.Join(errs...)
}

// free reports whether host h is available to some request at all.
func (p *plan) free(h Host) bool {
	_, held := p.taken[h.Name]
	return h.Managed && p.c.online(h, p.now) && !held && (h.Mode == Idle && h.GPUProcesses == 0 || h.Mode == ServiceRunning)
}

// open reports whether a request after last (or any request, when last is
// nil) may still be granted a host. Every later request has at most
// last's priority.
func (p *plan) open(last *Request) bool {
	for _, h := range p.byName {
		if !p.free(h) {
			continue
		}
		switch {
		case h.Draining:
		case serviceOwned(h) && last != nil && last.Priority < p.c.opts.LendMinPriority:
		default:
			return true
		}
	}
	return false
}

// openToBorrowers reports whether some host is free for a borrower.
func (p *plan) openToBorrowers() bool {
	for _, h := range p.byName {
		if p.free(h) {
			return true
		}
	}
	return false
}

// overduePair reports whether r is a pair that has waited
// Options.PairMaxWait.
func (p *plan) overduePair(r Request) bool {
	return r.Topology == Pair && !r.Submitted.IsZero() && p.now.Sub(r.Submitted) >= p.c.opts.PairMaxWait
}

// priority is r's priority in this pass: an overdue pair's is raised above
// every class but development (one above the highest other class), so it
// goes ahead of all one-host work but development's.
func (p *plan) priority(r Request) int {
	if !p.overduePair(r) {
		return r.Priority
	}
	return max(r.Priority, p.c.overduePriority)
}

// ahead reports whether a goes before b in this pass: by priority (an
// overdue pair's raised), then in submission order. It is the order the
// pass places requests in.
func (p *plan) ahead(a, b Request) bool {
	if pa, pb := p.priority(a), p.priority(b); pa != pb {
		return pa > pb
	}
	return a.Seq < b.Seq
}

// placeOverdueAhead places, in order, the overdue pairs that go before r
// in this pass and are not placed yet.
func (p *plan) placeOverdueAhead(r Request) {
	for len(p.overdue) > 0 && p.ahead(p.overdue[0], r) {
		o := p.overdue[0]
		p.overdue = p.overdue[1:]
		p.place(o)
	}
}

// place grants r the hosts it needs, or records why it waits. A request
// placed already is left as it is.
func (p *plan) place(r Request) {
	if p.placed[r.ID] {
		return
	}
	p.placed[r.ID] = true
	p.order = append(p.order, r)
	grant, hold, why := p.decide(r)
	for _, h := range append(grant, hold...) {
		p.taken[h] = r // a pair holds the free hosts it needs against lower-priority work
	}
	if grant != nil {
		p.grants[r.ID] = grant
	} else {
		p.pending[r.ID] = why
	}
}

// reason is why r waits: what the pass recorded, or, for a request it
// did not read, what the hosts look like to r after every request ahead
// of it was placed.
func (p *plan) reason(r Request) string {
	if why, ok := p.pending[r.ID]; ok {
		return why
	}
	if _, ok := p.grants[r.ID]; ok {
		return ""
	}
	_, _, why := p.decide(r)
	return why
}

// decide is what r gets from the hosts as the requests ahead of it left
// them: the hosts granted, or the hosts a waiting pair holds and why it
// waits.
func (p *plan) decide(r Request) (grant, hold []string, why string) {
	free, reasons := p.candidates(r)
	need := 1
	if r.Topology == Pair {
		need = 2
	}
	if len(free) >= need {
		return free[:need], nil, ""
	}
	if r.Topology == Pair {
		hold = free
		reasons = append(reasons, fmt.Sprintf("a pair needs both hosts; holding %s", strings.Join(free, ", ")))
	}
	if len(reasons) == 0 {
		reasons = []string{"no host is free"}
	}
	return nil, hold, strings.Join(reasons, "; ")
}

// candidates are the hosts free for r, and why each other one is not.
func (p *plan) candidates(r Request) (free, reasons []string) {
	candidates := p.anyHost
	switch {
	case r.Host != "":
		candidates = []string{r.Host}
	case r.Class == Development:
		candidates = p.c.targets(r) // the drained target(s): development waits for them
	}
	for _, name := range candidates {
		h, ok := p.byName[name]
		if !ok {
			reasons = append(reasons, fmt.Sprintf("host %s is unknown", name))
			continue
		}
		if r.Class == ServiceStart && h.Mode == ServiceRunning {
			reasons = append(reasons, "the service is already running")
			continue
		}
		if why := p.why(r, h); why != "" {
			reasons = append(reasons, why)
		} else {
			free = append(free, name)
		}
	}
	return free, reasons
}

// why explains why host h cannot take r ("" when it can). A host is
// claimed only by a request ahead of r in this pass.
func (p *plan) why(r Request, h Host) string {
	c := p.c
	claim, claimed := p.taken[h.Name]
	claimed = claimed && claim.ID != r.ID && p.ahead(claim, r)
	switch {
	case !h.Managed:
		return fmt.Sprintf("host %s is not managed", h.Name)
	case !c.online(h, p.now):
		return fmt.Sprintf("host %s is offline (no fresh heartbeat)", h.Name)
	case claimed:
		return fmt.Sprintf("host %s is claimed by request %s", h.Name, claim.ID)
	case h.Mode == Leased:
		return fmt.Sprintf("host %s is running request %s", h.Name, h.Lease)
	case h.Mode == ReleaseRequired:
		return fmt.Sprintf("host %s needs cleanup (release required)", h.Name)
	case h.Mode == Cleaning:
		return fmt.Sprintf("host %s is cleaning up after request %s", h.Name, h.Ended)
	case h.Mode == Idle && h.GPUProcesses > 0:
		return fmt.Sprintf("host %s reports %d GPU process(es) that no lease holds", h.Name, h.GPUProcesses)
	case h.Mode == Lending, h.Mode == Restoring:
		return fmt.Sprintf("host %s is %s the resident service", h.Name, map[Mode]string{Lending: "stopping", Restoring: "restoring"}[h.Mode])
	case h.Mode == OutOfService:
		return fmt.Sprintf("host %s is out of service after failed restores", h.Name)
	case h.Draining && r.Class != Development:
		return fmt.Sprintf("host %s is draining for development", h.Name)
	case h.Mode == ServiceRunning && !c.lendable(r):
		return fmt.Sprintf("host %s runs the resident service, which %s work does not borrow", h.Name, r.Class)
	case serviceOwned(h) && !c.lendable(r):
		return fmt.Sprintf("host %s is the resident service's, stopped for request %s, which %s work does not borrow", h.Name, h.Pending, r.Class)
	}
	return ""
}

// serviceOwned reports whether h is the resident service's host and no
// lease holds it: running the service, or Idle after a lending, its
// service stopped for the grant still to be made. Either way only
// lendable work borrows it.
func serviceOwned(h Host) bool {
	return h.Service && h.Lease == "" && (h.Mode == ServiceRunning || h.Mode == Idle)
}

// position is r's 1-based place in the order this pass takes the queue:
// the requests that go before it by priority (an overdue pair's raised)
// and submission.
func (p *plan) position(tx Tx, r Request) (int, error) {
	// The stored index counts by stored priority: count the requests
	// before r's place in the pass, then correct for the overdue pairs,
	// whose place in the pass is not their place in the index.
	ahead, err := tx.QueueAhead(Request{Priority: p.priority(r), Seq: r.Seq})
	if err != nil {
		return 0, err
	}
	for _, o := range p.allOverdue {
		if o.ID == r.ID {
			continue
		}
		if Before(o, Request{Priority: p.priority(r), Seq: r.Seq}) {
			ahead-- // counted by the index at its own priority
		}
		if p.ahead(o, r) {
			ahead++
		}
	}
	return ahead + 1, nil
}

// head calls fn with up to n queued requests in the order this pass
// takes them: the index's order, with the overdue pairs at their raised
// places.
func (p *plan) head(tx Tx, n int, fn func(Request)) error {
	listed := 0
	overdue := slices.Clone(p.allOverdue)
	emit := func(r Request) bool {
		fn(r)
		listed++
		return listed < n
	}
	more := true
	err := tx.Queue(false, func(r Request) bool {
		for len(overdue) > 0 && p.ahead(overdue[0], r) && more {
			more = emit(overdue[0])
			overdue = overdue[1:]
		}
		if !more {
			return false
		}
		if p.overduePair(r) {
			return true // listed at its raised place
		}
		more = emit(r)
		return more
	})
	for len(overdue) > 0 && more {
		more = emit(overdue[0])
		overdue = overdue[1:]
	}
	return err
}
