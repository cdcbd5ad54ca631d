package spark

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/gpugate/gpugate/internal/textlimit"
)

// DashboardSnapshot is the sanitized mirror for a control-room dashboard.
// Its types can carry only allowed fields: resource state, reservation
// kind, topology, queue position, service health and GitHub linkage. Never
// host addresses, usernames, commands, environment values, model paths,
// credentials, raw logs or fencing tokens.
type DashboardSnapshot struct {
	GeneratedAt time.Time       `json:"generated_at"`
	Hosts       []DashboardHost `json:"hosts"`
	// Queued counts every queued reservation; Reservations lists the
	// active ones and the head of the queue (Options.DashboardQueue).
	Queued       int                    `json:"queued"`
	Reservations []DashboardReservation `json:"reservations"`
}

// DashboardHost is one resource's sanitized state.
type DashboardHost struct {
	Name           string `json:"name"` // the configured display name
	State          Mode   `json:"state"`
	Online         bool   `json:"online"`
	Draining       bool   `json:"draining"`
	ServiceHealthy *bool  `json:"service_healthy,omitempty"` // service hosts only
}

// DashboardReservation is one queued or active reservation.
type DashboardReservation struct {
	ID       string   `json:"id"`
	Kind     Class    `json:"kind"`
	Topology Topology `json:"topology"`
	State    State    `json:"state"`
	Position int      `json:"position,omitempty"`
	Hosts    []string `json:"hosts,omitempty"` // display names
	Repo     string   `json:"repo,omitempty"`
	PR       int      `json:"pr,omitempty"`
	SHA      string   `json:"sha,omitempty"` // short
}

// Dashboard builds the sanitized snapshot. names maps host names to
// display names (a host missing from it is shown by its name).
// It reads the hosts, the active reservations and the head of the queue
// in one read-only transaction: its cost follows the hosts and
// Options.DashboardQueue, not the queue's length. A queued reservation's
// position is the one Status reports.
func (c *Controller) Dashboard(ctx context.Context, names map[string]string) (DashboardSnapshot, error) {
	var hosts []Host
	var reqs []Request
	var queued int
	err := c.tx(ctx, func(tx Tx) error {
		var err error
		if hosts, err = tx.Hosts(); err != nil {
			return err
		}
		if reqs, err = tx.Requests(Active); err != nil {
			return err
		}
		if queued, err = tx.QueueLen(); err != nil {
			return err
		}
		p, err := c.plan(tx)
		if err != nil {
			return err
		}
		if queued > 0 {
			if err := p.head(tx, c.opts.DashboardQueue, func(r Request) { reqs = append(reqs, r) }); err != nil {
				return err
			}
		}
		return errRollback
	})
	if errors.Is(err, errRollback) {
		err = nil
	}
	if err != nil {
		return DashboardSnapshot{}, err
	}
	display := func(h string) string {
		if n, ok := names[h]; ok {
			return n
		}
		return h
	}
	now := time.Now()
	out := DashboardSnapshot{GeneratedAt: now.UTC(), Hosts: []DashboardHost{}, Queued: queued, Reservations: []DashboardReservation{}}
	for _, h := range hosts {
		dh := DashboardHost{Name: display(h.Name), State: h.Mode, Online: c.online(h, now), Draining: h.Draining}
		if h.Service {
			healthy := h.Mode == ServiceRunning
			dh.ServiceHealthy = &healthy
		}
		out.Hosts = append(out.Hosts, dh)
	}
	position := 0
	for _, r := range reqs {
		d := DashboardReservation{ID: r.ID, Kind: r.Class, Topology: r.Topology, State: r.State}
		if r.State == Queued {
			position++ // the queue is read from its head, in admission order
			d.Position = position
		}
		for _, h := range r.Hosts {
			d.Hosts = append(d.Hosts, display(h))
		}
		if r.PR != nil {
			d.Repo, d.PR, d.SHA = r.PR.Repo, r.PR.Number, textlimit.ShortSHA(r.PR.SHA)
		}
		out.Reservations = append(out.Reservations, d)
	}
	return out, nil
}

// DashboardHandler serves the snapshot read-only as JSON.
func (c *Controller) DashboardHandler(names map[string]string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "read-only", http.StatusMethodNotAllowed)
			return
		}
		snap, err := c.Dashboard(r.Context(), names)
		if err != nil {
			http.Error(w, "the controller state is unavailable", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(snap)
	})
}
