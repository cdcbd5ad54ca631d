package dstack

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"time"
)

// Log sources (core/models/logs.py LogEventSource).
const (
	LogStdout = "stdout"
	LogStderr = "stderr"
)

// maxLogLimit is the most events one logs/poll answers
// (schemas/logs.py PollLogsRequest.limit).
const maxLogLimit = 1000

// LogEvent is one event of a job's output (core/models/logs.py LogEvent):
// a chunk of what the job wrote, not necessarily one whole line.
type LogEvent struct {
	Timestamp time.Time
	Source    string // LogStdout or LogStderr
	// Message is the chunk, decoded from the base64 the API sends it in.
	Message []byte
}

// UnmarshalJSON decodes dstack's LogEvent: timestamp, log_source and
// message are required, and message must be base64.
func (e *LogEvent) UnmarshalJSON(data []byte) error {
	if err := requireKeys(data, "log event", "timestamp", "log_source", "message"); err != nil {
		return err
	}
	var w struct {
		Timestamp time.Time `json:"timestamp"`
		Source    string    `json:"log_source"`
		Message   string    `json:"message"`
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return nest("log event", err)
	}
	msg, err := base64.StdEncoding.DecodeString(w.Message)
	if err != nil {
		return malformed("log event: message is not base64")
	}
	if w.Source != LogStdout && w.Source != LogStderr {
		return malformed("log event: log_source %.20q is neither stdout nor stderr", w.Source)
	}
	*e = LogEvent{Timestamp: w.Timestamp, Source: w.Source, Message: msg}
	return nil
}

// LogsPage is one page of a job's output (core/models/logs.py
// JobSubmissionLogs).
type LogsPage struct {
	Events []LogEvent
	// NextToken asks for the next page; "" when this one is the last.
	NextToken string
}

// UnmarshalJSON decodes dstack's JobSubmissionLogs: logs is required.
func (p *LogsPage) UnmarshalJSON(data []byte) error {
	if err := requireKeys(data, "logs", "logs"); err != nil {
		return err
	}
	var w struct {
		Logs      []LogEvent `json:"logs"`
		NextToken *string    `json:"next_token"`
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return nest("logs", err)
	}
	*p = LogsPage{Events: w.Logs}
	if w.NextToken != nil {
		p.NextToken = *w.NextToken
	}
	return nil
}

// LogsQuery asks for one page of a job submission's output.
type LogsQuery struct {
	RunName      string
	SubmissionID string // Job.SubmissionID
	// Descending pages from the newest event back.
	Descending bool
	NextToken  string // from the previous page
	Limit      int    // events per page, 1 to 1000 (0: 1000)
}

// PollLogs returns one page of a job submission's output, the job's own
// (not the runner's diagnostics)
// (POST /api/project/{project}/logs/poll {"run_name", "job_submission_id",
// "descending", "next_token", "limit", "diagnose": false}). dstack answers
// an empty page for output it does not have.
func (c *Client) PollLogs(ctx context.Context, q LogsQuery) (LogsPage, error) {
	limit := q.Limit
	if limit <= 0 || limit > maxLogLimit {
		limit = maxLogLimit
	}
	body := struct {
		RunName         string  `json:"run_name"`
		JobSubmissionID string  `json:"job_submission_id"`
		Descending      bool    `json:"descending"`
		NextToken       *string `json:"next_token,omitempty"`
		Limit           int     `json:"limit"`
		Diagnose        bool    `json:"diagnose"`
	}{RunName: q.RunName, JobSubmissionID: q.SubmissionID, Descending: q.Descending, Limit: limit}
	if q.NextToken != "" {
		body.NextToken = &q.NextToken
	}
	var p LogsPage
	err := c.post(ctx, c.projectPath("logs", "poll"), body, &p)
	return p, err
}
