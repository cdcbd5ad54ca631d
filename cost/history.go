package cost

import (
	"archive/zip"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-github/v66/github"

	"github.com/gpugate/gpugate/internal/cli"
	"github.com/gpugate/gpugate/internal/ghpage"
)

// RunRecord is one saved workflow run attempt.
type RunRecord struct {
	ID         int64     `json:"id"`
	Attempt    int       `json:"attempt"`
	Event      string    `json:"event"`
	HeadSHA    string    `json:"head_sha"`
	HeadBranch string    `json:"head_branch"`
	CreatedAt  time.Time `json:"created_at"`
	Status     string    `json:"status"`
	Conclusion string    `json:"conclusion"`
	URL        string    `json:"url"`
}

// CostArtifactPrefix starts the names of the cost artifacts Collect
// downloads: cost-report-<run attempt>.
const CostArtifactPrefix = "cost-report"

// MaxArtifactBytes bounds what Collect downloads: only small cost
// artifacts, never test archives.
const MaxArtifactBytes = 1 << 20

func attemptDir(dir string, id int64, attempt int) string {
	return filepath.Join(dir, "runs", fmt.Sprintf("%d-%d", id, attempt))
}

// Collect saves the evidence of every attempt of every run of workflow
// whose start falls in the inclusive UTC date range [since, until]: run
// metadata, logs, and only the small cost artifacts, into dir. It is
// resumable: what is already saved is skipped. Failures of single downloads
// are collected and returned together after everything else was saved.
func Collect(ctx context.Context, client *github.Client, repo, workflow string, since, until time.Time, dir string) error {
	owner, name, runs, err := listRuns(ctx, client, repo, workflow, since, until)
	if err != nil {
		return err
	}
	var errs []error
	for _, run := range runs {
		attempts := max(run.GetRunAttempt(), 1)
		for a := 1; a <= attempts; a++ {
			if err := saveAttempt(ctx, client, owner, name, run, a, dir); err != nil {
				errs = append(errs, err)
			}
		}
		if err := saveArtifacts(ctx, client, owner, name, run, attempts, dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// listRuns lists every run of workflow in repo (owner/name) started in
// [since, until] (UTC days). A listing longer than ghpage's bound is an
// error, never a shorter history.
func listRuns(ctx context.Context, client *github.Client, repo, workflow string, since, until time.Time) (owner, name string, runs []*github.WorkflowRun, err error) {
	owner, name, ok := cli.ParseRepo(repo)
	if !ok {
		return "", "", nil, fmt.Errorf("cost: repository %q: want owner/name", repo)
	}
	if until.Before(since) {
		return "", "", nil, fmt.Errorf("cost: until %s is before since %s", until.Format(time.DateOnly), since.Format(time.DateOnly))
	}
	opts := &github.ListWorkflowRunsOptions{
		Created:     since.UTC().Format(time.DateOnly) + ".." + until.UTC().Format(time.DateOnly),
		ListOptions: github.ListOptions{PerPage: ghpage.PerPage},
	}
	runs, err = ghpage.All(func(page int) ([]*github.WorkflowRun, *github.Response, error) {
		opts.Page = page
		res, resp, err := client.Actions.ListWorkflowRunsByFileName(ctx, owner, name, workflow, opts)
		if err != nil {
			return nil, resp, err
		}
		return res.WorkflowRuns, resp, nil
	})
	if err != nil {
		return "", "", nil, fmt.Errorf("cost: list runs of %s: %w", workflow, err)
	}
	return owner, name, runs, nil
}

// ReaperArtifactPrefix starts the names of the orphan reaper's decision
// artifacts: runpod-reap-decisions-<run id>-<attempt>.
const ReaperArtifactPrefix = "runpod-reap-decisions-"

// CollectReaper saves the orphan reaper's decision artifacts from every run
// of its workflow (e.g. runpod-reap.yml) started in [since, until], into
// dir/reaper: the independent recovery record Summarize sets beside the GPU
// workflow's own reports. Resumable like Collect.
func CollectReaper(ctx context.Context, client *github.Client, repo, workflow string, since, until time.Time, dir string) error {
	owner, name, runs, err := listRuns(ctx, client, repo, workflow, since, until)
	if err != nil {
		return err
	}
	var errs []error
	for _, run := range runs {
		d := filepath.Join(dir, "reaper", fmt.Sprintf("%d-%d", run.GetID(), max(run.GetRunAttempt(), 1)))
		if err := saveSmallArtifacts(ctx, client, owner, name, run, ReaperArtifactPrefix, func(string) string { return d }); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func saveAttempt(ctx context.Context, client *github.Client, owner, repo string, run *github.WorkflowRun, a int, dir string) error {
	d := attemptDir(dir, run.GetID(), a)
	if err := os.MkdirAll(d, 0o755); err != nil {
		return fmt.Errorf("cost: %w", err)
	}
	meta := filepath.Join(d, "run.json")
	if _, err := os.Stat(meta); err != nil {
		r := run
		if a != run.GetRunAttempt() {
			var err error
			if r, _, err = client.Actions.GetWorkflowRunAttempt(ctx, owner, repo, run.GetID(), a, nil); err != nil {
				return fmt.Errorf("cost: run %d attempt %d: %w", run.GetID(), a, err)
			}
		}
		rec := RunRecord{ID: run.GetID(), Attempt: a, Event: r.GetEvent(), HeadSHA: r.GetHeadSHA(), HeadBranch: r.GetHeadBranch(),
			CreatedAt: r.GetRunStartedAt().Time, Status: r.GetStatus(), Conclusion: r.GetConclusion(), URL: r.GetHTMLURL()}
		if rec.CreatedAt.IsZero() {
			rec.CreatedAt = r.GetCreatedAt().Time
		}
		data, _ := json.MarshalIndent(rec, "", "  ")
		if err := writeAtomic(meta, data); err != nil {
			return err
		}
	}
	logs := filepath.Join(d, "logs.zip")
	if _, err := os.Stat(logs); err == nil {
		return nil
	}
	u, _, err := client.Actions.GetWorkflowRunAttemptLogs(ctx, owner, repo, run.GetID(), a, 3)
	if err != nil {
		return fmt.Errorf("cost: logs of run %d attempt %d: %w", run.GetID(), a, err)
	}
	data, err := fetch(ctx, u.String(), 256<<20)
	if err != nil {
		return fmt.Errorf("cost: logs of run %d attempt %d: %w", run.GetID(), a, err)
	}
	return writeAtomic(logs, data)
}

// saveArtifacts downloads the run's small cost artifacts and keeps their
// JSON files, in the directory of the attempt their name names.
func saveArtifacts(ctx context.Context, client *github.Client, owner, repo string, run *github.WorkflowRun, attempts int, dir string) error {
	return saveSmallArtifacts(ctx, client, owner, repo, run, CostArtifactPrefix, func(name string) string {
		attempt := attempts
		if n, err := strconv.Atoi(strings.TrimPrefix(strings.TrimPrefix(name, CostArtifactPrefix), "-")); err == nil && n >= 1 && n <= attempts {
			attempt = n
		}
		return filepath.Join(attemptDir(dir, run.GetID(), attempt), "cost")
	})
}

// saveSmallArtifacts keeps the JSON files of the run's unexpired artifacts
// whose names start with prefix and that are at most MaxArtifactBytes, in
// the directory dest gives each; what was saved before is skipped. Every
// page of the run's artifacts is read.
func saveSmallArtifacts(ctx context.Context, client *github.Client, owner, repo string, run *github.WorkflowRun, prefix string, dest func(name string) string) error {
	opts := &github.ListOptions{PerPage: ghpage.PerPage}
	list, err := ghpage.All(func(page int) ([]*github.Artifact, *github.Response, error) {
		opts.Page = page
		arts, resp, err := client.Actions.ListWorkflowRunArtifacts(ctx, owner, repo, run.GetID(), opts)
		if err != nil {
			return nil, resp, err
		}
		return arts.Artifacts, resp, nil
	})
	if err != nil {
		return fmt.Errorf("cost: artifacts of run %d: %w", run.GetID(), err)
	}
	var errs []error
	for _, a := range list {
		if !strings.HasPrefix(a.GetName(), prefix) || a.GetSizeInBytes() > MaxArtifactBytes || a.GetExpired() {
			continue
		}
		d := dest(a.GetName())
		done := filepath.Join(d, a.GetName()+".done")
		if _, err := os.Stat(done); err == nil {
			continue
		}
		u, _, err := client.Actions.DownloadArtifact(ctx, owner, repo, a.GetID(), 3)
		if err != nil {
			errs = append(errs, fmt.Errorf("cost: artifact %s of run %d: %w", a.GetName(), run.GetID(), err))
			continue
		}
		data, err := fetch(ctx, u.String(), MaxArtifactBytes*4)
		if err == nil {
			err = extractJSON(data, d)
		}
		if err == nil {
			err = writeAtomic(done, nil)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("cost: artifact %s of run %d: %w", a.GetName(), run.GetID(), err))
		}
	}
	return errors.Join(errs...)
}

// signedURLTimeout bounds one download from a signed URL.
const signedURLTimeout = 5 * time.Minute

// signedURLs fetches the signed URLs GitHub redirects log and artifact
// downloads to (blob storage): a plain client that carries no GitHub
// token (the token has no business there, and blob storage refuses
// requests that carry one), bounded in time.
var signedURLs = &http.Client{Timeout: signedURLTimeout, Transport: http.DefaultTransport.(*http.Transport).Clone()}

// unsigned is a signed URL without its query (the signature).
func unsigned(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	u.RawQuery, u.Fragment, u.User = "", "", nil
	return u.String()
}

// fetch downloads a signed URL GitHub handed out, at most limit bytes,
// without GitHub credentials.
func fetch(ctx context.Context, u string, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := signedURLs.Do(req)
	if err != nil {
		// The URL's query is its signature: never printed.
		var ue *url.Error
		if errors.As(err, &ue) {
			return nil, fmt.Errorf("download from %s: %w", unsigned(u), ue.Err)
		}
		return nil, fmt.Errorf("download from %s: %w", unsigned(u), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("download: status %d", resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("download larger than %d bytes", limit)
	}
	return data, nil
}

func extractJSON(zipped []byte, dir string) error {
	zr, err := zip.NewReader(bytes.NewReader(zipped), int64(len(zipped)))
	if err != nil {
		return fmt.Errorf("not a zip: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range zr.File {
		if !strings.HasSuffix(f.Name, ".json") || f.UncompressedSize64 > MaxArtifactBytes {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return err
		}
		data, err := io.ReadAll(io.LimitReader(rc, MaxArtifactBytes))
		rc.Close()
		if err != nil {
			return err
		}
		if err := writeAtomic(filepath.Join(dir, filepath.Base(f.Name)), data); err != nil {
			return err
		}
	}
	return nil
}

// writeAtomic writes data to a temporary file beside path and renames it
// into place, so a reader sees the whole file or none. The temporary file
// never outlives the call, whatever fails.
func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("cost: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename there is nothing left to remove
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644) // CreateTemp makes it 0600
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("cost: write %s: %w", filepath.Base(path), err)
	}
	return nil
}

// Spend splits money by what it bought.
type Spend struct {
	Useful   float64 `json:"useful"`   // the first paid validation of each tested ref, and manual confirmations
	Rejected float64 `json:"rejected"` // rejected provisioning candidates
	Retested float64 `json:"retested"` // automatic runs that paid again for an already-paid tested ref
	Total    float64 `json:"total"`
}

func (s *Spend) add(useful, rejected, retested float64) {
	s.Useful += useful
	s.Rejected += rejected
	s.Retested += retested
	s.Total += useful + rejected + retested
}

// GPUSpend is one GPU type's spend, failures included. An excluded pod
// (ExcludedRun) is in no row: its cost is unknown, never $0.
type GPUSpend struct {
	GPU      string  `json:"gpu"`
	Pods     int     `json:"pods"`
	Accepted float64 `json:"accepted"`
	Rejected float64 `json:"rejected"`
}

// DaySpend is one UTC day. A day whose only runs are excluded
// (ExcludedRun), with no rejected candidate, is not listed: its spend is
// unknown, never $0.
type DaySpend struct {
	Day   string             `json:"day"`
	ByGPU map[string]float64 `json:"by_gpu"` // useful spend per GPU type
	Spend Spend              `json:"spend"`
}

// RefSummary is a tested ref that automatic runs paid for more than once.
type RefSummary struct {
	Ref      string  `json:"ref"`
	PaidRuns int     `json:"paid_runs"`
	Retested float64 `json:"retested_spend"`
}

// StageTotal sums one stage over the runs where it is known and whose
// paid window the spend counts: the stages add up to the accepted pods'
// spend (Spend.Total less Spend.Rejected). A run the spend leaves out
// (ExcludedRun) is left out of the stages too, and counted unknown.
type StageTotal struct {
	Stage   string  `json:"stage"`
	Seconds float64 `json:"seconds"`
	Cost    float64 `json:"cost"`
	Known   int     `json:"known_runs"`
	Unknown int     `json:"unknown_runs"`
}

// Unknowns counts missing evidence; none of it is treated as zero.
type Unknowns struct {
	NoCostReport       int `json:"no_cost_report"`
	NoLogs             int `json:"no_logs"`
	UnknownWindow      int `json:"unknown_window"`
	UnknownPrice       int `json:"unknown_price"`
	NoDeletionEvidence int `json:"no_deletion_evidence"`
}

// ExcludedRun is an accepted pod whose paid window the summary cannot
// count: no confirmed deletion, an unknown start or an unknown price. It is
// listed apart and left out of the spend, the stage totals and the GPU and
// day tables, so the stage table still adds up to the total and no GPU or
// day shows its unknown cost as $0.
type ExcludedRun struct {
	RunID   int64  `json:"run_id"`
	Attempt int    `json:"run_attempt"`
	PodID   string `json:"pod_id"`
	GPU     string `json:"gpu,omitempty"`
	Reason  string `json:"reason"`
}

// Summary is the offline cost history.
type Summary struct {
	Version            int           `json:"version"`
	Runs               int           `json:"run_attempts"`
	Automatic          int           `json:"automatic"`
	Manual             int           `json:"manual_confirmations"`
	ReusedGates        int           `json:"reused_gates"`
	RejectedCandidates int           `json:"rejected_candidates"`
	RepeatedRefs       []RefSummary  `json:"repeated_automatic_refs"`
	Spend              Spend         `json:"spend"`
	PerGPU             []GPUSpend    `json:"per_gpu"`
	PerDay             []DaySpend    `json:"per_day"`
	Stages             []StageTotal  `json:"stages"`
	Excluded           []ExcludedRun `json:"excluded_runs"` // listed apart: in neither the spend, the stages nor the GPU and day tables
	Unknown            Unknowns      `json:"unknown"`
	Reaper             *ReaperSpend  `json:"reaper,omitempty"` // present when reaper records were saved
	Notes              []string      `json:"notes"`
}

// ReaperSpend is what the orphan reaper's saved decisions record: the
// independent recovery record for pods a workflow could not confirm it
// deleted.
type ReaperSpend struct {
	Sweeps        int     `json:"sweeps"`
	Deleted       int     `json:"deleted"`        // pods the reaper confirmed deleting
	DeleteFailed  int     `json:"delete_failed"`  // pods it tried and failed to delete
	EstimatedCost float64 `json:"estimated_cost"` // of the deleted pods, from their start; an estimate
	UnknownCost   int     `json:"unknown_cost"`   // deleted pods without an estimate (start unknown)
	Recovered     int     `json:"recovered"`      // deleted pods whose workflow report had no deletion evidence
	// Retained counts the debug pods a sweep kept for inspection
	// (keep_failed_pods) that no saved sweep deleted: still billing when
	// last seen. RetainedCost is their latest estimate each (the largest,
	// as a pod's estimate only grows); RetainedUnknown those without one.
	Retained        int     `json:"retained"`
	RetainedCost    float64 `json:"retained_cost"`
	RetainedUnknown int     `json:"retained_unknown_cost"`
}

// reaperDoc is the part of a reaper decisions document (what the reap
// command writes with -out) that the history reads.
type reaperDoc struct {
	Decisions []struct {
		PodID         string   `json:"pod_id"`
		Rule          string   `json:"rule"`
		Action        string   `json:"action"`
		EstimatedCost *float64 `json:"estimated_cost"`
	} `json:"decisions"`
}

type evidence struct {
	run     RunRecord
	reports []Report
	logs    bool
}

// Summarize reads saved evidence only (no network): repeated automatic
// refs versus manual confirmations, reused gates, rejected candidates,
// per-GPU spend including failures, per-day spend, and stage totals where
// available. Missing logs, prices and deletion evidence are counted as
// unknowns, never as zero.
func Summarize(dir string) (Summary, error) {
	entries, err := os.ReadDir(filepath.Join(dir, "runs"))
	if err != nil {
		return Summary{}, fmt.Errorf("cost: no saved runs in %s: %w", dir, err)
	}
	var evs []evidence
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		d := filepath.Join(dir, "runs", e.Name())
		data, err := os.ReadFile(filepath.Join(d, "run.json"))
		if err != nil {
			return Summary{}, fmt.Errorf("cost: %s: %w", d, err)
		}
		var ev evidence
		if err := json.Unmarshal(data, &ev.run); err != nil {
			return Summary{}, fmt.Errorf("cost: %s/run.json: %w", d, err)
		}
		_, lerr := os.Stat(filepath.Join(d, "logs.zip"))
		ev.logs = lerr == nil
		err = eachJSON(filepath.Join(d, "cost", "*.json"), func(f string, data []byte) error {
			var r Report
			if err := json.Unmarshal(data, &r); err != nil || r.Version != ReportVersion {
				return fmt.Errorf("cost: %s is not a version %d cost report: %v", f, ReportVersion, err)
			}
			ev.reports = append(ev.reports, r)
			return nil
		})
		if err != nil {
			return Summary{}, err
		}
		evs = append(evs, ev)
	}
	var docs []reaperDoc
	err = eachJSON(filepath.Join(dir, "reaper", "*", "*.json"), func(f string, data []byte) error {
		var d reaperDoc
		if err := json.Unmarshal(data, &d); err != nil {
			return fmt.Errorf("cost: %s is not a reaper decisions document: %w", f, err)
		}
		docs = append(docs, d)
		return nil
	})
	if err != nil {
		return Summary{}, err
	}
	s := summarize(evs)
	if len(docs) > 0 {
		s.Reaper = reaperSpend(docs, evs)
	}
	return s, nil
}

// eachJSON hands each file pattern matches, in name order, with its
// contents, to decode.
func eachJSON(pattern string, decode func(file string, data []byte) error) error {
	files, _ := filepath.Glob(pattern) // the only error is a malformed pattern, and these are fixed
	slices.Sort(files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("cost: %w", err)
		}
		if err := decode(f, data); err != nil {
			return err
		}
	}
	return nil
}

// reaperSpend totals the reaper's deletions once per pod, and counts those
// that recover a workflow report without deletion evidence.
func reaperSpend(docs []reaperDoc, evs []evidence) *ReaperSpend {
	unconfirmed := map[string]bool{}
	for _, ev := range evs {
		for _, r := range ev.reports {
			if r.PodID != "" && r.DeletedAt == nil {
				unconfirmed[r.PodID] = true
			}
		}
	}
	rs := &ReaperSpend{Sweeps: len(docs)}
	deleted := map[string]bool{}
	retained := map[string]*float64{} // pod -> its largest estimate (nil: none known)
	for _, d := range docs {
		for _, dec := range d.Decisions {
			if dec.Rule == "retained" {
				prev, seen := retained[dec.PodID]
				if !seen || dec.EstimatedCost != nil && (prev == nil || *dec.EstimatedCost > *prev) {
					retained[dec.PodID] = dec.EstimatedCost
				}
			}
			switch {
			case dec.Action == "delete-failed":
				rs.DeleteFailed++
			case dec.Action != "deleted" || deleted[dec.PodID]:
			default:
				deleted[dec.PodID] = true
				rs.Deleted++
				if dec.EstimatedCost != nil {
					rs.EstimatedCost += *dec.EstimatedCost
				} else {
					rs.UnknownCost++
				}
				if unconfirmed[dec.PodID] {
					rs.Recovered++
				}
			}
		}
	}
	for pod, est := range retained {
		switch {
		case deleted[pod]: // its deletion's estimate counts it, retention included
		case est == nil:
			rs.Retained++
			rs.RetainedUnknown++
		default:
			rs.Retained++
			rs.RetainedCost += *est
		}
	}
	return rs
}

func summarize(evs []evidence) Summary {
	slices.SortFunc(evs, func(a, b evidence) int {
		return cmp.Or(a.run.CreatedAt.Compare(b.run.CreatedAt), cmp.Compare(a.run.ID, b.run.ID), cmp.Compare(a.run.Attempt, b.run.Attempt))
	})
	// Every list is [] when empty, never null.
	s := Summary{Version: ReportVersion, RepeatedRefs: []RefSummary{}, PerGPU: []GPUSpend{}, PerDay: []DaySpend{}, Stages: []StageTotal{}, Excluded: []ExcludedRun{}, Notes: []string{NoteEstimates, NoteStorage,
		"Compare GPU rankings only on matched workloads and revisions; totals alone do not select a GPU policy."}}
	gpus := map[string]*GPUSpend{}
	days := map[string]*DaySpend{}
	paidRefs := map[string]int{}
	retestedBy := map[string]float64{}
	stages := map[string]*StageTotal{}
	var stageOrder []string
	for _, ev := range evs {
		s.Runs++
		switch ev.run.Event {
		case "workflow_dispatch":
			s.Manual++
		default:
			s.Automatic++
		}
		if !ev.logs {
			s.Unknown.NoLogs++
		}
		if len(ev.reports) == 0 {
			s.Unknown.NoCostReport++
			continue
		}
		day := ev.run.CreatedAt.UTC().Format(time.DateOnly)
		for _, r := range ev.reports {
			if r.GateKind == "reused" {
				s.ReusedGates++
			}
			rejected := r.RejectedCost()
			s.RejectedCandidates += len(r.Rejected)
			for _, a := range r.Rejected {
				g := gpu(gpus, a.GPUTypeID)
				g.Pods++
				g.Rejected += a.EstimatedCost
			}
			accepted, excluded := 0.0, ""
			switch {
			case r.PodID == "":
			case r.DeletedAt == nil:
				s.Unknown.NoDeletionEvidence++
				excluded = "no deletion evidence: its paid window has no end"
			case !r.Window.Known:
				s.Unknown.UnknownWindow++
				excluded = "unknown start: its paid window is unknown"
			case !r.Window.CostKnown():
				s.Unknown.UnknownPrice++
				excluded = "unknown price"
			default:
				accepted = r.Window.Cost
			}
			if excluded != "" {
				s.Excluded = append(s.Excluded, ExcludedRun{RunID: ev.run.ID, Attempt: ev.run.Attempt, PodID: r.PodID, GPU: r.GPUTypeID, Reason: excluded})
			}
			// An excluded pod's cost is unknown, not zero: it is listed
			// apart, in no GPU row, and a day it alone would show is not
			// listed at $0.
			if r.PodID != "" && excluded == "" {
				g := gpu(gpus, r.GPUTypeID)
				g.Pods++
				g.Accepted += accepted
			}
			useful, retested := accepted, 0.0
			if r.GateKind == "paid" && r.TestedRef != "" && ev.run.Event != "workflow_dispatch" {
				paidRefs[r.TestedRef]++
				if paidRefs[r.TestedRef] > 1 {
					useful, retested = 0, accepted
					retestedBy[r.TestedRef] += accepted
				}
			}
			s.Spend.add(useful, rejected, retested)
			if excluded == "" || len(r.Rejected) > 0 { // a day is listed for what it is known to have paid
				ds := days[day]
				if ds == nil {
					ds = &DaySpend{Day: day, ByGPU: map[string]float64{}}
					days[day] = ds
				}
				ds.Spend.add(useful, rejected, retested)
				if useful > 0 {
					ds.ByGPU[r.GPUTypeID] += useful
				}
			}
			for _, st := range r.Stages {
				t := stages[st.Name]
				if t == nil {
					t = &StageTotal{Stage: st.Name}
					stages[st.Name] = t
					stageOrder = append(stageOrder, st.Name)
				}
				if st.Seconds == nil || excluded != "" {
					t.Unknown++ // a window the spend leaves out is left out here too
					continue
				}
				t.Known++
				t.Seconds += *st.Seconds
				if st.Cost != nil {
					t.Cost += *st.Cost
				}
			}
		}
	}
	for ref, n := range paidRefs {
		if n > 1 {
			s.RepeatedRefs = append(s.RepeatedRefs, RefSummary{Ref: ref, PaidRuns: n, Retested: retestedBy[ref]})
		}
	}
	slices.SortFunc(s.RepeatedRefs, func(a, b RefSummary) int {
		return cmp.Or(cmp.Compare(b.Retested, a.Retested), strings.Compare(a.Ref, b.Ref))
	})
	for _, g := range gpus {
		s.PerGPU = append(s.PerGPU, *g)
	}
	slices.SortFunc(s.PerGPU, func(a, b GPUSpend) int { return strings.Compare(a.GPU, b.GPU) })
	for _, d := range days {
		s.PerDay = append(s.PerDay, *d)
	}
	slices.SortFunc(s.PerDay, func(a, b DaySpend) int { return strings.Compare(a.Day, b.Day) })
	for _, n := range stageOrder {
		s.Stages = append(s.Stages, *stages[n])
	}
	return s
}

func gpu(m map[string]*GPUSpend, id string) *GPUSpend {
	if id == "" {
		id = "unknown"
	}
	g := m[id]
	if g == nil {
		g = &GPUSpend{GPU: id}
		m[id] = g
	}
	return g
}

// Markdown renders the summary.
func (s Summary) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "## GPU cost history\n\n%d run attempts: %d automatic, %d manual confirmations; %d reused gates; %d rejected candidates.\n\n", s.Runs, s.Automatic, s.Manual, s.ReusedGates, s.RejectedCandidates)
	fmt.Fprintf(&b, "| spend | USD |\n| --- | --- |\n| useful | %.2f |\n| rejected candidates | %.2f |\n| re-tested refs | %.2f |\n| **total** | **%.2f** |\n\n", s.Spend.Useful, s.Spend.Rejected, s.Spend.Retested, s.Spend.Total)
	if len(s.RepeatedRefs) > 0 {
		b.WriteString("Automatic runs that paid again for an already-validated tested ref:\n\n| tested ref | paid runs | re-tested USD |\n| --- | --- | --- |\n")
		for _, r := range s.RepeatedRefs {
			fmt.Fprintf(&b, "| `%s` | %d | %.2f |\n", r.Ref, r.PaidRuns, r.Retested)
		}
		b.WriteString("\n")
	}
	b.WriteString("| GPU | pods | accepted USD | rejected USD |\n| --- | --- | --- | --- |\n")
	for _, g := range s.PerGPU {
		fmt.Fprintf(&b, "| %s | %d | %.2f | %.2f |\n", g.GPU, g.Pods, g.Accepted, g.Rejected)
	}
	if len(s.Stages) > 0 {
		b.WriteString("\n| stage | known runs | unknown runs | seconds | USD |\n| --- | --- | --- | --- | --- |\n")
		for _, st := range s.Stages {
			fmt.Fprintf(&b, "| %s | %d | %d | %.0f | %.4f |\n", st.Stage, st.Known, st.Unknown, st.Seconds, st.Cost)
		}
		fmt.Fprintf(&b, "| rejected candidates | | | | %.4f |\n| **total** | | | | **%.4f** |\n", s.Spend.Rejected, s.Spend.Total)
	}
	if len(s.Excluded) > 0 {
		b.WriteString("\nListed apart, cost unknown, in neither the spend, the stages nor the GPU table:\n\n| run | pod | GPU | why |\n| --- | --- | --- | --- |\n")
		for _, x := range s.Excluded {
			fmt.Fprintf(&b, "| %d attempt %d | `%s` | %s | %s |\n", x.RunID, x.Attempt, x.PodID, x.GPU, x.Reason)
		}
	}
	u := s.Unknown
	fmt.Fprintf(&b, "\nUnknown (not zero): %d runs without a cost report, %d without logs, %d with an unknown start, %d with an unknown price, %d without deletion evidence.\n\n",
		u.NoCostReport, u.NoLogs, u.UnknownWindow, u.UnknownPrice, u.NoDeletionEvidence)
	if r := s.Reaper; r != nil {
		fmt.Fprintf(&b, "Orphan reaper (%d sweeps): deleted %d pods, an estimated USD %.2f (%d with an unknown start); %d deletions failed; %d of its deletions recover a run whose own report had no deletion evidence.\n\n",
			r.Sweeps, r.Deleted, r.EstimatedCost, r.UnknownCost, r.DeleteFailed, r.Recovered)
		if r.Retained > 0 {
			fmt.Fprintf(&b, "Retained for inspection and not yet deleted when last swept: %d debug pods, still billing, an estimated USD %.2f so far (%d with an unknown start). Delete them when done.\n\n",
				r.Retained, r.RetainedCost, r.RetainedUnknown)
		}
	}
	for _, n := range s.Notes {
		b.WriteString("_" + n + "_\n")
	}
	return b.String()
}
