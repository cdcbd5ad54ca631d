package gateflow_test

import (
	"context"
	"fmt"
	"os"

	"github.com/gpugate/gpugate/changepolicy"
	"github.com/gpugate/gpugate/gate"
	"github.com/gpugate/gpugate/gate/gatetest"
	"github.com/gpugate/gpugate/gateflow"
)

// A docs-only change runs the gate without a GPU: it is classified,
// authorized for the head it was listed at, and the required check is an
// explicit not-required success; no pod is bought (Deps has no RunPod
// client at all).
func ExampleRun() {
	const head, merge = "7fc2a91c3b5e4d6f8a9b0c1d2e3f405162738495", "9a1b2c3d4e5f60718293a4b5c6d7e8f901234567"
	repo := gatetest.NewRepo()
	repo.Roles = map[string]string{"maintainer": "maintain"}
	repo.PRs = map[int]gate.PullRequest{43: {Number: 43, Open: true, HeadSHA: head, MergeSHA: merge, HeadRepoID: 1, BaseRepoID: 1}}
	policy, err := changepolicy.Load(changepolicy.ExamplePolicy)
	if err != nil {
		panic(err)
	}
	listing := changepolicy.Listing{Changes: []changepolicy.Change{{Path: "docs/install.md", Status: changepolicy.Modified}}, HeadSHA: head}
	oc, err := gateflow.Run(context.Background(), gateflow.Deps{Policy: policy, Repo: repo, Checks: gatetest.NewChecks()}, listing, "maintainer", 43, os.Stdout)
	fmt.Println(oc.Gate, err)
	// Output:
	//  1. classify           docs-only; GPU gate required: false (class is docs-only: no code path changed; GPU validation not required: docs-only change)
	//  2. authorize          maintainer (maintain) may spend on PR #43: head 7fc2a91, tested merge ref 9a1b2c3
	//  3. publish            "CI GPU gate": success (runpod-gpu-gate:v1:9a1b2c3d4e5f60718293a4b5c6d7e8f901234567:not-required) — no pod created
	// not-required <nil>
}
