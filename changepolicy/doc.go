// Package changepolicy decides from a change's file list which CI lanes must
// run, so that a docs-only change never pays for a GPU while required checks
// never silently disappear.
//
// A change has one primary Class and independent lane flags:
//
//   - Code: Rust (or any) sources, manifests, build configuration, paths no
//     rule knows, and the empty diff. Every lane runs, the paid GPU gate
//     included.
//   - DocsOnly: only documentation and repository prose. The docs lane runs;
//     compiled-code lanes and the GPU gate are explicit successful no-ops.
//   - CIOnly: only known workflow and CI-helper paths (and possibly docs).
//     CI-helper tests and workflow lint run. The GPU gate is required only
//     when a changed path is device control (it can change what the paid
//     pod executes or whether it can); hosted-only paths of the paid lane
//     never require it. The policy file itself is always device control,
//     because a diff there can turn the paid lane off.
//
// Code overrides (such as docs/tutorial-code/**) win over docs and ci globs.
// Renames and copies classify both paths; deletions count. Named lanes (a
// macOS lane, say) run for code and for any change that touches one of their
// triggers. Decision.Jobs lists every configured required job, each either
// Run with its profile or an explicit NoOp with the reason, and
// Decision.Files records the rule that matched every path.
//
// gpu.device_control and gpu.hosted_only only refine CI paths. A path the
// ci set does not hold is classified as if neither list named it: a
// hosted_only "**/cost*" leaves src/cost.rs code, and every lane runs.
// Load refuses (ErrRefinesOutsideCI) a glob of either list that can match a
// path outside ci, one that no positive ci glob matches or that a ci
// exclusion removes (the list's own exclusions taken off first), and names
// such a path in GlobError.Example. The check is exact, not a heuristic:
// every glob compiles to an automaton of the language the matcher accepts,
// and Load searches their product for a repository path the glob matches
// and ci does not. The policy file itself is device control wherever it
// lies.
//
// A classification failure is a validation failure: bad input is an error,
// never a cheaper class, and FromPullRequest withholds a partial file list
// (ErrIncomplete) rather than let it be classified.
//
// Unknown paths fail safe, but a misspelt glob need not: a device-control
// pattern that matches nothing lets a change to what the pod runs skip the
// GPU gate. Policy.Unmatched, over TrackedFiles, names every code,
// device-control, hosted-only and lane-trigger glob that brings no file of
// the repository into its section (through the matcher Classify uses,
// exclusions applied); run it in CI whenever the policy or a CI path
// changes.
//
// # Globs
//
// A glob is a doublestar v4 pattern over slash-separated repository paths,
// read the way dorny/paths-filter reads its filters (picomatch with
// dot: true), or refused by Load. A refused glob is a *GlobError naming its
// section, line and construct (GlobError.Construct) and, where there is
// one, a rewrite; it wraps ErrInvalidGlob, ErrUnsupportedGlob,
// ErrNeverMatches or ErrRefinesOutsideCI, and matches ErrInvalidPolicy.
//
// What a glob means:
//
//   - "*" and "?" match within one path segment; "**" as a whole segment
//     matches any number of segments, and "x/**" matches x itself. A run of
//     stars that is not a whole segment is one "*".
//   - "{a,b}" are alternatives, nested as deep as needed and expanded
//     before matching (at most 256 per glob); an empty alternative matches
//     no path.
//   - "[abc]", "[a-z]", "[!a]" and "[^a]" match one character, and never
//     '/': a negated class does not match the separator (doublestar's
//     would). A class whose text holds no regex character also matches
//     that text, as in picomatch: "app/[id]/page.tsx" matches
//     app/i/page.tsx and app/[id]/page.tsx.
//   - A path equal to the glob's text matches it, as in picomatch.
//   - Dotfiles and dot-directories match like any other name.
//   - A backslash escapes the punctuation character after it.
//   - A leading "!" makes an exclusion: a path belongs to a set when a
//     positive glob of the set matches it and no exclusion of the set does.
//
// Refused as unsupported (ErrUnsupportedGlob), because picomatch, bash or
// doublestar read them differently from one another or from this matcher:
// `extglob` (@(a|b), +(…), !(…), ?(…), *(…)), `posix-class` ([[:alpha:]]),
// `brace-range` ({1..3}), `brace-without-comma` ({a}, literal text in
// picomatch), `regex-group` ((a|b)), `regex-alternation` (a bare '|'),
// `regex-quantifier` ('+' after ']', '}' or ')'), `regex-escape` (a
// backslash before a letter or digit: \d, \b), `backslash-in-class`,
// `slash-in-class` ([/], a class that could match '/'), `quotes` ("…",
// quoted text in picomatch), `repeated-backslash`, `escaped-slash` (\/),
// `double-negation` (!!a), `leading-dot-slash` (./a), `trailing-slash`
// (docs/: a directory, and a diff lists files), `repeated-globstar`
// (**/**), `star-before-globstar` (a*/**: picomatch matches only paths
// under such a directory, doublestar the file "ab" too; write a*/**/*),
// `too-many-alternatives` and `too-complex` (past what the checks search).
// Refused as never matching (ErrNeverMatches): `only-exclusions` (a set of
// exclusions only, such as ["!**/*.md"], which in paths-filter means
// everything but Markdown and here would match nothing: write
// ["**", "!**/*.md"]), `matches-nothing`, `all-excluded` (every path the
// glob matches is excluded), `excludes-nothing` (an exclusion that removes
// nothing the set's positive globs match), `dot-segment` (a "." or ".."
// segment) and `empty-segment` (a//b). Refused as invalid
// (ErrInvalidGlob): `empty`, `not-utf8`, `absolute` and `malformed`. And
// `outside-ci`, above.
//
// picomatch's test suite and paths-filter's filter tests run against Load
// and Classify (testdata/SOURCES.md). Where this package's result differs
// from a suite's, the case records why, and these are the reasons besides
// the refusals above:
//
//   - `dotfiles`: the suite ran picomatch without dot: true, so "*" missed
//     ".a"; paths-filter sets dot: true, and this package matches dotfiles.
//   - `option:NAME`: the case ran picomatch with an option paths-filter
//     does not set (nocase, windows, bash, noglobstar, ...).
//   - `exclusions-subtract`: paths-filter ORs a filter's patterns unless
//     predicate-quantifier is every, so ["*/*", "!a/b"] matches a/b there;
//     here an exclusion removes what it matches from the set.
//   - `status-filter`: paths-filter can require a change status
//     (added: "**/*"); a policy cannot, since a rename or deletion changes
//     what must run as much as an edit.
//   - `path-not-clean`: the path ("./a", "a/", "a//b", "/a") is one no diff
//     lists, and Classify refuses it (ErrInvalidChange).
//
// A change list comes from git (FromGitDiff), a pull request
// (ListPullRequest) or git diff --name-status output (ParseNameStatus, and
// ReadNameStatus and ReadNameStatusFile for a stream or a file). A
// Decision prints as a person reads it in a log (String) and as a job
// summary (Markdown).
//
// Usage:
//
//	p, err := changepolicy.LoadFile(".github/gpugate/policy.yml")
//	...
//	changes, err := changepolicy.FromGitDiff(ctx, ".", "origin/main", "HEAD")
//	...
//	d, err := changepolicy.Classify(p, changes)
//	if d.GPU { /* run the paid gate */ }
package changepolicy
