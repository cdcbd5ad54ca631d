package cachetrust

import (
	"cmp"
	_ "embed"
	"errors"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Rule IDs of workflow findings.
const (
	RulePrivilegedCacheSave = "privileged-cache-save"        // PR code in a privileged context saves a cache
	RuleNonPublisherSave    = "cache-save-outside-publisher" // a cache save outside the declared publisher
	RulePublisherBranch     = "publisher-off-default-branch" // the publisher can save from another branch
	RuleWritePermission     = "write-permission"             // a write permission outside the allowlist
	RuleNoPermissions       = "no-permissions"               // no permissions block: the token's defaults apply
	RulePullRequestTarget   = "pull-request-target"          // a pull_request_target trigger not allowlisted
	RulePersistCredentials  = "persist-credentials"          // checkout keeps credentials in a job holding provider secrets
	RuleKeyPair             = "key-pair"                     // publisher and consumer key expressions differ
	RuleConsistentInput     = "consistent-input"             // an action input that must agree across steps differs
	RuleActionSavesCache    = "action-saves-cache"           // a composite action saves a cache
	RuleRerunUpload         = "rerun-upload"                 // an upload a re-run attempt would repeat, refused as a conflict
	RuleMovingRunner        = "moving-runner"                // a job runs on a -latest image alias, which moves under fixed cache keys
	RuleFleetRunner         = "fleet-runner"                 // a job targets the owned fleet's runners outside a controller-dispatched workflow
	RuleUnknownWorkflow     = "unknown-workflow"             // the rules name a workflow that is not among the checked files
	RuleParse               = "parse"                        // the file is not valid workflow YAML
	RuleSelfHostedSecret    = "secret-on-self-hosted"        // a job that may run on a self-hosted runner (the pod) references a secret outside the allowlist
	RuleUnprovenCache       = "unproven-cache"               // (warning) a privileged job uses an action the cache catalog does not know
	RuleReleaseCache        = "cache-in-release"             // a job that publishes artifacts uses the cache
	RuleRestoreKeys         = "restore-keys"                 // a restore falls back to another key's entry by prefix where the rules forbid it
)

// Finding is one contract violation.
type Finding struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Rule    string `json:"rule"`
	Message string `json:"message"`
	// Warning marks what cannot be proven rather than what was found
	// (RuleUnprovenCache): reported, and failing nothing by itself.
	Warning bool `json:"warning,omitempty"`
}

// String formats the finding as file:line:column: rule: message, the
// shape editors and problem matchers read.
func (f Finding) String() string {
	return fmt.Sprintf("%s:%d:%d: %s: %s", f.File, f.Line, f.Column, f.Rule, f.Message)
}

// StepRef names a step's input: a job and a step (by id or name) in a
// workflow file.
type StepRef struct {
	File  string `yaml:"file"`
	Job   string `yaml:"job"`
	Step  string `yaml:"step"`
	Input string `yaml:"input"` // default key
}

// KeyPair declares a publisher's and a consumer's key expressions that must
// be byte-identical.
type KeyPair struct {
	Publisher StepRef `yaml:"publisher"`
	Consumer  StepRef `yaml:"consumer"`
}

// WriteGrant allows one write permission.
type WriteGrant struct {
	Workflow string `yaml:"workflow"` // file path
	Job      string `yaml:"job"`      // empty: the workflow level and every job
	Scope    string `yaml:"scope"`    // e.g. actions
}

// Rules configure CheckWorkflows.
type Rules struct {
	DefaultBranch     string       `yaml:"default_branch"`
	Publishers        []string     `yaml:"publishers"`          // workflows that may save caches (from the default branch only)
	IsolatedWriters   []string     `yaml:"isolated_writers"`    // pull_request workflows (saves scoped to the PR), also run by push to the default branch
	WriteGrants       []WriteGrant `yaml:"write_grants"`        // the write-permission allowlist
	PullRequestTarget []string     `yaml:"pull_request_target"` // workflows allowed that trigger
	ProviderSecrets   []string     `yaml:"provider_secrets"`    // secret names whose jobs must not persist checkout credentials
	KeyPairs          []KeyPair    `yaml:"key_pairs"`
	// ConsistentInputs are action inputs that must have one value in every
	// step they apply to: a label or check name spelt one way in one
	// workflow and another way in the next splits what the steps decide.
	ConsistentInputs []ConsistentInput `yaml:"consistent_inputs"`
	// RerunUploads are workflows (file paths) that must survive a re-run
	// ("gh run rerun --failed"): an artifact name is unique in a workflow
	// run across its attempts, so every actions/upload-artifact step in
	// them must name its attempt (github.run_attempt) or set overwrite:
	// true, or the re-run fails at the upload with a conflict.
	RerunUploads []string `yaml:"rerun_uploads"`
	// PinnedRunners requires every job to name its hosted image's version
	// (ubuntu-24.04, never ubuntu-latest): an alias moves to a new image
	// when GitHub changes it, so a cache key that names the OS would then
	// restore what another image built, and the build and execution
	// baseline would change without a reviewed edit.
	PinnedRunners bool `yaml:"pinned_runners"`
	// FleetRunners keeps the owned fleet's runner labels to the workflows
	// its controller dispatches after granting a lease.
	FleetRunners FleetRunners `yaml:"fleet_runners"`
	// SelfHostedSecrets are the secrets a job that may run on a
	// self-hosted runner (the paid pod, a fleet host) may reference;
	// GITHUB_TOKEN is always allowed, and a provider secret never is. A
	// job counts as self-hosted unless every label its runs-on can name
	// is a GitHub-hosted image (ubuntu-24.04, windows-2022, macos-15,
	// ...): an expression such as the provisioned pod's label counts.
	SelfHostedSecrets []string `yaml:"self_hosted_secrets"`
	// NoCacheActions are third-party actions (owner/repo[/path], no @ref)
	// reviewed to use no cache: a privileged job may use them without an
	// unproven-cache warning.
	NoCacheActions []string `yaml:"no_cache_actions"`
	// NoRestoreKeys forbids restore-keys (a restore that falls back to
	// another key's entry by prefix) in these workflows (file paths), or in
	// every workflow with "*": a prefix hit restores what another key
	// built, under a key that says otherwise.
	NoRestoreKeys []string `yaml:"no_restore_keys"`
}

// FleetRunners are the owned fleet's runner labels and the workflows that
// may target them. The fleet's runners are one-job JIT runners the
// controller mints after granting capacity, so only a workflow it
// dispatches (workflow_dispatch, nothing else) may run on them: a pull
// request or push job with those labels would wait for a runner no lease
// created, or be assigned one while its host is being returned to
// development or the resident service.
type FleetRunners struct {
	Labels    []string `yaml:"labels"`    // e.g. the fleet's own label, waffuru-spark
	Workflows []string `yaml:"workflows"` // file paths of the controller-dispatched workflows
}

// ConsistentInput is an input of an action (uses, without its @ref) that
// must have one value, the action's default counting as one when a step
// leaves it unset, across every step of that action; with Where, only
// across the steps whose Where input is one of Values (the step a
// multi-purpose action runs).
type ConsistentInput struct {
	Uses   string   `yaml:"uses"`
	Input  string   `yaml:"input"`
	Where  string   `yaml:"where"`
	Values []string `yaml:"values"`
}

// ExampleRules are the default rules, as YAML.
//
//go:embed example_rules.yml
var ExampleRules []byte

// ErrRules is matched by LoadRules errors.
var ErrRules = errors.New("cachetrust: invalid rules")

// LoadRules parses rules strictly: a key Rules does not have is an error,
// and so is a second '---' document; an empty file is no rules.
func LoadRules(data []byte) (Rules, error) {
	var r Rules
	if err := decodeStrict(data, &r); err != nil {
		return Rules{}, fmt.Errorf("%w: %w", ErrRules, err)
	}
	if r.DefaultBranch == "" {
		r.DefaultBranch = "main"
	}
	for i, p := range r.KeyPairs {
		for _, s := range []StepRef{p.Publisher, p.Consumer} {
			if s.File == "" || s.Job == "" || s.Step == "" {
				return Rules{}, fmt.Errorf("%w: key_pairs[%d]: file, job and step are required", ErrRules, i)
			}
		}
	}
	if slices.Contains(r.FleetRunners.Labels, "") {
		return Rules{}, fmt.Errorf("%w: fleet_runners.labels holds an empty label", ErrRules)
	}
	if len(r.FleetRunners.Workflows) > 0 && len(r.FleetRunners.Labels) == 0 {
		return Rules{}, fmt.Errorf("%w: fleet_runners lists workflows but no labels, so it checks nothing: name the fleet's runner labels", ErrRules)
	}
	for i, g := range r.WriteGrants {
		if g.Workflow == "" || g.Scope == "" {
			return Rules{}, fmt.Errorf("%w: write_grants[%d]: workflow and scope are required (job is optional: empty grants the whole workflow)", ErrRules, i)
		}
	}
	for i, ci := range r.ConsistentInputs {
		switch {
		case ci.Uses == "" || ci.Input == "":
			return Rules{}, fmt.Errorf("%w: consistent_inputs[%d]: uses and input are required", ErrRules, i)
		case strings.Contains(ci.Uses, "@"):
			return Rules{}, fmt.Errorf("%w: consistent_inputs[%d]: uses %q: name the action without its @ref", ErrRules, i, ci.Uses)
		case (ci.Where == "") != (len(ci.Values) == 0):
			return Rules{}, fmt.Errorf("%w: consistent_inputs[%d]: where and values go together", ErrRules, i)
		}
	}
	return r, nil
}

// savesCache reports whether a step saves a cache, and why, from the
// catalog (CacheActions); env holds the enclosing workflow's and job's env
// blocks.
func savesCache(step *yaml.Node, env ...*yaml.Node) (bool, string) {
	use := stepCache(step, env, nil)
	if !use.saves {
		return false, ""
	}
	return true, fmt.Sprintf("%s and saves it: %s", use.why, use.fix)
}

// actionOf is the action a step uses, without its @ref ("" for a run
// step).
func actionOf(step *yaml.Node) string {
	action, _, _ := strings.Cut(scalar(get(step, "uses")), "@")
	return action
}

func truthy(v string) bool {
	v = strings.TrimSpace(strings.ToLower(v))
	v = strings.TrimSuffix(strings.TrimPrefix(v, "${{"), "}}")
	v = strings.TrimSpace(v)
	return v != "false" && v != "" && v != "'false'" && v != "0"
}

func get(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

func keyNode(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i]
		}
	}
	return nil
}

func scalar(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}

// eachScalar calls fn on every scalar (a key or a value) under n, aliases
// followed, until fn returns true; it reports whether one did.
func eachScalar(n *yaml.Node, fn func(*yaml.Node) bool) bool {
	switch {
	case n == nil:
		return false
	case n.Kind == yaml.ScalarNode:
		return fn(n)
	case n.Kind == yaml.AliasNode:
		return eachScalar(n.Alias, fn)
	}
	return slices.ContainsFunc(n.Content, func(child *yaml.Node) bool { return eachScalar(child, fn) })
}

// triggers returns the workflow's events and their nodes.
func triggers(root *yaml.Node) map[string]*yaml.Node {
	out := map[string]*yaml.Node{}
	on := get(root, "on")
	if on == nil {
		on = get(root, "true") // YAML 1.1 readers turn on into true
	}
	switch {
	case on == nil:
	case on.Kind == yaml.ScalarNode:
		out[on.Value] = on
	case on.Kind == yaml.SequenceNode:
		for _, e := range on.Content {
			out[e.Value] = e
		}
	case on.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(on.Content); i += 2 {
			out[on.Content[i].Value] = on.Content[i+1]
		}
	}
	return out
}

var prInput = regexp.MustCompile(`(?i)(^|_|-)(pr|pull|pull_request|pr_number)($|_|-)`)

// privileged reports whether the workflow runs PR-controlled code with the
// default branch's credentials.
func privileged(tr map[string]*yaml.Node) (bool, string) {
	for _, ev := range []string{"workflow_run", "pull_request_target", "issue_comment"} {
		if _, ok := tr[ev]; ok {
			return true, ev
		}
	}
	if wd, ok := tr["workflow_dispatch"]; ok {
		if inputs := get(wd, "inputs"); inputs != nil && inputs.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(inputs.Content); i += 2 {
				if prInput.MatchString(inputs.Content[i].Value) {
					return true, "workflow_dispatch with input " + inputs.Content[i].Value
				}
			}
		}
	}
	return false, ""
}

type checker struct {
	docs      map[string]*yaml.Node // every checked file, for following local actions and reusable workflows
	rules     Rules
	secretRef *regexp.Regexp // a reference to a provider secret; nil when there are none
	file      string
	findings  []Finding
}

// secretRefs matches a reference to any of the named secrets, or is nil
// when there are none.
func secretRefs(names []string) *regexp.Regexp {
	if len(names) == 0 {
		return nil
	}
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = regexp.QuoteMeta(n)
	}
	return regexp.MustCompile(`secrets\.(?:` + strings.Join(quoted, "|") + `)\b`)
}

// warn adds a warning: what cannot be proven, not what was found.
func (c *checker) warn(n *yaml.Node, rule, format string, args ...any) {
	c.add(n, rule, format, args...)
	c.findings[len(c.findings)-1].Warning = true
}

func (c *checker) add(n *yaml.Node, rule, format string, args ...any) {
	f := Finding{File: c.file, Rule: rule, Message: fmt.Sprintf(format, args...)}
	if n != nil {
		f.Line, f.Column = n.Line, n.Column
	}
	c.findings = append(c.findings, f)
}

// CheckWorkflows checks workflow (and composite action) files against the
// cache-trust contract, reporting each finding with its file, line, column
// and rule. files maps repository paths to contents.
func CheckWorkflows(files map[string][]byte, rules Rules) []Finding {
	if rules.DefaultBranch == "" {
		rules.DefaultBranch = "main"
	}
	var all []Finding
	docs := map[string]*yaml.Node{}
	secretRef := secretRefs(rules.ProviderSecrets)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		c := &checker{rules: rules, secretRef: secretRef, file: name}
		var doc yaml.Node
		if err := yaml.Unmarshal(files[name], &doc); err != nil {
			c.add(nil, RuleParse, "%v", err)
			all = append(all, c.findings...)
			continue
		}
		if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
			c.add(&doc, RuleParse, "not a YAML mapping")
			all = append(all, c.findings...)
			continue
		}
		docs[name] = doc.Content[0]
	}
	called := calledWorkflows(docs)
	for _, name := range slices.Sorted(maps.Keys(docs)) {
		root := docs[name]
		c := &checker{docs: docs, rules: rules, secretRef: secretRef, file: name}
		if runs := get(root, "runs"); runs != nil {
			c.action(runs)
		} else {
			c.workflow(root, called[name])
		}
		all = append(all, c.findings...)
	}
	for i, p := range rules.KeyPairs {
		all = append(all, keyPair(docs, i, p)...)
	}
	for _, ci := range rules.ConsistentInputs {
		all = append(all, consistentInput(docs, ci)...)
	}
	slices.SortStableFunc(all, func(a, b Finding) int {
		return cmp.Or(strings.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
	})
	return all
}

// CheckRuleReferences reports each workflow the rules name that is not
// among files, the repository's workflows: a rule about a renamed or
// misspelt file checks nothing. Most rules then fail closed (a renamed
// publisher is an unlisted writer), but a renamed re-run workflow's uploads
// would go unchecked, and an entry naming nothing hides what the rules were
// meant to say. Run it with the repository's own rules; the example rules
// name the default files. Key pairs report their own missing files in
// CheckWorkflows.
func CheckRuleReferences(files map[string][]byte, r Rules) []Finding {
	fields := map[string][]string{}
	add := func(field string, paths ...string) {
		for _, p := range paths {
			if _, ok := files[p]; !ok && !slices.Contains(fields[p], field) {
				fields[p] = append(fields[p], field)
			}
		}
	}
	add("publishers", r.Publishers...)
	add("isolated_writers", r.IsolatedWriters...)
	for i, g := range r.WriteGrants {
		add(fmt.Sprintf("write_grants[%d]", i), g.Workflow)
	}
	add("pull_request_target", r.PullRequestTarget...)
	add("rerun_uploads", r.RerunUploads...)
	add("fleet_runners.workflows", r.FleetRunners.Workflows...)
	add("no_restore_keys", slices.DeleteFunc(slices.Clone(r.NoRestoreKeys), func(p string) bool { return p == "*" })...)
	var out []Finding
	for _, p := range slices.Sorted(maps.Keys(fields)) {
		out = append(out, Finding{File: p, Rule: RuleUnknownWorkflow, Message: fmt.Sprintf(
			"the rules name this workflow (%s), but it is not among the checked files, so those rules check nothing: correct the path (relative to the repository root) or remove the entry",
			strings.Join(fields[p], ", "))})
	}
	return out
}

// action checks a composite action: it runs in its caller's context, so it
// must never save a cache.
// calledWorkflows names the checked reusable workflows that only
// workflow_call triggers and that a checked workflow calls.
func calledWorkflows(docs map[string]*yaml.Node) map[string]bool {
	out := map[string]bool{}
	for _, root := range docs {
		jobs := get(root, "jobs")
		if jobs == nil || jobs.Kind != yaml.MappingNode {
			continue
		}
		for i := 1; i < len(jobs.Content); i += 2 {
			uses := scalar(get(jobs.Content[i], "uses"))
			if !strings.HasPrefix(uses, "./") {
				continue
			}
			file := path.Clean(strings.TrimPrefix(uses, "./"))
			if callee := docs[file]; callee != nil {
				tr := triggers(callee)
				if _, ok := tr["workflow_call"]; ok && len(tr) == 1 {
					out[file] = true
				}
			}
		}
	}
	return out
}

// restoreKeys reports each cache restore with restore-keys in a job of a
// workflow (origin: the one the run starts in) the rules forbid them in.
func (c *checker) restoreKeys(origin, job string, steps []*yaml.Node) {
	if !slices.Contains(c.rules.NoRestoreKeys, origin) && !slices.Contains(c.rules.NoRestoreKeys, "*") {
		return
	}
	for _, s := range steps {
		if a := strings.ToLower(actionOf(s)); a != "actions/cache" && a != "actions/cache/restore" {
			continue
		}
		if rk := get(get(s, "with"), "restore-keys"); rk != nil {
			c.add(rk, RuleRestoreKeys, "job %s restores with restore-keys: a prefix hit restores an entry another key built, under a key that says otherwise; restore the exact key only (no_restore_keys)", job)
		}
	}
}

func (c *checker) action(runs *yaml.Node) {
	steps := get(runs, "steps")
	if steps == nil || steps.Kind != yaml.SequenceNode {
		return
	}
	for _, s := range steps.Content {
		if ok, why := savesCache(s); ok {
			c.add(get(s, "uses"), RuleActionSavesCache, "%s; an action runs in its caller's (possibly privileged) context", why)
		}
	}
}

// workflow checks one workflow file. calledOnly: a reusable workflow
// (workflow_call its only trigger) that a checked workflow calls; its
// cache use is checked under each caller's triggers instead of its own.
func (c *checker) workflow(root *yaml.Node, calledOnly bool) {
	tr := triggers(root)
	priv, why := privileged(tr)
	publisher := slices.Contains(c.rules.Publishers, c.file)
	isolated := slices.Contains(c.rules.IsolatedWriters, c.file)
	release, _ := releaseTriggers(tr)
	sc := cacheScope{tr: tr, priv: priv, why: why, publisher: publisher, isolated: isolated, release: release, origin: c.file}
	if n, ok := tr["pull_request_target"]; ok && !slices.Contains(c.rules.PullRequestTarget, c.file) {
		c.add(n, RulePullRequestTarget, "pull_request_target runs with write credentials on PR events; it is not allowlisted for this workflow")
	}
	if publisher {
		c.publisherTriggers(tr)
	}
	jobs := get(root, "jobs")
	topPerms := get(root, "permissions")
	c.permissions(topPerms, "")
	allJobsHavePerms := jobs != nil && jobs.Kind == yaml.MappingNode
	if jobs == nil || jobs.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(jobs.Content); i += 2 {
		name, job := jobs.Content[i].Value, jobs.Content[i+1]
		perms := get(job, "permissions")
		if perms == nil {
			allJobsHavePerms = false
		}
		c.permissions(perms, name)
		steps := get(job, "steps")
		var stepList []*yaml.Node
		if steps != nil && steps.Kind == yaml.SequenceNode {
			stepList = steps.Content
		}
		guarded := strings.Contains(scalar(get(job, "if")), "refs/heads/"+c.rules.DefaultBranch)
		jsc := sc
		jsc.env = []*yaml.Node{get(root, "env"), get(job, "env")}
		if uses := scalar(get(job, "uses")); strings.HasPrefix(uses, "./") {
			c.reusableCall(jsc, name, uses, map[string]bool{c.file: true})
		} else if uses != "" {
			c.remoteCall(jsc, name, job)
		} else if !calledOnly {
			c.scopeJob(&jsc, job)
			c.jobCache(jsc, name, stepList, guarded, map[string]bool{})
		}
		c.restoreKeys(c.file, name, stepList)
		c.credentials(name, job, stepList)
		c.selfHostedSecrets(name, job, get(root, "env"))
		if c.rules.PinnedRunners {
			c.movingRunners(name, job)
		}
		if len(c.rules.FleetRunners.Labels) > 0 {
			c.fleetRunners(name, job, tr)
		}
		if slices.Contains(c.rules.RerunUploads, c.file) {
			c.rerunUploads(name, stepList)
		}
	}
	if topPerms == nil && !allJobsHavePerms {
		c.add(keyNode(root, "jobs"), RuleNoPermissions, "no workflow-level permissions block and not every job declares one: the token's default (possibly write) permissions apply")
	}
}

// movingImage matches a GitHub-hosted image alias that moves.
var movingImage = regexp.MustCompile(`^(?:ubuntu|windows|macos)-latest(?:-[A-Za-z0-9-]+)?$`)

// labelWords splits a runs-on scalar into the runner labels it can name:
// the whole scalar, or each quoted or listed word of an expression such as
// fromJSON('["self-hosted","gpu"]').
func labelWords(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune(" \t\n'\",[]", r) })
}

// runnerScalars returns every scalar a job's runner can come from: its
// runs-on (a label, a list, a group's labels, an expression) and, when
// runs-on reads the matrix, the matrix's values.
func runnerScalars(job *yaml.Node) []*yaml.Node {
	var out []*yaml.Node
	collect := func(s *yaml.Node) bool { out = append(out, s); return false }
	eachScalar(get(job, "runs-on"), collect)
	if strings.Contains(scalar(get(job, "runs-on")), "matrix.") {
		eachScalar(get(get(job, "strategy"), "matrix"), collect)
	}
	return out
}

// movingRunners reports each -latest image alias a job's runner can come
// from.
func (c *checker) movingRunners(job string, n *yaml.Node) {
	for _, s := range runnerScalars(n) {
		for _, w := range labelWords(s.Value) {
			if movingImage.MatchString(w) {
				c.add(s, RuleMovingRunner, "job %s runs on %s, an alias GitHub moves to a new image: cache keys that name the OS would restore what another image built, and the baseline would change unreviewed; name the version (e.g. ubuntu-24.04)", job, w)
			}
		}
	}
}

// fleetRunners reports a job that targets the fleet's runners outside a
// controller-dispatched workflow, or in one another event can start.
func (c *checker) fleetRunners(job string, n *yaml.Node, tr map[string]*yaml.Node) {
	fr := c.rules.FleetRunners
	for _, s := range runnerScalars(n) {
		words := labelWords(s.Value)
		for _, label := range fr.Labels {
			if !slices.Contains(words, label) {
				continue
			}
			if !slices.Contains(fr.Workflows, c.file) {
				c.add(s, RuleFleetRunner, "job %s runs on the fleet's label %s outside the workflows its controller dispatches: the fleet's one-job runners exist only after a granted lease, so the job would wait for one, or take one while its host is returned to development or the resident service; let the controller dispatch it (fleet_runners.workflows)", job, label)
				return
			}
			for _, ev := range slices.Sorted(maps.Keys(tr)) {
				if ev != "workflow_dispatch" {
					c.add(tr[ev], RuleFleetRunner, "job %s runs on the fleet's label %s, and %s can start this workflow: only the controller may, by workflow_dispatch after it grants a lease", job, label, ev)
				}
			}
			return
		}
	}
}

// rerunUploads reports each upload-artifact step a re-run attempt would
// repeat under the same name without overwriting it.
func (c *checker) rerunUploads(job string, steps []*yaml.Node) {
	for _, s := range steps {
		if actionOf(s) != "actions/upload-artifact" {
			continue
		}
		with := get(s, "with")
		artifact := scalar(get(with, "name"))
		if strings.Contains(artifact, "github.run_attempt") || strings.EqualFold(strings.TrimSpace(scalar(get(with, "overwrite"))), "true") {
			continue
		}
		if artifact == "" {
			artifact = "artifact" // upload-artifact's default name
		}
		c.add(get(s, "uses"), RuleRerunUpload, "job %s uploads %q, which a re-run attempt uploads again under the same name and GitHub refuses as a conflict: set overwrite: true or put ${{ github.run_attempt }} in the name", job, artifact)
	}
}

// publisherTriggers: the publisher runs only default-branch definitions.
func (c *checker) publisherTriggers(tr map[string]*yaml.Node) {
	for ev, n := range tr {
		switch ev {
		case "push":
			branches := get(n, "branches")
			if branches == nil || branches.Kind != yaml.SequenceNode || len(branches.Content) != 1 || branches.Content[0].Value != c.rules.DefaultBranch {
				c.add(n, RulePublisherBranch, "the publisher's push trigger must list only branches: [%s]", c.rules.DefaultBranch)
			}
		case "schedule", "workflow_dispatch":
		default:
			c.add(n, RulePublisherBranch, "the publisher must not run on %s: only push to %s, schedule and workflow_dispatch", ev, c.rules.DefaultBranch)
		}
	}
}

func onlyDefaultBranch(tr map[string]*yaml.Node, def string) bool {
	for ev, n := range tr {
		switch ev {
		case "schedule":
		case "push":
			b := get(n, "branches")
			if b == nil || b.Kind != yaml.SequenceNode || len(b.Content) != 1 || b.Content[0].Value != def {
				return false
			}
		default:
			return false
		}
	}
	return true
}

var writeAll = map[string]bool{"write-all": true}

func (c *checker) permissions(p *yaml.Node, job string) {
	if p == nil {
		return
	}
	if p.Kind == yaml.ScalarNode {
		if writeAll[p.Value] {
			c.add(p, RuleWritePermission, "permissions: write-all grants every scope write access")
		}
		return
	}
	if p.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(p.Content); i += 2 {
		scope, level := p.Content[i].Value, p.Content[i+1].Value
		if level != "write" {
			continue
		}
		allowed := slices.ContainsFunc(c.rules.WriteGrants, func(g WriteGrant) bool {
			return g.Workflow == c.file && g.Scope == scope && (g.Job == "" || g.Job == job)
		})
		if !allowed {
			where := "the workflow"
			if job != "" {
				where = "job " + job
			}
			c.add(p.Content[i+1], RuleWritePermission, "%s grants %s: write, which the allowlist does not", where, scope)
		}
	}
}

// credentials: a job that holds provider secrets must not persist checkout
// credentials.
func (c *checker) credentials(name string, job *yaml.Node, steps []*yaml.Node) {
	if c.secretRef == nil || !eachScalar(job, func(s *yaml.Node) bool { return c.secretRef.MatchString(s.Value) }) {
		return
	}
	for _, s := range steps {
		if actionOf(s) != "actions/checkout" {
			continue
		}
		if v := get(get(s, "with"), "persist-credentials"); v == nil || truthy(scalar(v)) {
			c.add(get(s, "uses"), RulePersistCredentials, "job %s holds provider secrets; actions/checkout must set persist-credentials: false", name)
		}
	}
}

// hostedImage matches the label of a GitHub-hosted runner image.
var hostedImage = regexp.MustCompile(`^(?:ubuntu|windows|macos)-(?:latest|[0-9][0-9.]*)(?:-(?:arm|arm64|large|xlarge|xl|intel))?$`)

// secretUse matches a reference to a secret by name, or to all of them at
// once (toJSON(secrets), secrets[...]).
var secretUse = regexp.MustCompile(`\bsecrets\s*(?:\.\s*([A-Za-z_][A-Za-z0-9_]*)|\.\s*\*|\[|\))`)

// mayBeSelfHosted reports whether a job's runner can be anything but a
// GitHub-hosted image. A job that calls a reusable workflow has no runner
// of its own (the callee is checked by itself).
func mayBeSelfHosted(job *yaml.Node) bool {
	runsOn := get(job, "runs-on")
	if runsOn == nil {
		return false
	}
	labels := []*yaml.Node{}
	eachScalar(runsOn, func(s *yaml.Node) bool { labels = append(labels, s); return false })
	for _, s := range labels {
		if m := matrixRef.FindStringSubmatch(strings.TrimSpace(s.Value)); m != nil {
			values, ok := matrixValues(job, m[1])
			if !ok {
				return true
			}
			for _, v := range values {
				if !hostedLabels(v) {
					return true
				}
			}
			continue
		}
		if strings.Contains(s.Value, "${{") || !hostedLabels(s.Value) {
			return true
		}
	}
	return false
}

// matrixRef matches a runs-on that is exactly one matrix variable.
var matrixRef = regexp.MustCompile(`^\$\{\{\s*matrix\.([A-Za-z0-9_-]+)\s*\}\}$`)

// matrixValues are the literal values the job's matrix gives key, its
// include entries' too; ok is false when one is not a literal (an
// expression, a fromJSON).
func matrixValues(job *yaml.Node, key string) (values []string, ok bool) {
	matrix := get(get(job, "strategy"), "matrix")
	if matrix == nil || matrix.Kind != yaml.MappingNode {
		return nil, false
	}
	add := func(n *yaml.Node) bool {
		literal := true
		eachScalar(n, func(s *yaml.Node) bool {
			if strings.Contains(s.Value, "${{") {
				literal = false
				return true
			}
			values = append(values, s.Value)
			return false
		})
		return literal
	}
	if v := get(matrix, key); v != nil && !add(v) {
		return nil, false
	}
	if inc := get(matrix, "include"); inc != nil {
		if inc.Kind != yaml.SequenceNode {
			return nil, false
		}
		for _, e := range inc.Content {
			if v := get(e, key); v != nil && !add(v) {
				return nil, false
			}
		}
	}
	return values, len(values) > 0
}

// hostedLabels reports whether every label word of s is a GitHub-hosted
// image.
func hostedLabels(s string) bool {
	words := labelWords(s)
	for _, w := range words {
		if !hostedImage.MatchString(w) {
			return false
		}
	}
	return len(words) > 0
}

// selfHostedSecrets reports each secret a job that may run on a
// self-hosted runner references outside the allowlist: the pod runs the
// pull request's code, so whatever secret reaches it is the pull
// request's. Provider secrets are never allowed there.
func (c *checker) selfHostedSecrets(name string, job, workflowEnv *yaml.Node) {
	if !mayBeSelfHosted(job) {
		return
	}
	allowed := func(list []string, secret string) bool {
		return slices.ContainsFunc(list, func(a string) bool { return strings.EqualFold(a, secret) })
	}
	check := func(s *yaml.Node) bool {
		for _, m := range secretUse.FindAllStringSubmatch(s.Value, -1) {
			secret := m[1]
			switch {
			case secret == "":
				c.add(s, RuleSelfHostedSecret, "job %s may run on a self-hosted runner (the pod runs the pull request's code) and hands it every secret at once; pass the few it needs by name", name)
			case allowed(c.rules.ProviderSecrets, secret):
				c.add(s, RuleSelfHostedSecret, "job %s may run on a self-hosted runner (the pod runs the pull request's code) and references the provider secret %s; only trusted GitHub-hosted jobs may hold it", name, secret)
			case !strings.EqualFold(secret, "GITHUB_TOKEN") && !allowed(c.rules.SelfHostedSecrets, secret):
				c.add(s, RuleSelfHostedSecret, "job %s may run on a self-hosted runner (the pod runs the pull request's code) and references secrets.%s, which self_hosted_secrets does not allow", name, secret)
			}
		}
		return false
	}
	eachScalar(job, check)
	eachScalar(workflowEnv, check) // the workflow's env reaches every job
}

// keyPair compares a declared publisher/consumer pair of key expressions.
func keyPair(docs map[string]*yaml.Node, i int, p KeyPair) []Finding {
	find := func(r StepRef) (job, v *yaml.Node, problem string) {
		root := docs[r.File]
		if root == nil {
			return nil, nil, fmt.Sprintf("%s is not among the checked files", r.File)
		}
		job = get(get(root, "jobs"), r.Job)
		steps := get(job, "steps")
		if steps == nil {
			return nil, nil, fmt.Sprintf("%s has no job %s with steps", r.File, r.Job)
		}
		for _, s := range steps.Content {
			if scalar(get(s, "id")) == r.Step || scalar(get(s, "name")) == r.Step {
				input := r.Input
				if input == "" {
					input = "key"
				}
				if v := get(get(s, "with"), input); v != nil {
					return job, v, ""
				}
				return nil, nil, fmt.Sprintf("%s job %s step %s has no with.%s", r.File, r.Job, r.Step, input)
			}
		}
		return nil, nil, fmt.Sprintf("%s job %s has no step %s", r.File, r.Job, r.Step)
	}
	pubJob, pub, perr := find(p.Publisher)
	conJob, con, cerr := find(p.Consumer)
	switch {
	case perr != "":
		return []Finding{{File: p.Publisher.File, Rule: RuleKeyPair, Message: fmt.Sprintf("key_pairs[%d] publisher: %s", i, perr)}}
	case cerr != "":
		return []Finding{{File: p.Consumer.File, Rule: RuleKeyPair, Message: fmt.Sprintf("key_pairs[%d] consumer: %s", i, cerr)}}
	}
	// Compare what each key is computed from, not the expressions: the
	// same ${{ steps.key.outputs.key }} on both sides says nothing when
	// the two key steps read different specs or toolchains.
	pd, cd := derive(pubJob, pub.Value, 0), derive(conJob, con.Value, 0)
	if pd == cd {
		return nil
	}
	msg := fmt.Sprintf("key expression differs from the publisher's (%s:%d): %q vs %q", p.Publisher.File, pub.Line, con.Value, pub.Value)
	if pub.Value == con.Value {
		msg = fmt.Sprintf("the key reads the same expression as the publisher's (%s:%d), %q, but the steps that compute it differ: %s vs %s", p.Publisher.File, pub.Line, con.Value, cd, pd)
	}
	return []Finding{{File: p.Consumer.File, Line: con.Line, Column: con.Column, Rule: RuleKeyPair, Message: msg}}
}

// stepOutput matches a reference to a step's output in an expression.
var stepOutput = regexp.MustCompile(`steps\.([A-Za-z0-9_-]+)\.outputs\.([A-Za-z0-9_-]+)`)

// derive rewrites value with every steps.<id>.outputs.<name> it reads
// replaced by what that step of job computes it from (its uses, with, run
// and env, themselves derived), so that two values compare equal only
// when they are computed the same way.
func derive(job *yaml.Node, value string, depth int) string {
	if depth > 8 {
		return value
	}
	return stepOutput.ReplaceAllStringFunc(value, func(ref string) string {
		m := stepOutput.FindStringSubmatch(ref)
		step := stepByID(job, m[1])
		if step == nil {
			return ref // an unknown step compares as written
		}
		var b strings.Builder
		fmt.Fprintf(&b, "{uses %q", scalar(get(step, "uses")))
		for _, field := range []string{"with", "env"} {
			n := get(step, field)
			if n == nil || n.Kind != yaml.MappingNode {
				continue
			}
			keys := make([]string, 0, len(n.Content)/2)
			vals := map[string]string{}
			for i := 0; i+1 < len(n.Content); i += 2 {
				keys = append(keys, n.Content[i].Value)
				vals[n.Content[i].Value] = n.Content[i+1].Value
			}
			slices.Sort(keys)
			for _, k := range keys {
				fmt.Fprintf(&b, " %s.%s=%q", field, k, derive(job, vals[k], depth+1))
			}
		}
		if run := scalar(get(step, "run")); run != "" {
			fmt.Fprintf(&b, " run=%q", derive(job, run, depth+1))
		}
		return b.String() + "}.outputs." + m[2]
	})
}

// stepByID is the job's step with this id, or nil.
func stepByID(job *yaml.Node, id string) *yaml.Node {
	for _, s := range stepsOf(job) {
		if scalar(get(s, "id")) == id {
			return s
		}
	}
	return nil
}

// consistentInput reports every step whose value of ci.Input differs from
// the value most of the steps it applies to have (the first seen on a tie).
func consistentInput(docs map[string]*yaml.Node, ci ConsistentInput) []Finding {
	type use struct {
		file  string
		node  *yaml.Node // the input, or the step's uses when it is unset
		value string     // "" for the action's default
	}
	var uses []use
	counts := map[string]int{}
	for _, file := range slices.Sorted(maps.Keys(docs)) {
		jobs := get(docs[file], "jobs")
		if jobs == nil || jobs.Kind != yaml.MappingNode {
			continue
		}
		for i := 1; i < len(jobs.Content); i += 2 {
			steps := get(jobs.Content[i], "steps")
			if steps == nil || steps.Kind != yaml.SequenceNode {
				continue
			}
			for _, s := range steps.Content {
				with := get(s, "with")
				if actionOf(s) != ci.Uses || ci.Where != "" && !slices.Contains(ci.Values, scalar(get(with, ci.Where))) {
					continue
				}
				u := use{file: file, node: get(s, "uses")}
				if v := get(with, ci.Input); v != nil {
					u.node, u.value = v, scalar(v)
				}
				uses = append(uses, u)
				counts[u.value]++
			}
		}
	}
	if len(counts) < 2 {
		return nil
	}
	want := uses[0].value
	for _, u := range uses {
		if counts[u.value] > counts[want] {
			want = u.value
		}
	}
	show := func(v string) string {
		if v == "" {
			return "the action's default"
		}
		return strconv.Quote(v)
	}
	var out []Finding
	for _, u := range uses {
		if u.value != want {
			out = append(out, Finding{File: u.file, Line: u.node.Line, Column: u.node.Column, Rule: RuleConsistentInput,
				Message: fmt.Sprintf("%s's %s is %s here but %s in %d other step(s): one value everywhere, or the steps decide differently", ci.Uses, ci.Input, show(u.value), show(want), counts[want])})
		}
	}
	return out
}
