package changepolicy_test

import (
	"fmt"

	"github.com/gpugate/gpugate/changepolicy"
)

func Example() {
	p, err := changepolicy.Load(changepolicy.ExamplePolicy)
	if err != nil {
		panic(err)
	}
	d, err := changepolicy.Classify(p, []changepolicy.Change{
		{Path: "docs/guide.md", Status: changepolicy.Modified},
		{Path: "scripts/ci/runpod_cost.py", Status: changepolicy.Modified},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(d.Class, "docs:", d.Docs, "ci:", d.CI, "gpu:", d.GPU)
	for _, j := range d.Jobs {
		fmt.Printf("%-22s %s\n", j.Name, j.Outcome)
	}
	// Output:
	// ci-only docs: true ci: true gpu: false
	// Linux workspace tests  no-op
	// Linux extension tests  no-op
	// macOS workspace tests  no-op
	// Documentation          run
	// CI configuration       run
	// CI GPU gate            no-op
}

func ExampleClassify_deviceControl() {
	p, err := changepolicy.Load([]byte(`
ci: ["scripts/ci/**"]
gpu:
  device_control: ["scripts/ci/*_partition.tsv"]
jobs:
  - {name: "CI GPU gate", runs_for: [gpu], profile: runpod}
`))
	if err != nil {
		panic(err)
	}
	d, err := changepolicy.Classify(p, []changepolicy.Change{{Path: "scripts/ci/cuda_partition.tsv"}})
	if err != nil {
		panic(err)
	}
	fmt.Println(d.Class, d.GPU)
	fmt.Println(d.Jobs[0].Reason)
	// Output:
	// ci-only true
	// GPU validation required: device-control path scripts/ci/cuda_partition.tsv changed
}

func ExampleParseNameStatus() {
	changes, err := changepolicy.ParseNameStatus([]byte("R090\tsrc/old.rs\tdocs/old.md\nM\tREADME.md\n"))
	if err != nil {
		panic(err)
	}
	for _, c := range changes {
		fmt.Printf("%s %s (from %q)\n", c.Status, c.Path, c.OldPath)
	}
	// Output:
	// renamed docs/old.md (from "src/old.rs")
	// modified README.md (from "")
}

func ExamplePolicy_Unmatched() {
	p, _ := changepolicy.Load([]byte(`
ci: ["scripts/ci/**"]
gpu:
  device_control: ["scripts/ci/runpod_provison.py"]
jobs:
  - {name: "CI GPU gate", runs_for: [gpu]}
`))
	tracked := []string{"scripts/ci/runpod_provision.py", "src/lib.rs"}
	for _, u := range p.Unmatched(tracked) {
		fmt.Println(u, "matches no tracked file")
	}
	// Output:
	// gpu.device_control: "scripts/ci/runpod_provison.py" matches no tracked file
}

// A decision as the classify command prints it in a log; Markdown is the
// same as a job summary.
func ExampleDecision_String() {
	p, _ := changepolicy.Load(changepolicy.ExamplePolicy)
	changes, _ := changepolicy.ParseNameStatus([]byte("M\tdocs/guide.md\nR100\tdocs/old.md\tdocs/new.md\n"))
	d, _ := changepolicy.Classify(p, changes)
	fmt.Print(d)
	// Output:
	// class: docs-only (docs: yes, ci: no, gpu: no)
	// why:   class is docs-only: no code path changed; GPU validation not required: docs-only change
	// lane macos: no
	// jobs:
	//   no-op Linux workspace tests: explicit success: class is docs-only: no code path changed
	//   no-op Linux extension tests: explicit success: class is docs-only: no code path changed
	//   no-op macOS workspace tests: explicit success: no trigger of lane macos changed
	//   run   Documentation [docs]: documentation changed (docs/guide.md)
	//   no-op CI configuration: explicit success: no CI path changed
	//   no-op CI GPU gate: explicit success: GPU validation not required: docs-only change
	// files:
	//   modified  docs  docs/guide.md (docs **/*.md)
	//   renamed   docs  docs/old.md (old side) (docs **/*.md)
	//   renamed   docs  docs/new.md (docs **/*.md)
}
