// Package partition keeps test lanes exhaustive and disjoint: every test of
// a real inventory in exactly one category, and each lane selecting
// exactly its category's tests, device-independent and hardware tests
// apart.
//
// ParseNextestList and ParseGoTestJSON read the real inventory; partition
// files (TSV: binary-id, test name, category, note) say where each test
// runs; Check fails on any test in no category, any test listed twice
// across an archive set's files, any stale line and an inventory that
// lists no test at all, printing the exact TSV lines to add or remove with
// rename hints. A test's name, feature gate or #[ignore] never classifies
// it. Select renders a lane as a nextest filterset or go test -run
// patterns (refused for a Go test whose subtests are in more than one
// category: -run runs a parent with every subtest, so the lanes would
// overlap), and Config.Lane does so only for a configured category (and,
// when asked, a non-empty lane), since a misspelt lane selects nothing and
// can pass; NotRun lists what a gate summary must report as NOT RUN, never
// as passed.
//
// What a workflow step needs, as the partition command's check and select
// subcommands use it: Config.ParseTSVFiles reads and validates an archive
// set's files; AuditListing parses a listing in either format
// (ParseInventory) and checks it, with the Go split tests, and prints as a
// person reads it (Config.AuditFiles reads the files and checks them in
// one call); Config.Selection (Config.SelectFiles from the files) fits the
// lane's filterset into one argument and renders it each way
// (Renderings), and NotRunOutput cuts the NOT RUN list to what one
// environment variable carries. Audit.Outputs and Selection.Outputs are
// the steps' outputs, named as $GITHUB_OUTPUT carries them.
//
// Planning long CUDA compiles (shards, object reuse, checkpoint chains) is
// package compileplan's concern.
package partition
