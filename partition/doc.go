// Package partition keeps test lanes exhaustive and disjoint, and long CUDA
// compiles inside hosted-runner limits without silent recompiles.
//
// Test partitions (device-independent and hardware tests apart):
// ParseNextestList and ParseGoTestJSON read the
// real inventory; partition files (TSV: binary-id, test name, category,
// note) say where each test runs; Check fails on any test in no category,
// any test listed twice across an archive set's files, any stale line and
// an inventory that lists no test at all, printing the exact TSV lines to
// add or remove with rename hints. A test's
// name, feature gate or #[ignore] never classifies it. Select renders a
// lane as a nextest filterset or go test -run patterns (refused for a Go
// test whose subtests are in more than one category: -run runs a parent
// with every subtest, so the lanes would overlap), and Config.Lane
// does so only for a configured category (and, when asked, a non-empty
// lane), since a misspelt lane selects nothing and can pass; NotRun lists
// what a gate summary must report as NOT RUN, never as passed.
//
// Long compiles (the compile-sharding ADR): Shards balances compile units
// deterministically with a manifest per shard; VerifyObjects makes the link
// step prove it reused every shard object; PlanChain sizes sequential
// checkpoint chains under the 6-hour job cap and refuses builds the wired
// depth cannot finish; WriteCheckpoint and RestoreCheckpoint carry a link's
// whole source and build tree as a PAX tar, so every mtime survives to the
// nanosecond (ninja's restat) and no entry lands outside the tree;
// MergeChainState keeps completion per matrix cell, CombineChainStates
// folds the per-cell state files every link leaves, and Resume and Finished
// say where each unfinished cell resumes and whether the chain is done;
// Batches keeps dispatches inside the 24-hour queue cap. The adoption
// workflows cuda-chain-build.yml and cuda-sharded-build.yml wire these.
package partition
