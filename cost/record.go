package cost

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// PodRecord is a pod's billing-relevant metadata, read from a v2 record
// (startedAt, cost) or a saved v1 record (lastStartedAt, costPerHr,
// adjustedCostPerHr).
type PodRecord struct {
	APIVersion    int        `json:"api_version"` // 1 or 2
	ID            string     `json:"id"`
	Name          string     `json:"name,omitempty"`
	GPUTypeID     string     `json:"gpu_type_id,omitempty"`
	StartedAt     *time.Time `json:"started_at"`               // nil: unknown (never replaced by createdAt)
	CreatedAt     *time.Time `json:"created_at,omitempty"`     // never used for cost
	ListPrice     float64    `json:"list_price"`               // USD/hour: v2 cost, v1 costPerHr
	AdjustedPrice float64    `json:"adjusted_price,omitempty"` // v1 adjustedCostPerHr (savings plans); 0 when unknown
}

// ErrRecord is matched by ParsePodRecord errors.
var ErrRecord = errors.New("cost: invalid pod record")

type rawRecord struct {
	ID                string               `json:"id"`
	Name              string               `json:"name"`
	StartedAt         *string              `json:"startedAt"`
	CreatedAt         *string              `json:"createdAt"`
	Cost              *float64             `json:"cost"`
	GPU               *struct{ ID string } `json:"gpu"`
	LastStartedAt     *string              `json:"lastStartedAt"`
	CostPerHr         *price               `json:"costPerHr"`
	AdjustedCostPerHr *price               `json:"adjustedCostPerHr"`
	Machine           *struct {
		GPUTypeID string `json:"gpuTypeId"`
	} `json:"machine"`
}

// price is an hourly price in a saved v1 record: a JSON number or, as
// RunPod's own v1 schema example writes costPerHr ("0.74"), a string that
// holds exactly one. Any other string is an error, never a zero price.
type price float64

func (p *price) UnmarshalJSON(data []byte) error {
	// A json.Number takes a number, or a string only if it holds a valid
	// JSON number (no sign but '-', no spaces, no "NaN" or "Inf").
	var n json.Number
	if err := json.Unmarshal(data, &n); err != nil {
		return fmt.Errorf("%s is not a price (a number, or a string holding one)", data)
	}
	f, err := n.Float64()
	if err != nil || n == "" {
		return fmt.Errorf("%s is not a price (a number, or a string holding one)", data)
	}
	*p = price(f)
	return nil
}

// ParsePodRecord reads a v2 pod record (ISO-8601 startedAt, possibly null;
// createdAt; cost; gpu.id) or a saved v1 record (lastStartedAt in Go's
// time.Time.String() format or ISO-8601, costPerHr, adjustedCostPerHr,
// each a number or a numeric string, as RunPod's v1 schema shows costPerHr).
func ParsePodRecord(data []byte) (PodRecord, error) {
	var raw rawRecord
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil {
		return PodRecord{}, fmt.Errorf("%w: %v", ErrRecord, err)
	}
	v1 := raw.CostPerHr != nil || raw.LastStartedAt != nil || raw.AdjustedCostPerHr != nil
	v2 := raw.Cost != nil || raw.StartedAt != nil
	rec := PodRecord{ID: raw.ID, Name: raw.Name}
	if raw.GPU != nil {
		rec.GPUTypeID = raw.GPU.ID
	}
	var err error
	switch {
	case v1 && v2:
		return PodRecord{}, fmt.Errorf("%w: mixes v1 (lastStartedAt, costPerHr) and v2 (startedAt, cost) fields", ErrRecord)
	case v2:
		rec.APIVersion = 2
		if raw.Cost != nil {
			rec.ListPrice = *raw.Cost
		}
		if rec.StartedAt, err = parseTime(raw.StartedAt); err != nil {
			return PodRecord{}, fmt.Errorf("%w: startedAt: %v", ErrRecord, err)
		}
	case v1:
		rec.APIVersion = 1
		if raw.CostPerHr != nil {
			rec.ListPrice = float64(*raw.CostPerHr)
		}
		if raw.AdjustedCostPerHr != nil {
			rec.AdjustedPrice = float64(*raw.AdjustedCostPerHr)
		}
		if rec.GPUTypeID == "" && raw.Machine != nil {
			rec.GPUTypeID = raw.Machine.GPUTypeID
		}
		if rec.StartedAt, err = parseTime(raw.LastStartedAt); err != nil {
			return PodRecord{}, fmt.Errorf("%w: lastStartedAt: %v", ErrRecord, err)
		}
	default:
		return PodRecord{}, fmt.Errorf("%w: neither a v2 record (startedAt, cost) nor a v1 record (lastStartedAt, costPerHr)", ErrRecord)
	}
	if rec.ListPrice < 0 || rec.AdjustedPrice < 0 {
		return PodRecord{}, fmt.Errorf("%w: negative price", ErrRecord)
	}
	if rec.CreatedAt, err = parseTime(raw.CreatedAt); err != nil {
		return PodRecord{}, fmt.Errorf("%w: createdAt: %v", ErrRecord, err)
	}
	return rec, nil
}

// goTimeString matches time.Time.String() output, with an optional
// monotonic clock reading ("m=+1.5") that is dropped.
var goTimeString = regexp.MustCompile(`^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)? [+-]\d{4} [A-Za-z0-9+-]+)(?: m=[+-]\d+\.\d+)?$`)

// parseTime reads ISO-8601 (RFC 3339) or Go's time.Time.String() format.
// A null, empty or zero time is unknown (nil).
func parseTime(s *string) (*time.Time, error) {
	if s == nil || strings.TrimSpace(*s) == "" {
		return nil, nil
	}
	v := strings.TrimSpace(*s)
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return nonZero(t), nil
	}
	if m := goTimeString.FindStringSubmatch(v); m != nil {
		if t, err := time.Parse("2006-01-02 15:04:05.999999999 -0700 MST", m[1]); err == nil {
			return nonZero(t), nil
		}
	}
	return nil, fmt.Errorf("%q is neither ISO-8601 nor Go's time format", v)
}

func nonZero(t time.Time) *time.Time {
	if t.IsZero() || t.Year() < 2000 {
		return nil
	}
	u := t.UTC()
	return &u
}

// PriceSource says which hourly price a window used.
type PriceSource string

// Price sources.
const (
	PriceAdjusted PriceSource = "adjusted" // savings-plan adjusted
	PriceList     PriceSource = "list"
	PriceUnknown  PriceSource = "unknown"
)

// Window is a pod's paid window: from its start to its confirmed deletion.
type Window struct {
	Known       bool        `json:"known"` // false when the start is unknown: cost unknown, not zero
	Start       time.Time   `json:"start,omitzero"`
	End         time.Time   `json:"end,omitzero"`
	Seconds     float64     `json:"seconds"`
	HourlyPrice float64     `json:"hourly_price"`
	PriceSource PriceSource `json:"price_source"`
	Cost        float64     `json:"cost"` // meaningful only when Known and the price is known
}

// CostKnown reports whether Cost is a real estimate.
func (w Window) CostKnown() bool { return w.Known && w.PriceSource != PriceUnknown }

// ErrWindow is matched by PaidWindow errors.
var ErrWindow = errors.New("cost: invalid paid window")

// PaidWindow is the pod's paid window: from its start to its confirmed
// deletion, at the adjusted hourly price when known, else the list price.
// An unknown start is never replaced by createdAt: the window is unknown.
func PaidWindow(rec PodRecord, deletedAt time.Time) (Window, error) {
	w := Window{PriceSource: PriceUnknown}
	switch {
	case rec.AdjustedPrice > 0:
		w.HourlyPrice, w.PriceSource = rec.AdjustedPrice, PriceAdjusted
	case rec.ListPrice > 0:
		w.HourlyPrice, w.PriceSource = rec.ListPrice, PriceList
	}
	if rec.StartedAt == nil {
		return w, nil
	}
	if deletedAt.IsZero() {
		return w, fmt.Errorf("%w: no confirmed deletion time for pod %s", ErrWindow, rec.ID)
	}
	if deletedAt.Before(*rec.StartedAt) {
		return w, fmt.Errorf("%w: pod %s deleted at %s, before its start %s", ErrWindow, rec.ID, deletedAt.Format(time.RFC3339), rec.StartedAt.Format(time.RFC3339))
	}
	w.Known, w.Start, w.End = true, *rec.StartedAt, deletedAt.UTC()
	w.Seconds = w.End.Sub(w.Start).Seconds()
	if w.PriceSource != PriceUnknown {
		w.Cost = w.Seconds / 3600 * w.HourlyPrice
	}
	return w, nil
}

// Marks are the moments that divide a paid window into stages.
type Marks struct {
	JobStarted   *time.Time `json:"job_started,omitempty"`   // the GPU test job began
	TestsStarted *time.Time `json:"tests_started,omitempty"` // the test step began
	TestsEnded   *time.Time `json:"tests_ended,omitempty"`
}

// Stage names.
const (
	StageStartup    = "startup/queue"
	StageSetup      = "test-job setup"
	StageExecution  = "test execution"
	StageCleanup    = "cleanup/queue"
	StageUnassigned = "unassigned overhead"
)

// Stage is one part of the paid window. A nil Seconds is unknown.
type Stage struct {
	Name    string   `json:"name"`
	Seconds *float64 `json:"seconds"`
	Cost    *float64 `json:"cost"`
}

// Stages divides a known window at the marks: startup/queue (start to the
// test job), test-job setup (to the tests), test execution (to their end),
// cleanup/queue (to deletion), and unassigned overhead, which reconciles
// the stages to the window exactly (including the time of any unknown
// stage). A missing or out-of-order mark makes its stages unknown, not
// zero. Nothing after the confirmed deletion (reporting) is counted.
func Stages(w Window, m Marks) []Stage {
	names := []string{StageStartup, StageSetup, StageExecution, StageCleanup}
	if !w.Known {
		out := make([]Stage, 0, 5)
		for _, n := range append(names, StageUnassigned) {
			out = append(out, Stage{Name: n})
		}
		return out
	}
	points := []*time.Time{&w.Start, m.JobStarted, m.TestsStarted, m.TestsEnded, &w.End}
	clamp := func(t *time.Time) *time.Time {
		if t == nil {
			return nil
		}
		c := *t
		if c.Before(w.Start) {
			c = w.Start
		}
		if c.After(w.End) {
			c = w.End // reporting after deletion is never counted
		}
		return &c
	}
	var last *time.Time
	for i := range points {
		points[i] = clamp(points[i])
		// An out-of-order mark is as good as missing: using it would
		// count some seconds twice.
		if points[i] != nil && last != nil && points[i].Before(*last) {
			points[i] = nil
		}
		if points[i] != nil {
			last = points[i]
		}
	}
	var out []Stage
	assigned := 0.0
	for i, n := range names {
		a, b := points[i], points[i+1]
		st := Stage{Name: n}
		if a != nil && b != nil && !b.Before(*a) {
			s := b.Sub(*a).Seconds()
			st.Seconds = &s
			assigned += s
		}
		out = append(out, st)
	}
	rest := w.Seconds - assigned
	if rest < 0 {
		rest = 0
	}
	out = append(out, Stage{Name: StageUnassigned, Seconds: &rest})
	if w.PriceSource != PriceUnknown {
		for i := range out {
			if out[i].Seconds != nil {
				c := *out[i].Seconds / 3600 * w.HourlyPrice
				out[i].Cost = &c
			}
		}
	}
	return out
}
