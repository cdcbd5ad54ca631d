// Package spark admits work onto a small owned GPU fleet shared by
// interactive development, a resident inference service and CI. GitHub
// queues source work; the controller owns physical admission:
//
//   - Classes admit in priority order (development 100, service start 90,
//     manual PR 80, merge CI 70, benchmark 50, background CI 20) and never
//     preempt: only an emergency termination stops active work
//     (Controller.Terminate with the emergency key; over the API, the
//     operator's credential).
//   - Development drains its target host: active work finishes, no new CI
//     starts there, and development takes it next.
//   - One-host requests prefer the configured host. A pair is one atomic
//     reservation that holds the first idle host against lower classes; a
//     higher class may still take a held host, so a waiting pair never
//     blocks more important work (no priority inversion), and it runs once
//     higher classes stop arriving. CI pairs are refused until a real
//     distributed test is configured.
//   - Every grant carries a fencing token that strictly increases across
//     restarts (allocated in the grant's transaction); Release and host
//     actions present it. A stale heartbeat makes a host offline, never
//     idle; an expired lease with processes leaves its host
//     release-required; a pair fails as a unit. Without the store, the
//     controller fails closed. A lease lasts its class's configured length
//     (DefaultDurations); a request may ask for less, never more.
//   - The resident service is drained, stopped and verified released
//     before its host is lent, and restored (health-checked, with a bounded
//     retry policy and alerts) when the borrowed work releases.
//   - A pull request's newer commit supersedes its queued older ones
//     (Submit does so itself; Supersede ends one when nothing new is asked
//     for); Cancel ends queued work only. An active run keeps the commit it
//     tests.
//   - Preflight is the runner-side check before a job starts.
//   - NewHandler serves the agent/CLI API and the hosts' heartbeats;
//     APIClient is its client.
//
// The authoritative store is spark/sqlitestore; spark/sparktest has fakes.
package spark
