package actiontest

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/gpugate/gpugate/cachetrust"
)

// scriptStep is what scripts/action.sh does for one step: the text of
// every case branch that handles it.
type scriptStep struct {
	text string
}

var (
	caseStart   = regexp.MustCompile(`^case "\$\{GPUGATE_STEP:-classify\}" in$`)
	caseLabel   = regexp.MustCompile(`^([a-z][a-z-]*(?: \| [a-z][a-z-]*)*)\)$`)
	gpugateVar  = regexp.MustCompile(`GPUGATE_[A-Z_]+`)
	usesSim     = regexp.MustCompile(`\bsim\[`)
	topNeed     = regexp.MustCompile(`(?m)^\tneed "\$\{(GPUGATE_[A-Z_]+):-\}"`)
	kebab       = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	pinnedByRef = regexp.MustCompile(`@[0-9a-f]{40}$`)
)

// scriptSteps parses scripts/action.sh's case statements on the step:
// the steps it knows, in its order, and what each branch does.
func scriptSteps(t *testing.T) ([]string, map[string]*scriptStep) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "scripts/action.sh"))
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	steps := map[string]*scriptStep{}
	inCase, first := false, true
	var current []string
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case caseStart.MatchString(line):
			inCase, current = true, nil
			continue
		case inCase && line == "esac":
			inCase, first = false, false
			continue
		case !inCase:
			continue
		}
		if m := caseLabel.FindStringSubmatch(line); m != nil {
			current = strings.Split(m[1], " | ")
			for _, name := range current {
				if steps[name] == nil {
					if !first {
						t.Fatalf("scripts/action.sh: step %s appears only in a later case", name)
					}
					steps[name] = &scriptStep{}
					order = append(order, name)
				}
			}
			continue
		}
		if line == "*)" {
			current = nil
			continue
		}
		for _, name := range current {
			steps[name].text += line + "\n"
		}
	}
	if len(order) < 10 {
		t.Fatalf("scripts/action.sh: found only the steps %v", order)
	}
	return order, steps
}

// reads is every GPUGATE_* variable the step reads (the shared -simulate
// included), but the step and the binaries' directory.
func (s *scriptStep) reads() map[string]bool {
	out := map[string]bool{}
	for _, v := range gpugateVar.FindAllString(s.text, -1) {
		if v != "GPUGATE_STEP" && v != "GPUGATE_BIN" {
			out[v] = true
		}
	}
	if usesSim.MatchString(s.text) {
		out["GPUGATE_SIMULATE"] = true
	}
	return out
}

// needs is every variable the step fails without, whatever else is set.
func (s *scriptStep) needs() map[string]bool {
	out := map[string]bool{}
	for _, m := range topNeed.FindAllStringSubmatch(s.text, -1) {
		out[m[1]] = true
	}
	return out
}

// perStepActions lists the per-step actions: <dir>/action.yml at the
// repository root, by directory.
func perStepActions(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "*", "action.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, f := range files {
		dirs = append(dirs, filepath.Base(filepath.Dir(f)))
	}
	sort.Strings(dirs)
	return dirs
}

// The steps that talk to neither GitHub nor RunPod, and the ones that
// talk to RunPod: their actions take exactly the tokens they use.
var (
	noGitHub = map[string]bool{"partition-check": true, "partition-select": true, "cost-report": true, "install": true, "free-disk": true, "cuda-tree": true}
	runPod   = map[string]bool{"provision": true, "watch": true, "cleanup": true, "reap": true}
)

// programNeeds lists, by step, the variables scripts/action.sh passes on
// unchecked but whose flags the step's program requires (it exits 2
// without them): the action marks them required as well.
// TestEveryPerStepActionMarksRequiredWhatItsProgramRequires runs each
// program with its action's required inputs only, which keeps this honest.
var programNeeds = map[string][]string{
	"publish": {"GPUGATE_HEAD_SHA", "GPUGATE_TESTED_REF"}, // gate publish -head, -tested-ref
}

const (
	runLine     = `exec bash "$ACTION_PATH/scripts/action.sh"`
	installLine = `bash "$ACTION_PATH/scripts/install.sh"`
)

// Every action (the root dispatcher and one per step) passes each input
// to its step's environment, maps each output from the step's own, and
// says what each is; each per-step action takes exactly the inputs its
// step reads, marks required exactly the ones the step fails without,
// names its outputs in kebab-case, and installs the step's commands
// before it runs them.
func TestEveryInputAndOutputIsWired(t *testing.T) {
	order, steps := scriptSteps(t)
	script, err := os.ReadFile(filepath.Join(root, "scripts/action.sh"))
	if err != nil {
		t.Fatal(err)
	}
	dirs := perStepActions(t)
	for _, s := range order {
		if !slices.Contains(dirs, s) {
			t.Errorf("step %s has no action %s/action.yml", s, s)
		}
	}
	for _, file := range append([]string{"action.yml"}, func() []string {
		var f []string
		for _, d := range dirs {
			f = append(f, d+"/action.yml")
		}
		return f
	}()...) {
		t.Run(file, func(t *testing.T) {
			a := loadActionFile(t, file)
			dir := filepath.Dir(file)
			perStep := dir != "."
			if a.Name == "" || a.Description == "" || a.Runs.Using != "composite" {
				t.Errorf("name %q, description %q, runs.using %q", a.Name, a.Description, a.Runs.Using)
			}
			if len(a.Runs.Steps) == 0 {
				t.Fatal("no steps")
			}
			run := a.Runs.Steps[len(a.Runs.Steps)-1]
			if run.ID != "run" || run.Run != runLine || run.Shell != "bash" {
				t.Fatalf("the last step must be id run, shell bash, %s: %+v", runLine, run)
			}
			actionPath := "${{ github.action_path }}"
			if perStep {
				actionPath += "/.."
			}
			if run.Env["ACTION_PATH"] != actionPath {
				t.Errorf("run: ACTION_PATH = %q, want %q", run.Env["ACTION_PATH"], actionPath)
			}
			for name, in := range a.Inputs {
				if in.Description == "" {
					t.Errorf("input %s has no description", name)
				}
				env := envName(name)
				if got := run.Env[env]; got != "${{ inputs."+name+" }}" {
					t.Errorf("input %s: env %s = %q", name, env, got)
				}
				if env != "GITHUB_TOKEN" && env != "RUNPOD_API_KEY" && !strings.Contains(string(script), env) {
					t.Errorf("input %s: scripts/action.sh never reads %s", name, env)
				}
			}
			for name, out := range a.Outputs {
				value := name
				if perStep {
					if !kebab.MatchString(name) {
						t.Errorf("output %s is not kebab-case", name)
					}
					value = strings.ReplaceAll(name, "-", "_")
				}
				if out.Value != "${{ steps.run.outputs."+value+" }}" || out.Description == "" {
					t.Errorf("output %s: %+v (want the step's output %s and a description)", name, out, value)
				}
			}
			for _, s := range a.Runs.Steps {
				if s.Uses != "" && !pinnedByRef.MatchString(s.Uses) {
					t.Errorf("%s is not pinned by SHA", s.Uses)
				}
				if strings.Contains(s.Run, "${{") {
					t.Errorf("a run script splices an expression: %q", s.Run)
				}
			}
			// The commands are installed first (a verified release, or Go
			// to build them), except for free-disk, which runs none.
			install, setupGo := a.step("install"), (*actionStep)(nil)
			for i, s := range a.Runs.Steps {
				if strings.HasPrefix(s.Uses, "actions/setup-go@") {
					setupGo = &a.Runs.Steps[i]
				}
			}
			if dir == "free-disk" {
				if len(a.Runs.Steps) != 1 {
					t.Errorf("free-disk runs no command: want only the run step, got %d steps", len(a.Runs.Steps))
				}
			} else {
				if install == nil || install.Run != installLine || install.Env["GPUGATE_ACTION_REF"] != "${{ github.action_ref }}" || install.Env["ACTION_PATH"] != actionPath {
					t.Errorf("want a first step id install running %s with the Action's ref and path: %+v", installLine, install)
				} else if install != &a.Runs.Steps[0] {
					t.Error("the install step must come first")
				}
				if setupGo == nil || setupGo.If != "steps.install.outputs.build == 'true'" || setupGo.With["cache"] != "false" || setupGo.With["go-version-file"] != actionPath+"/go.mod" {
					t.Errorf("want Go set up only when the install step says build, from the Action's go.mod, caching off: %+v", setupGo)
				}
				if run.Env["GPUGATE_BIN"] != "${{ steps.install.outputs.bin }}" {
					t.Errorf("run: GPUGATE_BIN = %q, want the install step's bin", run.Env["GPUGATE_BIN"])
				}
			}
			if !perStep {
				if a.Branding.Icon == "" || a.Branding.Color == "" {
					t.Errorf("the root action has no branding: %+v", a.Branding)
				}
				if install != nil && (install.Env["GPUGATE_STEP"] != "${{ inputs.step }}" || install.Env["GPUGATE_COMMANDS"] != "${{ inputs.commands }}") {
					t.Errorf("install: the step and commands are not the inputs: %v", install.Env)
				}
				for name, in := range a.Inputs {
					if in.Required {
						t.Errorf("input %s is required, but the dispatcher's inputs depend on its step", name)
					}
				}
				return
			}
			step := steps[dir]
			if step == nil {
				t.Fatalf("scripts/action.sh has no step %s", dir)
			}
			if run.Env["GPUGATE_STEP"] != dir || install != nil && install.Env["GPUGATE_STEP"] != dir {
				t.Errorf("GPUGATE_STEP is %q (install %v), want %s", run.Env["GPUGATE_STEP"], install, dir)
			}
			if install != nil && (dir == "install") != (install.Env["GPUGATE_COMMANDS"] == "${{ inputs.commands }}") {
				t.Errorf("install: GPUGATE_COMMANDS = %q", install.Env["GPUGATE_COMMANDS"])
			}
			reads, needs := step.reads(), step.needs()
			for _, env := range programNeeds[dir] {
				needs[env] = true
			}
			inputs := map[string]bool{}
			for name, in := range a.Inputs {
				env := envName(name)
				inputs[env] = true
				switch env {
				case "GITHUB_TOKEN":
					if noGitHub[dir] {
						t.Errorf("input %s: step %s makes no GitHub call", name, dir)
					}
					continue
				case "RUNPOD_API_KEY":
					if !runPod[dir] {
						t.Errorf("input %s: step %s makes no RunPod call", name, dir)
					}
					continue
				}
				if !reads[env] {
					t.Errorf("input %s: step %s never reads %s", name, dir, env)
				}
				if in.Required != needs[env] {
					t.Errorf("input %s: required is %v, but whether step %s fails without it is %v", name, in.Required, dir, needs[env])
				}
			}
			for env := range reads {
				if !inputs[env] {
					t.Errorf("step %s reads %s, which is no input of its action", dir, env)
				}
			}
			if !noGitHub[dir] && !inputs["GITHUB_TOKEN"] {
				t.Errorf("step %s calls GitHub: want a github-token input", dir)
			}
			if runPod[dir] && !inputs["RUNPOD_API_KEY"] {
				t.Errorf("step %s calls RunPod: want a runpod-api-key input", dir)
			}
			for env := range run.Env {
				if !inputs[env] && env != "GPUGATE_STEP" && env != "GPUGATE_BIN" && env != "ACTION_PATH" {
					t.Errorf("run: env %s is no input", env)
				}
			}
		})
	}
}

// Every action, like the workflows that use it, keeps the cache-trust
// contract: it never saves a cache (setup-go's cache is off), so a pull
// request cannot plant one that a trusted run restores. So does the
// release workflow, whose one write grant is its publish job's.
func TestEveryActionKeepsTheCacheTrustContract(t *testing.T) {
	rules := cachetrust.Rules{DefaultBranch: "main", WriteGrants: []cachetrust.WriteGrant{
		{Workflow: ".github/workflows/release.yml", Job: "publish", Scope: "contents"},
	}}
	files := map[string][]byte{}
	for _, rel := range append([]string{"action.yml", ".github/workflows/release.yml"}, func() []string {
		var f []string
		for _, d := range perStepActions(t) {
			f = append(f, d+"/action.yml")
		}
		return f
	}()...) {
		data, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		files[rel] = data
	}
	for _, f := range cachetrust.CheckWorkflows(files, rules) {
		t.Error(f)
	}
}
