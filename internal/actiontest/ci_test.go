package actiontest

import (
	"encoding/json"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/gpugate/gpugate/changepolicy"
	"github.com/gpugate/gpugate/internal/workflowtest"
)

// lookup is a required job reading its own outcome or reason from the
// classifier's jobs, by its name.
var lookup = regexp.MustCompile(`fromJSON\(needs\.changes\.outputs\.required \|\| '\{\}'\)\['([^']+)'\]\.(outcome|reason)`)

// The adoption ci.yml takes its required jobs from the classifier's jobs
// output, not from a list of its own: each job other than the gate (which
// the trusted GPU workflow publishes) is one of the example policy's jobs,
// every job of the policy is one of them, and each decides to run or to
// no-op by looking up its own name in that output, nothing else of the
// classifier's. The changes job turns the list into the lookup, run here
// on the classifier's jobs for a docs-only change.
func TestTheAdoptionCIRunsEveryJobThePolicyRequires(t *testing.T) {
	wf := workflowtest.Read(t, "ci.yml")
	p, err := changepolicy.Load(changepolicy.ExamplePolicy)
	if err != nil {
		t.Fatal(err)
	}
	var policy []string
	for _, j := range p.Jobs {
		if !slices.Equal(j.RunsFor, []string{"gpu"}) { // the gate: runpod-gpu-test.yml publishes it
			policy = append(policy, j.Name)
		}
	}
	var jobs []string
	for id, job := range wf.Jobs {
		if !job.NeedsJob("changes") {
			continue
		}
		jobs = append(jobs, job.Name)
		var refs []string
		refs = append(refs, job.RunsOn.String())
		for _, s := range job.Steps {
			refs = append(refs, s.If)
			for _, v := range s.Env {
				refs = append(refs, v)
			}
		}
		looked := 0
		for _, r := range refs {
			uses := strings.Count(r, "needs.changes.outputs")
			for _, m := range lookup.FindAllStringSubmatch(r, -1) {
				if m[1] != job.Name {
					t.Errorf("%s (%s) looks up %q", id, job.Name, m[1])
				}
				uses--
				looked++
			}
			if uses != 0 {
				t.Errorf("%s (%s) reads the classifier's outputs other than its own entry in jobs: %q", id, job.Name, r)
			}
		}
		if looked == 0 {
			t.Errorf("%s (%s) never looks itself up in the classifier's jobs", id, job.Name)
		}
	}
	sort.Strings(policy)
	sort.Strings(jobs)
	if !slices.Equal(policy, jobs) {
		t.Errorf("ci.yml's required jobs %q, the example policy's (but the gate) %q", jobs, policy)
	}

	changes := wf.Jobs["changes"]
	if changes.Outputs["required"] != "${{ steps.required.outputs.by-name }}" {
		t.Fatalf("changes: output required = %q", changes.Outputs["required"])
	}
	step := changes.Step(t, "required", func(s workflowtest.Step) bool { return s.ID == "required" })
	if step.Env["JOBS"] != "${{ steps.classify.outputs.jobs }}" {
		t.Errorf("the required step reads %q, not the classifier's jobs", step.Env["JOBS"])
	}
	d, err := changepolicy.Classify(p, []changepolicy.Change{{Path: "docs/guide.md", Status: changepolicy.Modified}})
	if err != nil {
		t.Fatal(err)
	}
	list, _ := json.Marshal(d.Jobs)
	res := workflowtest.NewRunner(t, "jq").Run(t, step, map[string]string{"JOBS": string(list)})
	var byName map[string]changepolicy.Job
	if err := json.Unmarshal([]byte(res.Output("by-name")), &byName); res.Code != 0 || err != nil {
		t.Fatalf("exit %d, %v:\n%s", res.Code, err, res.Out)
	}
	for _, j := range d.Jobs {
		if byName[j.Name] != j {
			t.Errorf("%s: %+v, want %+v", j.Name, byName[j.Name], j)
		}
	}
	if byName["Documentation"].Outcome != changepolicy.Run || byName["Linux workspace tests"].Outcome != changepolicy.NoOp {
		t.Errorf("a docs-only change: %+v", byName)
	}
}
