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
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
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
	var subs []cli.Subcommand
	for _, name := range []string{"reuse", "authorize", "publish", "local-run", "local-relay", "recover"} {
		subs = append(subs, cli.Subcommand{Name: name, Usage: usages[name], Run: func(args []string) error {
			return subcommand(ctx, name, args, getenv, stdout, stderr)
		}})
	}
	// A subcommand reports its own failure (an ::error:: annotation in
	// Actions); a refused command line is already said in one line.
	return cli.Status(cli.Dispatch("gate", stderr, args, subs...))
}

var usages = map[string]string{
	"reuse":       "-head SHA -tested-ref SHA",
	"authorize":   "-actor LOGIN (-pr N | -ref REF) [-classified-head SHA]",
	"publish":     "-head SHA -tested-ref SHA -kind KIND [evidence flags]",
	"local-run":   "-pr N -lane CMD [-dir DIR] [-workflow FILE]",
	"local-relay": "-dispatcher LOGIN -pr N -sha SHA",
	"recover":     "-pr N [-workflow FILE] [-wait]",
}

// subcommand runs one: its flags and the shared ones (-repo, -check-name,
// -json), the flags it cannot do without, then the work. A work failure
// is reported here (an ::error:: annotation in Actions).
func subcommand(ctx context.Context, name string, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gate "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	repo := fs.String("repo", getenv("GITHUB_REPOSITORY"), "owner/name (default GITHUB_REPOSITORY)")
	check := fs.String("check-name", gate.DefaultCheckName, "the required check's name")
	gha, log := ghaction.FromEnv(getenv), stdout // annotations go to the log, -json or not
	ghaction.JSONFlag(fs, &stdout, &gha)
	cmd := commands[name](fs)
	if err := cli.Flags(fs, args); err != nil {
		return err
	}
	if err := cli.Require(fs, append([]string{"repo"}, cmd.need...)...); err != nil {
		return err
	}
	owner, repoName, err := cli.SplitRepo("gate", *repo)
	if err != nil {
		return cli.Refuse(fs, "-repo %q: want owner/name", *repo)
	}
	if cmd.refuse != nil {
		if err := cmd.refuse(); err != nil {
			return cli.Refuse(fs, "%v", err)
		}
	}
	outputs, err := func() ([][2]string, error) {
		client, err := ghclient.New(ctx, getenv)
		if err != nil {
			return nil, fmt.Errorf("gate: %w", err)
		}
		return cmd.exec(ctx, &gate.GitHub{Client: client, Owner: owner, Repo: repoName}, *check)
	}()
	for _, kv := range outputs {
		fmt.Fprintf(stdout, "%s=%s\n", kv[0], kv[1])
	}
	if werr := gha.SetOutputs(outputs...); werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		gha.Fail(log, stderr, err)
	}
	return err
}

// command is one subcommand's flags (registered by its constructor), the
// ones it cannot do without, a command line it refuses otherwise, and its
// work.
type command struct {
	need   []string
	refuse func() error // nil, or why the command line cannot run
	exec   func(ctx context.Context, gh *gate.GitHub, check string) ([][2]string, error)
}

var commands = map[string]func(fs *flag.FlagSet) command{
	"reuse": func(fs *flag.FlagSet) command {
		head := fs.String("head", "", "the authorized PR head SHA (required)")
		ref := fs.String("tested-ref", "", "the tested merge SHA (required)")
		return command{need: []string{"head", "tested-ref"}, exec: func(ctx context.Context, gh *gate.GitHub, check string) ([][2]string, error) {
			d := gate.LookupReuse(ctx, gh, *head, *ref, check)
			out := [][2]string{{"reuse", strconv.FormatBool(d.Reuse)}, {"reason", d.Reason}}
			if d.From != nil {
				out = append(out, [2]string{"from_id", strconv.FormatInt(d.From.ID, 10)}, [2]string{"from_url", d.From.URL})
			}
			return out, nil // fails open: any error already answered "run"
		}}
	},
	"authorize": func(fs *flag.FlagSet) command {
		actor := fs.String("actor", "", "the user asking (GITHUB_ACTOR; required)")
		pr := fs.Int("pr", 0, "pull request number")
		ref := fs.String("ref", "", "manual revision (cannot be combined with -pr)")
		role := fs.String("min-role", "maintain", "maintain or admin")
		label := fs.String("local-label", gate.DefaultLocalLabel, "the label of a PR validated on a maintainer's GPU: the paid path skips it")
		classified := fs.String("classified-head", "", "the head the classifier listed the changed files at (classify's head_sha); a head that moved since is refused")
		refuse := func() error {
			if (*pr != 0) == (*ref != "") {
				return errors.New("give -pr N or -ref REF: one of them, not both")
			}
			return oneOf("-min-role", *role, "maintain", "admin")
		}
		return command{need: []string{"actor"}, refuse: refuse, exec: func(ctx context.Context, gh *gate.GitHub, _ string) ([][2]string, error) {
			a, err := gate.Authorize(ctx, gh, gate.AuthRequest{Actor: *actor, PR: *pr, Ref: *ref, MinRole: *role, LocalLabel: *label, ClassifiedHead: *classified})
			if err != nil {
				return nil, err
			}
			return [][2]string{{"head_sha", a.HeadSHA}, {"tested_ref", a.TestedRef}, {"pr", strconv.Itoa(a.PR)}, {"role", a.Role},
				{"local_gpu_validation", strconv.FormatBool(a.LocalValidation)}}, nil
		}}
	},
	"publish": func(fs *flag.FlagSet) command {
		head := fs.String("head", "", "the authorized PR head SHA (required)")
		ref := fs.String("tested-ref", "", "the tested merge SHA (required)")
		kind := fs.String("kind", "", "paid, reused, failed, not-required or skipped (required)")
		fromID := fs.Int64("reused-from-id", 0, "with -kind reused: the check reused")
		fromURL := fs.String("reused-from-url", "", "with -kind reused: its link")
		gpu := fs.String("gpu-required", "", "with -kind not-required: the classifier's gpu output (must be false)")
		reason := fs.String("reason", "", "with -kind not-required: the classifier's reason")
		classified := fs.String("classified-head", "", "with -gpu-required: the head the classifier listed the files at (classify's head_sha); not-required is published only on that head")
		testsPassed := fs.String("tests-passed", "", "with -kind paid: the GPU test job's result (must be true)")
		ran := fs.String("ran", "", "comma-separated list of what ran")
		notRun := fs.String("not-run", "", "comma-separated list of what did NOT run")
		details := fs.String("details-file", "", "Markdown file appended to the summary")
		existing := fs.Int64("existing-id", 0, "complete this in-progress check instead of creating one")
		url := fs.String("details-url", "", "link to the run")
		pr := fs.Int("pr", 0, "the pull request: re-read first, and nothing is published while it carries -local-label")
		label := fs.String("local-label", gate.DefaultLocalLabel, "the label of a PR validated on a maintainer's GPU")
		refuse := func() error {
			kinds := []string{string(gate.KindPaid), string(gate.KindReused), string(gate.KindFailed), string(gate.KindNotRequired), string(gate.KindLocal), string(gate.KindSkipped)}
			for _, c := range []struct{ flag, v string }{{"-tests-passed", *testsPassed}, {"-gpu-required", *gpu}} {
				if c.v != "" {
					if err := oneOf(c.flag, c.v, "true", "false"); err != nil {
						return err
					}
				}
			}
			return oneOf("-kind", *kind, kinds...)
		}
		return command{need: []string{"head", "tested-ref", "kind"}, refuse: refuse, exec: func(ctx context.Context, gh *gate.GitHub, check string) ([][2]string, error) {
			r := gate.Report{HeadSHA: *head, CheckName: check, ID: gate.ExternalID{Ref: *ref, Kind: gate.Kind(*kind)},
				Ran: split(*ran), NotRun: split(*notRun), ExistingID: *existing, DetailsURL: *url}
			if *fromID != 0 {
				r.ReusedFrom = &gate.Gate{ID: *fromID, URL: *fromURL}
			}
			if *gpu != "" {
				req, err := strconv.ParseBool(*gpu)
				if err != nil {
					return nil, fmt.Errorf("gate: -gpu-required %q: want true or false", *gpu)
				}
				r.GPU = &gate.Classification{GPURequired: req, Reason: *reason, HeadSHA: *classified}
			}
			if *testsPassed != "" {
				passed, err := strconv.ParseBool(*testsPassed)
				if err != nil {
					return nil, fmt.Errorf("gate: -tests-passed %q: want true or false", *testsPassed)
				}
				r.Paid = &gate.PaidEvidence{TestsPassed: passed}
			}
			if *details != "" {
				data, err := os.ReadFile(*details)
				if err != nil {
					return nil, fmt.Errorf("gate: %w", err)
				}
				r.Details = string(data)
			}
			// The label may have been added after authorization; the local
			// relay's gate must not be overridden.
			g, err := gate.PublishPaid(ctx, gh, gh, *pr, *label, r, time.Now())
			if errors.Is(err, gate.ErrLocallyValidated) {
				return [][2]string{{"published", "false"}, {"reason", fmt.Sprintf("#%d carries %q: its local validation stands, so the paid path publishes nothing", *pr, *label)}}, nil
			}
			if err != nil {
				return nil, err
			}
			return [][2]string{{"published", "true"}, {"check_id", strconv.FormatInt(g.ID, 10)}, {"title", gate.Title(r.ID.Kind)}}, nil
		}}
	},
	"local-run": func(fs *flag.FlagSet) command {
		pr := fs.Int("pr", 0, "the pull request whose head is checked out (required)")
		lane := fs.String("lane", "", "the GPU lane's command, run with sh -c in -dir (required)")
		dir := fs.String("dir", ".", "the checkout: its HEAD must be the PR's head, with no uncommitted change")
		wf := fs.String("workflow", gate.DefaultRelayWorkflow, "the relay workflow, dispatched on the default branch")
		label := fs.String("local-label", gate.DefaultLocalLabel, "the local-validation label the PR must carry")
		return command{need: []string{"pr", "lane"}, exec: func(ctx context.Context, gh *gate.GitHub, _ string) ([][2]string, error) {
			head, err := gate.CleanHead(ctx, *dir)
			if err != nil {
				return nil, err
			}
			res, err := gate.RunLocal(ctx, gh, gh, gh, gate.LocalRun{PR: *pr, Head: head, LaneName: *lane, Label: *label, Workflow: *wf,
				Lane: gate.ShellLane(*dir, *lane, os.Stderr)})
			if err != nil {
				return nil, err
			}
			return [][2]string{{"sha", head}, {"relay_ref", res.Ref}, {"lane_seconds", strconv.Itoa(int(res.Took.Seconds()))}}, nil
		}}
	},
	"local-relay": func(fs *flag.FlagSet) command {
		dispatcher := fs.String("dispatcher", "", "who dispatched the relay (GITHUB_ACTOR; required)")
		pr := fs.Int("pr", 0, "pull request number (required)")
		sha := fs.String("sha", "", "the head SHA to publish for (required)")
		label := fs.String("local-label", gate.DefaultLocalLabel, "the local-validation label")
		return command{need: []string{"dispatcher", "pr", "sha"}, exec: func(ctx context.Context, gh *gate.GitHub, check string) ([][2]string, error) {
			ev, err := gate.VerifyLocalEvidence(ctx, gh, gate.LocalRequest{Dispatcher: *dispatcher, PR: *pr, SHA: *sha, Label: *label})
			if err != nil {
				return nil, err
			}
			g, err := gate.Publish(ctx, gh, gate.Report{HeadSHA: *sha, CheckName: check, ID: gate.ExternalID{Ref: *sha, Kind: gate.KindLocal}, Local: &ev,
				Details: fmt.Sprintf("Validated on a maintainer's GPU; evidence posted on #%d by %s.", *pr, *dispatcher)}, time.Now())
			if err != nil {
				return nil, err
			}
			return [][2]string{{"check_id", strconv.FormatInt(g.ID, 10)}}, nil
		}}
	},
	"recover": func(fs *flag.FlagSet) command {
		pr := fs.Int("pr", 0, "pull request number (required)")
		wf := fs.String("workflow", "runpod-gpu-test.yml", "the GPU workflow file")
		wait := fs.Bool("wait", false, "follow the dispatched run to completion")
		return command{need: []string{"pr", "workflow"}, exec: func(ctx context.Context, gh *gate.GitHub, _ string) ([][2]string, error) {
			res, err := gate.Recover(ctx, gh, gate.RecoverRequest{Workflow: *wf, PR: *pr, Wait: *wait})
			if res.Ref == "" {
				return nil, err // nothing was dispatched: no outputs
			}
			out := [][2]string{{"ref", res.Ref}}
			if res.Run.ID != 0 {
				out = append(out, [2]string{"run_id", strconv.FormatInt(res.Run.ID, 10)}, [2]string{"conclusion", res.Run.Conclusion}, [2]string{"url", res.Run.URL})
			}
			return out, err
		}}
	},
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// oneOf refuses a flag value outside its closed set.
func oneOf(flag, v string, choices ...string) error {
	if slices.Contains(choices, v) {
		return nil
	}
	return fmt.Errorf("%s %q: want %s", flag, v, strings.Join(choices, ", "))
}
