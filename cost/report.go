package cost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ReportVersion is the version of the JSON report format.
const ReportVersion = 1

// Attempt is a rejected provisioning attempt, listed apart from the
// accepted pod's window.
type Attempt struct {
	Name          string  `json:"name"`
	GPUTypeID     string  `json:"gpu_type_id"`
	Outcome       string  `json:"outcome"`
	Seconds       float64 `json:"seconds"`
	EstimatedCost float64 `json:"estimated_cost"`
}

// Report is the best-effort cost artifact written after confirmed deletion.
type Report struct {
	Version   int        `json:"version"`
	TestedRef string     `json:"tested_ref,omitempty"`
	GateKind  string     `json:"gate_kind,omitempty"` // paid, reused, failed, ...
	Outcome   string     `json:"outcome,omitempty"`   // the GPU workload's conclusion, kept even on failure
	PodID     string     `json:"pod_id,omitempty"`
	GPUTypeID string     `json:"gpu_type_id,omitempty"`
	DeletedAt *time.Time `json:"deleted_at,omitempty"` // the confirmed deletion; absent: no deletion evidence
	Window    Window     `json:"window"`
	Stages    []Stage    `json:"stages"`
	Rejected  []Attempt  `json:"rejected_attempts"`
	// Cache observations: true hit, false miss, null unknown.
	Cache map[string]*bool `json:"cache,omitempty"`
	Notes []string         `json:"notes"`
}

// ErrCacheObservations is matched by ParseCacheObservations' errors.
var ErrCacheObservations = errors.New("cost: malformed cache observations")

var cacheName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// ParseCacheObservations reads the cache-hit observations a workflow hands
// the report ("archive/cuTENSOR/CUDA cache-hit
// observations"): name=value pairs separated by commas or spaces, where
// value is actions/cache's cache-hit output: "true" is a hit, "false" a
// miss, and empty (the restore did not run) or "unknown" stays unknown,
// never a miss. Names are letters, digits, '.', '_' and '-', each given
// once. An empty string has no observations (nil).
func ParseCacheObservations(s string) (map[string]*bool, error) {
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' })
	if len(fields) == 0 {
		return nil, nil
	}
	out := make(map[string]*bool, len(fields))
	for _, f := range fields {
		name, value, ok := strings.Cut(f, "=")
		if !ok || !cacheName.MatchString(name) {
			return nil, fmt.Errorf("%w: %q: want name=true, name=false or name= (unknown)", ErrCacheObservations, f)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%w: %s is given twice", ErrCacheObservations, name)
		}
		switch value {
		case "true", "false":
			hit := value == "true"
			out[name] = &hit
		case "", "unknown":
			out[name] = nil
		default:
			return nil, fmt.Errorf("%w: %s=%q: want true, false or nothing (actions/cache's cache-hit output)", ErrCacheObservations, name, value)
		}
	}
	return out, nil
}

// Standard notes every report carries.
const (
	NoteEstimates = "These are estimates from the pod's reported hourly price, not invoices."
	NoteStorage   = "Storage (container disk and volume) charges are out of scope."
)

// NewReport builds a report for a deleted pod.
func NewReport(rec PodRecord, deletedAt time.Time, marks Marks, rejected []Attempt) (Report, error) {
	w, err := PaidWindow(rec, deletedAt)
	if err != nil {
		return Report{}, err
	}
	r := Report{Version: ReportVersion, PodID: rec.ID, GPUTypeID: rec.GPUTypeID, Window: w, Stages: Stages(w, marks), Rejected: rejected,
		Notes: []string{NoteEstimates, NoteStorage}}
	if !deletedAt.IsZero() {
		t := deletedAt.UTC()
		r.DeletedAt = &t
	}
	if !w.Known {
		r.Notes = append(r.Notes, "The pod's start time is unknown, so its paid window and cost are unknown (not zero).")
	}
	return r, nil
}

// NoteNoPod is the note of a report for a run that accepted no pod.
const NoteNoPod = "No candidate was accepted: this run paid only for its rejected candidates."

// NewRejectedReport is the report of a run that accepted no pod: its
// rejected candidates still cost money, and the history counts them.
func NewRejectedReport(rejected []Attempt) Report {
	return Report{Version: ReportVersion, Window: Window{PriceSource: PriceUnknown}, Stages: []Stage{}, Rejected: rejected,
		Notes: []string{NoteEstimates, NoteStorage, NoteNoPod}}
}

// RejectedCost sums the rejected attempts.
func (r Report) RejectedCost() float64 {
	t := 0.0
	for _, a := range r.Rejected {
		t += a.EstimatedCost
	}
	return t
}

// Outputs are the step outputs of a cleanup that wrote this report, in
// order: deleted ("true" after the confirmed deletion of the report's pod,
// "none" for a run that accepted no pod), cost (USD, six decimals) and
// cost_known. A run that accepted no pod paid nothing for one: its cost
// is zero and known, not unknown.
func (r Report) Outputs() [][2]string {
	deleted, known := "true", r.Window.CostKnown()
	if r.PodID == "" {
		deleted, known = "none", true
	}
	return [][2]string{{"deleted", deleted}, {"cost", strconv.FormatFloat(r.Window.Cost, 'f', 6, 64)}, {"cost_known", strconv.FormatBool(known)}}
}

// WriteJSON writes the report.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func money(c *float64) string {
	if c == nil {
		return "unknown"
	}
	return fmt.Sprintf("$%.4f", *c)
}

func secs(s *float64) string {
	if s == nil {
		return "unknown"
	}
	return fmt.Sprintf("%.0f s", *s)
}

// Markdown renders the job summary.
func (r Report) Markdown() string {
	var b strings.Builder
	b.WriteString("### GPU paid time\n\n")
	switch {
	case r.PodID == "":
		b.WriteString("No pod was accepted, so there is no paid window.\n\n")
	case r.Window.Known:
		price := "unknown price"
		if r.Window.PriceSource != PriceUnknown {
			price = fmt.Sprintf("$%.2f/h (%s price)", r.Window.HourlyPrice, r.Window.PriceSource)
		}
		cost := "unknown"
		if r.Window.CostKnown() {
			cost = fmt.Sprintf("$%.4f", r.Window.Cost)
		}
		fmt.Fprintf(&b, "Pod `%s` on %s: %.0f s from start to confirmed deletion at %s = **%s**.\n\n", r.PodID, r.GPUTypeID, r.Window.Seconds, price, cost)
	default:
		fmt.Fprintf(&b, "Pod `%s` on %s: the start time is unknown, so the paid window and its cost are **unknown**.\n\n", r.PodID, r.GPUTypeID)
	}
	if len(r.Stages) > 0 {
		b.WriteString("| stage | time | cost |\n| --- | --- | --- |\n")
		for _, s := range r.Stages {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", s.Name, secs(s.Seconds), money(s.Cost))
		}
	}
	if len(r.Rejected) > 0 {
		fmt.Fprintf(&b, "\nRejected provisioning attempts (separate from the window above): %d, estimated $%.4f.\n\n| runner | GPU | outcome | time | est. cost |\n| --- | --- | --- | --- | --- |\n", len(r.Rejected), r.RejectedCost())
		for _, a := range r.Rejected {
			fmt.Fprintf(&b, "| `%s` | %s | %s | %.0f s | $%.4f |\n", a.Name, a.GPUTypeID, a.Outcome, a.Seconds, a.EstimatedCost)
		}
	}
	if len(r.Cache) > 0 {
		b.WriteString("\nCache observations: ")
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(r.Cache)) {
			v := "unknown"
			if p := r.Cache[k]; p != nil {
				v = map[bool]string{true: "hit", false: "miss"}[*p]
			}
			parts = append(parts, k+" "+v)
		}
		b.WriteString(strings.Join(parts, ", ") + ".\n")
	}
	b.WriteString("\n")
	for _, n := range r.Notes {
		b.WriteString("_" + n + "_\n")
	}
	return b.String()
}

// WriteBounded writes the report to path within d and never panics: cost
// reporting is best effort and must not delay anything else. The file is
// written atomically (a temporary file, then a rename).
func WriteBounded(ctx context.Context, d time.Duration, path string, r Report) (err error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("cost: writing the report panicked: %v", p)
			}
		}()
		var b bytes.Buffer
		if err := r.WriteJSON(&b); err != nil {
			done <- fmt.Errorf("cost: write report: %w", err)
			return
		}
		done <- writeAtomic(path, b.Bytes()) // its temporary file is gone before the answer
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("cost: writing the report took longer than %s: %w", d, ctx.Err())
	}
}
