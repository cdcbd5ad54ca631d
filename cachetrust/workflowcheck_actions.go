package cachetrust

import (
	_ "embed"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// CacheActions is the catalog of actions that use the GitHub Actions
// cache, with the inputs that decide whether a step restores and saves
// one, as YAML (workflowcheck_actions.yml). CheckWorkflows reads it; a
// step of an action it does not list, in a privileged job, cannot be
// proven to save no cache.
//
//go:embed workflowcheck_actions.yml
var CacheActions []byte

// cacheAction is one catalog entry.
type cacheAction struct {
	Uses    string       `yaml:"uses"`
	Enable  []cacheInput `yaml:"enable"`
	Off     []cacheInput `yaml:"off"`
	SaveOff []cacheInput `yaml:"save_off"`
	Save    *bool        `yaml:"save"`
	Restore *bool        `yaml:"restore"`
	Env     []string     `yaml:"env"`
	Never   bool         `yaml:"never"`
}

// cacheInput is an input that turns something on.
type cacheInput struct {
	Input    string   `yaml:"input"`
	Default  bool     `yaml:"default"`
	Values   []string `yaml:"values"`
	Contains string   `yaml:"contains"`
}

var (
	catalogOnce sync.Once
	catalog     map[string]cacheAction
	catalogErr  error
)

// cacheCatalog parses CacheActions once.
func cacheCatalog() (map[string]cacheAction, error) {
	catalogOnce.Do(func() {
		var list []cacheAction
		if err := decodeStrict(CacheActions, &list); err != nil {
			catalogErr = fmt.Errorf("cachetrust: workflowcheck_actions.yml: %w", err)
			return
		}
		catalog = map[string]cacheAction{}
		for _, a := range list {
			catalog[strings.ToLower(a.Uses)] = a
		}
	})
	return catalog, catalogErr
}

// on reports whether a step's with (and the input's default) turns in on,
// and how it reads; known is false for an expression this file cannot
// evaluate (other than ${{ true }} and ${{ false }}), which the caller
// reads in the direction that finds a cache: on for an enabling input,
// not on for one that turns the cache (or its saving) off.
func (in cacheInput) on(with *yaml.Node) (on, known bool, why string) {
	v := strings.TrimSpace(scalar(get(with, in.Input)))
	if strings.Contains(v, "${{") {
		switch lit := strings.Join(strings.Fields(strings.TrimSuffix(strings.TrimPrefix(v, "${{"), "}}")), ""); lit {
		case "true", "false":
			// A literal: read as if written plainly.
			plain := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{{Kind: yaml.ScalarNode, Value: in.Input}, {Kind: yaml.ScalarNode, Value: lit}}}
			on, why = in.value(plain)
			return on, true, why
		}
		on, why = in.value(with)
		return on, false, why
	}
	on, why = in.value(with)
	return on, true, why
}

func (in cacheInput) value(with *yaml.Node) (bool, string) {
	v := get(with, in.Input)
	if v == nil {
		if in.Default {
			return true, fmt.Sprintf("%s defaults to on", in.Input)
		}
		return false, ""
	}
	val := strings.TrimSpace(scalar(v))
	switch {
	case strings.Contains(val, "${{"):
		return true, fmt.Sprintf("%s: %s may turn it on", in.Input, val)
	case in.Contains != "":
		return strings.Contains(val, in.Contains), fmt.Sprintf("%s: %s", in.Input, val)
	case len(in.Values) > 0:
		for _, want := range in.Values {
			if strings.EqualFold(val, want) {
				return true, fmt.Sprintf("%s: %s", in.Input, val)
			}
		}
		return false, ""
	}
	return truthy(val), fmt.Sprintf("%s: %s", in.Input, val)
}

// anyOn is the first input of ins that is on, an unknown expression
// counting as on (an enabling input).
func anyOn(ins []cacheInput, with *yaml.Node) (bool, string) {
	for _, in := range ins {
		if ok, _, why := in.on(with); ok {
			return true, why
		}
	}
	return false, ""
}

// anyOff is whether an input of ins is known to be on: an input that turns
// the cache off proves nothing when it is an expression.
func anyOff(ins []cacheInput, with *yaml.Node) bool {
	for _, in := range ins {
		if ok, known, _ := in.on(with); ok && known {
			return true
		}
	}
	return false
}

// cacheUse is what a step does with the cache.
type cacheUse struct {
	known    bool   // the catalog lists the action (or it is first-party or local)
	restores bool   // it uses the cache at all
	saves    bool   // it saves one
	why      string // which input decided, for the message
	fix      string // how to keep the step from saving
}

var truthyEnv = regexp.MustCompile(`(?i)^\s*(true|on|1|yes|\$\{\{.*\}\})\s*$`)

// stepCache says what a step does with the cache, from the catalog. env
// holds the env blocks that reach the job's steps (the workflow's, the
// job's, every step's: a tool such as sccache reads its switch where the
// compiler runs), and runs the job's run scripts (a switch written to
// $GITHUB_ENV).
func stepCache(step *yaml.Node, env []*yaml.Node, runs []string) cacheUse {
	action := actionOf(step)
	cat, err := cacheCatalog()
	if err != nil {
		panic(err) // the embedded catalog is tested
	}
	a, ok := cat[strings.ToLower(action)]
	if !ok {
		return cacheUse{known: action == "" || firstParty(action)}
	}
	if a.Never {
		return cacheUse{known: true}
	}
	with := get(step, "with")
	use := cacheUse{known: true, why: action + " uses the cache"}
	if len(a.Enable) > 0 {
		on, why := anyOn(a.Enable, with)
		if !on {
			return use
		}
		use.why = fmt.Sprintf("%s uses the cache (%s)", action, why)
	}
	if anyOff(a.Off, with) {
		return use
	}
	if len(a.Env) > 0 {
		set := false
		for _, e := range append(env, get(step, "env")) {
			for _, name := range a.Env {
				if v := get(e, name); v != nil && truthyEnv.MatchString(scalar(v)) {
					set, use.why = true, fmt.Sprintf("%s uses the cache (%s: %s)", action, name, scalar(v))
				}
			}
		}
		for _, run := range runs {
			for _, name := range a.Env {
				if strings.Contains(run, name) && strings.Contains(run, "GITHUB_ENV") {
					set, use.why = true, fmt.Sprintf("%s uses the cache (a run step writes %s to $GITHUB_ENV)", action, name)
				}
			}
		}
		if !set {
			// It may still be configured where this file cannot show
			// (a run step writing GITHUB_ENV): it uses a cache as far as a
			// release is concerned, but is not proven to save one.
			use.restores = true
			return use
		}
	}
	use.restores = a.Restore == nil || *a.Restore
	use.saves = a.Save == nil || *a.Save
	if anyOff(a.SaveOff, with) {
		use.saves = false
	}
	use.fix = a.fix()
	return use
}

// fix says how to keep a step of the action from saving.
func (a cacheAction) fix() string {
	set := func(in cacheInput, def string) string {
		v := def
		if len(in.Values) > 0 {
			v = in.Values[0]
		}
		return fmt.Sprintf("set %s: %s", in.Input, v)
	}
	switch {
	case a.Uses == "actions/cache" || a.Uses == "actions/cache/save":
		return "use actions/cache/restore"
	case len(a.SaveOff) > 0:
		return set(a.SaveOff[0], "true") + " (it still restores)"
	case len(a.Enable) > 0 && a.Enable[0].Contains == "":
		return fmt.Sprintf("set %s: false", a.Enable[0].Input)
	case len(a.Off) > 0:
		return set(a.Off[0], "true")
	case len(a.Env) > 0:
		return fmt.Sprintf("leave %s unset in this job", a.Env[0])
	}
	return "remove it from this job"
}

// firstParty reports whether an action is GitHub's own (actions/…,
// github/…) or runs from this repository or an image: none of those
// saves a cache unless the catalog lists it (actions/cache, the setup
// actions), and local actions are followed.
func firstParty(action string) bool {
	lower := strings.ToLower(action)
	return strings.HasPrefix(lower, "actions/") || strings.HasPrefix(lower, "github/") ||
		strings.HasPrefix(action, "./") || strings.HasPrefix(lower, "docker://")
}
