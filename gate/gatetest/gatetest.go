// Package gatetest holds in-memory fakes of the GitHub surfaces package
// gate uses (check runs, the repository, workflow runs), for anyone's
// tests. Every fake can be told to fail.
package gatetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gpugate/gpugate/gate"
)

// ErrInjected is what a failing fake returns.
var ErrInjected = errors.New("gatetest: injected failure")

// Checks is a fake of check runs, keyed by commit.
type Checks struct {
	mu     sync.Mutex
	runs   map[string][]gate.Gate // sha -> gates
	names  map[int64]string
	shaOf  map[int64]string
	nextID int64
	Fail   bool // every call fails
	Panic  bool // ListGates panics (a programming error)
}

var _ gate.Checks = (*Checks)(nil)

// NewChecks returns an empty fake.
func NewChecks() *Checks {
	return &Checks{runs: map[string][]gate.Gate{}, names: map[int64]string{}, shaOf: map[int64]string{}}
}

// Add records an existing check run on sha and returns it with its ID.
func (c *Checks) Add(sha, name string, g gate.Gate) gate.Gate {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextID++
	if g.ID == 0 {
		g.ID = c.nextID
	}
	if g.URL == "" {
		g.URL = fmt.Sprintf("https://github.com/o/r/runs/%d", g.ID)
	}
	c.runs[sha] = append(c.runs[sha], g)
	c.names[g.ID], c.shaOf[g.ID] = name, sha
	return g
}

// ListGates lists the check runs named name on sha.
func (c *Checks) ListGates(ctx context.Context, sha, name string) ([]gate.Gate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.Panic {
		panic("gatetest: a programming error")
	}
	if c.Fail {
		return nil, ErrInjected
	}
	var out []gate.Gate
	for _, g := range c.runs[sha] {
		if c.names[g.ID] == name {
			out = append(out, g)
		}
	}
	return out, nil
}

func gateOf(p gate.Publication) gate.Gate {
	return gate.Gate{ExternalID: p.ID.String(), Status: p.Status, Conclusion: p.Conclusion, CompletedAt: p.CompletedAt}
}

// CreateGate records a new check run.
func (c *Checks) CreateGate(ctx context.Context, p gate.Publication) (gate.Gate, error) {
	if c.Fail {
		return gate.Gate{}, ErrInjected
	}
	return c.Add(p.HeadSHA, p.Name, gateOf(p)), nil
}

// UpdateGate completes an existing check run.
func (c *Checks) UpdateGate(ctx context.Context, id int64, p gate.Publication) (gate.Gate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.Fail {
		return gate.Gate{}, ErrInjected
	}
	sha := c.shaOf[id]
	for i, g := range c.runs[sha] {
		if g.ID == id {
			n := gateOf(p)
			n.ID, n.URL = id, g.URL
			c.runs[sha][i] = n
			return n, nil
		}
	}
	return gate.Gate{}, fmt.Errorf("gatetest: no check run %d", id)
}

// Published returns every check run on sha.
func (c *Checks) Published(sha string) []gate.Gate {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.runs[sha])
}

// Repo is a fake repository: roles, pull requests, refs and comments.
type Repo struct {
	mu       sync.Mutex
	Roles    map[string]string
	PRs      map[int]gate.PullRequest
	Refs     map[string]string
	Comment  map[int][]gate.Comment
	reads    map[int]int
	OnReread func(pr *gate.PullRequest) // changes the PR on its second read
	Fail     bool
	// Login is who PostComment posts as (default "maintainer").
	Login string
}

var _ gate.Repo = (*Repo)(nil)

// NewRepo returns an empty fake.
func NewRepo() *Repo {
	return &Repo{Roles: map[string]string{}, PRs: map[int]gate.PullRequest{}, Refs: map[string]string{}, Comment: map[int][]gate.Comment{}, reads: map[int]int{}}
}

// Permission returns the user's role ("none" when unknown).
func (r *Repo) Permission(ctx context.Context, user string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Fail {
		return "", ErrInjected
	}
	if role, ok := r.Roles[user]; ok {
		return role, nil
	}
	return "none", nil
}

// PullRequest returns a pull request; OnReread may change it from the
// second read on.
func (r *Repo) PullRequest(ctx context.Context, number int) (gate.PullRequest, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Fail {
		return gate.PullRequest{}, ErrInjected
	}
	pr, ok := r.PRs[number]
	if !ok {
		return gate.PullRequest{}, fmt.Errorf("gatetest: no PR #%d", number)
	}
	r.reads[number]++
	if r.reads[number] > 1 && r.OnReread != nil {
		r.OnReread(&pr)
		r.PRs[number] = pr
	}
	return pr, nil
}

// ResolveRef resolves a ref from Refs (a full SHA resolves to itself).
func (r *Repo) ResolveRef(ctx context.Context, ref string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Fail {
		return "", ErrInjected
	}
	if sha, ok := r.Refs[ref]; ok {
		return sha, nil
	}
	if gate.IsSHA(ref) {
		return ref, nil
	}
	return "", fmt.Errorf("gatetest: unknown ref %q", ref)
}

// Comments returns a PR's comments.
func (r *Repo) Comments(ctx context.Context, number int) ([]gate.Comment, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Fail {
		return nil, ErrInjected
	}
	return slices.Clone(r.Comment[number]), nil
}

// PostComment adds a comment by Login.
func (r *Repo) PostComment(ctx context.Context, number int, body string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Fail {
		return ErrInjected
	}
	login := r.Login
	if login == "" {
		login = "maintainer"
	}
	r.Comment[number] = append(r.Comment[number], gate.Comment{ID: int64(len(r.Comment[number]) + 1), Author: login, Body: body})
	return nil
}

// Workflows is a fake of workflow dispatch: each dispatch creates a run
// that completes with Conclusion after Duration.
type Workflows struct {
	mu         sync.Mutex
	Default    string
	Conclusion string        // default success
	Duration   time.Duration // default 10 minutes
	Dispatched []Dispatch
	runs       []gate.Run
	done       map[int64]time.Time
}

// Dispatch is one recorded dispatch.
type Dispatch struct {
	Workflow, Ref string
	Inputs        map[string]any
}

var _ gate.Workflows = (*Workflows)(nil)

// DefaultBranch returns Default (main when empty).
func (w *Workflows) DefaultBranch(ctx context.Context) (string, error) {
	if w.Default == "" {
		return "main", nil
	}
	return w.Default, nil
}

// Dispatch records the dispatch and starts a run.
func (w *Workflows) Dispatch(ctx context.Context, workflow, ref string, inputs map[string]any) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.Dispatched = append(w.Dispatched, Dispatch{workflow, ref, inputs})
	if w.done == nil {
		w.done = map[int64]time.Time{}
	}
	d := w.Duration
	if d == 0 {
		d = 10 * time.Minute
	}
	id := int64(1000 + len(w.runs))
	w.runs = append(w.runs, gate.Run{ID: id, Status: "queued", URL: fmt.Sprintf("https://github.com/o/r/actions/runs/%d", id), CreatedAt: time.Now()})
	w.done[id] = time.Now().Add(d)
	return nil
}

func (w *Workflows) current(r gate.Run) gate.Run {
	if !time.Now().Before(w.done[r.ID]) {
		r.Status, r.Conclusion = "completed", w.Conclusion
		if r.Conclusion == "" {
			r.Conclusion = "success"
		}
	} else {
		r.Status = "in_progress"
	}
	return r
}

// Runs lists runs created at or after since.
func (w *Workflows) Runs(ctx context.Context, workflow string, since time.Time) ([]gate.Run, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []gate.Run
	for _, r := range w.runs {
		if !r.CreatedAt.Before(since) {
			out = append(out, w.current(r))
		}
	}
	return out, nil
}

// Run returns a run.
func (w *Workflows) Run(ctx context.Context, id int64) (gate.Run, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.runs {
		if r.ID == id {
			return w.current(r), nil
		}
	}
	return gate.Run{}, fmt.Errorf("gatetest: no run %d", id)
}
