// Command cleanup ends a paid GPU pod's life: it reads the pod's billing
// record, deletes the pod with confirmed deletion (a 404 confirms; anything
// else is retried, then reported for the reaper), and only then writes the
// cost report: the paid window from the pod's start to the confirmed
// deletion, split into stages by the job's marks, rejected provisioning
// attempts apart.
//
//	cleanup -pod ID [-marks marks.json] [-provision provision.json] [-tested-ref SHA] [-gate-kind paid] [-cache archive=true,...] [-out cost-report.json]
//	cleanup -provision provision.json     # the pod (if any) from provision's result
//	cleanup -simulate     # a fake pod, in process, no credentials
//
// With -provision (provision -json, or its provision_result output) the
// report lists the rejected candidates, a candidate whose deletion
// provisioning could not confirm is deleted too, and a run that accepted
// no pod still gets a report: its rejected candidates were paid for.
//
// Without -marks, in a workflow run, the stage marks are GitHub's own
// timestamps for the GPU job (-job) and its test step (-test-step), read
// after the confirmed deletion with GITHUB_TOKEN; unread marks make their
// stages unknown, with a warning.
//
// Real runs read RUNPOD_API_KEY. In GitHub Actions the outputs deleted,
// cost and cost_known go to $GITHUB_OUTPUT and the report to the step
// summary. Run it with `if: always()`: a pod must not outlive its job.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gpugate/gpugate/cost"
	"github.com/gpugate/gpugate/ghclient"
	"github.com/gpugate/gpugate/internal/cli"
	"github.com/gpugate/gpugate/internal/ghaction"
	"github.com/gpugate/gpugate/internal/stepsignal"
	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/rest"
	"github.com/gpugate/gpugate/runpod/runpoddemo"
	"github.com/gpugate/gpugate/runpod/runpodgh"
)

func main() {
	stepsignal.FinishOnSignal() // a deletion in flight finishes
	os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

type options struct {
	pod, marks, provision, ref, kind, out string
	job, testStep, repo, cache            string
	runID                                 int64
	runAttempt                            int
	simulate                              bool
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("cleanup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.pod, "pod", "", "the pod to delete")
	fs.StringVar(&o.marks, "marks", "", "JSON file of the job's marks (job_started, tests_started, tests_ended); missing marks make their stages unknown. Without it, with -run-id, the marks are read from that run's jobs: -job and -test-step")
	fs.StringVar(&o.repo, "repo", getenv("GITHUB_REPOSITORY"), "without -marks: owner/name of the run's repository")
	cli.RunFlags(fs, getenv, &o.runID, &o.runAttempt, "whose GPU job's timestamps mark the stages, without -marks")
	fs.StringVar(&o.job, "job", "Run GPU tests", "without -marks: the GPU job whose start, and whose test step's start and end, mark the stages")
	fs.StringVar(&o.testStep, "test-step", "Run CUDA tests from archive", "without -marks: the GPU job's step that runs the tests")
	fs.StringVar(&o.provision, "provision", "", "provision -json output, for the rejected attempts")
	fs.StringVar(&o.ref, "tested-ref", "", "the tested merge ref (recorded in the report)")
	fs.StringVar(&o.kind, "gate-kind", "", "the gate's kind (paid, failed, ...), recorded in the report")
	fs.StringVar(&o.cache, "cache", "", `the run's cache-hit observations for the report: "archive=true,cuda-runtime=false,cuda-toolkit=" (empty: unknown); a malformed value is reported and left out, never a reason not to delete`)
	fs.StringVar(&o.out, "out", "cost-report.json", "where the cost report goes")
	fs.BoolVar(&o.simulate, "simulate", false, "delete a fake pod in process")
	gha, log := ghaction.FromEnv(getenv), stdout // warnings and annotations go to the log, -json or not
	ghaction.JSONFlag(fs, &stdout, &gha)
	if exit, ok := cli.Parse(fs, args); !ok {
		return exit
	}
	if !o.simulate && o.pod == "" && o.provision == "" {
		return cli.Status(cli.Refuse(fs, "-pod is required (the provision step's pod_id output), or -provision with its result"))
	}
	if err := cleanup(ctx, o, getenv, gha, stdout, log); err != nil {
		gha.Fail(log, stderr, err)
		return 1
	}
	return 0
}

// connect is the RunPod client of a real run (tests point it at a fake).
var connect = func(getenv func(string) string) (*rest.Client, error) {
	return rest.ClientFromEnv(getenv)
}

func cleanup(ctx context.Context, o options, getenv func(string) string, gha ghaction.Env, stdout, log io.Writer) error {
	var marks cost.Marks
	if o.marks != "" {
		if err := readJSON(o.marks, &marks); err != nil {
			return err
		}
	}
	var prov runpod.Result
	if o.provision != "" {
		if err := readJSON(o.provision, &prov); err != nil {
			return err
		}
	}
	if o.pod == "" {
		o.pod = prov.PodID
	}
	var api *rest.Client
	var err error
	if o.simulate {
		if api, o.pod, err = runpoddemo.AcceptedPod(ctx); err != nil {
			return err
		}
	} else {
		key := getenv("RUNPOD_API_KEY")
		switch {
		case key == "":
			return errors.New("cleanup: RUNPOD_API_KEY is not set (or use -simulate)")
		case o.pod == "" && o.provision == "":
			return errors.New("cleanup: -pod is required (the provision step's pod_id output), or -provision with its result")
		}
		if api, err = connect(getenv); err != nil {
			return err
		}
	}
	// A rejected candidate whose deletion provisioning could not confirm
	// is still being paid for.
	var live error
	if id := prov.LivePodID; id != "" && id != o.pod {
		if err := runpod.Delete(ctx, api, id); err != nil {
			live = fmt.Errorf("cleanup: rejected candidate %s: %w; the scheduled reaper will retry", id, err)
		} else {
			fmt.Fprintf(stdout, "deleted rejected candidate %s (confirmed)\n", id)
		}
	}
	// A pod known only by its name (a lost create while the listing
	// failed) is resolved by listing before anything is claimed.
	for _, name := range prov.UnresolvedPodNames {
		if err := runpod.DeleteByName(ctx, api, name); err != nil {
			live = errors.Join(live, fmt.Errorf("cleanup: the pod named %q, whose create's outcome was unknown: %w; the scheduled reaper will retry", name, err))
		} else {
			fmt.Fprintf(stdout, "resolved the pod named %q by listing: none left running (confirmed)\n", name)
		}
	}
	rejected := cost.RejectedAttempts(prov.Attempts)
	if o.pod == "" {
		rep := cost.NewRejectedReport(rejected)
		rep.TestedRef, rep.GateKind = o.ref, o.kind
		fmt.Fprintf(stdout, "no pod was accepted; rejected candidates cost an estimated USD %.6f\n", rep.RejectedCost())
		return errors.Join(live, report(ctx, o, gha, log, rep))
	}
	// The billing record is read before deletion, as one bounded GET. When
	// that fails, the record provisioning saved stands in; without one the
	// start is unknown, so the cost is reported unknown, never zero.
	rec, saved, readErr := cost.RecordBeforeDelete(ctx, api, o.pod, prov.Snapshot)
	if readErr != nil && saved {
		ghaction.Warning(log, fmt.Sprintf("cleanup: reading pod %s before its deletion failed (%s); the cost uses the record saved at startup", o.pod, readErr))
	} else if readErr != nil {
		ghaction.Warning(log, fmt.Sprintf("cleanup: reading pod %s before its deletion failed (%s) and provisioning saved no record of it; its cost is reported unknown", o.pod, readErr))
	}
	if err := runpod.Delete(ctx, api, o.pod); err != nil {
		return errors.Join(live, fmt.Errorf("cleanup: %w; the scheduled reaper will retry", err), gha.SetOutputs([2]string{"deleted", "false"}))
	}
	if errors.Is(readErr, rest.ErrNotFound) && !saved {
		// No pod has this ID, and provisioning never saw one with it: a
		// 404 confirms nothing about a name (a runner label passed as
		// -pod). Whatever pod carries it as its name goes too.
		if err := runpod.DeleteByName(ctx, api, o.pod); err != nil {
			return errors.Join(live, fmt.Errorf("cleanup: no pod has the ID %q, and the pod named so could not be resolved: %w; the scheduled reaper will retry", o.pod, err), gha.SetOutputs([2]string{"deleted", "false"}))
		}
		fmt.Fprintf(stdout, "no pod has the ID %s (already deleted, or not a pod ID); none named so runs either (confirmed by listing)\n", o.pod)
	}
	deletedAt := time.Now()
	fmt.Fprintf(stdout, "deleted pod %s (confirmed)\n", o.pod)
	if o.marks == "" && !o.simulate && o.runID != 0 {
		// Only after the confirmed deletion: reporting never delays it.
		marks = runMarks(ctx, o, getenv, log)
	}
	rep, err := cost.NewReport(rec, deletedAt, marks, rejected)
	if err != nil {
		return errors.Join(live, err)
	}
	rep.TestedRef, rep.GateKind, rep.PodID, rep.GPUTypeID = o.ref, o.kind, o.pod, rec.GPUTypeID
	if rep.Window.CostKnown() {
		fmt.Fprintf(stdout, "paid window %.1f s at $%.2f/h (%s): USD %.6f; rejected candidates USD %.6f\n", rep.Window.Seconds, rep.Window.HourlyPrice, rep.Window.PriceSource, rep.Window.Cost, rep.RejectedCost())
	} else {
		fmt.Fprintln(stdout, "paid window unknown: the pod's start was never reported")
	}
	return errors.Join(live, report(ctx, o, gha, log, rep))
}

// runMarks reads the stage marks from this workflow run's jobs: when the
// GPU job started, and when its test step started and ended (GitHub's own
// timestamps, through the same adapter the watchdog uses). It is best
// effort and bounded: a failure is a warning, and its stages are reported
// unknown, never zero.
func runMarks(ctx context.Context, o options, getenv func(string) string, log io.Writer) cost.Marks {
	warn := func(err error) cost.Marks {
		ghaction.Warning(log, fmt.Sprintf("cleanup: stage marks unread, the stages are reported unknown: %s", err))
		return cost.Marks{}
	}
	owner, repo, err := cli.SplitRepo("cleanup", o.repo)
	if err != nil {
		return warn(err)
	}
	client, err := ghclient.New(ctx, getenv)
	if err != nil {
		return warn(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	p, err := runpodgh.Repo{Client: client, Owner: owner, Name: repo}.Progress(o.runID, o.runAttempt, o.job, o.testStep).JobProgress(ctx)
	if err != nil {
		return warn(err)
	}
	return cost.MarksOf(p)
}

// report writes the cost report (best effort, bounded: it runs after the
// deletion and cannot extend a paid lifetime), the step summary and the
// outputs. A report with a pod follows its confirmed deletion; one without
// is a run that accepted no pod.
func report(ctx context.Context, o options, gha ghaction.Env, log io.Writer, rep cost.Report) error {
	// Read only now, after the deletion: a malformed observation costs the
	// report its cache line, never the deletion.
	if obs, err := cost.ParseCacheObservations(o.cache); err != nil {
		fmt.Fprintf(log, "cache observations left out of the report (best effort): %v\n", err)
	} else {
		rep.Cache = obs
	}
	if err := cost.WriteBounded(ctx, 10*time.Second, o.out, rep); err != nil {
		fmt.Fprintf(log, "cost report not written (best effort): %v\n", err)
	}
	if err := gha.AppendSummary(rep.Markdown()); err != nil {
		return err
	}
	return gha.SetOutputs(rep.Outputs()...)
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("cleanup: %s: %w", path, err)
	}
	return nil
}
