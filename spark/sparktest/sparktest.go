// Package sparktest holds in-memory fakes for package spark: a Store, a
// ResidentService, preflight checks, and an admission loop for tests.
package sparktest

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/gpugate/gpugate/spark"
)

// Store is an in-memory spark.Store with all-or-nothing transactions.
type Store struct {
	mu       sync.Mutex
	hosts    map[string]spark.Host
	requests map[string]spark.Request
	events   []spark.Event
	token    int64
	seq      int64
	// Fail makes every transaction fail (the store is unavailable).
	Fail bool
}

var _ spark.Store = (*Store)(nil)

// NewStore returns an empty store.
func NewStore() *Store {
	return &Store{hosts: map[string]spark.Host{}, requests: map[string]spark.Request{}}
}

// ErrUnavailable is what a failing Store returns.
var ErrUnavailable = errors.New("sparktest: store unavailable")

type tx struct {
	hosts    map[string]spark.Host
	requests map[string]spark.Request
	events   []spark.Event
	token    int64
	seq      int64
}

// Tx runs fn on a copy and commits it only when fn succeeds.
func (s *Store) Tx(ctx context.Context, fn func(spark.Tx) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Fail {
		return ErrUnavailable
	}
	t := &tx{hosts: map[string]spark.Host{}, requests: make(map[string]spark.Request, len(s.requests)), events: s.events, token: s.token, seq: s.seq}
	maps.Copy(t.hosts, s.hosts)
	maps.Copy(t.requests, s.requests)
	if err := fn(t); err != nil {
		return err
	}
	s.hosts, s.requests, s.events, s.token, s.seq = t.hosts, t.requests, t.events, t.token, t.seq
	return nil
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
	out := make([]spark.Host, 0, len(t.hosts))
	for _, h := range t.hosts {
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b spark.Host) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out, nil
}

func (t *tx) PutHost(h spark.Host) error { t.hosts[h.Name] = h; return nil }

func (t *tx) Requests(states ...spark.State) ([]spark.Request, error) {
	var out []spark.Request
	for _, r := range t.requests {
		if len(states) == 0 || slices.Contains(states, r.State) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b spark.Request) int { return int(a.Seq - b.Seq) })
	return out, nil
}

func (t *tx) Request(id string) (spark.Request, bool, error) {
	r, ok := t.requests[id]
	return r, ok, nil
}

func (t *tx) PutRequest(r spark.Request) error { t.requests[r.ID] = r; return nil }
func (t *tx) NextToken() (int64, error)        { t.token++; return t.token, nil }
func (t *tx) NextSeq() (int64, error)          { t.seq++; return t.seq, nil }
func (t *tx) AppendEvent(e spark.Event) error {
	t.events = append(slices.Clip(t.events), e)
	return nil
}

func (t *tx) Events(limit int) ([]spark.Event, error) {
	if limit <= 0 || limit > len(t.events) {
		limit = len(t.events)
	}
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
