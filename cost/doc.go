// Package cost attributes every paid GPU second and keeps unknowns unknown.
//
// It implements the cost rules: GPU cleanup and cost reporting,
// observability, and the cost history:
//
//   - ParsePodRecord reads v2 pod records (startedAt, cost) and saved v1
//     records (lastStartedAt in Go's time format, costPerHr,
//     adjustedCostPerHr), whose prices may be numeric strings as RunPod's
//     own v1 schema example writes costPerHr ("0.74"). The schema examples
//     of RunPod's published OpenAPI v1 and v2 are kept as fixtures in
//     testdata (SOURCES.md).
//   - PaidWindow runs from the pod's start to its confirmed deletion at the
//     adjusted hourly price when known, else the list price, and says which.
//     An unknown start is never replaced by createdAt: the cost is unknown,
//     not zero.
//   - Stages splits the window into startup/queue, test-job setup, test
//     execution, cleanup/queue and unassigned overhead, adding up exactly to
//     the window; a missing mark makes its stages unknown; nothing after the
//     deletion is counted.
//   - PodRecordOf, RejectedAttempts and MarksOf read what package runpod
//     reports (the pod before its deletion, the provisioning attempts, the
//     GPU job's progress) into a PodRecord, the rejected attempts that
//     were paid for and the stage Marks, so every report is built the
//     same way. RecordBeforeDelete reads the pod's record before its
//     deletion and, when that fails, falls back to the record provisioning
//     saved at startup, else to an unknown start.
//   - Report is the versioned JSON artifact and Markdown summary, written
//     after deletion and bounded (WriteBounded), with rejected provisioning
//     attempts apart and storage out of scope; Report.Outputs are a
//     cleanup step's outputs.
//   - Collect saves run evidence (metadata, logs, small cost artifacts)
//     resumably; Summarize reads it offline into JSON, Markdown and an SVG
//     chart that sets rejected candidates and re-tested refs apart from
//     useful spend. These are estimates, not invoices.
//   - CollectReaper saves the orphan reaper's decision artifacts; Summarize
//     totals its deletions, counts the runs whose own report had no
//     deletion evidence that a reaper deletion recovers, and the debug pods
//     it kept for inspection and never deleted, still billing, at their
//     latest estimate.
package cost
