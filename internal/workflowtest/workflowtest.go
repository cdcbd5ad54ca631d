// Package workflowtest reads the adoption workflows in examples/workflows,
// for the tests that check a rule against the templates an adopting
// repository copies, and runs their steps' scripts as written.
package workflowtest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// Workflow is the part of a workflow file the tests read.
type Workflow struct {
	On struct {
		Push struct {
			Branches []string `yaml:"branches"`
		} `yaml:"push"`
	} `yaml:"on"`
	Concurrency Concurrency    `yaml:"concurrency"`
	Defaults    Defaults       `yaml:"defaults"`
	Jobs        map[string]Job `yaml:"jobs"`
}

// Defaults is a workflow's or a job's defaults block.
type Defaults struct {
	Run struct {
		Shell string `yaml:"shell"`
	} `yaml:"run"`
}

// Concurrency is a workflow's or a job's concurrency block.
type Concurrency struct {
	Group            string `yaml:"group"`
	CancelInProgress bool   `yaml:"cancel-in-progress"`
	Queue            string `yaml:"queue"`
}

// Job is one job: its own steps, or the reusable workflow it calls.
type Job struct {
	Name        string            `yaml:"name"`
	If          string            `yaml:"if"`
	RunsOn      Labels            `yaml:"runs-on"`
	Needs       any               `yaml:"needs"` // a job name or a list of them
	Uses        string            `yaml:"uses"`
	With        map[string]string `yaml:"with"`
	Outputs     map[string]string `yaml:"outputs"`
	Concurrency Concurrency       `yaml:"concurrency"`
	Env         map[string]string `yaml:"env"`
	Defaults    Defaults          `yaml:"defaults"`
	// TimeoutMinutes is the job's own limit; 0 when it sets none.
	TimeoutMinutes float64  `yaml:"timeout-minutes"`
	Strategy       Strategy `yaml:"strategy"`
	Steps          []Step   `yaml:"steps"`
}

// Labels is a job's runs-on: one label or expression, or a list of them.
type Labels []string

// UnmarshalYAML reads a scalar as a one-item list.
func (l *Labels) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*l = Labels{n.Value}
		return nil
	}
	var list []string
	if err := n.Decode(&list); err != nil {
		return err
	}
	*l = list
	return nil
}

// String joins the labels with spaces.
func (l Labels) String() string { return strings.Join(l, " ") }

// Strategy is a job's matrix strategy.
type Strategy struct {
	FailFast *bool `yaml:"fail-fast"` // nil: GitHub's default, true
	Matrix   struct {
		Include string         `yaml:"include"` // an expression, as the templates write it
		Values  map[string]any `yaml:",inline"` // the other keys: each a list of values
	} `yaml:"matrix"`
}

// NeedsJob says whether the job needs the named job.
func (j Job) NeedsJob(name string) bool {
	switch n := j.Needs.(type) {
	case string:
		return n == name
	case []any:
		for _, v := range n {
			if v == name {
				return true
			}
		}
	}
	return false
}

// Step is one step.
type Step struct {
	ID               string            `yaml:"id"`
	Name             string            `yaml:"name"`
	If               string            `yaml:"if"`
	Uses             string            `yaml:"uses"`
	Run              string            `yaml:"run"`
	Env              map[string]string `yaml:"env"`
	With             map[string]string `yaml:"with"`
	WorkingDirectory string            `yaml:"working-directory"`
	Shell            string            `yaml:"shell"`
	TimeoutMinutes   float64           `yaml:"timeout-minutes"`
	ContinueOnError  bool              `yaml:"continue-on-error"`
}

// Artifact is what a download-artifact or upload-artifact step names: its
// artifact name, or the pattern a download matches artifacts by.
func (s Step) Artifact() string {
	if name := s.With["name"]; name != "" {
		return name
	}
	return s.With["pattern"]
}

// Dir is the adoption workflows' directory.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "examples", "workflows")
}

// Read reads examples/workflows/name, failing the test when it cannot.
func Read(t testing.TB, name string) Workflow {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(Dir(), name))
	if err != nil {
		t.Fatal(err)
	}
	var wf Workflow
	if err := yaml.Unmarshal(data, &wf); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return wf
}

// Step finds the job's first step that match accepts, failing the test
// when there is none.
func (j Job) Step(t testing.TB, what string, match func(Step) bool) Step {
	t.Helper()
	for _, s := range j.Steps {
		if match(s) {
			return s
		}
	}
	t.Fatalf("no step %s", what)
	return Step{}
}

// Runs matches a step whose script starts with prefix.
func Runs(prefix string) func(Step) bool {
	return func(s Step) bool { return strings.HasPrefix(strings.TrimSpace(s.Run), prefix) }
}

// Runner runs steps' scripts as a hosted runner runs them under shell:
// bash (bash -e -o pipefail, which every adoption workflow sets as its
// default), in a workspace of its own with its own RUNNER_TEMP, step
// outputs and job summary. A step's working-directory is taken relative
// to Workspace.
type Runner struct {
	Workspace string
	Temp      string // RUNNER_TEMP
	Path      string // PATH
}

// NewRunner returns a Runner with fresh directories, skipping the test
// when bash or any of tools is not installed.
func NewRunner(t testing.TB, tools ...string) *Runner {
	t.Helper()
	for _, tool := range append([]string{"bash"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
	return &Runner{Workspace: t.TempDir(), Temp: t.TempDir(), Path: os.Getenv("PATH")}
}

// Result is what one step did.
type Result struct {
	Code    int    // exit status
	Out     string // stdout and stderr
	Outputs string // what it wrote to GITHUB_OUTPUT
	Summary string // what it wrote to GITHUB_STEP_SUMMARY
	Env     string // what it wrote to GITHUB_ENV (unless env named another file)
}

// Output returns the step output name, or "".
func (r Result) Output(name string) string {
	for _, line := range strings.Split(r.Outputs, "\n") {
		if v, ok := strings.CutPrefix(line, name+"="); ok {
			return v
		}
	}
	return ""
}

// Run runs s with env, the values its expressions would have.
func (r *Runner) Run(t testing.TB, s Step, env map[string]string) Result {
	t.Helper()
	if s.Run == "" {
		t.Fatalf("step %q has no script", s.Name)
	}
	files := t.TempDir()
	output, summary, githubEnv := filepath.Join(files, "output"), filepath.Join(files, "summary"), filepath.Join(files, "env")
	cmd := exec.Command("bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", s.Run)
	cmd.Dir = filepath.Join(r.Workspace, s.WorkingDirectory)
	cmd.Env = []string{"PATH=" + r.Path, "HOME=" + r.Temp, "RUNNER_TEMP=" + r.Temp, "GITHUB_OUTPUT=" + output,
		"GITHUB_STEP_SUMMARY=" + summary, "GITHUB_ENV=" + githubEnv, "GITHUB_ACTIONS=true"}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	res := Result{Out: string(out)}
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("step %q: %v", s.Name, err)
		}
		res.Code = ee.ExitCode()
	}
	written, _ := os.ReadFile(output)
	sum, _ := os.ReadFile(summary)
	exported, _ := os.ReadFile(githubEnv)
	res.Outputs, res.Summary, res.Env = string(written), string(sum), string(exported)
	return res
}
