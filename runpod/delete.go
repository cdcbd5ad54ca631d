package runpod

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gpugate/gpugate/runpod/rest"
)

// PodAPI is what provisioning, deletion and the reaper need from RunPod.
// *rest.Client implements it; runpodtest's server backs it in tests.
type PodAPI interface {
	CreatePod(ctx context.Context, req rest.CreatePodRequest) (*rest.Pod, error)
	GetPod(ctx context.Context, id string) (*rest.Pod, error)
	ListPods(ctx context.Context) ([]rest.Pod, error)
	DeletePod(ctx context.Context, id string) error
}

var _ PodAPI = (*rest.Client)(nil)

// ErrNotDeleted is matched by Delete's error when deletion could not be
// confirmed: the pod may still be running and billing.
var ErrNotDeleted = errors.New("runpod: pod deletion not confirmed")

// DeleteError names the pod whose deletion could not be confirmed, so that
// a job summary can report it for manual cleanup.
type DeleteError struct {
	PodID    string // empty when only the name is known
	Name     string // set when a create's outcome was unknown
	Attempts int
	Err      error // the last failure
}

// Error names the pod that may still be running and why its deletion was
// not confirmed.
func (e *DeleteError) Error() string {
	who := "pod " + e.PodID
	if e.PodID == "" {
		who = fmt.Sprintf("a pod named %q", e.Name)
	}
	return fmt.Sprintf("runpod: %s may still be running: deletion not confirmed after %d attempt(s): %v; delete it by hand", who, e.Attempts, e.Err)
}

// Unwrap returns the last failure.
func (e *DeleteError) Unwrap() error { return e.Err }

// Is matches ErrNotDeleted.
func (e *DeleteError) Is(target error) bool { return target == ErrNotDeleted }

// Delete is the shared cleanup helper: at most five DELETE attempts within
// 180 seconds (deletePolicy), each request's timeout 20 seconds capped by
// what is left. The first DELETE is sent at once, even while the client's
// shared cooldown pauses other calls; a Retry-After is then a minimum
// between attempts, capped by the client (rest.DefaultMaxRetryAfter). A
// 404 confirms deletion, so deleting an already-deleted pod succeeds. Permanent errors stop at once. After a lost response, a GET
// (after the client's cooldown) checks whether the pod is already gone. On
// failure the *DeleteError names the pod.
func Delete(ctx context.Context, api PodAPI, podID string) error {
	return deleteWith(ctx, api, podID, deletePolicy())
}

// deletePolicy is the shared cleanup budget: at most five DELETE attempts
// within 180 seconds, each request's timeout 20 seconds capped by what is
// left.
func deletePolicy() rest.RetryPolicy {
	p := rest.DefaultRetryPolicy()
	p.Deadline, p.MaxAttempts, p.InitialInterval = 180*time.Second, 5, 2*time.Second
	return p
}

// deleteWith is Delete under another budget.
func deleteWith(ctx context.Context, api PodAPI, podID string, policy rest.RetryPolicy) error {
	if err := checkPodID(podID); err != nil {
		return err
	}
	var cool func() time.Duration
	if c, ok := api.(interface{ Cooldown() time.Duration }); ok {
		// The pod's first DELETE goes out at once, whatever the shared
		// cooldown says: it is what stops the billing. Only retries wait.
		first := true
		cool = func() time.Duration {
			if first {
				first = false
				return 0
			}
			return c.Cooldown()
		}
	}
	var (
		attempts int
		last     error
	)
	err := policy.Run(ctx, cool, func(ctx context.Context, n int) error {
		attempts = n
		if n > 1 && rest.Ambiguous(last) {
			// The last response may have been lost after the pod went:
			// look before deleting again.
			p, err := api.GetPod(ctx, podID)
			switch {
			case errors.Is(err, rest.ErrNotFound):
				return nil
			case err == nil && p.Status == rest.StatusTerminated:
				return nil
			}
		}
		last = api.DeletePod(ctx, podID)
		if last == nil || errors.Is(last, rest.ErrNotFound) {
			return nil
		}
		if ctx.Err() != nil && !errors.Is(last, rest.ErrTransient) {
			// A request timed out on this attempt's own deadline: a lost
			// response, worth another look.
			last = fmt.Errorf("%w: %w", rest.ErrTransient, last)
		}
		return last
	})
	if err != nil {
		return &DeleteError{PodID: podID, Attempts: attempts, Err: err}
	}
	return nil
}

// RecordTimeout bounds the read of a pod's billing record before its
// deletion, and RecordConnectTimeout its connection ("reads the
// soon-to-be-deleted Pod record with a two-second connection timeout and
// a five-second total timeout. A missing record or failed read does not
// prevent deletion").
const (
	RecordTimeout        = 5 * time.Second
	RecordConnectTimeout = 2 * time.Second
)

// RecordBeforeDelete reads a pod's record for its cost report as a single
// GET: no retry, RecordConnectTimeout to connect, RecordTimeout in all, so
// a slow or throttled API delays the deletion by five seconds at most.
// Its error never prevents the deletion: warn, and fall back to the record
// provisioning saved (Result.Snapshot). With a PodAPI other than
// *rest.Client it is one GetPod within RecordTimeout.
func RecordBeforeDelete(ctx context.Context, api PodAPI, podID string) (*rest.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, RecordTimeout)
	defer cancel()
	if c, ok := api.(*rest.Client); ok {
		return c.GetPodOnce(ctx, podID, RecordConnectTimeout)
	}
	return api.GetPod(ctx, podID)
}

// DeleteByName resolves a pod known only by its name (Result.UnresolvedPodNames:
// a create whose response was lost while the listing failed) and deletes
// it. It lists pods within deletePolicy's budget and deletes every live pod
// with exactly that name, each with Delete. It returns nil only when the
// listing succeeded and every such pod's deletion was confirmed (none
// found: no pod was created). Otherwise the *DeleteError names the pod:
// a name is never sent as an ID, since a DELETE of it would answer 404
// and "confirm" a pod that is still billing.
func DeleteByName(ctx context.Context, api PodAPI, name string) error {
	if name == "" {
		return fmt.Errorf("runpod: DeleteByName needs the pod's name")
	}
	pods, attempts, err := listNamed(ctx, api, name)
	if err != nil {
		return &DeleteError{Name: name, Attempts: attempts, Err: err}
	}
	var errs []error
	for _, p := range pods {
		if err := Delete(ctx, api, p.ID); err != nil {
			var de *DeleteError
			if errors.As(err, &de) {
				de.Name = name
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// listNamed lists the live pods with exactly this name, retrying the
// listing within deletePolicy's budget: each try is one listing (one
// request per page, for a *rest.Client), so a Retry-After or the shared
// cooldown is waited out between tries, never inside one try's timeout.
func listNamed(ctx context.Context, api PodAPI, name string) (named []rest.Pod, attempts int, err error) {
	var pods []rest.Pod
	list := api.ListPods
	if c, ok := api.(*rest.Client); ok {
		list = c.ListPodsOnce
	}
	var cool func() time.Duration
	if c, ok := api.(interface{ Cooldown() time.Duration }); ok {
		cool = c.Cooldown
	}
	err = deletePolicy().Run(ctx, cool, func(ctx context.Context, n int) error {
		attempts = n
		var err error
		pods, err = list(ctx)
		if err != nil && !errors.Is(err, rest.ErrTransient) {
			err = fmt.Errorf("%w: %w", rest.ErrTransient, err) // listing again may work
		}
		return err
	})
	if err != nil {
		return nil, attempts, fmt.Errorf("listing pods to find it: %w", err)
	}
	for _, p := range pods {
		if p.Name == name && p.Status != rest.StatusTerminated {
			named = append(named, p)
		}
	}
	return named, attempts, nil
}

// checkPodID refuses, before any request, what is not a bare pod ID: a
// path or a query in it would address something else.
func checkPodID(id string) error {
	if id == "" || strings.ContainsAny(id, "/?#") {
		return fmt.Errorf("runpod: pod id %q: want a bare pod id", id)
	}
	return nil
}
