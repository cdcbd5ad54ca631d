package runpodtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/rest"
)

// Registry is a fake runner registry tied to a Server: the runner named in
// a pod's GPUGATE_RUNNER_NAME comes online once the pod has been RUNNING for
// the proof duration and its CUDA proof passes (configurable per GPU type
// and per runner name). It records every JIT config it minted.
type Registry struct {
	srv *Server

	mu        sync.Mutex
	proofTime time.Duration
	failGPU   map[string]bool
	failName  map[string]bool
	minted    map[string]rest.Secret
	removed   []string        // in order
	gone      map[string]bool // removed
	faults    int             // Runner lookups still to fail
}

var _ runpod.RunnerRegistry = (*Registry)(nil)

// NewRegistry returns a registry whose runners need 30 s of RUNNING to
// pass the proof.
func (s *Server) NewRegistry() *Registry {
	return &Registry{srv: s, proofTime: 30 * time.Second, failGPU: map[string]bool{}, failName: map[string]bool{}, minted: map[string]rest.Secret{},
		gone: map[string]bool{}}
}

// SetProofTime sets how long a RUNNING pod takes to pass its proof.
func (r *Registry) SetProofTime(d time.Duration) { r.mu.Lock(); r.proofTime = d; r.mu.Unlock() }

// FailProofOn makes every pod of this GPU type fail its CUDA proof: the
// container exits (as the real startup script does) and no runner appears.
func (r *Registry) FailProofOn(gpuID string) {
	r.mu.Lock()
	r.failGPU[gpuID] = true
	r.mu.Unlock()
	r.srv.SetBehavior(gpuID, Behavior{ExitAfter: r.proofTime})
}

// FailProofFor makes the pod of one runner name fail its proof silently:
// it keeps running but its runner never comes online.
func (r *Registry) FailProofFor(name string) { r.mu.Lock(); r.failName[name] = true; r.mu.Unlock() }

// FailLookups makes the next n Runner calls fail (unknown state).
func (r *Registry) FailLookups(n int) { r.mu.Lock(); r.faults = n; r.mu.Unlock() }

// Minted returns the JIT configs minted, by runner name.
func (r *Registry) Minted() map[string]rest.Secret {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]rest.Secret{}
	maps.Copy(out, r.minted)
	return out
}

// Removed returns the runner names whose registrations Remove deleted,
// in order.
func (r *Registry) Removed() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.removed)
}

// Remove deletes the registration of a minted runner: it never comes
// online after. A name never minted, or removed already, is not an
// error.
func (r *Registry) Remove(ctx context.Context, name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.minted[name]; ok && !r.gone[name] {
		r.gone[name] = true
		r.removed = append(r.removed, name)
	}
	return nil
}

// MintJIT returns a fresh random config for the name.
func (r *Registry) MintJIT(ctx context.Context, name string, labels []string) (rest.Secret, error) {
	if len(labels) == 0 {
		return "", fmt.Errorf("runpodtest: a JIT config needs at least one label")
	}
	var b [16]byte
	rand.Read(b[:])
	s := rest.Secret("jitconfig-" + hex.EncodeToString(b[:]))
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.minted[name]; dup {
		return "", fmt.Errorf("runpodtest: runner name %q was already minted: JIT configs are single-use", name)
	}
	r.minted[name] = s
	return s, nil
}

// Runner reports the runner of that exact name.
func (r *Registry) Runner(ctx context.Context, name string) (runpod.Runner, bool, error) {
	r.mu.Lock()
	if r.faults > 0 {
		r.faults--
		r.mu.Unlock()
		return runpod.Runner{}, false, fmt.Errorf("runpodtest: registry unavailable")
	}
	failName, proof := r.failName[name], r.proofTime
	jit, minted := r.minted[name]
	gone := r.gone[name]
	failGPU := maps.Clone(r.failGPU)
	r.mu.Unlock()
	if !minted || gone {
		return runpod.Runner{}, false, nil
	}
	s := r.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for _, p := range s.pods {
		if p.env[runpod.EnvRunnerName] != name || p.env[runpod.EnvJITConfig] != jit.Reveal() {
			continue
		}
		st := s.state(p, now)
		online := st.status == rest.StatusRunning && st.runtime && st.uptime >= proof && !failName && !failGPU[p.gpu.ID]
		return runpod.Runner{Name: name, Online: online, Labels: []string{name}}, true, nil
	}
	return runpod.Runner{}, false, nil
}

// PR is a fake pull request state.
type PR struct {
	mu    sync.Mutex
	state runpod.PR
	err   error
	reads int
}

var _ runpod.PRState = (*PR)(nil)

// NewPR returns an open pull request at head.
func NewPR(head string) *PR { return &PR{state: runpod.PR{Open: true, HeadSHA: head}} }

// Set changes the state; err makes Current fail (unknown state).
func (p *PR) Set(state runpod.PR, err error) { p.mu.Lock(); p.state, p.err = state, err; p.mu.Unlock() }

// Current reports the state.
func (p *PR) Current(ctx context.Context) (runpod.PR, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reads++
	return p.state, p.err
}

// Reads is how many times Current was called: each is a GitHub API
// request.
func (p *PR) Reads() int { p.mu.Lock(); defer p.mu.Unlock(); return p.reads }
