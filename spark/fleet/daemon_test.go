package fleet

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/sparkgh"
	"github.com/gpugate/gpugate/spark/sparktest"
)

func TestJITWriter_TheHostAgentGetsWholeConfigsOnlyItCanRead(t *testing.T) {
	dir := t.TempDir()
	write := JITWriter(dir)
	if err := write("spark-r1", sparkgh.Secret("JIT-CONFIG-SECRET")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "spark-r1.jitconfig")
	data, err := os.ReadFile(path)
	if err != nil || string(data) != "JIT-CONFIG-SECRET" {
		t.Fatalf("config %q, %v", data, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	for _, bad := range []string{"", "../spark-r1", "a/b", ".hidden"} {
		if err := write(bad, "x"); err == nil {
			t.Errorf("runner name %q was accepted", bad)
		}
	}
	if err := JITWriter(filepath.Join(dir, "missing"))("spark-r2", "JIT-CONFIG-SECRET"); !errors.Is(err, fs.ErrNotExist) || strings.Contains(err.Error(), "JIT-CONFIG-SECRET") {
		t.Errorf("a missing -jit-dir: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("the directory holds %v, want only spark-r1.jitconfig", entries)
	}
}

// TestSweepJIT_AnEndedLeasesUnstartedRunnerIsRevoked: a runner config the
// host agent has not collected is removed once its lease is no longer
// active (here released, or unknown to the controller), so the runner can
// never come online on a host no lease holds; an active lease's config
// and files sparkd did not write stay.
func TestSweepJIT_AnEndedLeasesUnstartedRunnerIsRevoked(t *testing.T) {
	ctx := context.Background()
	c := newController(t)
	submit := func() spark.Request {
		r, err := c.Submit(ctx, spark.SubmitRequest{Class: spark.Development, Topology: spark.Single, Owner: "dev"})
		if err != nil {
			t.Fatal(err)
		}
		sparktest.Admit(ctx, c, "spark-1", "spark-2")
		st, _ := c.Status(ctx, r.ID)
		if st.Request.State != spark.Active {
			t.Fatalf("request %s is %s", r.ID, st.Request.State)
		}
		return st.Request
	}
	ended := submit()
	if err := c.Release(ctx, ended.ID, ended.Token); err != nil {
		t.Fatal(err)
	}
	active := submit()
	dir := t.TempDir()
	write := JITWriter(dir)
	for _, runner := range []string{sparkgh.RunnerName(active.ID), sparkgh.RunnerName(ended.ID), sparkgh.RunnerName("r-none")} {
		if err := write(runner, "JIT-CONFIG-SECRET"); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "other.jitconfig"), []byte("not sparkd's"), 0o600)
	var logs bytes.Buffer
	sweepJIT(ctx, dir, c, slog.New(slog.NewTextHandler(&logs, nil)))
	var left []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if want := []string{"other.jitconfig", sparkgh.RunnerName(active.ID) + ".jitconfig"}; !slices.Equal(left, want) {
		t.Errorf("left %v, want %v", left, want)
	}
	if strings.Count(logs.String(), "sparkd.jit_revoked") != 2 || strings.Contains(logs.String(), "JIT-CONFIG-SECRET") {
		t.Errorf("logs:\n%s", logs.String())
	}
}

// hungGitHub accepts every request and answers none.
type hungGitHub struct{}

func hang(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }

func (hungGitHub) Permission(ctx context.Context, _, _ string) (string, error) { return "", hang(ctx) }
func (hungGitHub) PullRequest(ctx context.Context, _ string, _ int) (sparkgh.PR, error) {
	return sparkgh.PR{}, hang(ctx)
}
func (hungGitHub) CreateCheck(ctx context.Context, _, _, _ string, _ sparkgh.Check) (int64, error) {
	return 0, hang(ctx)
}
func (hungGitHub) UpdateCheck(ctx context.Context, _ string, _ int64, _ string, _ sparkgh.Check) error {
	return hang(ctx)
}
func (hungGitHub) Comment(ctx context.Context, _ string, _ int, _ string) error { return hang(ctx) }
func (hungGitHub) Dispatch(ctx context.Context, _, _ string, _ map[string]any) error {
	return hang(ctx)
}
func (hungGitHub) MintJIT(ctx context.Context, _ string, _ []string) (sparkgh.Secret, error) {
	return "", hang(ctx)
}
func (hungGitHub) SuiteChecks(ctx context.Context, _ string, _ int64, _ string) ([]sparkgh.CheckRun, error) {
	return nil, hang(ctx)
}
func (hungGitHub) Runners(ctx context.Context) ([]sparkgh.RegisteredRunner, error) {
	return nil, hang(ctx)
}
func (hungGitHub) RemoveRunner(ctx context.Context, _ string) error           { return hang(ctx) }
func (hungGitHub) BranchSHA(ctx context.Context, _, _ string) (string, error) { return "", hang(ctx) }

// One round's GitHub work is bounded: with GitHub answering nothing (here
// the check a queued pull-request request still needs), the round returns
// after githubRoundTimeout and the admission loop goes on.
func TestGitHubRound_IsBoundedWhenGitHubStopsAnswering(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c := newController(t)
		gh, err := sparkgh.New(sparkgh.DefaultConfig("webhook-secret-123"), c, hungGitHub{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Submit(ctx, spark.SubmitRequest{Class: spark.ManualPR, PR: &spark.PRRef{Repo: "o/r", Number: 7, SHA: strings.Repeat("1", 40)},
			Annotations: map[string]string{"gh.repo": "o/r"}}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		githubRound(ctx, gh, c, t.TempDir(), nil, &runnerSweep{}, slog.New(slog.DiscardHandler))
		if took := time.Since(start); took != githubRoundTimeout {
			t.Errorf("the round took %s, want %s", took, githubRoundTimeout)
		}
	})
}

// newController is the seed's fleet on an in-memory store, its resident
// service a stand-in.
func newController(t *testing.T) *spark.Controller {
	t.Helper()
	opts := spark.DefaultOptions()
	opts.Service = &sparktest.Service{}
	c, err := spark.New(sparktest.NewStore(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// countingRunners is a GitHub that lists no runner and counts the
// listings; everything else hangs.
type countingRunners struct {
	hungGitHub
	listings int
}

func (c *countingRunners) Runners(context.Context) ([]sparkgh.RegisteredRunner, error) {
	c.listings++
	return nil, nil
}

// The registered-runner sweep runs at start (leases that ended while
// sparkd was down), then hourly.
func TestRunnerSweep_AtStartThenHourly(t *testing.T) {
	ctx := context.Background()
	gh := &countingRunners{}
	in, err := sparkgh.New(sparkgh.DefaultConfig("webhook-secret-123"), newController(t), gh, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &runnerSweep{}
	start := time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)
	for _, at := range []time.Duration{0, time.Minute, 59 * time.Minute, time.Hour, time.Hour + time.Minute} {
		s.tick(ctx, in, start.Add(at), slog.New(slog.DiscardHandler))
	}
	if gh.listings != 2 {
		t.Errorf("%d listings, want 2 (at start, and an hour later)", gh.listings)
	}
}
