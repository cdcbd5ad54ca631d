package sparkgh

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/google/go-github/v66/github"

	"github.com/gpugate/gpugate/spark"
)

// rerun handles check_run deliveries. "rerequested" is a Re-run of one
// of the integration's checks from GitHub's interface: the request the
// check reports (its external_id) is asked for again, as a new request
// with a new check, when it has ended, its commit is still the one to
// test, and whoever asked may request fleet time. A pull request's lane
// needs the pull request still open at that commit (a fork's never runs);
// a merge group's needs the group still in the queue.
func (in *Integration) rerun(ctx context.Context, e *github.CheckRunEvent) error {
	cr := e.GetCheckRun()
	if e.GetAction() != "rerequested" || cr.GetName() != in.cfg.CheckName || cr.GetExternalID() == "" {
		return nil
	}
	return in.rerunRequest(ctx, e.GetRepo().GetFullName(), e.GetSender().GetLogin(), cr.GetExternalID(), cr.GetHeadSHA())
}

// rerunSuite handles check_suite deliveries: "rerequested" is "Re-run all
// checks" of the integration's suite at a commit. Each of its checks is
// re-run as its own Re-run would be; an actor below min_role is refused
// once, not once per check.
func (in *Integration) rerunSuite(ctx context.Context, e *github.CheckSuiteEvent) error {
	if e.GetAction() != "rerequested" {
		return nil
	}
	repo, actor := e.GetRepo().GetFullName(), e.GetSender().GetLogin()
	runs, err := in.gh.SuiteChecks(ctx, repo, e.GetCheckSuite().GetID(), in.cfg.CheckName)
	if err != nil {
		return fmt.Errorf("sparkgh: list the checks of suite %d to re-run them: %w", e.GetCheckSuite().GetID(), err)
	}
	runs = slices.DeleteFunc(runs, func(cr CheckRun) bool { return cr.ExternalID == "" })
	if len(runs) == 0 {
		return nil
	}
	if err := in.hasRole(ctx, repo, actor); err != nil {
		in.log.Warn("sparkgh.rerun_refused", "repo", repo, "suite", e.GetCheckSuite().GetID(), "why", err.Error())
		if st, serr := in.ctrl.Status(ctx, runs[0].ExternalID); serr == nil && st.Request.PR != nil {
			return in.refuse(ctx, PR{Repo: repo, Number: st.Request.PR.Number}, err.Error())
		}
		return nil
	}
	var errs []error
	for _, cr := range runs {
		errs = append(errs, in.rerunRequest(ctx, repo, actor, cr.ExternalID, cr.HeadSHA))
	}
	return errors.Join(errs...)
}

// rerunRequest asks again for request id, whose check at sha actor
// re-ran.
func (in *Integration) rerunRequest(ctx context.Context, repo, actor, id, sha string) error {
	st, err := in.ctrl.Status(ctx, id)
	if errors.Is(err, spark.ErrNotFound) {
		in.log.Info("sparkgh.rerun_ignored", "repo", repo, "request", id, "why", "the controller has no such request")
		return nil
	}
	if err != nil {
		return err
	}
	r := st.Request
	switch {
	case r.Annotations[keyRepo] != repo || commitOf(r) != sha:
		in.log.Warn("sparkgh.rerun_ignored", "repo", repo, "request", id, "why", "the check's repository or commit is not its request's")
		return nil
	case r.State == spark.Queued || r.State == spark.Active:
		in.log.Info("sparkgh.rerun_ignored", "repo", repo, "request", id, "why", "the request is still "+string(r.State))
		return nil
	}
	lane := Lane{Suite: r.Suite, Topology: r.Topology}
	switch {
	case r.PR != nil:
		cur, err := in.gh.PullRequest(ctx, repo, r.PR.Number)
		if err != nil {
			return fmt.Errorf("sparkgh: read %s#%d before re-running its check: %w", repo, r.PR.Number, err)
		}
		if !cur.Open || cur.HeadSHA != r.PR.SHA {
			in.log.Info("sparkgh.rerun_ignored", "repo", repo, "pr", r.PR.Number, "request", id, "why", "the pull request is closed or has moved past the check's commit")
			return nil
		}
		if err := in.authorize(ctx, cur, actor); err != nil {
			return in.refuse(ctx, cur, err.Error())
		}
		// Asked for as a command is: a later label removal leaves it.
		return in.askFor(ctx, cur, lane, "")
	case r.Annotations[keyMerge] != "" && in.cfg.MergeQueue != nil:
		sha, ref := r.Annotations[keySHA], r.Annotations[keyMerge]
		if queued, err := in.stillQueued(ctx, repo, sha, ref); !queued {
			return err
		}
		if err := in.hasRole(ctx, repo, actor); err != nil {
			in.log.Warn("sparkgh.rerun_refused", "repo", repo, "merge_group", ref, "why", err.Error())
			return nil
		}
		return in.queueMerge(ctx, repo, sha, ref)
	}
	return nil
}
