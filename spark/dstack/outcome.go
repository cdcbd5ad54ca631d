package dstack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"unicode"

	"github.com/gpugate/gpugate/spark"
)

// Outcome sentinels.
var (
	// ErrRunGone: the lease's run does not exist in dstack (deleted, or
	// never submitted under its name). What it ran is unknown, so it
	// never counts as a pass.
	ErrRunGone = errors.New("dstack: the lease's run is gone")
	// ErrNoReceipt: the run's standard output does not end with an
	// evidence receipt: a last line that is one JSON object of at most
	// spark.MaxReceipt bytes.
	ErrNoReceipt = errors.New("dstack: the run's output ends with no evidence receipt")
)

// Outcome is how a lease's run stands, as Judge reads it.
type Outcome struct {
	Run Run
	// Finished: the run has ended (terminated, failed or done). An
	// unknown status is not finished.
	Finished bool
	// Succeeded: the run finished successfully: status done with
	// termination reason all_jobs_done, and each of the lease's nodes a
	// job that is done on one of the leased hosts. Nothing else is a
	// success: not a stopped or aborted run, not a failed one, not one
	// whose jobs ran elsewhere or are missing.
	Succeeded bool
	// Reason, for a finished run that did not succeed, says why: the
	// status and termination reason, and each job that did not end done,
	// e.g. "failed (job_failed); job 0 failed: container_exited_with_error".
	Reason string
}

// Result reads the run of lease (ErrRunGone when it does not exist;
// ErrConflict when the run of that name is not the lease's) and judges it.
func (b *Backend) Result(ctx context.Context, lease LeaseWork) (Outcome, error) {
	name := b.RunName(lease.LeaseID)
	r, err := b.c.GetRun(ctx, name)
	switch {
	case errors.Is(err, ErrNotFound):
		return Outcome{}, fmt.Errorf("%w: lease %s's run %s: %w", ErrRunGone, lease.LeaseID, name, err)
	case err != nil:
		return Outcome{}, fmt.Errorf("dstack: lease %s: read run %s: %w", lease.LeaseID, name, err)
	case r.Env[EnvLeaseID] != lease.LeaseID || !slices.Contains(r.Fleets, b.cfg.Fleet):
		return Outcome{}, fmt.Errorf("%w: run %s is not lease %s's run in fleet %s", ErrConflict, name, lease.LeaseID, b.cfg.Fleet)
	}
	return b.Judge(r, lease), nil
}

// Judge reads run r of lease (see Outcome). It reads nothing but r.
func (b *Backend) Judge(r Run, lease LeaseWork) Outcome {
	o := Outcome{Run: r, Finished: r.Status.Finished()}
	if !o.Finished {
		return o
	}
	nodes := 1
	if lease.Topology == spark.Pair {
		nodes = 2
	}
	leased := map[string]bool{}
	for _, h := range lease.Hosts {
		leased[strings.ToLower(b.hostname(h))] = true
	}
	var why []string
	if r.Status != RunDone || r.TerminationReason != ReasonAllJobsDone {
		end := string(r.Status)
		if r.TerminationReason != "" {
			end += " (" + r.TerminationReason + ")"
		}
		why = append(why, end)
	}
	if len(r.Jobs) != nodes {
		why = append(why, fmt.Sprintf("%d jobs for %d leased nodes", len(r.Jobs), nodes))
	}
	seen := map[string]bool{}
	for _, j := range r.Jobs {
		host := strings.ToLower(j.Hostname)
		switch {
		case j.Status != JobDone:
			why = append(why, fmt.Sprintf("job %d %s: %s", j.Num, j.Status, j.TerminationReason))
		case !leased[host] || seen[host]:
			why = append(why, fmt.Sprintf("job %d ran on %q, not on a leased host of its own", j.Num, j.Hostname))
		}
		seen[host] = true
	}
	if len(why) == 0 {
		o.Succeeded = true
		return o
	}
	o.Reason = strings.Join(why, "; ")
	return o
}

// maxLogPages bounds the pages Receipt reads back from the end.
const maxLogPages = 64

// Receipt is the evidence receipt of a run that finished: the last line
// of its first job's standard output (what the suite's entry point prints
// last), when that line is one JSON object of at most spark.MaxReceipt
// bytes; otherwise ErrNoReceipt. It reads the output back from its end
// (PollLogs, descending), only as far as that line needs.
func (b *Backend) Receipt(ctx context.Context, r Run) ([]byte, error) {
	i := slices.IndexFunc(r.Jobs, func(j Job) bool { return j.Num == 0 })
	if i < 0 || r.Jobs[i].SubmissionID == "" {
		return nil, fmt.Errorf("%w: run %s has no submitted first job", ErrNoReceipt, r.Name)
	}
	q := LogsQuery{RunName: r.Name, SubmissionID: r.Jobs[i].SubmissionID, Descending: true}
	var chunks [][]byte // newest first
	for range maxLogPages {
		p, err := b.c.PollLogs(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("dstack: run %s: read its output: %w", r.Name, err)
		}
		for _, e := range p.Events {
			if e.Source == LogStdout {
				chunks = append(chunks, e.Message)
			}
		}
		line, whole, long := lastLine(chunks)
		switch {
		case long:
			return nil, fmt.Errorf("%w: run %s: the last line of its output is longer than %d bytes", ErrNoReceipt, r.Name, spark.MaxReceipt)
		case whole || p.NextToken == "" || p.NextToken == q.NextToken:
			return receipt(r.Name, line)
		}
		q.NextToken = p.NextToken
	}
	return nil, fmt.Errorf("%w: run %s: no line ends its output within %d pages", ErrNoReceipt, r.Name, maxLogPages)
}

// lastLine is the last line of the output whose chunks are given newest
// first, trailing blank space aside; whole reports that a line break
// before it was seen (so it is complete), long that it is longer than a
// receipt may be.
func lastLine(newestFirst [][]byte) (line []byte, whole, long bool) {
	var out []byte
	for _, c := range slices.Backward(newestFirst) {
		out = append(out, c...)
	}
	out = bytes.TrimRightFunc(out, unicode.IsSpace)
	if i := bytes.LastIndexByte(out, '\n'); i >= 0 {
		out, whole = out[i+1:], true
	}
	line = bytes.TrimSpace(out)
	return line, whole, len(line) > spark.MaxReceipt
}

func receipt(run string, line []byte) ([]byte, error) {
	if len(line) == 0 || line[0] != '{' || !json.Valid(line) {
		return nil, fmt.Errorf("%w: run %s: the last line of its output is not a JSON object", ErrNoReceipt, run)
	}
	return bytes.Clone(line), nil
}

// RunURL is run r's page in the dstack server's web UI
// (/projects/{project}/runs/{id}), or "" when the server is not served
// over https (a loopback address is no link for anyone else).
func (b *Backend) RunURL(r Run) string {
	if b.c.base.Scheme != "https" || r.ID == "" {
		return ""
	}
	return b.c.base.String() + "/projects/" + url.PathEscape(b.c.project) + "/runs/" + url.PathEscape(r.ID)
}
