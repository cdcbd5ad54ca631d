// Command costreport collects and summarizes the cost history of the paid
// GPU workflow:
//
//	costreport collect   -repo owner/name -workflow runpod-gpu-test.yml [-reaper-workflow runpod-reap.yml] -since 2026-10-06 -until 2026-10-09 -dir DIR
//	costreport summarize -dir DIR [-out DIR]    # offline: JSON, Markdown and an SVG chart
//
// collect reads GITHUB_TOKEN. summarize needs no network:
//
//	go run ./examples/costreport summarize -dir examples/costreport/testdata/evidence
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/gpugate/gpugate/cost"
	"github.com/gpugate/gpugate/ghclient"
	"github.com/gpugate/gpugate/internal/cli"
	"github.com/gpugate/gpugate/internal/ghaction"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	err := cli.Dispatch("costreport", stderr, args,
		cli.Subcommand{Name: "collect", Usage: "-repo owner/name -since YYYY-MM-DD -until YYYY-MM-DD -dir DIR [-workflow FILE] [-reaper-workflow FILE]",
			Run: func(args []string) error { return collect(ctx, args, getenv, stdout, stderr) }},
		cli.Subcommand{Name: "summarize", Usage: "-dir DIR [-out DIR] [-json]",
			Run: func(args []string) error { return summarize(args, getenv, stdout, stderr) }})
	code := cli.Status(err)
	if code == 1 {
		gha := ghaction.FromEnv(getenv)
		gha.JSON = ghaction.JSONRequested(args) // stdout carries only JSON: annotations go to stderr
		gha.Fail(stdout, stderr, err)
	}
	return code
}

func collect(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("costreport collect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	repo := fs.String("repo", getenv("GITHUB_REPOSITORY"), "owner/name (default GITHUB_REPOSITORY)")
	workflow := fs.String("workflow", "runpod-gpu-test.yml", "the paid GPU workflow file")
	reaper := fs.String("reaper-workflow", "runpod-reap.yml", "the orphan reaper's workflow file, whose decision artifacts are the recovery record (\"\": skip)")
	since := fs.String("since", "", "first UTC day, YYYY-MM-DD (inclusive)")
	until := fs.String("until", "", "last UTC day, YYYY-MM-DD (inclusive)")
	dir := fs.String("dir", "", "where to save evidence (outside the repository)")
	if err := cli.Flags(fs, args); err != nil {
		return err
	}
	if err := cli.Require(fs, "repo"); err != nil {
		return err
	}
	if _, _, err := cli.SplitRepo("costreport", *repo); err != nil {
		return cli.Refuse(fs, "-repo %q: want owner/name", *repo)
	}
	s, err1 := time.Parse(time.DateOnly, *since)
	u, err2 := time.Parse(time.DateOnly, *until)
	if err1 != nil || err2 != nil || *dir == "" {
		return cli.Refuse(fs, "-since and -until (YYYY-MM-DD) and -dir are required")
	}
	if u.Before(s) {
		return cli.Refuse(fs, "-until %s is before -since %s", *until, *since)
	}
	client, err := ghclient.New(ctx, getenv)
	if err != nil {
		return fmt.Errorf("costreport: %w", err)
	}
	err = cost.Collect(ctx, client, *repo, *workflow, s, u, *dir)
	if *reaper != "" {
		err = errors.Join(err, cost.CollectReaper(ctx, client, *repo, *reaper, s, u, *dir))
	}
	if err != nil {
		fmt.Fprintf(stderr, "costreport: collect stopped; what it saved is under %s, and collect run again resumes there\n", *dir)
		return err
	}
	fmt.Fprintf(stdout, "evidence saved under %s (run collect again to resume)\n", *dir)
	return nil
}

func summarize(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("costreport summarize", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "saved evidence")
	out := fs.String("out", "", "write summary.json, summary.md and spend.svg here")
	asJSON := fs.Bool("json", false, "print JSON instead of Markdown")
	if err := cli.Flags(fs, args); err != nil {
		return err
	}
	if *dir == "" {
		return cli.Refuse(fs, "-dir is required")
	}
	s, err := cost.Summarize(*dir)
	if err != nil {
		return err
	}
	data, _ := json.MarshalIndent(s, "", "  ")
	if *asJSON {
		fmt.Fprintln(stdout, string(data))
	} else {
		fmt.Fprint(stdout, s.Markdown())
	}
	if err := ghaction.FromEnv(getenv).AppendSummary(s.Markdown()); err != nil {
		return err
	}
	if *out != "" {
		if err := os.MkdirAll(*out, 0o755); err != nil {
			return err
		}
		for name, body := range map[string][]byte{"summary.json": append(data, '\n'), "summary.md": []byte(s.Markdown()), "spend.svg": []byte(s.SVG())} {
			if err := os.WriteFile(filepath.Join(*out, name), body, 0o644); err != nil {
				return fmt.Errorf("costreport: %w", err)
			}
		}
		fmt.Fprintf(stderr, "wrote summary.json, summary.md and spend.svg to %s\n", *out)
	}
	return nil
}
