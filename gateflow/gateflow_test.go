package gateflow_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/gpugate/gpugate/changepolicy"
	"github.com/gpugate/gpugate/gate"
	"github.com/gpugate/gpugate/gate/gatetest"
	"github.com/gpugate/gpugate/gateflow"
)

// The lifecycle authorizes only the head its classification listed: a push
// between classification and authorization stops the run before anything
// is published or bought.
func TestLifecycle_AHeadThatMovedSinceClassificationPublishesNothing(t *testing.T) {
	const listed, pushed = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
	repo := gatetest.NewRepo()
	repo.Roles = map[string]string{"maintainer": "maintain"}
	repo.PRs = map[int]gate.PullRequest{9: {Number: 9, Open: true, HeadSHA: pushed, MergeSHA: strings.Repeat("3", 40), HeadRepoID: 1, BaseRepoID: 1}}
	checks := gatetest.NewChecks()
	policy, err := changepolicy.Load(changepolicy.ExamplePolicy)
	if err != nil {
		t.Fatal(err)
	}
	docs := changepolicy.Listing{Changes: []changepolicy.Change{{Path: "README.md", Status: changepolicy.Modified}}, HeadSHA: listed}
	_, err = gateflow.Run(context.Background(), gateflow.Deps{Policy: policy, Repo: repo, Checks: checks}, docs, "maintainer", 9, io.Discard)
	if !errors.Is(err, gate.ErrHeadMoved) {
		t.Fatalf("err = %v, want ErrHeadMoved", err)
	}
	if gates := checks.Published(pushed); len(gates) != 0 {
		t.Errorf("published %v on a head that was never classified", gates)
	}
}

// A pull request validated on a maintainer's GPU (the local-validation
// label, here added after the classification) buys nothing and publishes
// nothing, so the local relay's gate stands; the outcome says why.
func TestRun_APullRequestValidatedLocallyBuysAndPublishesNothing(t *testing.T) {
	const head = "1111111111111111111111111111111111111111"
	repo := gatetest.NewRepo()
	repo.Roles = map[string]string{"maintainer": "maintain"}
	repo.PRs = map[int]gate.PullRequest{9: {Number: 9, Open: true, HeadSHA: head, MergeSHA: strings.Repeat("3", 40), HeadRepoID: 1, BaseRepoID: 1,
		Labels: []string{gate.DefaultLocalLabel}}}
	checks := gatetest.NewChecks()
	policy, err := changepolicy.Load(changepolicy.ExamplePolicy)
	if err != nil {
		t.Fatal(err)
	}
	for name, path := range map[string]string{"a CUDA change": "src/kernels/add.cu", "a docs-only change": "README.md"} {
		t.Run(name, func(t *testing.T) {
			listing := changepolicy.Listing{Changes: []changepolicy.Change{{Path: path, Status: changepolicy.Modified}}, HeadSHA: head}
			// No RunPod client: a run that tried to buy would panic.
			oc, err := gateflow.Run(context.Background(), gateflow.Deps{Policy: policy, Repo: repo, Checks: checks}, listing, "maintainer", 9, io.Discard)
			if err != nil || !oc.LocallyValidated || oc.Result != nil || oc.Gate != "" {
				t.Errorf("%+v, %v; want a locally validated outcome that bought nothing", oc, err)
			}
			if gates := checks.Published(head); len(gates) != 0 {
				t.Errorf("published %v over the local validation", gates)
			}
		})
	}
}
