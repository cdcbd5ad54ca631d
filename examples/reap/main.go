// Command reap sweeps RunPod for orphaned CI pods once: it lists every pod,
// considers only pods tagged by this repository's GPU workflow whose name
// agrees with the tags, and reclaims those whose run completed five minutes
// ago, whose attempt was superseded, or that outlived the two-hour
// backstop. It is a dry run unless -execute is given.
//
//	reap -repo owner/name -workflow .github/workflows/runpod-gpu-test.yml [-execute] [-out decisions.json]
//	reap -simulate [-execute]
//
// Real runs read RUNPOD_API_KEY and GitHub credentials: GITHUB_TOKEN, or
// a GitHub App (GITHUB_APP_ID, GITHUB_APP_INSTALLATION_ID,
// GITHUB_APP_PRIVATE_KEY_FILE).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/gpugate/gpugate/internal/cli"
	"github.com/gpugate/gpugate/internal/ghaction"
	"github.com/gpugate/gpugate/internal/runpodenv"
	"github.com/gpugate/gpugate/internal/stepsignal"
	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/runpoddemo"
	"github.com/gpugate/gpugate/runpod/runpodgh"
)

func main() {
	stepsignal.FinishOnSignal() // a deletion in flight finishes
	os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

type options struct {
	repo, workflow, out  string
	execute, cancel, sim bool
	json                 bool
	grace, lifetime      time.Duration
}

// Document is the decisions artifact.
type Document struct {
	Repository string                `json:"repository"`
	Workflow   string                `json:"workflow"`
	SweptAt    time.Time             `json:"swept_at"`
	Execute    bool                  `json:"execute"`
	Decisions  []runpod.ReapDecision `json:"decisions"`
	Error      string                `json:"error,omitempty"`
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("reap", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	def := runpod.DefaultReapPolicy("", "")
	fs.StringVar(&o.repo, "repo", getenv("GITHUB_REPOSITORY"), "owner/name the pods must be tagged with")
	fs.StringVar(&o.workflow, "workflow", ".github/workflows/runpod-gpu-test.yml", "the GPU workflow path the pods must be tagged with")
	fs.BoolVar(&o.execute, "execute", false, "delete reclaimable pods (default: dry run)")
	fs.BoolVar(&o.cancel, "cancel-runs", false, "after deleting a pod past its lifetime, cancel its still-active run")
	fs.DurationVar(&o.grace, "completed-grace", def.CompletedGrace, "reclaim this long after the owning run completed")
	fs.DurationVar(&o.lifetime, "lifetime", def.Lifetime, "lifetime backstop from the pod's start")
	fs.StringVar(&o.out, "out", "", "write the JSON decisions document here")
	fs.BoolVar(&o.json, "json", false, "print the decisions document instead of the table")
	fs.BoolVar(&o.sim, "simulate", false, "sweep a fake RunPod with a bundled mix of pods")
	if exit, ok := cli.Parse(fs, args); !ok {
		return exit
	}
	if !o.sim {
		if err := cli.Require(fs, "repo", "workflow"); err != nil {
			return cli.Status(err)
		}
		if _, _, err := cli.SplitRepo("reap", o.repo); err != nil {
			return cli.Status(cli.Refuse(fs, "-repo %q: want owner/name", o.repo))
		}
	}
	if err := reap(ctx, o, getenv, stdout, stderr); err != nil {
		ghaction.FromEnv(getenv).Fail(stdout, stderr, err)
		return 1
	}
	return 0
}

func reap(ctx context.Context, o options, getenv func(string) string, stdout, stderr io.Writer) error {
	var deps runpod.ReapDeps
	var demo *runpoddemo.Reaping
	if o.sim {
		var err error
		o.repo, o.workflow = runpoddemo.Repository, runpoddemo.Workflow
		if demo, err = runpoddemo.NewReaping(ctx); err != nil {
			return err
		}
		deps = demo.Deps
	} else {
		owner, name, settings := cli.SplitRepo("reap", o.repo)
		if settings != nil {
			settings = fmt.Errorf("reap: -repo %q: want owner/name", o.repo)
		}
		api, gh, err := runpodenv.Clients(ctx, getenv, "reap", "run lookups need GitHub", settings)
		if err != nil {
			return err
		}
		repo := runpodgh.Repo{Client: gh, Owner: owner, Name: name}
		deps = runpod.ReapDeps{API: api, Runs: repo.Runs(), Retention: repo.Retention()}
	}
	pol := runpod.ReapPolicy{Repository: o.repo, Workflow: o.workflow, CompletedGrace: o.grace, Lifetime: o.lifetime, Execute: o.execute, CancelRuns: o.cancel}
	now := time.Now()
	ds, sweepErr := runpod.Reap(ctx, deps, pol, now)
	if ds == nil {
		ds = []runpod.ReapDecision{} // no pods is [], not null
	}
	doc := Document{Repository: o.repo, Workflow: o.workflow, SweptAt: now.UTC(), Execute: o.execute, Decisions: ds}
	if sweepErr != nil {
		doc.Error = sweepErr.Error()
	}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	if o.out != "" {
		if err := os.WriteFile(o.out, append(data, '\n'), 0o644); err != nil {
			return fmt.Errorf("reap: %w", err)
		}
	}
	if o.json {
		fmt.Fprintln(stdout, string(data))
	} else {
		writeTable(stdout, doc)
	}
	if w := otherWorkflows(doc); w != "" {
		beside := stdout // beside the decisions table; -json writes only JSON to stdout
		if o.json {
			beside = stderr
		}
		ghaction.FromEnv(getenv).Warn(stdout, beside, w)
	}
	if err := ghaction.FromEnv(getenv).AppendSummary(markdown(doc)); err != nil {
		return err
	}
	if demo != nil && !o.json {
		fmt.Fprintf(stdout, "pods still running in the simulation: %d\n", demo.Running())
	}
	return sweepErr
}

// otherWorkflows warns about pods tagged for this repository but another
// workflow: the reaper never reclaims them, so when that workflow is the
// GPU workflow under another name, -workflow is wrong and its orphans
// would run until someone notices.
func otherWorkflows(doc Document) string {
	seen := map[string]int{}
	for _, d := range doc.Decisions {
		if d.Rule == runpod.RuleForeign && d.Identity != nil && d.Identity.Repository == doc.Repository {
			seen[d.Identity.Workflow]++
		}
	}
	if len(seen) == 0 {
		return ""
	}
	var parts []string
	for _, wf := range slices.Sorted(maps.Keys(seen)) {
		parts = append(parts, fmt.Sprintf("%s (%d)", wf, seen[wf]))
	}
	return fmt.Sprintf("reap: pods tagged for %s but another workflow than %s are never reclaimed: %s; if one of these is the GPU workflow, fix -workflow", doc.Repository, doc.Workflow, strings.Join(parts, ", "))
}

func writeTable(w io.Writer, doc Document) {
	mode := "dry run (pass -execute to delete)"
	if doc.Execute {
		mode = "execute"
	}
	fmt.Fprintf(w, "reap %s %s at %s: %s\n", doc.Repository, doc.Workflow, doc.SweptAt.Format(time.RFC3339), mode)
	fmt.Fprintf(w, "%-12s %-26s %-14s %-13s %8s  %s\n", "POD", "NAME", "RULE", "ACTION", "AGE", "REASON")
	for _, d := range doc.Decisions {
		fmt.Fprintf(w, "%-12s %-26s %-14s %-13s %7.0fm  %s\n", d.PodID, d.Name, d.Rule, d.Action, d.AgeSeconds/60, d.Reason)
	}
}

func markdown(doc Document) string {
	var b strings.Builder
	fmt.Fprintf(&b, "### RunPod reaper (execute: %v)\n\n| pod | name | rule | action | age (min) | reason |\n| --- | --- | --- | --- | --- | --- |\n", doc.Execute)
	for _, d := range doc.Decisions {
		fmt.Fprintf(&b, "| `%s` | `%s` | %s | %s | %.0f | %s |\n", d.PodID, ghaction.MarkdownCell(d.Name), d.Rule, d.Action, d.AgeSeconds/60, ghaction.MarkdownCell(d.Reason))
	}
	if doc.Error != "" {
		fmt.Fprintf(&b, "\n**The sweep failed in part:** %s\n", ghaction.MarkdownCell(doc.Error))
	}
	return b.String()
}
