package dstacktest

import (
	"encoding/base64"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// logEvent is one chunk of a job's output.
type logEvent struct {
	at     time.Time
	source string
	msg    []byte
}

// Log sources Output takes (dstack's LogEventSource).
const (
	LogStdout = "stdout"
	LogStderr = "stderr"
)

// pollLogsKeys are PollLogsRequest's fields (server/schemas/logs.py).
var pollLogsKeys = []string{"run_name", "job_submission_id", "start_time", "end_time", "descending", "next_token", "limit", "diagnose"}

// Output appends one chunk to the output of job jobNum of the run of
// project Project named name (its latest submission), as the job's
// runner reports it: source is LogStdout or LogStderr, and text need not be
// a whole line (a line may span chunks, a chunk hold several lines).
func (s *Server) Output(name string, jobNum int, source, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.projects[Project].byName(name)
	if r == nil {
		return
	}
	for _, j := range r.jobs {
		if j.num == jobNum {
			j.logs = append(j.logs, logEvent{at: time.Now(), source: source, msg: []byte(text)})
		}
	}
}

// Ending is how End finishes a run: the run's status and termination
// reason, and its jobs' (dstack's RunStatus, RunTerminationReason,
// JobStatus and JobTerminationReason values).
type Ending struct {
	Status, Reason       string // e.g. "terminated", "aborted_by_user"
	JobStatus, JobReason string // e.g. "aborted", "aborted_by_user"
}

// End finishes an unfinished run of project Project as e says, freeing
// its instances.
func (s *Server) End(name string, e Ending) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.projects[Project].byName(name)
	if r == nil || finished(r.status) {
		return
	}
	now := time.Now()
	r.status, r.termination, r.processed = e.Status, e.Reason, now
	for _, j := range r.jobs {
		j.status, j.termination, j.processed = e.JobStatus, e.JobReason, now
		free(j)
	}
}

// Delete makes the run of project Project named name disappear, finished
// or not (as dstack's runs/delete removes a finished one, or as a lost
// server database would): runs/get no longer finds it, and its instances
// are free.
func (s *Server) Delete(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.projects[Project].byName(name); r != nil {
		r.deleted = true
		r.status = "terminated"
		for _, j := range r.jobs {
			free(j)
		}
	}
}

// pollLogs is POST /api/project/{project}/logs/poll (routers/logs.py):
// one page of a job submission's own output (diagnose: the runner's,
// which the fake has none of), oldest first or, descending, newest first;
// next_token asks for the page after. Output it does not have is an empty
// page, as dstack's file log storage answers.
func (s *Server) pollLogs(w http.ResponseWriter, p *project, v any) {
	c := &check{}
	loc := []any{"body"}
	m := c.object(v, loc)
	if m == nil {
		invalid(w, c.errs...)
		return
	}
	c.fields(m, loc, pollLogsKeys, []string{"run_name", "job_submission_id"})
	name, _ := c.str(m, "run_name", loc)
	sub, _ := c.uuid(m, "job_submission_id", loc)
	descending := c.boolean(m, "descending", loc, false)
	diagnose := c.boolean(m, "diagnose", loc, false)
	limit := int64(100)
	if n, ok := c.integer(m, "limit", loc, 0, 1000); ok {
		limit = n
	}
	since, _ := c.datetime(m, "start_time", loc)
	until, _ := c.datetime(m, "end_time", loc)
	token, hasToken := c.str(m, "next_token", loc)
	if len(c.errs) > 0 {
		invalid(w, c.errs...)
		return
	}
	start := 0
	if hasToken {
		n, err := strconv.Atoi(token)
		if err != nil || n < 0 {
			clientError(w, "error", "Invalid next_token: "+token)
			return
		}
		start = n
	}
	var events []logEvent
	for _, r := range p.runs {
		for _, j := range r.jobs {
			if r.name == name && j.id == sub && !diagnose {
				events = slices.Clone(j.logs)
			}
		}
	}
	events = slices.DeleteFunc(events, func(e logEvent) bool {
		return (!since.IsZero() && !e.at.After(since)) || (!until.IsZero() && !e.at.Before(until))
	})
	if descending {
		slices.Reverse(events)
	}
	out := []any{}
	var next any
	for i := start; i < len(events); i++ {
		if int64(len(out)) == limit {
			next = strconv.Itoa(i)
			break
		}
		e := events[i]
		out = append(out, map[string]any{"timestamp": ts(e.at), "log_source": e.source, "message": base64.StdEncoding.EncodeToString(e.msg)})
	}
	writeJSON(w, http.StatusOK, map[string]any{"logs": out, "external_url": nil, "next_token": next})
}
