package changepolicy

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Class is a change's primary class.
type Class string

// The three classes. Anything not provably docs-only or ci-only is Code.
const (
	Code     Class = "code"
	DocsOnly Class = "docs-only"
	CIOnly   Class = "ci-only"
)

// Status is how a file changed, in GitHub's vocabulary (the pull request
// files API); FromGitDiff maps git's letters onto it.
type Status string

// File statuses. The empty Status is treated as Modified.
const (
	Added     Status = "added"
	Removed   Status = "removed"
	Modified  Status = "modified"
	Renamed   Status = "renamed"
	Copied    Status = "copied"
	Changed   Status = "changed" // type change (file to symlink, say)
	Unchanged Status = "unchanged"
)

// Change is one changed path. OldPath is set for renames and copies; both
// paths are classified.
type Change struct {
	Path    string `json:"path"`
	OldPath string `json:"old_path,omitempty"`
	Status  Status `json:"status,omitempty"`
}

// Kind is what a single path is.
type Kind string

// Path kinds.
const (
	KindCode Kind = "code"
	KindDocs Kind = "docs"
	KindCI   Kind = "ci"
)

// Rules a path can be matched by, recorded in FileDecision.Rule.
const (
	RuleCode          = "code"               // a code override
	RuleDocs          = "docs"               // a docs glob
	RuleCI            = "ci"                 // a ci glob
	RuleDeviceControl = "gpu.device_control" // a device-control glob
	RuleHostedOnly    = "gpu.hosted_only"    // a hosted-only glob
	RulePolicyFile    = "policy-file"        // the policy file itself
	RuleUnknown       = "unknown"            // no rule: code, failing safe
)

// FileDecision records why one path was classified as it was.
type FileDecision struct {
	Path          string   `json:"path"`
	Old           bool     `json:"old,omitempty"` // the source side of a rename or copy
	Status        Status   `json:"status"`
	Kind          Kind     `json:"kind"`
	Rule          string   `json:"rule"`
	Pattern       string   `json:"pattern,omitempty"` // the glob that decided, as written
	DeviceControl bool     `json:"device_control,omitempty"`
	HostedOnly    bool     `json:"hosted_only,omitempty"`
	Lanes         []string `json:"lanes,omitempty"` // lanes this path triggers
}

// Outcome says whether a required job runs or publishes an explicit success.
type Outcome string

// Job outcomes.
const (
	Run  Outcome = "run"
	NoOp Outcome = "no-op"
)

// Job is one required job's fate for this change.
type Job struct {
	Name    string  `json:"name"`
	Outcome Outcome `json:"outcome"`
	Profile string  `json:"profile,omitempty"` // set when the job runs
	Reason  string  `json:"reason"`
}

// Decision is the classification of one change.
type Decision struct {
	Class Class           `json:"class"`
	Docs  bool            `json:"docs"`
	CI    bool            `json:"ci"`
	GPU   bool            `json:"gpu"`
	Lanes map[string]bool `json:"lanes"`
	// Reason explains the class and the GPU requirement in one sentence.
	Reason string         `json:"reason"`
	Files  []FileDecision `json:"files"`
	Jobs   []Job          `json:"jobs"`
	// HeadSHA and BaseSHA are the commits the classified changes were
	// listed at (Listing.Classify); empty for a change list of no known
	// head. A decision is evidence only for its HeadSHA.
	HeadSHA      string `json:"head_sha,omitempty"`
	BaseSHA      string `json:"base_sha,omitempty"`
	MergeBaseSHA string `json:"merge_base_sha,omitempty"`
}

// ErrInvalidChange is matched by every error Classify returns for a change
// list it cannot classify. A classification failure is a validation failure:
// callers must fail the check, never fall back to a cheaper class.
var ErrInvalidChange = errors.New("changepolicy: invalid change")

// ChangeError names the change Classify refused and why.
type ChangeError struct {
	Index int // position in the change list
	Path  string
	Msg   string
}

// Error names the invalid change by its index and path.
func (e *ChangeError) Error() string {
	return fmt.Sprintf("changepolicy: invalid change %d (%q): %s", e.Index, e.Path, e.Msg)
}

// Is reports whether target is ErrInvalidChange.
func (e *ChangeError) Is(target error) bool { return target == ErrInvalidChange }

// checkPath rejects paths that cannot come from a repository diff.
func checkPath(p string) string {
	switch {
	case p == "":
		return "the path is empty"
	case strings.ContainsRune(p, 0):
		return "the path contains a NUL byte"
	case !utf8.ValidString(p):
		return "the path is not valid UTF-8"
	case strings.HasPrefix(p, "/"):
		return "the path is absolute; paths must be repository-relative"
	}
	for seg := range strings.SplitSeq(p, "/") {
		switch seg {
		case "..":
			return "the path has a '..' segment"
		case ".", "":
			return "the path is not clean (empty or '.' segment); pass paths as git prints them"
		}
	}
	return ""
}

func checkStatus(s Status) bool {
	switch s {
	case "", Added, Removed, Modified, Renamed, Copied, Changed, Unchanged:
		return true
	}
	return false
}

// Classify decides which lanes a change runs. It is pure. An empty change
// list (and so a main push classified with nil changes) is Code: every lane
// runs. Any path no rule knows is code. Bad input is an error, never a
// cheaper class.
func Classify(p *Policy, changes []Change) (Decision, error) {
	if p == nil {
		return Decision{}, fmt.Errorf("%w: nil policy", ErrInvalidPolicy)
	}
	idx := p.idx
	if idx == nil {
		if err := p.Compile(); err != nil {
			return Decision{}, err
		}
		idx = p.idx
	}
	c := classifier{p: p, idx: idx, buf: make([]setMatch, idx.sets())}
	c.d.Files = make([]FileDecision, 0, len(changes))
	for i, ch := range changes {
		if msg := checkPath(ch.Path); msg != "" {
			return Decision{}, &ChangeError{Index: i, Path: ch.Path, Msg: msg}
		}
		if !checkStatus(ch.Status) {
			return Decision{}, &ChangeError{Index: i, Path: ch.Path, Msg: fmt.Sprintf("unknown status %q", ch.Status)}
		}
		if (ch.Status == Renamed || ch.Status == Copied) && ch.OldPath == "" {
			return Decision{}, &ChangeError{Index: i, Path: ch.Path, Msg: fmt.Sprintf("a %s file needs its old path", ch.Status)}
		}
		if ch.OldPath != "" {
			if msg := checkPath(ch.OldPath); msg != "" {
				return Decision{}, &ChangeError{Index: i, Path: ch.OldPath, Msg: "old path: " + msg}
			}
			c.file(ch.OldPath, ch.Status, true)
		}
		c.file(ch.Path, ch.Status, false)
	}
	return c.decide(), nil
}

type classifier struct {
	p   *Policy
	idx *index
	buf []setMatch
	d   Decision

	firstCode, firstDocs, firstCI, firstDevice string
	hosted                                     int
	laneTrigger                                map[string]string // lane -> first trigger path
}

func (c *classifier) file(path string, st Status, old bool) {
	if st == "" {
		st = Modified
	}
	c.idx.match(path, c.buf)
	fd := FileDecision{Path: path, Old: old, Status: st}
	set := func(kind Kind, rule string, m setMatch) {
		fd.Kind, fd.Rule = kind, rule
		if m.pos >= 0 {
			fd.Pattern = c.idx.globs[m.pos].raw
		}
	}
	// The gpu lists only refine CI paths (Load refuses a glob of theirs
	// that reaches outside ci): a path no ci glob holds is classified as
	// if they did not name it.
	inCI := c.buf[setCI].member()
	device := (inCI && c.buf[setDevice].member()) || (c.p.Path != "" && path == c.p.Path)
	hosted := inCI && c.buf[setHosted].member()
	switch {
	case c.buf[setCode].member():
		set(KindCode, RuleCode, c.buf[setCode])
	case c.p.Path != "" && path == c.p.Path:
		set(KindCI, RulePolicyFile, setMatch{pos: -1})
	case device:
		set(KindCI, RuleDeviceControl, c.buf[setDevice])
	case hosted:
		set(KindCI, RuleHostedOnly, c.buf[setHosted])
	case c.buf[setCI].member():
		set(KindCI, RuleCI, c.buf[setCI])
	case c.buf[setDocs].member():
		set(KindDocs, RuleDocs, c.buf[setDocs])
	default:
		set(KindCode, RuleUnknown, setMatch{pos: -1})
	}
	fd.DeviceControl = device
	fd.HostedOnly = hosted && !device
	for i, name := range c.idx.lanes {
		if c.buf[firstLane+i].member() {
			fd.Lanes = append(fd.Lanes, name)
			if c.laneTrigger == nil {
				c.laneTrigger = map[string]string{}
			}
			if _, ok := c.laneTrigger[name]; !ok {
				c.laneTrigger[name] = path
			}
		}
	}
	first := func(s *string) {
		if *s == "" {
			*s = path
		}
	}
	switch fd.Kind {
	case KindCode:
		first(&c.firstCode)
	case KindDocs:
		first(&c.firstDocs)
	case KindCI:
		first(&c.firstCI)
	}
	// A CI path that is also documentation sets the docs flag too.
	if fd.Kind == KindCI && c.buf[setDocs].member() {
		first(&c.firstDocs)
	}
	if device {
		first(&c.firstDevice)
	}
	if fd.HostedOnly {
		c.hosted++
	}
	c.d.Files = append(c.d.Files, fd)
}

// selection is one selector's state and the sentence that explains it.
type selection struct {
	on     bool
	reason string
}

func (c *classifier) decide() Decision {
	d := c.d
	d.Lanes = make(map[string]bool, len(c.idx.lanes))
	sel := map[string]selection{SelectAlways: {true, "runs for every change"}}
	switch {
	case len(d.Files) == 0:
		d.Class = Code
		d.Reason = "empty diff: nothing proves the change is cheap, so every lane runs"
	case c.firstCode != "":
		d.Class = Code
		d.Reason = fmt.Sprintf("code path %s changed: every lane runs, GPU included", c.firstCode)
	case c.firstCI != "":
		d.Class = CIOnly
	default:
		d.Class = DocsOnly
	}
	if d.Class == Code {
		d.Docs, d.CI, d.GPU = true, true, true
		for _, name := range c.idx.lanes {
			d.Lanes[name] = true
			sel[lanePrefix+name] = selection{true, "class is code"}
		}
		sel[SelectCode] = selection{true, d.Reason}
		sel[SelectDocs] = selection{true, "class is code"}
		sel[SelectCI] = selection{true, "class is code"}
		sel[SelectGPU] = selection{true, "GPU validation required: class is code"}
		d.Jobs = c.jobs(sel)
		return d
	}
	sel[SelectCode] = selection{false, fmt.Sprintf("class is %s: no code path changed", d.Class)}
	d.Docs = c.firstDocs != ""
	if d.Docs {
		sel[SelectDocs] = selection{true, fmt.Sprintf("documentation changed (%s)", c.firstDocs)}
	} else {
		sel[SelectDocs] = selection{false, "no documentation path changed"}
	}
	d.CI = c.firstCI != ""
	if d.CI {
		sel[SelectCI] = selection{true, fmt.Sprintf("CI path changed (%s)", c.firstCI)}
	} else {
		sel[SelectCI] = selection{false, "no CI path changed"}
	}
	switch {
	case c.firstDevice != "":
		d.GPU = true
		sel[SelectGPU] = selection{true, fmt.Sprintf("GPU validation required: device-control path %s changed", c.firstDevice)}
	case d.Class == DocsOnly:
		sel[SelectGPU] = selection{false, "GPU validation not required: docs-only change"}
	case c.hosted > 0:
		sel[SelectGPU] = selection{false, "GPU validation not required: the CI-only change touches hosted-only paths of the paid lane and no device-control path"}
	default:
		sel[SelectGPU] = selection{false, "GPU validation not required: the CI-only change touches no device-control path"}
	}
	d.Reason = fmt.Sprintf("%s; %s", sel[SelectCode].reason, sel[SelectGPU].reason)
	for _, name := range c.idx.lanes {
		// Triggers select a lane for any class; the spec requires it for
		// ci-only, and running it for a docs path that is also a trigger
		// is the fail-safe direction.
		if path, ok := c.laneTrigger[name]; ok {
			d.Lanes[name] = true
			sel[lanePrefix+name] = selection{true, fmt.Sprintf("lane %s trigger %s changed", name, path)}
		} else {
			d.Lanes[name] = false
			sel[lanePrefix+name] = selection{false, fmt.Sprintf("no trigger of lane %s changed", name)}
		}
	}
	d.Jobs = c.jobs(sel)
	return d
}

// jobs lists every configured job: Run with its profile when one of its
// selectors is on, else an explicit NoOp that says why.
func (c *classifier) jobs(sel map[string]selection) []Job {
	jobs := make([]Job, 0, len(c.p.Jobs))
	for _, spec := range c.p.Jobs {
		j := Job{Name: spec.Name, Outcome: NoOp}
		var off []string
		for _, s := range spec.RunsFor {
			st := sel[s]
			if st.on {
				j.Outcome, j.Profile, j.Reason = Run, spec.Profile, st.reason
				break
			}
			off = append(off, st.reason)
		}
		if j.Outcome == NoOp {
			j.Reason = "explicit success: " + strings.Join(off, "; ")
		}
		jobs = append(jobs, j)
	}
	return jobs
}
