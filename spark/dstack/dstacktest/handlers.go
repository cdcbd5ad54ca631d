package dstacktest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The request models' fields (server/schemas/*.py, core/models/*.py at
// the commit in ../testdata/SOURCES.md). Every dstack request model
// forbids unknown fields.
var (
	runSpecKeys = []string{"run_name", "repo_id", "repo_data", "repo_code_hash", "repo_dir", "file_archives", "working_dir",
		"configuration_path", "configuration", "profile", "ssh_key_pub"}
	// BaseRunConfiguration, ConfigurationWithPortsParams and ProfileParams:
	// what tasks and dev environments share.
	commonConfKeys = []string{"type", "name", "image", "user", "privileged", "entrypoint", "working_dir", "home_dir", "registry_auth",
		"python", "nvcc", "single_branch", "env", "shell", "resources", "priority", "volumes", "docker", "repos", "files", "dstack", "setup",
		"ports", "backends", "regions", "availability_zones", "instance_types", "reservation", "spot_policy", "retry", "max_duration",
		"stop_duration", "max_price", "creation_policy", "idle_duration", "utilization_policy", "startup_order", "stop_criteria",
		"schedule", "fleets", "instances", "tags", "backend_options"}
	taskKeys   = append(slices.Clone(commonConfKeys), "commands", "nodes", "groups")
	devEnvKeys = append(slices.Clone(commonConfKeys), "ide", "version", "init", "inactivity_duration")
	// Profile: ProfileParams and ProfileProps.
	profileKeys = []string{"backends", "regions", "availability_zones", "instance_types", "reservation", "spot_policy", "retry",
		"max_duration", "stop_duration", "max_price", "creation_policy", "idle_duration", "utilization_policy", "startup_order",
		"stop_criteria", "schedule", "fleets", "instances", "tags", "backend_options", "name", "default"}
	listRunsKeys = []string{"project_name", "repo_id", "username", "only_active", "include_jobs", "job_submissions_limit",
		"prev_submitted_at", "prev_run_id", "limit", "ascending"}
)

var (
	resourceNameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{1,40}$`)
	envStringRE    = regexp.MustCompile(`^([a-zA-Z_][a-zA-Z0-9_]*)(=.*$|$)`)
	uuidRE         = regexp.MustCompile(`^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$`)
)

// verr is one pydantic validation error as FastAPI reports it (422).
type verr struct {
	Type  string `json:"type"`
	Loc   []any  `json:"loc"`
	Msg   string `json:"msg"`
	Input any    `json:"input"`
}

func invalid(w http.ResponseWriter, errs ...verr) {
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"detail": errs})
}

// check collects validation errors.
type check struct{ errs []verr }

func at(loc []any, more ...any) []any { return append(slices.Clone(loc), more...) }

func (c *check) add(typ string, loc []any, msg string, input any) {
	c.errs = append(c.errs, verr{Type: typ, Loc: loc, Msg: msg, Input: input})
}

// object is v as a model's fields, or nil (an error recorded).
func (c *check) object(v any, loc []any) map[string]any {
	m, ok := v.(map[string]any)
	if !ok {
		c.add("model_type", loc, "Input should be a valid dictionary or object to extract fields from", v)
		return nil
	}
	return m
}

// fields refuses unknown keys and requires the required ones.
func (c *check) fields(m map[string]any, loc []any, allowed, required []string) {
	for _, k := range slices.Sorted(mapsKeys(m)) {
		if !slices.Contains(allowed, k) {
			c.add("extra_forbidden", at(loc, k), "Extra inputs are not permitted", m[k])
		}
	}
	for _, k := range required {
		if _, ok := m[k]; !ok {
			c.add("missing", at(loc, k), "Field required", m)
		}
	}
}

func mapsKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// str checks an optional string field (numbers coerce, as dstack's
// coerce_numbers_to_str does).
func (c *check) str(m map[string]any, key string, loc []any) (string, bool) {
	v, ok := m[key]
	if !ok || v == nil {
		return "", false
	}
	switch v := v.(type) {
	case string:
		return v, true
	case json.Number:
		return v.String(), true
	}
	c.add("string_type", at(loc, key), "Input should be a valid string", v)
	return "", false
}

// boolean checks a bool field as pydantic's lax mode does.
func (c *check) boolean(m map[string]any, key string, loc []any, def bool) bool {
	v, ok := m[key]
	if !ok {
		return def
	}
	switch v := v.(type) {
	case bool:
		return v
	case json.Number:
		switch v.String() {
		case "0":
			return false
		case "1":
			return true
		}
	case string:
		switch strings.ToLower(v) {
		case "0", "off", "f", "false", "n", "no":
			return false
		case "1", "on", "t", "true", "y", "yes":
			return true
		}
	}
	c.add("bool_type", at(loc, key), "Input should be a valid boolean", v)
	return def
}

// integer checks an optional integer field within [lo, hi].
func (c *check) integer(m map[string]any, key string, loc []any, lo, hi int64) (int64, bool) {
	v, ok := m[key]
	if !ok || v == nil {
		return 0, false
	}
	var n int64
	var err error
	switch v := v.(type) {
	case json.Number:
		n, err = strconv.ParseInt(v.String(), 10, 64)
	case string:
		n, err = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	default:
		err = fmt.Errorf("not a number")
	}
	if err != nil {
		c.add("int_type", at(loc, key), "Input should be a valid integer", v)
		return 0, false
	}
	if n < lo {
		c.add("greater_than_equal", at(loc, key), fmt.Sprintf("Input should be greater than or equal to %d", lo), v)
	}
	if n > hi {
		c.add("less_than_equal", at(loc, key), fmt.Sprintf("Input should be less than or equal to %d", hi), v)
	}
	return n, true
}

func (c *check) uuid(m map[string]any, key string, loc []any) (string, bool) {
	s, ok := c.str(m, key, loc)
	if ok && !uuidRE.MatchString(s) {
		c.add("uuid_parsing", at(loc, key), "Input should be a valid UUID", s)
		return "", false
	}
	return strings.ToLower(s), ok
}

func (c *check) strings(m map[string]any, key string, loc []any) []string {
	v, ok := m[key]
	if !ok || v == nil {
		return nil
	}
	list, isList := v.([]any)
	if !isList {
		c.add("list_type", at(loc, key), "Input should be a valid list", v)
		return nil
	}
	var out []string
	for i, it := range list {
		switch it := it.(type) {
		case string:
			out = append(out, it)
		case json.Number:
			out = append(out, it.String())
		default:
			c.add("string_type", at(loc, key, i), "Input should be a valid string", it)
		}
	}
	return out
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// selector is one configuration.instances entry (profiles.py
// InstanceNameSelector, InstanceHostnameSelector, FleetInstanceSelector).
type selector struct {
	name, hostname, fleet string
	instance              int64
	byFleet               bool
}

func (s selector) String() string {
	switch {
	case s.hostname != "":
		return "hostname=" + s.hostname
	case s.byFleet:
		return fmt.Sprintf("fleet=%s/instance=%d", s.fleet, s.instance)
	}
	return "name=" + s.name
}

func (s selector) matches(f *fleet, in *instance) bool {
	switch {
	case s.hostname != "":
		return strings.EqualFold(in.hostname, s.hostname)
	case s.byFleet:
		return f.name == s.fleet && int64(in.num) == s.instance
	}
	return in.name == s.name
}

// selectors reads a validated configuration's instances.
func selectors(conf map[string]any) []selector {
	var out []selector
	for _, it := range asList(conf["instances"]) {
		switch it := it.(type) {
		case string:
			out = append(out, selector{name: it})
		case map[string]any:
			sel := selector{}
			sel.name, _ = it["name"].(string)
			sel.hostname, _ = it["hostname"].(string)
			if f, ok := it["fleet"]; ok {
				sel.byFleet = true
				sel.fleet = fleetName(f)
				if n, ok := it["instance"].(json.Number); ok {
					sel.instance, _ = n.Int64()
				}
			}
			out = append(out, sel)
		}
	}
	return out
}

func (c *check) instanceSelectors(m map[string]any, loc []any) {
	v, ok := m["instances"]
	if !ok || v == nil {
		return
	}
	list, isList := v.([]any)
	switch {
	case !isList:
		c.add("list_type", at(loc, "instances"), "Input should be a valid list", v)
		return
	case len(list) == 0:
		c.add("too_short", at(loc, "instances"), "List should have at least 1 item after validation, not 0", v)
		return
	}
	for i, it := range list {
		l := at(loc, "instances", i)
		switch it := it.(type) {
		case string:
		case map[string]any:
			keys := slices.Sorted(mapsKeys(it))
			switch {
			case slices.Equal(keys, []string{"hostname"}):
				if h, ok := it["hostname"].(string); !ok || h == "" {
					c.add("string_too_short", at(l, "InstanceHostnameSelector", "hostname"), "String should have at least 1 character", it["hostname"])
				}
			case slices.Equal(keys, []string{"name"}):
				if n, ok := it["name"].(string); !ok || n == "" {
					c.add("string_too_short", at(l, "InstanceNameSelector", "name"), "String should have at least 1 character", it["name"])
				}
			case slices.Equal(keys, []string{"fleet", "instance"}):
				n, ok := it["instance"].(json.Number)
				if i, err := n.Int64(); !ok || err != nil || i < 0 || fleetName(it["fleet"]) == "" {
					c.add("value_error", at(l, "FleetInstanceSelector"), "Value error, the fleet must be a name and the instance a number >= 0", it)
				}
			default:
				c.add("extra_forbidden", l, "Extra inputs are not permitted", it)
			}
		default:
			c.add("model_type", l, "Input should be a valid dictionary or instance of InstanceNameSelector", it)
		}
	}
}

// fleetName is an EntityReference's name ("project/name" for another
// project's fleet).
func fleetName(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case map[string]any:
		name, _ := v["name"].(string)
		if p, ok := v["project"].(string); ok && p != "" {
			return p + "/" + name
		}
		return name
	}
	return ""
}

func fleetNames(v any) []string {
	var out []string
	for _, f := range asList(v) {
		if n := fleetName(f); n != "" {
			out = append(out, n)
		}
	}
	return out
}

func (c *check) fleetRefs(m map[string]any, loc []any) {
	v, ok := m["fleets"]
	if !ok || v == nil {
		return
	}
	list, isList := v.([]any)
	if !isList {
		c.add("list_type", at(loc, "fleets"), "Input should be a valid list", v)
		return
	}
	for i, it := range list {
		ok := false
		switch it := it.(type) {
		case string:
			parts := strings.Split(it, "/")
			ok = len(parts) <= 2 && !slices.Contains(parts, "")
		case map[string]any:
			keys := slices.Sorted(mapsKeys(it))
			name, _ := it["name"].(string)
			ok = name != "" && (slices.Equal(keys, []string{"name"}) || slices.Equal(keys, []string{"name", "project"}))
		}
		if !ok {
			c.add("value_error", at(loc, "fleets", i), "Value error, Invalid entity reference. Only `<name>` or `<project>/<name>` formats are allowed", it)
		}
	}
}

func (c *check) env(m map[string]any, loc []any) {
	v, ok := m["env"]
	if !ok || v == nil {
		return
	}
	switch v := v.(type) {
	case map[string]any:
		for k, val := range v {
			switch val.(type) {
			case string, json.Number:
			default:
				c.add("string_type", at(loc, "env", k), "Input should be a valid string", val)
			}
		}
	case []any:
		for i, it := range v {
			if s, ok := it.(string); !ok || !envStringRE.MatchString(s) {
				c.add("string_pattern_mismatch", at(loc, "env", i), "String should match pattern '"+envStringRE.String()+"'", it)
			}
		}
	default:
		c.add("dict_type", at(loc, "env"), "Input should be a valid dictionary", v)
	}
}

// envOf reads a validated env.
func envOf(v any) map[string]string {
	out := map[string]string{}
	switch v := v.(type) {
	case map[string]any:
		for k, val := range v {
			switch val := val.(type) {
			case string:
				out[k] = val
			case json.Number:
				out[k] = val.String()
			}
		}
	case []any:
		for _, it := range v {
			if s, ok := it.(string); ok {
				if k, val, ok := strings.Cut(s, "="); ok {
					out[k] = val
				}
			}
		}
	}
	return out
}

// configuration checks a run configuration (a task or dev environment;
// the union is discriminated by type, so errors sit under the type's
// name as pydantic puts them).
func (c *check) configuration(conf map[string]any, loc []any) string {
	typ, _ := conf["type"].(string)
	var allowed []string
	switch typ {
	case "task":
		allowed = taskKeys
	case "dev-environment":
		allowed = devEnvKeys
	case "service":
		return typ
	case "":
		c.add("union_tag_not_found", loc, "Unable to extract tag using discriminator 'type'", conf)
		return ""
	default:
		c.add("union_tag_invalid", loc, fmt.Sprintf("Input tag '%s' found using 'type' does not match any of the expected tags: 'dev-environment', 'task', 'service'", typ), conf)
		return ""
	}
	l := at(loc, typ)
	c.fields(conf, l, allowed, nil)
	c.str(conf, "name", l)
	c.str(conf, "image", l)
	c.env(conf, l)
	c.fleetRefs(conf, l)
	c.instanceSelectors(conf, l)
	if p, ok := c.str(conf, "creation_policy", l); ok && p != "reuse" && p != "reuse-or-create" {
		c.add("enum", at(l, "creation_policy"), "Input should be 'reuse' or 'reuse-or-create'", p)
	}
	switch typ {
	case "task":
		cmds := c.strings(conf, "commands", l)
		c.integer(conf, "nodes", l, 1, 1<<31)
		_, image := c.str(conf, "image", l)
		if conf["groups"] != nil && conf["nodes"] != nil {
			c.add("value_error", l, "Value error, `nodes` and `groups` are mutually exclusive", conf)
		}
		if len(cmds) == 0 && !image && conf["groups"] == nil {
			c.add("value_error", l, "Value error, Either `commands` or `image` must be set", conf)
		}
	case "dev-environment":
		c.strings(conf, "init", l)
		ide, hasIDE := c.str(conf, "ide", l)
		if hasIDE && !slices.Contains([]string{"vscode", "cursor", "windsurf", "zed"}, ide) {
			c.add("literal_error", at(l, "ide"), "Input should be 'vscode', 'cursor', 'windsurf' or 'zed'", ide)
		}
		if _, ok := c.str(conf, "version", l); ok && !hasIDE {
			c.add("value_error", l, "Value error, `version` requires `ide` to be set", conf)
		}
		if conf["entrypoint"] != nil {
			c.add("value_error", at(l, "entrypoint"), "Value error, entrypoint is not supported for dev-environment", conf["entrypoint"])
		}
	}
	return typ
}

// nameOrID reads a get request's body: the resource's name (under
// nameKey) or its id. A body that does not validate is answered here
// (ok false), as FastAPI answers it.
func nameOrID(w http.ResponseWriter, v any, nameKey string) (name, id string, byName, byID, ok bool) {
	c := &check{}
	loc := []any{"body"}
	if m := c.object(v, loc); m != nil {
		c.fields(m, loc, []string{nameKey, "id"}, nil)
		name, byName = c.str(m, nameKey, loc)
		id, byID = c.uuid(m, "id", loc)
	}
	if len(c.errs) > 0 {
		invalid(w, c.errs...)
		return "", "", false, false, false
	}
	return name, id, byName, byID, true
}

func (s *Server) getFleet(w http.ResponseWriter, p *project, v any) {
	name, id, byName, byID, ok := nameOrID(w, v, "name")
	if !ok {
		return
	}
	if !byName && !byID {
		clientError(w, "error", "name or id must be specified")
		return
	}
	for _, f := range p.fleets {
		if (byID && f.id == id) || (!byID && f.name == name) {
			writeJSON(w, http.StatusOK, s.fleetJSON(p, f))
			return
		}
	}
	clientError(w, "resource_not_exists", "Resource not found")
}

func (s *Server) getRun(w http.ResponseWriter, p *project, v any) {
	name, id, byName, byID, ok := nameOrID(w, v, "run_name")
	if !ok {
		return
	}
	var found *run
	switch {
	case byID:
		for _, r := range p.runs {
			if r.id == id {
				found = r
			}
		}
	case byName:
		found = p.byName(name)
	default:
		clientError(w, "error", "run_name or id must be specified")
		return
	}
	if found == nil {
		clientError(w, "resource_not_exists", "Run not found")
		return
	}
	writeJSON(w, http.StatusOK, s.runJSON(p, found, true))
}

func (s *Server) stopRuns(w http.ResponseWriter, p *project, v any) {
	c := &check{}
	loc := []any{"body"}
	m := c.object(v, loc)
	var names []string
	var abort bool
	if m != nil {
		c.fields(m, loc, []string{"runs_names", "abort"}, []string{"runs_names", "abort"})
		names = c.strings(m, "runs_names", loc)
		abort = c.boolean(m, "abort", loc, false)
	}
	if len(c.errs) > 0 {
		invalid(w, c.errs...)
		return
	}
	now := time.Now()
	for _, r := range p.runs {
		if !slices.Contains(names, r.name) || finished(r.status) {
			continue
		}
		r.termination = "stopped_by_user"
		if abort {
			r.termination = "aborted_by_user"
		}
		r.status, r.stop, r.abort, r.processed = "terminating", true, r.abort || abort, now
		for _, j := range r.jobs {
			if !finished(j.status) {
				j.status, j.processed = "terminating", now
			}
		}
	}
	writeJSON(w, http.StatusOK, nil)
}

func parseTime(s string) (time.Time, bool) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999Z07:00", "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// datetime checks an optional datetime field.
func (c *check) datetime(m map[string]any, key string, loc []any) (time.Time, bool) {
	str, ok := c.str(m, key, loc)
	if !ok {
		return time.Time{}, false
	}
	t, valid := parseTime(str)
	if !valid {
		c.add("datetime_from_date_parsing", at(loc, key), "Input should be a valid datetime or date", str)
	}
	return t, true
}

func (s *Server) listRuns(w http.ResponseWriter, _ *project, v any) {
	c := &check{}
	loc := []any{"body"}
	m := c.object(v, loc)
	if m == nil {
		invalid(w, c.errs...)
		return
	}
	c.fields(m, loc, listRunsKeys, nil)
	projectName, byProject := c.str(m, "project_name", loc)
	repoID, byRepo := c.str(m, "repo_id", loc)
	username, byUser := c.str(m, "username", loc)
	onlyActive := c.boolean(m, "only_active", loc, false)
	includeJobs := c.boolean(m, "include_jobs", loc, true)
	c.integer(m, "job_submissions_limit", loc, 0, 10)
	ascending := c.boolean(m, "ascending", loc, false)
	limit := int64(100)
	if n, ok := c.integer(m, "limit", loc, 0, 100); ok {
		limit = n
	}
	prevAt, byPrevAt := c.datetime(m, "prev_submitted_at", loc)
	prevID, byPrevID := c.uuid(m, "prev_run_id", loc)
	if len(c.errs) > 0 {
		invalid(w, c.errs...)
		return
	}
	out := []any{}
	if !byProject && byRepo {
		writeJSON(w, http.StatusOK, out)
		return
	}
	if byUser && username != User {
		clientError(w, "resource_not_exists", "User not found")
		return
	}
	var projects []*project
	if byProject {
		p := s.projects[projectName]
		if p == nil {
			writeJSON(w, http.StatusOK, out)
			return
		}
		if byRepo && !p.repos[repoID] {
			clientError(w, "repo_does_not_exist", fmt.Sprintf("Repo %s does not exist", repoID))
			return
		}
		projects = []*project{p}
	} else {
		for _, p := range s.projects {
			projects = append(projects, p)
		}
	}
	type entry struct {
		p *project
		r *run
	}
	var runs []entry
	for _, p := range projects {
		for _, r := range p.runs {
			if onlyActive && finished(r.status) {
				continue
			}
			if byRepo && r.spec["repo_id"] != repoID {
				continue
			}
			if byPrevAt {
				var after bool
				if ascending {
					after = r.submitted.After(prevAt) || (byPrevID && r.submitted.Equal(prevAt) && r.id < prevID)
				} else {
					after = r.submitted.Before(prevAt) || (byPrevID && r.submitted.Equal(prevAt) && r.id > prevID)
				}
				if !after {
					continue
				}
			}
			runs = append(runs, entry{p, r})
		}
	}
	slices.SortFunc(runs, func(a, b entry) int {
		if c := a.r.submitted.Compare(b.r.submitted); c != 0 {
			if ascending {
				return c
			}
			return -c
		}
		if ascending {
			return strings.Compare(b.r.id, a.r.id)
		}
		return strings.Compare(a.r.id, b.r.id)
	})
	for _, e := range runs[:min(int64(len(runs)), limit)] {
		out = append(out, s.runJSON(e.p, e.r, includeJobs))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) applyRun(w http.ResponseWriter, p *project, v any) {
	c := &check{}
	loc := []any{"body"}
	body := c.object(v, loc)
	var spec, conf map[string]any
	var force bool
	var current any
	typ := ""
	if body != nil {
		c.fields(body, loc, []string{"plan", "force"}, []string{"plan", "force"})
		force = c.boolean(body, "force", loc, false)
		if planV, ok := body["plan"]; ok {
			plan := c.object(planV, at(loc, "plan"))
			if plan != nil {
				c.fields(plan, at(loc, "plan"), []string{"run_spec", "current_resource"}, []string{"run_spec"})
				current = plan["current_resource"]
				if specV, ok := plan["run_spec"]; ok {
					sl := at(loc, "plan", "run_spec")
					spec = c.object(specV, sl)
					if spec != nil {
						c.fields(spec, sl, runSpecKeys, []string{"configuration"})
						c.str(spec, "run_name", sl)
						c.str(spec, "repo_id", sl)
						c.str(spec, "ssh_key_pub", sl)
						if confV, ok := spec["configuration"]; ok {
							if conf = c.object(confV, at(sl, "configuration")); conf != nil {
								typ = c.configuration(conf, at(sl, "configuration"))
							}
						}
						if prof, ok := spec["profile"]; ok && prof != nil {
							if pm := c.object(prof, at(sl, "profile")); pm != nil {
								c.fields(pm, at(sl, "profile"), profileKeys, nil)
								c.instanceSelectors(pm, at(sl, "profile"))
								c.fleetRefs(pm, at(sl, "profile"))
							}
						}
					}
				}
			}
		}
	}
	if len(c.errs) > 0 {
		invalid(w, c.errs...)
		return
	}
	if typ == "service" {
		clientError(w, "error", "dstacktest: services are not part of the fake")
		return
	}
	// validate_run_spec_and_set_defaults (services/runs/spec.py).
	name, hasName := spec["run_name"].(string)
	if hasName && !resourceNameRE.MatchString(name) {
		clientError(w, "error", "Resource name should match regex '^[a-z][a-z0-9-]{1,40}$'")
		return
	}
	repoID, hasRepo := spec["repo_id"].(string)
	repoData, hasRepoData := spec["repo_data"].(map[string]any)
	switch {
	case !hasRepo && hasRepoData:
		clientError(w, "error", "repo_data must not be set if repo_id is not set")
		return
	case hasRepo && !hasRepoData:
		clientError(w, "error", "repo_id must not be set if repo_data is not set")
		return
	case hasRepo && repoData["repo_type"] != "virtual" && !p.repos[repoID]:
		clientError(w, "repo_does_not_exist", fmt.Sprintf("Repo %s does not exist", repoID))
		return
	}
	if !hasRepo {
		spec["repo_id"], spec["repo_data"] = "none", map[string]any{"repo_type": "virtual"}
	}
	if _, ok := spec["ssh_key_pub"].(string); !ok {
		spec["ssh_key_pub"] = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDstacktestUserKey " + User
	}
	if conf["priority"] == nil {
		conf["priority"] = json.Number("0")
	}
	nodes := 1
	if typ == "task" {
		if n, ok := conf["nodes"].(json.Number); ok {
			i, _ := n.Int64()
			nodes = int(i)
		} else if conf["groups"] == nil {
			conf["nodes"] = json.Number("1")
		}
	}
	now := time.Now()
	if hasName {
		if old := p.byName(name); old != nil {
			if !finished(old.status) {
				same := reflect.DeepEqual(normalize(old.spec), normalize(spec))
				curID := ""
				if cur, ok := current.(map[string]any); ok {
					curID, _ = cur["id"].(string)
				}
				switch {
				case !same:
					clientError(w, "error", "Cannot override active run. Stop the run first.")
				case !force && curID != old.id:
					clientError(w, "error", "Failed to apply plan. Resource has been changed. Try again or use force apply.")
				default:
					old.deployments++
					old.processed = now
					writeJSON(w, http.StatusOK, s.runJSON(p, old, true))
				}
				return
			}
			old.deleted = true // submit_run deletes the finished run of the name
		}
	} else {
		for i := 1; ; i++ {
			if n := fmt.Sprintf("fake-run-%d", i); p.byName(n) == nil {
				name = n
				break
			}
		}
		spec["run_name"] = name
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		panic(err) // decoded JSON always encodes
	}
	r := &run{id: s.uuid(), name: name, status: "submitted", submitted: now, processed: now, spec: spec, raw: raw, typ: typ, nodes: nodes}
	for i := range nodes {
		r.jobs = append(r.jobs, &job{id: s.uuid(), num: i, status: "submitted", submitted: now, processed: now})
	}
	p.runs = append(p.runs, r)
	writeJSON(w, http.StatusOK, s.runJSON(p, r, true))
}

// normalize makes two decoded specs comparable.
func normalize(v map[string]any) any {
	b, _ := json.Marshal(v)
	var out any
	json.Unmarshal(b, &out)
	return out
}
