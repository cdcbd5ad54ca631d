// Package workflowtest reads the adoption workflows in examples/workflows,
// for the tests that check a seed rule against the templates an adopting
// repository copies.
package workflowtest

import (
	"os"
	"path/filepath"
	"runtime"
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
	Jobs        map[string]Job `yaml:"jobs"`
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
	RunsOn      string            `yaml:"runs-on"`
	Needs       any               `yaml:"needs"` // a job name or a list of them
	Uses        string            `yaml:"uses"`
	With        map[string]string `yaml:"with"`
	Outputs     map[string]string `yaml:"outputs"`
	Concurrency Concurrency       `yaml:"concurrency"`
	Env         map[string]string `yaml:"env"`
	// TimeoutMinutes is the job's own limit; 0 when it sets none.
	TimeoutMinutes float64  `yaml:"timeout-minutes"`
	Strategy       Strategy `yaml:"strategy"`
	Steps          []Step   `yaml:"steps"`
}

// Strategy is a job's matrix strategy.
type Strategy struct {
	FailFast *bool `yaml:"fail-fast"` // nil: GitHub's default, true
	Matrix   struct {
		Include string `yaml:"include"` // an expression, as the templates write it
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
	TimeoutMinutes   float64           `yaml:"timeout-minutes"`
	ContinueOnError  bool              `yaml:"continue-on-error"`
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
