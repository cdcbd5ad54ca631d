package changepolicy

import (
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The adoption CI workflow keeps the fail-safe direction when the
// classifier itself fails: GitHub skips a job whose dependency failed and
// reports a skipped required job as a success, so every required job runs
// unless the workflow was cancelled, and no-ops only on the classifier's
// successful word; otherwise it runs its profile.
func TestTheAdoptionCIWorkflowRunsEverythingWhenTheClassifierFails(t *testing.T) {
	data, err := os.ReadFile("../examples/workflows/ci.yml")
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		Jobs map[string]struct {
			Name  string `yaml:"name"`
			Needs string `yaml:"needs"`
			If    string `yaml:"if"`
			Steps []struct {
				If  string `yaml:"if"`
				Run string `yaml:"run"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	if err := yaml.Unmarshal(data, &wf); err != nil {
		t.Fatal(err)
	}
	required := 0
	for id, job := range wf.Jobs {
		if job.Needs != "changes" {
			continue
		}
		required++
		if !strings.Contains(job.If, "!cancelled()") && !strings.Contains(job.If, "always()") {
			t.Errorf("%s (%s): if %q: a failed classifier would skip it, which GitHub reports as success", id, job.Name, job.If)
		}
		noops := 0
		for _, s := range job.Steps {
			if !strings.Contains(s.If, "needs.changes.outputs") {
				continue
			}
			if strings.HasPrefix(s.Run, "echo \"No-op") {
				noops++
				if !strings.HasPrefix(s.If, "needs.changes.result == 'success' && ") {
					t.Errorf("%s: the no-op %q does not wait for the classifier's success", id, s.If)
				}
			} else if !strings.HasPrefix(s.If, "needs.changes.result != 'success' || ") {
				t.Errorf("%s: the step under %q does not run when the classifier failed", id, s.If)
			}
		}
		if noops != 1 {
			t.Errorf("%s: %d no-op steps, want one explicit success", id, noops)
		}
	}
	if required < 4 {
		t.Errorf("%d jobs need the classifier, want the four lanes", required)
	}
}
