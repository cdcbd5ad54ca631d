package runpodtest

import (
	"context"
	"errors"
	"sync"

	"github.com/gpugate/gpugate/runpod"
)

// Progress is a fake GPU job whose state a test sets.
type Progress struct {
	mu    sync.Mutex
	state runpod.JobProgress
	fail  bool
	hang  bool
	reads int
}

var _ runpod.Progress = (*Progress)(nil)

// Set changes the job's state.
func (p *Progress) Set(state runpod.JobProgress) { p.mu.Lock(); p.state = state; p.mu.Unlock() }

// Fail makes JobProgress fail (unknown state) until called with false.
func (p *Progress) Fail(on bool) { p.mu.Lock(); p.fail = on; p.mu.Unlock() }

// Hang makes JobProgress block until its context ends, as a request to
// GitHub that never answers would, until called with false.
func (p *Progress) Hang(on bool) { p.mu.Lock(); p.hang = on; p.mu.Unlock() }

// JobProgress reports the state.
func (p *Progress) JobProgress(ctx context.Context) (runpod.JobProgress, error) {
	p.mu.Lock()
	hang := p.hang
	p.reads++
	p.mu.Unlock()
	if hang {
		<-ctx.Done()
		return runpod.JobProgress{}, ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fail {
		return runpod.JobProgress{}, errors.New("runpodtest: progress API unavailable")
	}
	return p.state, nil
}

// Reads is how many times JobProgress was called: each is a GitHub API
// request.
func (p *Progress) Reads() int { p.mu.Lock(); defer p.mu.Unlock(); return p.reads }
