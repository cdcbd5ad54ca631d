package sparkgh

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/google/go-github/v66/github"

	"github.com/gpugate/gpugate/internal/textlimit"
	"github.com/gpugate/gpugate/spark"
)

// MergeQueue serves GitHub's merge queue ("Merge correctness
// CI", one node, admitted at its class's order after manual PR tests):
// each merge group GitHub asks checks of on one of Branches queues a
// spark.MergeCI request at the group's commit, with the check
// (Config.CheckName) on that commit, and once granted the workflow is
// dispatched like a pull request's.
//
// GitHub builds a merge group only from pull requests that satisfied the
// branch's protection (its required reviews and checks), which is what
// admits it here: no label is needed. A group whose newest pull request
// comes from a fork is refused, as a fork's label is.
type MergeQueue struct {
	Lane     `yaml:",inline"`
	Branches []string `yaml:"branches"` // base branches whose queue is served, e.g. main
}

// keyMerge marks a merge group's request with the group's ref.
const keyMerge = "gh.merge_group"

// mergeRef is a merge group's ref: the base branch and the newest pull
// request in the group, e.g.
// refs/heads/gh-readonly-queue/main/pr-123-<its head commit>.
var mergeRef = regexp.MustCompile(`^refs/heads/gh-readonly-queue/(.+)/pr-([0-9]+)-[0-9a-f]{40}$`)

// mergeGroup handles merge_group deliveries: checks_requested queues the
// group's lane, destroyed (merged, dequeued, or invalidated by an earlier
// entry) cancels it while it is still queued; work already running is
// never stopped ("Priority is intentionally non-preemptive").
func (in *Integration) mergeGroup(ctx context.Context, e *github.MergeGroupEvent) error {
	mq, g, repo := in.cfg.MergeQueue, e.GetMergeGroup(), e.GetRepo().GetFullName()
	if mq == nil {
		return nil // not served
	}
	sha, ref := g.GetHeadSHA(), g.GetHeadRef()
	switch e.GetAction() {
	case "destroyed":
		return in.endQueued(ctx, ofGroup(repo, ref, sha), "the merge group was removed from the merge queue", false)
	case "checks_requested":
	default:
		return nil
	}
	base, ok := strings.CutPrefix(g.GetBaseRef(), "refs/heads/")
	if !ok || !slices.Contains(mq.Branches, base) {
		in.log.Info("sparkgh.merge_group_ignored", "repo", repo, "base", g.GetBaseRef(), "why", "not a branch the merge queue lane serves")
		return nil
	}
	m := mergeRef.FindStringSubmatch(ref)
	if m == nil || m[1] != base {
		return in.refuseMerge(ctx, repo, sha, fmt.Sprintf("%q is not a merge queue ref of %s", ref, base))
	}
	if queued, err := in.stillQueued(ctx, repo, sha, ref); !queued {
		return err
	}
	number, _ := strconv.Atoi(m[2])
	pr, err := in.gh.PullRequest(ctx, repo, number)
	if err != nil {
		return fmt.Errorf("sparkgh: read %s#%d, the newest pull request in merge group %s: %w", repo, number, ref, err)
	}
	if pr.HeadRepoID == 0 || pr.HeadRepoID != pr.BaseRepoID {
		// A head repository GitHub no longer names (a deleted fork) is
		// refused as a fork is.
		return in.refuseMerge(ctx, repo, sha, fmt.Sprintf("#%d comes from a fork, whose code never runs on the fleet", number))
	}
	return in.queueMerge(ctx, repo, sha, ref)
}

// queueMerge queues the merge queue's lane for the group ref at sha,
// unless it is queued or running already, and opens its check.
func (in *Integration) queueMerge(ctx context.Context, repo, sha, ref string) error {
	mq := in.cfg.MergeQueue
	_, live, err := in.ctrl.Snapshot(ctx)
	if err != nil {
		return err
	}
	if i := slices.IndexFunc(live, ofGroup(repo, ref, sha)); i >= 0 {
		in.log.Info("sparkgh.already_requested", "request", live[i].ID, "repo", repo, "merge_group", ref)
		return nil
	}
	r, err := in.ctrl.Submit(ctx, spark.SubmitRequest{Class: spark.MergeCI, Topology: mq.Topology, Suite: mq.Suite, Owner: spark.OwnerMergeQueue,
		Annotations: map[string]string{keyRepo: repo, keySHA: sha, keyMerge: ref, keyPhase: "queued"}})
	if errors.Is(err, spark.ErrPairRefused) || errors.Is(err, spark.ErrInvalid) {
		return in.refuseMerge(ctx, repo, sha, err.Error())
	}
	if err != nil {
		return err
	}
	in.log.Info("sparkgh.queued", "request", r.ID, "repo", repo, "merge_group", ref, "sha", textlimit.ShortSHA(sha))
	return in.openCheck(ctx, r.ID)
}

// ofGroup selects the requests of the merge group ref at sha.
func ofGroup(repo, ref, sha string) func(spark.Request) bool {
	return func(r spark.Request) bool {
		return r.Annotations[keyRepo] == repo && r.Annotations[keyMerge] == ref && r.Annotations[keySHA] == sha
	}
}

// stillQueued reports whether the merge group ref is still in the queue
// at sha: a delivery acted on late (a redelivery, a re-run) may name a
// group the queue has since removed, whose ref is then gone, or moved.
func (in *Integration) stillQueued(ctx context.Context, repo, sha, ref string) (bool, error) {
	now, err := in.gh.BranchSHA(ctx, repo, strings.TrimPrefix(ref, "refs/heads/"))
	switch {
	case errors.Is(err, ErrNoBranch) || (err == nil && now != sha):
		in.log.Info("sparkgh.stale_delivery", "repo", repo, "merge_group", ref, "sha", textlimit.ShortSHA(sha), "why", "the merge group is no longer in the queue")
		return false, nil
	case err != nil:
		return false, fmt.Errorf("sparkgh: read merge group %s of %s: %w", ref, repo, err)
	}
	return true, nil
}

// refuseMerge fails the merge group's check at once, so the queue drops
// the group instead of waiting for a check that would never come.
func (in *Integration) refuseMerge(ctx context.Context, repo, sha, why string) error {
	in.log.Warn("sparkgh.merge_group_refused", "repo", repo, "sha", textlimit.ShortSHA(sha), "why", why)
	_, err := in.gh.CreateCheck(ctx, repo, sha, in.cfg.CheckName, Check{Status: "completed", Conclusion: "failure",
		Title: "Spark test refused", Summary: "The merge group was not admitted: " + why + "."})
	return err
}
