// Command gate runs one step of the required GPU gate from a workflow:
//
//	gate reuse       -head SHA -tested-ref SHA            # outputs reuse, reason, from_url
//	gate authorize   -actor LOGIN (-pr N | -ref REF)      # outputs head_sha, tested_ref
//	gate publish     -head SHA -tested-ref SHA -kind KIND # outputs check_id
//	gate local-run   -pr N -lane CMD [-dir DIR]           # a maintainer's GPU: runs the lane at HEAD, posts the evidence, dispatches the relay
//	gate local-relay -dispatcher LOGIN -pr N -sha SHA     # verifies evidence, publishes the local gate
//	gate recover     -pr N [-workflow FILE] [-wait]       # dispatches at the default branch
//
// Each subcommand takes its flags after it; a missing required flag, an
// unknown flag or a stray argument exits 2 before anything is read.
// Every subcommand reads GITHUB_TOKEN, GITHUB_REPOSITORY (or -repo) and
// GITHUB_API_URL, prints its outputs as name=value lines (with -json, as
// one JSON object), writes them to $GITHUB_OUTPUT, and fails with an
// ::error:: annotation.
//
// The steps are package gate's Steps, the ones gateflow.Run composes: the
// same rules hold whether one process runs the whole gate or the Action
// runs one step per process.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gpugate/gpugate/gate"
	"github.com/gpugate/gpugate/ghclient"
	"github.com/gpugate/gpugate/internal/cli"
	"github.com/gpugate/gpugate/internal/ghaction"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	gha := ghaction.FromEnv(getenv)
	var subs []cli.Verb
	for _, v := range verbs {
		subs = append(subs, cli.Verb{Name: v.name, Usage: v.usage, Flags: func(fs *flag.FlagSet) cli.Work { return v.work(ctx, fs, getenv) }})
	}
	err := cli.Dispatch("gate", stderr, args, cli.Verbs("gate", gha, nil, stdout, stderr, subs...)...)
	code := cli.Status(err)
	if code == 1 { // a refused command line is already said in one line
		gha.JSON = ghaction.JSONRequested(args) // stdout carries only JSON: annotations go to stderr
		gha.Fail(stdout, stderr, err)
	}
	return code
}

// verb is one subcommand: its usage line, -local-label's help ("" when
// it takes none), and a constructor that registers its own flags and
// returns its work.
type verb struct {
	name, usage string
	label       string
	flags       func(fs *flag.FlagSet) command
}

// command is a subcommand's work: the flags it cannot do without, a
// command line it refuses otherwise, and the step it runs.
type command struct {
	need   []string
	refuse func() error // nil, or why the command line cannot run
	exec   func(ctx context.Context, s gate.Steps, gh *gate.GitHub) ([][2]string, error)
}

// work registers the verb's flags and the shared ones (-repo,
// -check-name, -local-label where it takes one) on fs, and returns its
// work: the flags it cannot do without, then its step over GitHub, its
// outputs printed as name=value lines.
func (v verb) work(ctx context.Context, fs *flag.FlagSet, getenv func(string) string) cli.Work {
	repo := fs.String("repo", getenv("GITHUB_REPOSITORY"), "owner/name (default GITHUB_REPOSITORY)")
	steps := gate.Steps{CheckName: gate.DefaultCheckName, LocalLabel: gate.DefaultLocalLabel}
	fs.StringVar(&steps.CheckName, "check-name", steps.CheckName, "the required check's name")
	if v.label != "" {
		fs.StringVar(&steps.LocalLabel, "local-label", steps.LocalLabel, v.label)
	}
	cmd := v.flags(fs)
	return cli.Work{Run: func(w cli.Step) ([][2]string, error) {
		if err := cli.Require(fs, append([]string{"repo"}, cmd.need...)...); err != nil {
			return nil, err
		}
		owner, repoName, err := cli.SplitRepo("gate", *repo)
		if err != nil {
			return nil, cli.Refuse(fs, "-repo %q: want owner/name", *repo)
		}
		if cmd.refuse != nil {
			if err := cmd.refuse(); err != nil {
				return nil, cli.Refuse(fs, "%v", err)
			}
		}
		client, err := ghclient.New(ctx, getenv)
		if err != nil {
			return [][2]string{}, fmt.Errorf("gate: %w", err)
		}
		gh := &gate.GitHub{Client: client, Owner: owner, Repo: repoName}
		steps.Repo, steps.Checks = gh, gh
		outputs, err := cmd.exec(ctx, steps, gh)
		if outputs == nil {
			outputs = [][2]string{} // with -json, a failure still prints one (empty) object
		}
		for _, kv := range outputs {
			fmt.Fprintf(w.Out, "%s=%s\n", kv[0], kv[1])
		}
		return outputs, err
	}}
}

var verbs = []verb{
	{"reuse", "-head SHA -tested-ref SHA", "", func(fs *flag.FlagSet) command {
		head := fs.String("head", "", "the authorized PR head SHA (required)")
		ref := fs.String("tested-ref", "", "the tested merge SHA (required)")
		return command{need: []string{"head", "tested-ref"}, exec: func(ctx context.Context, s gate.Steps, _ *gate.GitHub) ([][2]string, error) {
			// Fails open: any error already answered "run".
			return s.Reuse(ctx, gate.Authorization{HeadSHA: *head, TestedRef: *ref}).Outputs(), nil
		}}
	}},
	{"authorize", "-actor LOGIN (-pr N | -ref REF) [-classified-head SHA]", "the label of a PR validated on a maintainer's GPU: the paid path skips it", func(fs *flag.FlagSet) command {
		actor := fs.String("actor", "", "the user asking (GITHUB_ACTOR; required)")
		pr := fs.Int("pr", 0, "pull request number")
		ref := fs.String("ref", "", "manual revision (cannot be combined with -pr)")
		role := fs.String("min-role", "maintain", "maintain or admin")
		classified := fs.String("classified-head", "", "the head the classifier listed the changed files at (classify's head_sha); a head that moved since is refused")
		refuse := func() error {
			if (*pr != 0) == (*ref != "") {
				return errors.New("give -pr N or -ref REF: one of them, not both")
			}
			if *role != "maintain" && *role != "admin" {
				return fmt.Errorf("-min-role %q: want maintain, admin", *role)
			}
			return nil
		}
		return command{need: []string{"actor"}, refuse: refuse, exec: func(ctx context.Context, s gate.Steps, _ *gate.GitHub) ([][2]string, error) {
			a, err := s.Authorize(ctx, gate.AuthRequest{Actor: *actor, PR: *pr, Ref: *ref, MinRole: *role, ClassifiedHead: *classified})
			if err != nil {
				return nil, err
			}
			return a.Outputs(), nil
		}}
	}},
	{"publish", "-head SHA -tested-ref SHA -kind KIND [evidence flags]", "the label of a PR validated on a maintainer's GPU", func(fs *flag.FlagSet) command {
		var in gate.PublishInputs
		fs.StringVar(&in.HeadSHA, "head", "", "the authorized PR head SHA (required)")
		fs.StringVar(&in.TestedRef, "tested-ref", "", "the tested merge SHA (required)")
		fs.StringVar(&in.Kind, "kind", "", "paid, reused, failed, not-required or skipped (required)")
		fs.Int64Var(&in.ReusedFromID, "reused-from-id", 0, "with -kind reused: the check reused")
		fs.StringVar(&in.ReusedFromURL, "reused-from-url", "", "with -kind reused: its link")
		fs.StringVar(&in.GPURequired, "gpu-required", "", "with -kind not-required: the classifier's gpu output (must be false)")
		fs.StringVar(&in.Reason, "reason", "", "with -kind not-required: the classifier's reason")
		fs.StringVar(&in.ClassifiedHead, "classified-head", "", "with -gpu-required: the head the classifier listed the files at (classify's head_sha); not-required is published only on that head")
		fs.StringVar(&in.TestsPassed, "tests-passed", "", "with -kind paid: the GPU test job's result (must be true)")
		fs.StringVar(&in.Ran, "ran", "", "comma-separated list of what ran")
		fs.StringVar(&in.NotRun, "not-run", "", "comma-separated list of what did NOT run")
		details := fs.String("details-file", "", "Markdown file appended to the summary")
		existing := fs.Int64("existing-id", 0, "complete this in-progress check instead of creating one")
		url := fs.String("details-url", "", "link to the run")
		pr := fs.Int("pr", 0, "the pull request: re-read first, and nothing is published while it carries -local-label")
		var r gate.Report
		refuse := func() (err error) {
			r, err = in.Report()
			if ie := (*gate.InputError)(nil); errors.As(err, &ie) {
				return fmt.Errorf("-%s %q: want %s", ie.Input, ie.Value, strings.Join(ie.Want, ", "))
			}
			return err
		}
		return command{need: []string{"head", "tested-ref", "kind"}, refuse: refuse, exec: func(ctx context.Context, s gate.Steps, _ *gate.GitHub) ([][2]string, error) {
			r.ExistingID, r.DetailsURL = *existing, *url
			if *details != "" {
				data, err := os.ReadFile(*details)
				if err != nil {
					return nil, fmt.Errorf("gate: %w", err)
				}
				r.Details = string(data)
			}
			g, err := s.Publish(ctx, *pr, r, time.Now()) // re-reads the label first
			if errors.Is(err, gate.ErrLocallyValidated) {
				return [][2]string{{"published", "false"}, {"reason", fmt.Sprintf("#%d carries %q: its local validation stands, so the paid path publishes nothing", *pr, s.LocalLabel)}}, nil
			}
			if err != nil {
				return nil, err
			}
			return [][2]string{{"published", "true"}, {"check_id", strconv.FormatInt(g.ID, 10)}, {"title", gate.Title(r.ID.Kind)}}, nil
		}}
	}},
	{"local-run", "-pr N -lane CMD [-dir DIR] [-workflow FILE]", "the local-validation label the PR must carry", func(fs *flag.FlagSet) command {
		pr := fs.Int("pr", 0, "the pull request whose head is checked out (required)")
		lane := fs.String("lane", "", "the GPU lane's command, run with sh -c in -dir (required)")
		dir := fs.String("dir", ".", "the checkout: its HEAD must be the PR's head, with no uncommitted change")
		wf := fs.String("workflow", gate.DefaultRelayWorkflow, "the relay workflow, dispatched on the default branch")
		return command{need: []string{"pr", "lane"}, exec: func(ctx context.Context, s gate.Steps, gh *gate.GitHub) ([][2]string, error) {
			res, err := gate.RunLocalCheckout(ctx, gh, gh, gh, *dir, gate.LocalRun{PR: *pr, LaneName: *lane, Label: s.LocalLabel, Workflow: *wf}, os.Stderr)
			if err != nil {
				return nil, err
			}
			return [][2]string{{"sha", res.Head}, {"relay_ref", res.Ref}, {"lane_seconds", strconv.Itoa(int(res.Took.Seconds()))}}, nil
		}}
	}},
	{"local-relay", "-dispatcher LOGIN -pr N -sha SHA", "the local-validation label", func(fs *flag.FlagSet) command {
		dispatcher := fs.String("dispatcher", "", "who dispatched the relay (GITHUB_ACTOR; required)")
		pr := fs.Int("pr", 0, "pull request number (required)")
		sha := fs.String("sha", "", "the head SHA to publish for (required)")
		return command{need: []string{"dispatcher", "pr", "sha"}, exec: func(ctx context.Context, s gate.Steps, _ *gate.GitHub) ([][2]string, error) {
			g, err := s.RelayLocal(ctx, gate.LocalRequest{Dispatcher: *dispatcher, PR: *pr, SHA: *sha}, time.Now())
			if err != nil {
				return nil, err
			}
			return [][2]string{{"check_id", strconv.FormatInt(g.ID, 10)}}, nil
		}}
	}},
	{"recover", "-pr N [-workflow FILE] [-wait]", "", func(fs *flag.FlagSet) command {
		pr := fs.Int("pr", 0, "pull request number (required)")
		wf := fs.String("workflow", "runpod-gpu-test.yml", "the GPU workflow file")
		wait := fs.Bool("wait", false, "follow the dispatched run to completion")
		return command{need: []string{"pr", "workflow"}, exec: func(ctx context.Context, s gate.Steps, gh *gate.GitHub) ([][2]string, error) {
			res, err := gate.Recover(ctx, gh, gate.RecoverRequest{Workflow: *wf, PR: *pr, Wait: *wait})
			return res.Outputs(), err // none when nothing was dispatched
		}}
	}},
}
