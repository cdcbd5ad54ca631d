// Command cleanup ends a paid GPU pod's life: it reads the pod's billing
// record, deletes the pod with confirmed deletion (a 404 confirms; anything
// else is retried, then reported for the reaper), and only then writes the
// cost report: the paid window from the pod's start to the confirmed
// deletion, split into stages by the job's marks, rejected provisioning
// attempts apart.
//
//	cleanup -pod ID [-marks marks.json] [-provision provision.json] [-tested-ref SHA] [-gate-kind paid] [-out cost-report.json]
//	cleanup -simulate     # a fake pod, in process, no credentials
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
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/gpugate/gpugate/cost"
	"github.com/gpugate/gpugate/internal/cli"
	"github.com/gpugate/gpugate/internal/ghaction"
	"github.com/gpugate/gpugate/internal/podcost"
	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/runpodtest"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

type options struct {
	pod, marks, provision, ref, kind, out string
	simulate                              bool
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("cleanup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.pod, "pod", "", "the pod to delete")
	fs.StringVar(&o.marks, "marks", "", "JSON file of the job's marks (job_started, tests_started, tests_ended); missing marks make their stages unknown")
	fs.StringVar(&o.provision, "provision", "", "provision -json output, for the rejected attempts")
	fs.StringVar(&o.ref, "tested-ref", "", "the tested merge ref (recorded in the report)")
	fs.StringVar(&o.kind, "gate-kind", "", "the gate's kind (paid, failed, ...), recorded in the report")
	fs.StringVar(&o.out, "out", "cost-report.json", "where the cost report goes")
	fs.BoolVar(&o.simulate, "simulate", false, "delete a fake pod in process")
	if exit, ok := cli.Parse(fs, args); !ok {
		return exit
	}
	if err := cleanup(ctx, o, getenv, stdout); err != nil {
		ghaction.FromEnv(getenv).Fail(stdout, stderr, err)
		return 1
	}
	return 0
}

func cleanup(ctx context.Context, o options, getenv func(string) string, stdout io.Writer) error {
	var api *runpod.Client
	var err error
	if o.simulate {
		if api, o.pod, err = simulatedPod(ctx); err != nil {
			return err
		}
	} else {
		key := getenv("RUNPOD_API_KEY")
		switch {
		case key == "":
			return errors.New("cleanup: RUNPOD_API_KEY is not set (or use -simulate)")
		case o.pod == "":
			return errors.New("cleanup: -pod is required (the provision step's pod_id output)")
		}
		if api, err = runpod.NewClient(runpod.WithAPIKey(runpod.Secret(key))); err != nil {
			return err
		}
	}
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
	// The billing record is read before deletion; a pod already gone has
	// an unknown start, so its cost is reported unknown, never zero.
	rec := cost.PodRecord{APIVersion: 2, ID: o.pod}
	if pod, err := api.GetPod(ctx, o.pod); err == nil {
		rec = podcost.Record(pod)
	}
	gha := ghaction.FromEnv(getenv)
	if err := runpod.Delete(ctx, api, o.pod); err != nil {
		gha.SetOutputs([2]string{"deleted", "false"})
		return fmt.Errorf("cleanup: %w; the scheduled reaper will retry", err)
	}
	deletedAt := time.Now()
	fmt.Fprintf(stdout, "deleted pod %s (confirmed)\n", o.pod)
	rep, err := cost.NewReport(rec, deletedAt, marks, podcost.Rejected(prov.Attempts))
	if err != nil {
		return err
	}
	rep.TestedRef, rep.GateKind, rep.PodID, rep.GPUTypeID = o.ref, o.kind, o.pod, rec.GPUTypeID
	if err := cost.WriteBounded(ctx, 10*time.Second, o.out, rep); err != nil {
		fmt.Fprintf(stdout, "cost report not written (best effort): %v\n", err)
	}
	if err := gha.AppendSummary(rep.Markdown()); err != nil {
		return err
	}
	known := rep.Window.CostKnown()
	if err := gha.SetOutputs([2]string{"deleted", "true"}, [2]string{"cost", strconv.FormatFloat(rep.Window.Cost, 'f', 6, 64)},
		[2]string{"cost_known", strconv.FormatBool(known)}); err != nil {
		return err
	}
	if known {
		fmt.Fprintf(stdout, "paid window %.1f s at $%.2f/h (%s): USD %.6f; rejected candidates USD %.6f\n", rep.Window.Seconds, rep.Window.HourlyPrice, rep.Window.PriceSource, rep.Window.Cost, rep.RejectedCost())
	} else {
		fmt.Fprintln(stdout, "paid window unknown: the pod's start was never reported")
	}
	return nil
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

// simulatedPod provisions one pod on an in-process fake.
func simulatedPod(ctx context.Context) (*runpod.Client, string, error) {
	fake := runpodtest.New(runpodtest.WithSchedule(20*time.Millisecond, 20*time.Millisecond))
	api, err := fake.NewClient()
	if err != nil {
		return nil, "", err
	}
	reg := fake.NewRegistry()
	reg.SetProofTime(20 * time.Millisecond)
	cfg, err := runpod.LoadConfig(runpod.ExampleConfig)
	if err != nil {
		return nil, "", err
	}
	cfg.StartupPoll, cfg.StartupTimeout = 10*time.Millisecond, 5*time.Second
	plan := runpod.CandidatePlan(cfg, nil)
	res, err := runpod.Provision(ctx, runpod.Deps{API: api, Registry: reg, Log: slog.New(slog.DiscardHandler)}, cfg, plan,
		runpod.PodTemplate{Image: "ghcr.io/actions/actions-runner:latest", Owner: runpod.Ownership{Repository: "example/gpu-project", Workflow: "runpod-gpu-test.yml", RunID: 1, RunAttempt: 1}})
	if err != nil {
		return nil, "", err
	}
	return api, res.PodID, nil
}
