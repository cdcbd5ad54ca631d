// Package sparktest holds in-memory fakes for package spark: a Store, a
// ResidentService, preflight checks, and an admission loop for tests.
package sparktest

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpugate/gpugate/spark"
)

// Store is an in-memory spark.Store with all-or-nothing transactions.
// A transaction writes into an overlay that is applied when it commits,
// and the queue is kept in admission order, so a transaction's cost
// follows what it reads and writes, not the store's size.
type Store struct {
	mu       sync.Mutex
	hosts    map[string]spark.Host
	requests map[string]spark.Request
	queue    []qkey // the queued requests, in admission order
	// byHost is the queue by the host its requests name ("" for none).
	byHost map[string][]qkey
	pairs  map[string]bool // the queued pairs' IDs
	// the queued requests' IDs by class and by pull request, and every
	// request's by state
	byClass map[spark.Class]map[string]bool
	byPR    map[prKey]map[string]bool
	byState map[spark.State]map[string]bool
	events  []spark.Event
	token   int64
	seq     int64
	lineage string // random: each store is its own event log
	// Fail makes every transaction fail (the store is unavailable).
	Fail bool
}

var _ spark.Store = (*Store)(nil)

// NewStore returns an empty store.
func NewStore() *Store {
	b := make([]byte, 8)
	rand.Read(b)
	return &Store{hosts: map[string]spark.Host{}, requests: map[string]spark.Request{}, lineage: hex.EncodeToString(b),
		byClass: map[spark.Class]map[string]bool{}, byPR: map[prKey]map[string]bool{}, byState: map[spark.State]map[string]bool{},
		byHost: map[string][]qkey{}, pairs: map[string]bool{}}
}

// qkey is a queued request's place in admission order.
type qkey struct {
	priority int
	seq      int64
	id       string
}

func keyOf(r spark.Request) qkey { return qkey{r.Priority, r.Seq, r.ID} }

// admission orders keys in admission order.
func admission(a, b qkey) int {
	return cmp.Or(cmp.Compare(b.priority, a.priority), cmp.Compare(a.seq, b.seq), strings.Compare(a.id, b.id))
}

type prKey struct {
	repo   string
	number int
}

// index adds (or, with !add, removes) queued r to the class and pull
// request indexes.
func (s *Store) index(r spark.Request, add bool) {
	set := func(m map[string]bool) {
		if add {
			m[r.ID] = true
		} else {
			delete(m, r.ID)
		}
	}
	if s.byClass[r.Class] == nil {
		s.byClass[r.Class] = map[string]bool{}
	}
	set(s.byClass[r.Class])
	if r.PR != nil {
		k := prKey{r.PR.Repo, r.PR.Number}
		if s.byPR[k] == nil {
			s.byPR[k] = map[string]bool{}
		}
		set(s.byPR[k])
	}
}

// ErrUnavailable is what a failing Store returns.
var ErrUnavailable = errors.New("sparktest: store unavailable")

type tx struct {
	s      *Store
	hosts  map[string]spark.Host
	writes map[string]spark.Request // requests written in this transaction
	events []spark.Event
	token  int64
	seq    int64
}

// Tx runs fn on an overlay and commits it only when fn succeeds.
func (s *Store) Tx(ctx context.Context, fn func(spark.Tx) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Fail {
		return ErrUnavailable
	}
	t := &tx{s: s, hosts: maps.Clone(s.hosts), writes: map[string]spark.Request{}, events: s.events, token: s.token, seq: s.seq}
	if err := fn(t); err != nil {
		return err
	}
	s.commit(t.writes)
	s.hosts, s.events, s.token, s.seq = t.hosts, t.events, t.token, t.seq
	return nil
}

// commit applies a transaction's writes. A few writes move their
// requests within the queue; many rebuild it.
func (s *Store) commit(writes map[string]spark.Request) {
	rebuild := len(writes) > 64 && len(writes) > len(s.queue)/8
	for id, r := range writes {
		if old, ok := s.requests[id]; ok {
			delete(s.byState[old.State], id)
		}
		if s.byState[r.State] == nil {
			s.byState[r.State] = map[string]bool{}
		}
		s.byState[r.State][id] = true
		if old, ok := s.requests[id]; ok && old.State == spark.Queued {
			s.index(old, false)
			delete(s.pairs, id)
			if !rebuild {
				i, _ := slices.BinarySearchFunc(s.queue, keyOf(old), admission)
				s.queue = slices.Delete(s.queue, i, i+1)
				hq := s.byHost[old.Host]
				j, _ := slices.BinarySearchFunc(hq, keyOf(old), admission)
				s.byHost[old.Host] = slices.Delete(hq, j, j+1)
			}
		}
		s.requests[id] = r
		if r.State == spark.Queued {
			s.index(r, true)
			if r.Topology == spark.Pair {
				s.pairs[id] = true
			}
			if !rebuild {
				i, _ := slices.BinarySearchFunc(s.queue, keyOf(r), admission)
				s.queue = slices.Insert(s.queue, i, keyOf(r))
				hq := s.byHost[r.Host]
				j, _ := slices.BinarySearchFunc(hq, keyOf(r), admission)
				s.byHost[r.Host] = slices.Insert(hq, j, keyOf(r))
			}
		}
	}
	if rebuild {
		s.queue = s.queue[:0]
		s.byHost = map[string][]qkey{}
		for _, r := range s.requests {
			if r.State == spark.Queued {
				s.queue = append(s.queue, keyOf(r))
				s.byHost[r.Host] = append(s.byHost[r.Host], keyOf(r))
			}
		}
		slices.SortFunc(s.queue, admission)
		for h := range s.byHost {
			slices.SortFunc(s.byHost[h], admission)
		}
	}
}

// SetFail sets Fail while other goroutines may be in a transaction.
func (s *Store) SetFail(fail bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Fail = fail
}

// Close does nothing.
func (s *Store) Close() error { return nil }

func (t *tx) Hosts() ([]spark.Host, error) {
	out := slices.Collect(maps.Values(t.hosts))
	slices.SortFunc(out, func(a, b spark.Host) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (t *tx) PutHost(h spark.Host) error { t.hosts[h.Name] = h; return nil }

// each calls fn with every request as this transaction sees it.
func (t *tx) each(fn func(spark.Request)) {
	for id, r := range t.s.requests {
		if _, ok := t.writes[id]; !ok {
			fn(r)
		}
	}
	for _, r := range t.writes {
		fn(r)
	}
}

func bySeq(rs []spark.Request) []spark.Request {
	slices.SortFunc(rs, func(a, b spark.Request) int { return cmp.Compare(a.Seq, b.Seq) })
	return rs
}

func (t *tx) Requests(states ...spark.State) ([]spark.Request, error) {
	var out []spark.Request
	if len(states) == 0 {
		t.each(func(r spark.Request) { out = append(out, r) })
		return bySeq(out), nil
	}
	for _, st := range states {
		out = append(out, t.indexed(t.s.byState[st], func(r spark.Request) bool { return r.State == st })...)
	}
	return bySeq(out), nil
}

// queued calls fn with each queued request this transaction sees, in
// admission order, until fn returns false: the committed queue merged
// with the ones this transaction queued.
func (t *tx) queued(fn func(spark.Request) bool) {
	t.queuedIn(t.s.queue, func(spark.Request) bool { return true }, fn)
}

// queuedIn is queued over a committed index (keys, in admission order)
// and this transaction's queued writes that match its condition.
func (t *tx) queuedIn(keys []qkey, match func(spark.Request) bool, fn func(spark.Request) bool) {
	var mine []spark.Request
	for _, r := range t.writes {
		if r.State == spark.Queued && match(r) {
			mine = append(mine, r)
		}
	}
	slices.SortFunc(mine, func(a, b spark.Request) int { return admission(keyOf(a), keyOf(b)) })
	for _, k := range keys {
		if _, ok := t.writes[k.id]; ok {
			continue // this transaction's version is in mine, or it left the queue
		}
		r := t.s.requests[k.id]
		for len(mine) > 0 && spark.Before(mine[0], r) {
			if !fn(mine[0]) {
				return
			}
			mine = mine[1:]
		}
		if !fn(r) {
			return
		}
	}
	for _, r := range mine {
		if !fn(r) {
			return
		}
	}
}

func (t *tx) Queue(borrowersOnly bool, fn func(spark.Request) bool) error {
	t.queued(func(r spark.Request) bool { return (borrowersOnly && !spark.Borrower(r)) || fn(r) })
	return nil
}

// QueueFor walks the host's own queue (borrowersOnly filters it: every
// request naming a host is a borrower, and for "" only development and
// pairs are).
func (t *tx) QueueFor(host string, borrowersOnly bool, fn func(spark.Request) bool) error {
	t.queuedIn(t.s.byHost[host], func(r spark.Request) bool { return r.Host == host }, func(r spark.Request) bool {
		if borrowersOnly && !spark.Borrower(r) {
			return true
		}
		return fn(r)
	})
	return nil
}

func (t *tx) QueuedPairs() ([]spark.Request, error) {
	return t.indexed(t.s.pairs, func(r spark.Request) bool { return r.State == spark.Queued && r.Topology == spark.Pair }), nil
}

func (t *tx) QueuedOf(class spark.Class) ([]spark.Request, error) {
	return t.indexed(t.s.byClass[class], func(r spark.Request) bool { return r.State == spark.Queued && r.Class == class }), nil
}

func (t *tx) QueuedForPR(repo string, number int) ([]spark.Request, error) {
	return t.indexed(t.s.byPR[prKey{repo, number}], func(r spark.Request) bool {
		return r.State == spark.Queued && r.PR != nil && r.PR.Repo == repo && r.PR.Number == number
	}), nil
}

// indexed lists, in submission order, the requests this transaction sees
// among the committed ones in ids (an index) and its own writes for which
// match (the index's condition) is true.
func (t *tx) indexed(ids map[string]bool, match func(spark.Request) bool) []spark.Request {
	var out []spark.Request
	for id := range ids {
		if _, ok := t.writes[id]; !ok {
			out = append(out, t.s.requests[id])
		}
	}
	for _, r := range t.writes {
		if match(r) {
			out = append(out, r)
		}
	}
	return bySeq(out)
}

func (t *tx) QueueLen() (int, error) {
	n := len(t.s.queue)
	for id, r := range t.writes {
		if old, ok := t.s.requests[id]; ok && old.State == spark.Queued {
			n--
		}
		if r.State == spark.Queued {
			n++
		}
	}
	return n, nil
}

func (t *tx) QueueAhead(r spark.Request) (int, error) {
	n, _ := slices.BinarySearchFunc(t.s.queue, keyOf(r), admission)
	for id, w := range t.writes {
		if old, ok := t.s.requests[id]; ok && old.State == spark.Queued && spark.Before(old, r) {
			n--
		}
		if w.State == spark.Queued && w.ID != r.ID && spark.Before(w, r) {
			n++
		}
	}
	return n, nil
}

func (t *tx) Request(id string) (spark.Request, bool, error) {
	if r, ok := t.writes[id]; ok {
		return r, true, nil
	}
	r, ok := t.s.requests[id]
	return r, ok, nil
}

func (t *tx) PutRequest(r spark.Request) error { t.writes[r.ID] = r; return nil }
func (t *tx) NextToken() (int64, error)        { t.token++; return t.token, nil }
func (t *tx) NextSeq() (int64, error)          { t.seq++; return t.seq, nil }
func (t *tx) AppendEvent(e spark.Event) error {
	t.events = append(slices.Clip(t.events), e)
	return nil
}

func (t *tx) EventsSince(after int64, limit int) ([]spark.Event, error) {
	limit = spark.EventLimit(limit)
	var out []spark.Event
	for i := max(after, 0); i < int64(len(t.events)) && len(out) < limit; i++ {
		e := t.events[i]
		e.ID = i + 1
		out = append(out, e)
	}
	return out, nil
}

func (t *tx) Lineage() (string, error) { return t.s.lineage, nil }

func (t *tx) Events(limit int) ([]spark.Event, error) {
	limit = min(spark.EventLimit(limit), len(t.events))
	return slices.Clone(t.events[len(t.events)-limit:]), nil
}

// Service is a fake resident service.
type Service struct {
	mu         sync.Mutex
	Running    bool
	HoldsGPU   bool
	FailStop   bool
	FailHealth int // the next n health checks fail
	Calls      []string
}

var _ spark.ResidentService = (*Service)(nil)

func (s *Service) call(name string) {
	s.mu.Lock()
	s.Calls = append(s.Calls, name)
	s.mu.Unlock()
}

// Drain stops taking new work.
func (s *Service) Drain(context.Context) error { s.call("drain"); return nil }

// Stop stops the service; with FailStop it does not release the GPU.
func (s *Service) Stop(context.Context) error {
	s.call("stop")
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.FailStop {
		return errors.New("sparktest: the service did not stop")
	}
	s.Running, s.HoldsGPU = false, false
	return nil
}

// VerifyReleased fails while the service holds the GPU.
func (s *Service) VerifyReleased(context.Context) error {
	s.call("verify")
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.HoldsGPU {
		return errors.New("sparktest: the GPU is still allocated (a pause is not a release)")
	}
	return nil
}

// Start starts the service.
func (s *Service) Start(context.Context) error {
	s.call("start")
	s.mu.Lock()
	s.Running, s.HoldsGPU = true, true
	s.mu.Unlock()
	return nil
}

// Healthy is the model-ready check.
func (s *Service) Healthy(context.Context) error {
	s.call("health")
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.FailHealth > 0 {
		s.FailHealth--
		return errors.New("sparktest: the model is not ready")
	}
	return nil
}

// CallsSnapshot returns the calls made so far.
func (s *Service) CallsSnapshot() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.Calls)
}

// Checks are fake preflight checks.
type Checks struct {
	Apps       []string
	AppsErr    error
	FreeBytes  uint64
	LinkErr    error
	ServiceErr error
}

// ComputeApps returns Apps.
func (c *Checks) ComputeApps(context.Context) ([]string, error) { return c.Apps, c.AppsErr }

// Free returns FreeBytes.
func (c *Checks) Free(string) (uint64, error) { return c.FreeBytes, nil }

// Check returns LinkErr.
func (c *Checks) Check(context.Context) error { return c.LinkErr }

// Released returns ServiceErr.
func (c *Checks) Released(context.Context) error { return c.ServiceErr }

// Admit is one round of a controller's admission for a test: the hosts
// report in (a clean heartbeat each) and the controller reconciles.
func Admit(ctx context.Context, c *spark.Controller, hosts ...string) {
	for _, h := range hosts {
		c.Heartbeat(ctx, spark.HostReport{Host: h})
	}
	c.Reconcile(ctx)
}

// RunAdmission runs Admit every period until ctx ends. Run it in its own
// goroutine; inside a testing/synctest bubble its period is the bubble's
// time.
func RunAdmission(ctx context.Context, c *spark.Controller, every time.Duration, hosts ...string) {
	t := time.NewTicker(every)
	defer t.Stop()
	for ctx.Err() == nil {
		Admit(ctx, c, hosts...)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
}
