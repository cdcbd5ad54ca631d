package spark

import (
	"errors"
	"time"
)

// Class names a workload class.
type Class string

// The default workload classes.
const (
	Development  Class = "development"   // interactive development (agents, CLI)
	ServiceStart Class = "service-start" // explicit start of the resident service
	ManualPR     Class = "manual-pr"     // a maintainer's PR label or comment
	MergeCI      Class = "merge-ci"      // controller-approved merge correctness CI
	Benchmark    Class = "benchmark"     // scheduled benchmark
	BackgroundCI Class = "background-ci" // opportunistic queue
)

// DefaultPriorities is the default admission order.
func DefaultPriorities() map[Class]int {
	return map[Class]int{Development: 100, ServiceStart: 90, ManualPR: 80, MergeCI: 70, Benchmark: 50, BackgroundCI: 20}
}

// DefaultDurations are the lease lengths per class: the length a request
// gets when it names none, and the most it may ask for.
func DefaultDurations() map[Class]time.Duration {
	return map[Class]time.Duration{Development: 8 * time.Hour, ServiceStart: time.Hour, ManualPR: 2 * time.Hour,
		MergeCI: 2 * time.Hour, Benchmark: 4 * time.Hour, BackgroundCI: 2 * time.Hour}
}

// Topology is how many hosts a request needs.
type Topology string

// Topologies.
const (
	Single Topology = "single"
	Pair   Topology = "pair"
)

// State is a request's lifecycle state.
type State string

// Request states.
const (
	Queued     State = "queued"
	Active     State = "active"
	Released   State = "released"
	Canceled   State = "canceled"
	Superseded State = "superseded"
	Expired    State = "expired"
	Failed     State = "failed"
	Terminated State = "terminated"
)

// PRRef identifies the pull request a request tests.
type PRRef struct {
	Repo   string `json:"repo"`
	Number int    `json:"number"`
	SHA    string `json:"sha"`
}

// Request is one reservation.
type Request struct {
	ID        string        `json:"id"`
	Class     Class         `json:"class"`
	Topology  Topology      `json:"topology"`
	Host      string        `json:"host,omitempty"` // a specific host, when asked for
	PR        *PRRef        `json:"pr,omitempty"`
	Owner     string        `json:"owner,omitempty"`
	Suite     string        `json:"suite,omitempty"`
	Duration  time.Duration `json:"duration"`
	Priority  int           `json:"priority"`
	Seq       int64         `json:"seq"` // submission order
	State     State         `json:"state"`
	Hosts     []string      `json:"hosts,omitempty"` // granted hosts
	Token     int64         `json:"token,omitempty"` // the grant's fencing token
	Submitted time.Time     `json:"submitted"`
	Granted   time.Time     `json:"granted,omitzero"`
	Expires   time.Time     `json:"expires,omitzero"`
	Ended     time.Time     `json:"ended,omitzero"`
	Reason    string        `json:"reason,omitempty"` // why it ended
	// Annotations carry integration state (a check run ID, say). Never
	// secrets: they are shown on status pages.
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Mode is what a host is doing.
type Mode string

// Host modes. A host is schedulable only when managed, online (a fresh
// heartbeat) and Idle, or Service and lendable.
const (
	Idle            Mode = "idle"
	Leased          Mode = "leased"
	ReleaseRequired Mode = "release-required" // processes outlived a lease: no CI until cleaned
	ServiceRunning  Mode = "service"          // the resident service owns it
	Lending         Mode = "lending"          // the service is being drained and stopped for a grant
	Restoring       Mode = "restoring"        // the service is being (re)started; out of CI
	Cleaning        Mode = "cleaning"         // a lease ended; the host agent cleans up, no work until it acknowledges
	OutOfService    Mode = "out"              // restore failed past its policy: a human must act
)

// Host is a fleet member's authoritative state.
type Host struct {
	Name            string    `json:"name"`
	Managed         bool      `json:"managed"` // adopted: unknown or unmanaged hosts are never schedulable
	Service         bool      `json:"service"` // the resident service lives here
	Mode            Mode      `json:"mode"`
	Draining        bool      `json:"draining"` // development asked for it: no new CI
	Lease           string    `json:"lease,omitempty"`
	Token           int64     `json:"token,omitempty"` // the current lease's fencing token
	LastHeartbeat   time.Time `json:"last_heartbeat,omitzero"`
	GPUProcesses    int       `json:"gpu_processes"`
	RestoreAttempts int       `json:"restore_attempts,omitempty"`
	NextRestore     time.Time `json:"next_restore,omitzero"`
	Pending         string    `json:"pending,omitempty"` // the request a lending is for
	Ended           string    `json:"ended,omitempty"`   // Cleaning: the lease whose cleanup the agent acknowledges
	CleaningSince   time.Time `json:"cleaning_since,omitzero"`
	CleanupOverdue  bool      `json:"cleanup_overdue,omitempty"` // Cleaning past Options.CleanupTimeout: alerted once
}

// Event is one observable happening. It never carries addresses, commands,
// environment values, paths, credentials or fencing tokens.
type Event struct {
	// ID is the event's place in the log (from 1, increasing), set when
	// it is read as history (Tx.EventsSince, Controller.History).
	ID      int64     `json:"id,omitempty"`
	At      time.Time `json:"at"`
	Kind    string    `json:"kind"`
	Request string    `json:"request,omitempty"`
	Host    string    `json:"host,omitempty"`
	Detail  string    `json:"detail,omitempty"`
	Alert   bool      `json:"alert,omitempty"`
}

// Sentinels.
var (
	ErrActive       = errors.New("spark: the request is active; only an authorized emergency termination stops active work")
	ErrNotQueued    = errors.New("spark: the request is not queued")
	ErrNotFound     = errors.New("spark: no such request")
	ErrStaleToken   = errors.New("spark: stale fencing token")
	ErrPairRefused  = errors.New("spark: pair requests need a configured distributed test")
	ErrInvalid      = errors.New("spark: invalid request")
	ErrUnauthorized = errors.New("spark: not authorized")
	ErrUnavailable  = errors.New("spark: controller state unavailable: failing closed")
)
