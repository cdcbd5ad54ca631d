// Command classify decides from a change's file list which CI lanes run.
//
// It needs the change to classify; -example classifies a bundled example
// diff under the bundled example policy (no network, no credentials):
//
//	classify -example
//	classify -policy .github/gpugate/policy.yml -base origin/main -head HEAD
//	classify -policy .github/gpugate/policy.yml -pr 123 -repo owner/name   # token in GITHUB_TOKEN
//	classify -changes changes.txt                                         # git diff --name-status output
//	classify -policy .github/gpugate/policy.yml -check-globs              # every fail-open glob matches a tracked file
//
// -check-globs belongs in the CI-configuration job: a code override, a
// gpu.device_control or gpu.hosted_only glob, or a lane trigger that matches
// no file git tracks in -dir is most likely misspelt, and a misspelt one
// fails open (a change to what the paid pod runs would skip the GPU gate).
// It exits 1 naming each.
//
// In GitHub Actions it writes the outputs class, docs, ci, gpu, lanes and
// jobs (JSON) to $GITHUB_OUTPUT and a per-file table to the step summary,
// and a failure is an ::error:: annotation with a non-zero exit.
package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/gpugate/gpugate/changepolicy"
	"github.com/gpugate/gpugate/ghclient"
	"github.com/gpugate/gpugate/internal/cli"
	"github.com/gpugate/gpugate/internal/ghaction"
)

//go:embed example.diff
var exampleDiff []byte

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
}

type options struct {
	policy, base, head, dir, repo, changes string
	pr                                     int
	json, checkGlobs, example              bool
}

func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("classify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.policy, "policy", "", "policy file (YAML; required, but with -example, whose default is the bundled example policy)")
	fs.StringVar(&o.base, "base", "", "base revision: classify the git diff base...head")
	fs.StringVar(&o.head, "head", "HEAD", "head revision, with -base")
	fs.StringVar(&o.dir, "dir", ".", "git work tree, with -base")
	fs.IntVar(&o.pr, "pr", 0, "pull request number: list its files through the GitHub API (token in GITHUB_TOKEN)")
	fs.StringVar(&o.repo, "repo", getenv("GITHUB_REPOSITORY"), "owner/name, with -pr")
	fs.StringVar(&o.changes, "changes", "", "file of `git diff --name-status` output (- for stdin)")
	fs.BoolVar(&o.json, "json", false, "print the decision as JSON")
	fs.BoolVar(&o.example, "example", false, "classify the bundled example diff (under -policy, or the bundled example policy)")
	fs.BoolVar(&o.checkGlobs, "check-globs", false, "instead of classifying, fail when a code, gpu or lane-trigger glob matches no file git tracks in -dir")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: classify [flags]\n\nName the change: -base (with -head), -pr, -changes, or -example for a bundled example diff.\n\n")
		fs.PrintDefaults()
	}
	if exit, ok := cli.Parse(fs, args); !ok {
		return exit
	}
	if err := refuse(fs, o); err != nil {
		return cli.Status(err)
	}
	gha := ghaction.FromEnv(getenv)
	if o.checkGlobs {
		if err := checkGlobs(ctx, o, gha, stdout); err != nil {
			gha.Fail(stdout, stderr, err)
			return 1
		}
		return 0
	}
	d, err := classify(ctx, o, getenv, stdin)
	if err == nil {
		err = report(o, d, gha, stdout)
	}
	if err != nil {
		gha.Fail(stdout, stderr, err)
		return 1
	}
	return 0
}

// refuse refuses a command line that names no change to classify, more
// than one, or a pull request without its repository.
func refuse(fs *flag.FlagSet, o options) error {
	sources := 0
	for _, set := range []bool{o.base != "", o.pr != 0, o.changes != "", o.example} {
		if set {
			sources++
		}
	}
	switch {
	case o.policy == "" && !o.example:
		return cli.Refuse(fs, "-policy FILE is required: your change policy (start from changepolicy/example_policy.yml); only -example uses the bundled one")
	case o.checkGlobs && sources > 0:
		return cli.Refuse(fs, "-check-globs reads the policy and the tracked files; it takes no -base, -pr, -changes or -example")
	case o.checkGlobs:
		return nil
	case sources == 0:
		return cli.Refuse(fs, "name the change to classify: -base REV (with -head), -pr N, -changes FILE (- for stdin), or -example for the bundled one")
	case sources > 1:
		return cli.Refuse(fs, "name one change: -base, -pr, -changes or -example")
	case o.pr != 0:
		if _, _, err := cli.SplitRepo("classify", o.repo); err != nil {
			return cli.Refuse(fs, "-pr needs -repo owner/name (default GITHUB_REPOSITORY), got %q", o.repo)
		}
	}
	return nil
}

// loadPolicy loads -policy, or the bundled example policy.
func loadPolicy(o options) (*changepolicy.Policy, error) {
	if o.policy == "" {
		return changepolicy.Load(changepolicy.ExamplePolicy)
	}
	return changepolicy.LoadFile(o.policy)
}

// errUnmatched is checkGlobs' failure.
var errUnmatched = errors.New("classify: policy globs match no tracked file")

// checkGlobs fails naming every fail-open glob that matches no file git
// tracks in -dir (changepolicy.Policy.Unmatched).
func checkGlobs(ctx context.Context, o options, gha ghaction.Env, stdout io.Writer) error {
	p, err := loadPolicy(o)
	if err != nil {
		return err
	}
	files, err := changepolicy.TrackedFiles(ctx, o.dir)
	if err != nil {
		return err
	}
	unmatched := p.Unmatched(files)
	if err := gha.SetOutputs([2]string{"unmatched", strconv.Itoa(len(unmatched))}); err != nil {
		return err
	}
	if len(unmatched) == 0 {
		fmt.Fprintf(stdout, "every code, gpu and lane-trigger glob matches at least one of the %d tracked files\n", len(files))
		return nil
	}
	for _, u := range unmatched {
		fmt.Fprintf(stdout, "%s matches no tracked file: fix the glob, or remove it if the file is gone\n", u)
	}
	return fmt.Errorf("%w: %d, listed above; a misspelt one fails open", errUnmatched, len(unmatched))
}

func classify(ctx context.Context, o options, getenv func(string) string, stdin io.Reader) (changepolicy.Decision, error) {
	p, err := loadPolicy(o)
	if err != nil {
		return changepolicy.Decision{}, err
	}
	listing, err := changesFor(ctx, o, getenv, stdin)
	if err != nil {
		return changepolicy.Decision{}, err
	}
	return listing.Classify(p)
}

// changesFor lists the changes to classify (refuse has made sure there
// is one source); from a pull request, bound to the head they were listed
// at.
func changesFor(ctx context.Context, o options, getenv func(string) string, stdin io.Reader) (changepolicy.Listing, error) {
	var changes []changepolicy.Change
	var err error
	switch {
	case o.pr != 0:
		owner, name, err := cli.SplitRepo("classify", o.repo)
		if err != nil {
			return changepolicy.Listing{}, err
		}
		client, err := ghclient.New(ctx, getenv)
		if err != nil {
			return changepolicy.Listing{}, fmt.Errorf("classify: -pr: %w", err)
		}
		return changepolicy.ListPullRequest(ctx, client, owner, name, o.pr)
	case o.base != "":
		changes, err = changepolicy.FromGitDiff(ctx, o.dir, o.base, o.head)
	case o.changes == "-":
		changes, err = changepolicy.ReadNameStatus(stdin)
	case o.changes != "":
		changes, err = changepolicy.ReadNameStatusFile(o.changes)
	default:
		changes, err = changepolicy.ParseNameStatus(exampleDiff)
	}
	return changepolicy.Listing{Changes: changes}, err
}

func report(o options, d changepolicy.Decision, gha ghaction.Env, stdout io.Writer) error {
	lanes, err := json.Marshal(d.Lanes)
	if err != nil {
		return err
	}
	jobs, err := json.Marshal(d.Jobs)
	if err != nil {
		return err
	}
	if err := gha.SetOutputs(
		[2]string{"class", string(d.Class)},
		[2]string{"docs", strconv.FormatBool(d.Docs)},
		[2]string{"ci", strconv.FormatBool(d.CI)},
		[2]string{"gpu", strconv.FormatBool(d.GPU)},
		[2]string{"lanes", string(lanes)},
		[2]string{"jobs", string(jobs)},
		[2]string{"reason", d.Reason},
		[2]string{"head_sha", d.HeadSHA},
	); err != nil {
		return err
	}
	if err := gha.AppendSummary(d.Markdown()); err != nil {
		return err
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(d)
	}
	_, err = io.WriteString(stdout, d.String())
	return err
}
