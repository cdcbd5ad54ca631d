// Package cachetrust keeps PR-controlled code from planting bytes that a
// trusted, paid GPU run later executes, and lets immutable GPU artifacts be
// reused safely. It has four concerns, each its own file set.
//
// Content keys (key.go, example_key_spec.yml): Key computes
// content-addressed archive keys over the material inputs only (sorted
// path, mode and content digests, the toolchain, explicit components and a
// manual vN), never branch, ref or commit identity. Explain says which
// inputs made two keys differ (ReadArchiveKey reads back an earlier key,
// each Difference prints as a line), and ArchiveKey.Unmatched names include
// globs that covered no file (a misspelt one would leave its files out of
// the key). LoadKeySpec reads the spec from a strict file over
// RustWorkspaceSpec (ExampleKeySpec: the binding set and PTX toolkit
// components, the manual version), and KeySpecFile from a path.
//
// Embeds and trusted reuse (embeds.go, trust.go): Embeds and CheckEmbeds
// require files compiled into binaries (Rust include_str!/include_bytes!,
// Go //go:embed) to be inputs of the key. Trusted, FindArtifact and
// FindRepoArtifact reuse an artifact only when its name is the exact key
// and its producing run is this repository's (by ID), a trusted workflow,
// a default-branch definition, and for directly triggered events the
// default branch. A miss means a fresh build.
//
// The workflow checker (workflowcheck.go, workflowcheck_actions.go,
// workflowcheck_scope.go, workflowcheck_repo.go, the catalog
// workflowcheck_actions.yml and the bundled example_rules.yml; tested in
// workflowcheck*_test.go against testdata/zizmor-cache-poisoning):
// CheckWorkflows runs contract checks over workflow YAML, each Finding
// with file, line, column and rule ID (Finding.Annotation is its GitHub
// Actions workflow command). Which steps use and save a cache comes from
// the catalog (CacheActions: actions/cache and its save/restore halves,
// the setup-* actions' cache inputs, rust-cache, setup-rust-toolchain,
// sccache with SCCACHE_GHA_ENABLED, docker's type=gha caches, setup-uv,
// setup-gradle, mise, magic-nix-cache, setup-bun, composer-install,
// maturin's sccache, ...), with the inputs and defaults that make each
// write. A job runs in its workflow's trust, and a local composite action
// (uses: ./dir, action.yml or action.yaml) or a local reusable workflow is
// checked under its caller's triggers. In a privileged job (PR-controlled
// code in the default branch's scope, or a self-hosted runner such as the
// pod) a cache save is a finding, and an action the catalog does not know
// is an unproven-cache warning (Finding.Warning; Rules.NoCacheActions
// allowlists it). A job that publishes artifacts (a release, a tag push, a
// push to a release branch, or a publisher action such as
// action-gh-release) must use no cache at all (cache-in-release; on
// zizmor's own cache-poisoning fixtures it reports every line zizmor
// does). Then: no cache saves in privileged PR-code contexts, only the
// publisher saves and only from the default branch, read-only permissions
// outside an allowlist, no unlisted pull_request_target, no persisted
// checkout credentials beside provider secrets, publisher/consumer keys
// computed from the same steps and inputs (the expressions' step outputs
// followed to what computes them), restore-keys only where the rules allow
// prefix fallback (Rules.NoRestoreKeys), and action inputs that must agree
// across steps (Rules.ConsistentInputs), and uploads that survive a re-run
// in the workflows maintainers re-run (Rules.RerunUploads), and runner
// images named by version, never a moving -latest alias
// (Rules.PinnedRunners), and the owned fleet's runner labels only in the
// workflows its controller dispatches (Rules.FleetRunners), and no provider
// secret (nor any secret outside Rules.SelfHostedSecrets) in a job that may
// run on a self-hosted runner, the pod that runs the pull request's code.
// CheckRuleReferences makes a repository's own rules name only workflows
// it has (a rule about a renamed file checks nothing). ReadWorkflows reads
// what a checkout holds to check (its workflows, action.yml and every
// local action they use, wherever it lives), and CheckRepo runs it all
// over a checkout under the bundled or the repository's own rules.
//
// Runtime trees (tree.go): CheckTree holds a restored (or freshly
// installed) runtime tree complete only when every symlink resolves
// inside it, each required library pattern matches a non-empty file and
// nothing matches what its installer must exclude (TreeRules); a hit
// message is never evidence. A library stored twice instead of linked is
// reported (Copies).
//
// decode.go is the one strict decoder the key spec and the checker's rules
// share; adoption_workflows_test.go checks that the adoption workflows wire
// the key, trusted reuse and the tree checks as these mean them.
//
// Usage:
//
//	spec := cachetrust.RustWorkspaceSpec()
//	spec.Toolchain = rustcVersion
//	k, err := cachetrust.KeyDir(".", spec)
//	if a, why := cachetrust.FindArtifact(ctx, gh, policy, k.Key); a != nil { /* download, no build */ }
package cachetrust
