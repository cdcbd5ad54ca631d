package cachetrust

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// cacheScope is what decides whether a job's cache use is a finding: the
// triggers and trust of the workflow that runs it, which for a called
// reusable workflow or a local action is its caller's.
type cacheScope struct {
	tr        map[string]*yaml.Node
	priv      bool   // the workflow runs PR-controlled code in the default branch's scope
	why       string // which trigger makes it privileged
	publisher bool   // the declared cache publisher
	isolated  bool   // an isolated writer (pull_request: saves scoped to the PR)
	release   string // non-empty: the job publishes artifacts (release trigger, or a publisher action), and how
	env       []*yaml.Node
	via       string // for a followed file: who calls it
	origin    string // the workflow file the run starts in
}

// releaseTriggers says whether the workflow's triggers are those used to
// publish artifacts (a release, a tag push, a push to a release branch),
// and whether they are only tag or release events.
func releaseTriggers(tr map[string]*yaml.Node) (string, bool) {
	var found []string
	onlyTags := true
	if _, ok := tr["release"]; ok {
		found = append(found, "the release event")
	}
	if push := tr["push"]; push != nil {
		if get(push, "tags") != nil || get(push, "tags-ignore") != nil {
			found = append(found, "tag pushes")
		}
		release := false
		eachScalar(get(push, "branches"), func(s *yaml.Node) bool {
			release = strings.Contains(strings.ToLower(s.Value), "release")
			return release
		})
		if release {
			found = append(found, "pushes to release branches")
			onlyTags = false
		}
	}
	return strings.Join(found, " and "), onlyTags && len(found) > 0
}

// publisherActions are well-known actions that publish artifacts (package
// registries, GitHub releases, container registries, cloud deployments):
// a job that runs one is publishing whatever its trigger.
var publisherActions = []string{
	"pypa/gh-action-pypi-publish", "rubygems/release-gem", "jreleaser/release-action", "goreleaser/goreleaser-action",
	"softprops/action-gh-release", "release-drafter/release-drafter", "googleapis/release-please-action",
	"docker/build-push-action", "redhat-actions/push-to-registry",
	"aws-actions/amazon-ecs-deploy-task-definition", "aws-actions/aws-cloudformation-github-deploy",
	"Azure/aci-deploy", "Azure/container-apps-deploy-action", "Azure/functions-action", "Azure/sql-action",
	"cloudflare/wrangler-action", "google-github-actions/deploy-appengine", "google-github-actions/deploy-cloudrun",
	"google-github-actions/deploy-cloud-functions",
}

// publishingStep is the job's first step of a publisher action, if any.
func publishingStep(steps []*yaml.Node) string {
	for _, s := range steps {
		a := actionOf(s)
		if !slices.ContainsFunc(publisherActions, func(p string) bool { return strings.EqualFold(p, a) }) {
			continue
		}
		if a == "docker/build-push-action" {
			if v := get(get(s, "with"), "push"); v != nil && !truthy(scalar(v)) {
				continue // builds without pushing
			}
		}
		return a
	}
	return ""
}

// tagExpr matches the tag-push guards a cache input can be set from.
var tagExpr = regexp.MustCompile(`^(!?)\s*\(?\s*(?:startsWith\(\s*github\.ref\s*,\s*'refs/tags/'\s*\)|github\.event_name\s*==\s*'push'\s*&&\s*github\.ref_type\s*==\s*'tag'|github\.ref_type\s*==\s*'tag'\s*&&\s*github\.event_name\s*==\s*'push')\s*\)?$`)

// onATagPush evaluates an input's expression for a tag push, when it is
// one of the guards tagExpr knows; ok is false for any other expression.
func onATagPush(value string) (on, ok bool) {
	inner, found := strings.CutPrefix(strings.TrimSpace(value), "${{")
	if !found {
		return false, false
	}
	inner = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(inner), "}}"))
	switch inner {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	m := tagExpr.FindStringSubmatch(inner)
	if m == nil {
		return false, false
	}
	return m[1] == "", true
}

// jobCache checks the cache use of one job's steps under sc, following
// local actions into their files.
func (c *checker) jobCache(sc cacheScope, job string, steps []*yaml.Node, guarded bool, seen map[string]bool) {
	for _, s := range steps {
		uses := scalar(get(s, "uses"))
		if strings.HasPrefix(uses, "./") {
			c.localAction(sc, job, s, uses, guarded, seen)
			continue
		}
		at := get(s, "uses")
		use := stepCache(s, append(slices.Clone(sc.env), stepEnvs(steps)...), runScripts(steps))
		if sc.release != "" && use.restores && !c.tagGuardedOff(sc, s) {
			c.add(at, RuleReleaseCache, "job %s%s publishes artifacts (%s), and %s: a poisoned cache entry would ship in the release; turn its cache off in this job", job, sc.via, sc.release, use.why)
		}
		if use.saves {
			reason := fmt.Sprintf("%s and saves it: %s", use.why, use.fix)
			switch {
			case sc.priv:
				c.add(at, RulePrivilegedCacheSave, "job %s%s runs PR-controlled code in a privileged context (%s) and %s", job, sc.via, sc.why, reason)
			case sc.publisher:
				stepGuard := strings.Contains(scalar(get(s, "if")), "refs/heads/"+c.rules.DefaultBranch)
				if !guarded && !stepGuard && !onlyDefaultBranch(sc.tr, c.rules.DefaultBranch) {
					c.add(at, RulePublisherBranch, "job %s saves a cache without an if: github.ref == 'refs/heads/%s' guard, and the workflow can run on other refs", job, c.rules.DefaultBranch)
				}
			case !sc.isolated:
				c.add(at, RuleNonPublisherSave, "job %s%s %s; only the declared publisher may save shared caches", job, sc.via, reason)
			}
		}
		if sc.priv && !use.known && !slices.ContainsFunc(c.rules.NoCacheActions, func(a string) bool { return strings.EqualFold(a, actionOf(s)) }) {
			c.warn(at, RuleUnprovenCache, "job %s%s runs PR-controlled code in a privileged context (%s) and uses %s, which the cache catalog does not know: nothing proves it saves no cache; review it and list it in no_cache_actions, or move it out of this job", job, sc.via, sc.why, actionOf(s))
		}
	}
}

// stepEnvs are the env blocks of a job's steps.
func stepEnvs(steps []*yaml.Node) []*yaml.Node {
	var out []*yaml.Node
	for _, s := range steps {
		if e := get(s, "env"); e != nil {
			out = append(out, e)
		}
	}
	return out
}

// runScripts are a job's run scripts.
func runScripts(steps []*yaml.Node) []string {
	var out []string
	for _, s := range steps {
		if r := scalar(get(s, "run")); r != "" {
			out = append(out, r)
		}
	}
	return out
}

// tagGuardedOff reports whether, in a workflow run only by tag or release
// events, the step's cache input is an expression that is off on a tag
// push (an expression zizmor's heuristics also read).
func (c *checker) tagGuardedOff(sc cacheScope, s *yaml.Node) bool {
	if _, onlyTags := releaseTriggers(sc.tr); !onlyTags {
		return false
	}
	cat, _ := cacheCatalog()
	a, ok := cat[strings.ToLower(actionOf(s))]
	if !ok {
		return false
	}
	with := get(s, "with")
	for _, in := range a.Enable {
		if on, ok := onATagPush(scalar(get(with, in.Input))); ok {
			return !on
		}
	}
	for _, in := range a.Off {
		if on, ok := onATagPush(scalar(get(with, in.Input))); ok {
			return on
		}
	}
	return false
}

// localAction follows a step's uses: ./dir into dir/action.yml (or
// action.yaml) and checks a composite action's steps under the caller's
// scope. A local action that is not among the checked files, in a
// privileged job, cannot be proven to save no cache.
func (c *checker) localAction(sc cacheScope, job string, s *yaml.Node, uses string, guarded bool, seen map[string]bool) {
	dir := path.Clean(strings.TrimPrefix(uses, "./"))
	var file string
	var root *yaml.Node
	for _, name := range []string{"action.yml", "action.yaml"} {
		if r := c.docs[path.Join(dir, name)]; r != nil {
			file, root = path.Join(dir, name), r
			break
		}
	}
	if root == nil {
		switch {
		case sc.priv:
			c.warn(get(s, "uses"), RuleUnprovenCache, "job %s%s runs PR-controlled code in a privileged context (%s) and uses the local action %s, whose action.yml is not among the checked files: nothing proves it saves no cache", job, sc.via, sc.why, uses)
		case !sc.isolated:
			c.warn(get(s, "uses"), RuleUnprovenCache, "job %s%s uses the local action %s, whose action.yml is not among the checked files: its cache use goes unchecked", job, sc.via, uses)
		}
		return
	}
	if seen[file] {
		return
	}
	seen[file] = true
	defer delete(seen, file)
	steps := get(get(root, "runs"), "steps")
	if steps == nil || steps.Kind != yaml.SequenceNode {
		return // a JavaScript or Docker action: its code is not workflow YAML
	}
	caller := c.file
	c.file = file
	sc.via = fmt.Sprintf(" (through %s, used by %s)", uses, caller)
	c.jobCache(sc, job, steps.Content, guarded, seen)
	c.restoreKeys(sc.origin, job, steps.Content)
	c.file = caller
}

// reusableCall checks a job that calls a local reusable workflow: the
// callee's jobs run under the caller's triggers and trust.
func (c *checker) reusableCall(sc cacheScope, job string, uses string, seen map[string]bool) {
	file := path.Clean(strings.TrimPrefix(uses, "./"))
	root := c.docs[file]
	if root == nil {
		if sc.priv {
			c.warn(nil, RuleUnprovenCache, "job %s%s runs PR-controlled code in a privileged context (%s) and calls %s, which is not among the checked files: nothing proves it saves no cache", job, sc.via, sc.why, uses)
		}
		return
	}
	if seen[file] {
		return
	}
	seen[file] = true
	defer delete(seen, file)
	caller := c.file
	c.file = file
	defer func() { c.file = caller }()
	jobs := get(root, "jobs")
	if jobs == nil || jobs.Kind != yaml.MappingNode {
		return
	}
	callee := sc
	callee.publisher = slices.Contains(c.rules.Publishers, caller)
	callee.isolated = slices.Contains(c.rules.IsolatedWriters, caller)
	for i := 0; i+1 < len(jobs.Content); i += 2 {
		name, j := jobs.Content[i].Value, jobs.Content[i+1]
		jsc := callee
		jsc.via = fmt.Sprintf(" (called by %s job %s)", caller, job)
		jsc.env = append(slices.Clone(sc.env[:min(len(sc.env), 1)]), get(root, "env"), get(j, "env"))
		if u := scalar(get(j, "uses")); strings.HasPrefix(u, "./") {
			c.reusableCall(jsc, name, u, seen)
			continue
		} else if u != "" {
			c.remoteCall(jsc, name, j)
			continue
		}
		c.restoreKeys(sc.origin, name, stepsOf(j))
		c.scopeJob(&jsc, j)
		c.jobCache(jsc, name, stepsOf(j), strings.Contains(scalar(get(j, "if")), "refs/heads/"+c.rules.DefaultBranch), seen)
	}
}

// remoteCall warns about a reusable workflow of another repository called
// from a privileged job: its cache use cannot be read here. Its owner and
// path go in no_cache_actions once reviewed.
func (c *checker) remoteCall(sc cacheScope, job string, j *yaml.Node) {
	uses := get(j, "uses")
	target, _, _ := strings.Cut(scalar(uses), "@")
	if !sc.priv || slices.ContainsFunc(c.rules.NoCacheActions, func(a string) bool { return strings.EqualFold(a, target) }) {
		return
	}
	c.warn(uses, RuleUnprovenCache, "job %s%s runs PR-controlled code in a privileged context (%s) and calls the reusable workflow %s of another repository: nothing here proves it saves no cache; review it and list it in no_cache_actions", job, sc.via, sc.why, target)
}

// scopeJob refines a workflow's scope for one job: a job that may run on
// a self-hosted runner (the pod) runs PR-controlled code there, and a job
// that runs a publisher action publishes.
func (c *checker) scopeJob(sc *cacheScope, job *yaml.Node) {
	if !sc.priv && !sc.isolated && mayBeSelfHosted(job) {
		sc.priv, sc.why = true, "a self-hosted runner, such as the pod, runs it"
	}
	if sc.release == "" {
		if a := publishingStep(stepsOf(job)); a != "" {
			sc.release = "it runs " + a
		}
	}
}

func stepsOf(job *yaml.Node) []*yaml.Node {
	if steps := get(job, "steps"); steps != nil && steps.Kind == yaml.SequenceNode {
		return steps.Content
	}
	return nil
}
