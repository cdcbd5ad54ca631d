package compileplan

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// Unit is one compile unit (a .cu file, say) with its estimated cost and
// the objects it produces.
type Unit struct {
	Name    string        `json:"name"`
	Cost    time.Duration `json:"cost"`
	Objects []string      `json:"objects,omitempty"` // default: <name>.o
}

// Object is a compiled object, named and content-digested.
type Object struct {
	Name   string `json:"name"`
	Digest string `json:"digest"`
}

// Shard is one compile job's share.
type Shard struct {
	Index    int           `json:"index"`
	Units    []string      `json:"units"`
	Cost     time.Duration `json:"cost"`
	Manifest []string      `json:"manifest"` // the objects this shard must produce
}

// ErrShards is matched by Shards' input errors.
var ErrShards = errors.New("compileplan: invalid compile units")

// Shards splits units into n balanced shards, deterministically: longest
// processing time first (ties by name) onto the least-loaded shard (ties by
// index). Adding or re-costing a small unit moves no larger one.
func Shards(units []Unit, n int) ([]Shard, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: %d shards", ErrShards, n)
	}
	seen := map[string]bool{}
	for _, u := range units {
		if u.Name == "" || seen[u.Name] || u.Cost < 0 {
			return nil, fmt.Errorf("%w: unit %q is unnamed, duplicated or has a negative cost", ErrShards, u.Name)
		}
		seen[u.Name] = true
	}
	order := slices.Clone(units)
	slices.SortFunc(order, func(a, b Unit) int { return cmp.Or(cmp.Compare(b.Cost, a.Cost), strings.Compare(a.Name, b.Name)) })
	shards := make([]Shard, n)
	for i := range shards {
		shards[i].Index = i
	}
	for _, u := range order {
		best := 0
		for i := range shards {
			if shards[i].Cost < shards[best].Cost {
				best = i
			}
		}
		s := &shards[best]
		s.Units = append(s.Units, u.Name)
		s.Cost += u.Cost
		objs := u.Objects
		if len(objs) == 0 {
			objs = []string{u.Name + ".o"}
		}
		s.Manifest = append(s.Manifest, objs...)
	}
	for i := range shards {
		slices.Sort(shards[i].Units)
		slices.Sort(shards[i].Manifest)
	}
	return shards, nil
}

// ErrObjects is matched when the link step did not reuse every shard object.
var ErrObjects = errors.New("compileplan: the link step did not reuse every shard object")

// ObjectError names what was missing, changed or rebuilt.
type ObjectError struct {
	Missing []string // in a manifest, absent at link time
	Changed []string // present with another digest: rebuilt or replaced
	Extra   []string // compiled at link time though no shard owns it
}

// Error lists the objects that were recompiled, changed, lost or built
// outside every shard.
func (e *ObjectError) Error() string {
	var parts []string
	if len(e.Missing) > 0 {
		parts = append(parts, fmt.Sprintf("missing %s", strings.Join(e.Missing, ", ")))
	}
	if len(e.Changed) > 0 {
		parts = append(parts, fmt.Sprintf("rebuilt or changed %s", strings.Join(e.Changed, ", ")))
	}
	if len(e.Extra) > 0 {
		parts = append(parts, fmt.Sprintf("compiled outside any shard %s", strings.Join(e.Extra, ", ")))
	}
	return "compileplan: the link step did not reuse every shard object (a silent full recompile): " + strings.Join(parts, "; ")
}

// Is matches ErrObjects.
func (e *ObjectError) Is(target error) bool { return target == ErrObjects }

// VerifyObjects is the link step's assertion: every object the shards
// recorded (name and digest) is present with the same digest, and nothing
// else was compiled. It fails loudly naming each difference, and when the
// manifests list no object at all.
func VerifyObjects(manifests [][]Object, present []Object) error {
	want := map[string]string{}
	for _, m := range manifests {
		for _, o := range m {
			want[o.Name] = o.Digest
		}
	}
	if len(want) == 0 {
		// Nothing to reuse proves no reuse: the shards wrote empty
		// manifests (or none arrived), and a link that compiled everything
		// itself would pass.
		return fmt.Errorf("%w: the shard manifests list no object: check that each shard compiled its units and uploaded its manifest", ErrObjects)
	}
	have := map[string]string{}
	for _, o := range present {
		have[o.Name] = o.Digest
	}
	e := &ObjectError{}
	for name, d := range want {
		switch got, ok := have[name]; {
		case !ok:
			e.Missing = append(e.Missing, name)
		case got != d:
			e.Changed = append(e.Changed, name)
		}
	}
	for name := range have {
		if _, ok := want[name]; !ok {
			e.Extra = append(e.Extra, name)
		}
	}
	if len(e.Missing)+len(e.Changed)+len(e.Extra) == 0 {
		return nil
	}
	slices.Sort(e.Missing)
	slices.Sort(e.Changed)
	slices.Sort(e.Extra)
	return e
}

// ErrSums is matched by ParseSHA256Sums errors.
var ErrSums = errors.New("compileplan: malformed sha256sum listing")

// sumsEscapes undoes GNU sha256sum's escaping of a name that holds a
// backslash, a newline or a carriage return (the line then starts with "\").
var sumsEscapes = strings.NewReplacer(`\\`, `\`, `\n`, "\n", `\r`, "\r")

// ParseSHA256Sums reads the objects of a manifest or of a link step's
// build tree as sha256sum prints them ("<64 hex>  <name>", or " *<name>" in
// binary mode, and "\<64 hex>  <escaped name>" for a name with a
// backslash, newline or carriage return), one per line; blank lines are
// skipped. Errors name the line. A name listed twice with different
// digests is an error.
func ParseSHA256Sums(r io.Reader) ([]Object, error) { return parseSums(r, "") }

// parseSums is ParseSHA256Sums with the listing named in its errors
// ("path: ", or "" for none).
func parseSums(r io.Reader, listing string) ([]Object, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	var out []Object
	seen := map[string]string{}
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		escaped := strings.HasPrefix(line, `\`)
		digest, rest, ok := strings.Cut(strings.TrimPrefix(line, `\`), " ")
		name := strings.TrimPrefix(rest, " ") // text mode: two spaces
		if name == rest {
			name = strings.TrimPrefix(rest, "*") // binary mode: " *"
		}
		if escaped {
			name = sumsEscapes.Replace(name)
		}
		if b, err := hex.DecodeString(digest); !ok || err != nil || len(b) != sha256.Size || name == "" {
			return nil, fmt.Errorf("%w: %sline %d: want \"<64 hex digits>  <file>\" as sha256sum prints it", ErrSums, listing, n)
		}
		digest = strings.ToLower(digest)
		if d, dup := seen[name]; dup && d != digest {
			return nil, fmt.Errorf("%w: %sline %d: %s is listed twice with different digests", ErrSums, listing, n, name)
		} else if dup {
			continue
		}
		seen[name] = digest
		out = append(out, Object{Name: name, Digest: digest})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s%w", ErrSums, listing, err)
	}
	return out, nil
}

// Chain is a sequential checkpoint plan.
type Chain struct {
	Links         int           `json:"links"`
	CompileBudget time.Duration `json:"compile_budget"` // each link's compile timeout
}

// ErrChain is matched when a build cannot finish within the wired chain.
var ErrChain = errors.New("compileplan: the build does not fit the checkpoint chain")

// ChainMargin is each link's reserve, within the job cap, for restoring and
// uploading the checkpoint (the whole source tree as a PAX tar).
const ChainMargin = 30 * time.Minute

// PlanChain says how many sequential checkpoint links a build of estimate
// needs when each job is capped at perJobCap (6 h on hosted runners). It is
// an error when more than maxLinks are needed: the chain that runs out loses
// its compute, since checkpoints are same-run artifacts.
func PlanChain(estimate, perJobCap time.Duration, maxLinks int) (Chain, error) {
	budget := perJobCap - ChainMargin
	if budget <= 0 || estimate < 0 || maxLinks < 1 {
		return Chain{}, fmt.Errorf("%w: job cap %s leaves no compile time after the %s checkpoint margin, or no links are wired", ErrChain, perJobCap, ChainMargin)
	}
	links := int((estimate + budget - 1) / budget)
	links = max(links, 1)
	c := Chain{Links: links, CompileBudget: budget}
	if links > maxLinks {
		return c, fmt.Errorf("%w: %s of compiling needs %d links of %s, but the chain is wired %d deep; raise the depth, shard the build, or move it to a runner without the cap", ErrChain, estimate, links, budget, maxLinks)
	}
	return c, nil
}

// CellState is one matrix cell's chain progress.
type CellState struct {
	Link int  `json:"link"`
	Done bool `json:"done"`
}

// ChainState is per matrix cell. A single "done" output shared by every
// cell is last-writer-wins and can mark an unfinished cell done; this
// cannot.
type ChainState map[string]CellState

// ErrCell is matched by MergeChainState's refusals.
var ErrCell = errors.New("compileplan: invalid chain update")

// MergeChainState applies one cell's update to the state and returns the
// new state: only that cell changes, its link never goes backwards, and a
// done cell stays done.
func MergeChainState(state ChainState, cell string, update CellState) (ChainState, error) {
	if cell == "" {
		return state, fmt.Errorf("%w: no cell name", ErrCell)
	}
	out := make(ChainState, len(state)+1)
	maps.Copy(out, state)
	cur := out[cell]
	if update.Link < cur.Link {
		return state, fmt.Errorf("%w: cell %s went from link %d back to %d", ErrCell, cell, cur.Link, update.Link)
	}
	out[cell] = CellState{Link: update.Link, Done: cur.Done || update.Done}
	return out, nil
}

// Pending lists the cells that are not done, sorted.
func (s ChainState) Pending() []string {
	var out []string
	for k, v := range s {
		if !v.Done {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// ErrChainState is matched when a chain state file cannot be read.
var ErrChainState = errors.New("compileplan: malformed chain state")

// ParseChainState reads a state file as partition chain-state writes it
// (a JSON object of cell name to {"link": N, "done": bool}). The file
// comes back from an artifact, so it is checked: a cell needs a name and a
// link of 0 or more, and nothing but the object may follow it.
func ParseChainState(data []byte) (ChainState, error) {
	s, err := decodeChainState(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrChainState, err)
	}
	return s, nil
}

// decodeChainState is ParseChainState's work; its errors say what is wrong
// without the prefix, which the caller adds with the file's name.
func decodeChainState(data []byte) (ChainState, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s ChainState
	if err := dec.Decode(&s); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value")
	}
	if s == nil {
		return nil, errors.New("want an object of cells, got null")
	}
	for cell, st := range s {
		if strings.TrimSpace(cell) == "" || st.Link < 0 {
			return nil, fmt.Errorf("cell %q at link %d: want a named cell at link 0 or more", cell, st.Link)
		}
	}
	return s, nil
}

// CombineChainStates folds the state files a chain leaves behind (one per
// cell and link, uploaded as artifacts, so no two writers share one) into
// one state: each cell at the furthest link any file records, and done
// when any file says so. The order of the files does not matter, so a
// re-run's newer file and an earlier attempt's older one combine alike.
func CombineChainStates(states ...ChainState) ChainState {
	out := ChainState{}
	for _, s := range states {
		for cell, st := range s {
			cur := out[cell]
			out[cell] = CellState{Link: max(cur.Link, st.Link), Done: cur.Done || st.Done}
		}
	}
	return out
}

// ResumePoint is where an unfinished cell's next link starts: the
// checkpoint its last link uploaded, or a fresh checkout at link 0.
type ResumePoint struct {
	Cell string `json:"cell"`
	Link int    `json:"link"`
}

// Resume lists, in the order of cells, every cell that is not done and the
// link whose checkpoint it resumes from; a cell the state does not know
// has not started (link 0). A re-run therefore continues from the furthest
// checkpoint, including the one a chain that ran out left behind, instead
// of losing that link's compute.
func (s ChainState) Resume(cells []string) []ResumePoint {
	out := []ResumePoint{}
	for _, c := range cells {
		if st := s[c]; !st.Done {
			out = append(out, ResumePoint{Cell: c, Link: st.Link})
		}
	}
	return out
}

// ErrUnfinished is matched when a chain left a cell unfinished.
var ErrUnfinished = errors.New("compileplan: the checkpoint chain did not finish every cell")

// Finished is the chain's completion check, the one a required check
// should run: nil when every cell is done, otherwise an error wrapping
// ErrUnfinished that names each unfinished cell and the link it reached.
func (s ChainState) Finished(cells []string) error {
	left := s.Resume(cells)
	if len(left) == 0 {
		return nil
	}
	parts := make([]string, len(left))
	for i, r := range left {
		parts[i] = fmt.Sprintf("%s (at link %d)", r.Cell, r.Link)
		if r.Link == 0 {
			parts[i] = r.Cell + " (never checkpointed)"
		}
	}
	return fmt.Errorf("%w: %s; re-run the failed jobs to resume each from its last checkpoint while the artifacts last, or raise the chain's depth", ErrUnfinished, strings.Join(parts, ", "))
}

// ErrBatches is matched when a dispatch cannot be batched safely.
var ErrBatches = errors.New("compileplan: cannot batch the dispatch")

// Batches splits a dispatch of jobs so that every batch clears within half
// of the queue cap (GitHub discards a job queued over 24 h) on runners
// parallel runners at typical minutes a job. It returns the batch sizes.
func Batches(jobs, runners int, typical, queueCap time.Duration) ([]int, error) {
	window := queueCap / 2
	switch {
	case jobs < 0 || runners < 1 || typical <= 0:
		return nil, fmt.Errorf("%w: %d jobs, %d runners, %s a job", ErrBatches, jobs, runners, typical)
	case typical > window:
		return nil, fmt.Errorf("%w: a typical job (%s) does not clear within half the %s queue cap", ErrBatches, typical, queueCap)
	}
	per := runners * int(window/typical)
	var out []int
	for left := jobs; left > 0; left -= per {
		out = append(out, min(left, per))
	}
	return out, nil
}
