package runpodtest

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/gpugate/gpugate/runpod"
)

// Runs is a fake of workflow runs and their debug-retention records
// (runpod.Runs and runpod.Retention).
type Runs struct {
	mu       sync.Mutex
	runs     map[int64]runpod.RunInfo
	records  map[int64][]string
	fail     map[string]int // method -> failures left
	failAll  bool
	canceled []int64
}

var (
	_ runpod.Runs      = (*Runs)(nil)
	_ runpod.Retention = (*Runs)(nil)
)

// NewRuns returns an empty fake.
func NewRuns() *Runs {
	return &Runs{runs: map[int64]runpod.RunInfo{}, records: map[int64][]string{}, fail: map[string]int{}}
}

// Set adds or replaces a run.
func (r *Runs) Set(info runpod.RunInfo) { r.mu.Lock(); r.runs[info.ID] = info; r.mu.Unlock() }

// Retain adds a retention record (an artifact name) to a run.
func (r *Runs) Retain(runID int64, name string) {
	r.mu.Lock()
	r.records[runID] = append(r.records[runID], name)
	r.mu.Unlock()
}

// FailNext makes the next n calls of method ("Run", "Cancel" or "Records")
// fail; n <= 0 clears the method's failures.
func (r *Runs) FailNext(method string, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n <= 0 {
		delete(r.fail, method)
		return
	}
	r.fail[method] += n
}

// FailAlways makes every call fail until called with false.
func (r *Runs) FailAlways(on bool) { r.mu.Lock(); r.failAll = on; r.mu.Unlock() }

// Canceled lists the runs whose cancellation was requested.
func (r *Runs) Canceled() []int64 { r.mu.Lock(); defer r.mu.Unlock(); return slices.Clone(r.canceled) }

func (r *Runs) failing(method string) error {
	if r.failAll {
		return fmt.Errorf("runpodtest: %s: GitHub unavailable", method)
	}
	if r.fail[method] > 0 {
		r.fail[method]--
		return fmt.Errorf("runpodtest: %s: GitHub unavailable", method)
	}
	return nil
}

// Run returns a run; an unknown ID is an error.
func (r *Runs) Run(ctx context.Context, runID int64) (runpod.RunInfo, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.failing("Run"); err != nil {
		return runpod.RunInfo{}, err
	}
	info, ok := r.runs[runID]
	if !ok {
		return runpod.RunInfo{}, fmt.Errorf("runpodtest: run %d not found", runID)
	}
	return info, nil
}

// Cancel records a cancellation request.
func (r *Runs) Cancel(ctx context.Context, runID int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.failing("Cancel"); err != nil {
		return err
	}
	r.canceled = append(r.canceled, runID)
	return nil
}

// Records returns a run's retention records.
func (r *Runs) Records(ctx context.Context, runID int64) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.failing("Records"); err != nil {
		return nil, err
	}
	return slices.Clone(r.records[runID]), nil
}
