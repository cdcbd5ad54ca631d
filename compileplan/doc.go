// Package compileplan keeps long CUDA compiles inside hosted-runner limits
// without silent recompiles: it plans how a build is split (across
// parallel shards, or along a chain of sequential jobs that checkpoint
// their tree) and checks that what each job left was reused.
//
// Sharded builds: Shards balances compile units deterministically (longest
// first onto the least-loaded shard) with a manifest per shard of the
// objects it must produce; ParseSHA256Sums reads the manifests and the
// link step's build tree as sha256sum prints them, and VerifyObjects makes
// the link step prove it reused every shard object, failing with an
// ObjectError that names each object missing, changed or compiled outside
// every shard.
//
// Checkpoint chains: PlanChain sizes the sequential links under the 6-hour
// job cap, leaving ChainMargin in each for the checkpoint, and refuses a
// build the wired depth cannot finish; WriteCheckpoint and
// RestoreCheckpoint carry a link's whole source and build tree as a PAX
// tar, so every mtime survives to the nanosecond (ninja's restat) and no
// entry lands outside the tree. A chain's progress is per matrix cell:
// MergeChainState applies one cell's update (its link never goes back, a
// done cell stays done), ParseChainState reads a state file back from an
// artifact, CombineChainStates folds the per-cell state files every link
// leaves, and ChainState.Resume and ChainState.Finished say where each
// unfinished cell resumes and whether the chain is done.
//
// Dispatches: Batches splits a dispatch of many jobs so that each batch
// clears within half of the 24-hour queue cap.
//
// The files the steps hand each other, as the partition command's
// subcommands read and write them: ReadUnits (the units file) and Matrix
// (the compile jobs' matrix), ReadSHA256Sums and VerifyObjectFiles,
// ParseCells (a chain's cells as a workflow passes them: a JSON array or a
// comma-separated list), CheckCells (a cell name an artifact name can
// carry), RecordCell and ReadChainStates (one state file per cell and
// link), WriteCheckpointFile (never inside its own tree, never left half
// written) and RestoreCheckpointFile.
//
// The steps as a command runs them (steps.go): ShardInputs, VerifyInputs,
// ChainInputs, CellInputs, StatusInputs, BatchInputs and CheckpointInputs
// hold one step's inputs, refuse what cannot run before anything is read
// or written (an *InputError naming the flags), and run the step; its
// report (ShardPlan, ObjectReuse, Chain, CellRecord, Status, BatchPlan,
// CheckpointReport) is the text a person reads (String) and what the step
// hands on (Outputs, named as $GITHUB_OUTPUT carries them).
//
// The adoption workflows cuda-sharded-build.yml, cuda-chain-build.yml and
// cuda-build-link.yml wire these through the partition command's
// shards, verify-objects, chain, chain-state, chain-status, checkpoint,
// restore and batches subcommands. Every error starts "compileplan: ", and
// each refusal wraps the sentinel its function documents (errors.Is).
package compileplan
