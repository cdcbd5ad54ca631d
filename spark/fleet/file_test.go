package fleet

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/sparkgh"
)

// The shipped fleet.example.yml is the seed's fleet: two managed hosts,
// the resident service on spark-1, spark-2 preferred, the seed's lease
// lengths, and the service's five commands.
func TestFleetFile_TheExampleIsTheSeedsFleet(t *testing.T) {
	f, err := Load(Example)
	if err != nil {
		t.Fatal(err)
	}
	opts := f.Options
	want := spark.DefaultOptions()
	want.PairTest, want.HeartbeatTimeout, want.LendMinPriority, want.RestoreAttempts, want.RestoreBackoff = false, 90*time.Second, 70, 5, 30*time.Second
	want.Durations, want.PairMaxWait, want.CleanupTimeout = spark.DefaultDurations(), time.Hour, 15*time.Minute
	if diff := cmp.Diff(want, opts, cmpopts.IgnoreFields(spark.Options{}, "Service")); diff != "" {
		t.Errorf("options (-want +got):\n%s", diff)
	}
	wantGH := sparkgh.DefaultConfig("")
	wantGH.CommandPrefix, wantGH.MinRole, wantGH.CheckName, wantGH.Workflow = "/spark", "maintain", "Spark test", "spark-test.yml"
	if diff := cmp.Diff(wantGH, f.GitHub); diff != "" {
		t.Errorf("GitHub integration (-want +got):\n%s", diff)
	}
	svc, ok := opts.Service.(*ShellService)
	if !ok || svc.DrainCmd == "" || svc.StopCmd == "" || svc.VerifyReleasedCmd == "" || svc.StartCmd == "" || svc.HealthyCmd == "" {
		t.Errorf("service %#v", opts.Service)
	}
}

// The example's merge queue line, uncommented, serves main's queue with
// the smoke suite on one node.
func TestFleetFile_TheExamplesMergeQueueLoads(t *testing.T) {
	file := strings.Replace(string(Example), "  # merge_queue:", "  merge_queue:", 1)
	if file == string(Example) {
		t.Fatal("the example has no commented merge_queue line")
	}
	f, err := Load([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	want := &sparkgh.MergeQueue{Lane: sparkgh.Lane{Suite: "smoke", Topology: spark.Single}, Branches: []string{"main"}}
	if diff := cmp.Diff(want, f.GitHub.MergeQueue); diff != "" {
		t.Errorf("merge queue (-want +got):\n%s", diff)
	}
}

// sched is a schedule entry with the given time fields.
func sched(when string) string {
	if when != "" {
		when = ", " + when
	}
	return "{name: nightly, repo: o/butter, branch: main, class: benchmark, suite: performance" + when + "}"
}

// A fleet file sparkd cannot run safely is refused, naming what to fix.
func TestFleetFile_RefusesWhatItCannotRunSafely(t *testing.T) {
	const hosts = "hosts:\n  - {name: a, managed: true}\n"
	const svcHost = "hosts:\n  - {name: a, managed: true, service: true}\n"
	const cmds = "service: {drain: 'true', stop: 'true', verify_released: 'true', start: 'true', healthy: 'true'}\n"
	for name, tc := range map[string]struct{ file, want string }{
		"empty":                              {"", "the file is empty"},
		"an unknown key":                     {hosts + "prefered_host: a\n", "prefered_host"},
		"no hosts":                           {"preferred_host: a\n", "list at least one host"},
		"a negative timeout":                 {hosts + "heartbeat_timeout: -1s\n", "cannot be negative"},
		"an unknown class":                   {hosts + "durations: {develop: 2h}\n", `unknown class "develop"`},
		"a length that is not a duration":    {hosts + "durations: {development: forever}\n", `"forever" is not a positive duration`},
		"a zero length":                      {hosts + "durations: {development: 0s}\n", "not a positive duration"},
		"two service hosts":                  {"hosts:\n  - {name: a, managed: true, service: true}\n  - {name: b, managed: true, service: true}\n" + cmds, "a and b both run the resident service"},
		"a service host without commands":    {svcHost, "service: needs its drain, stop, verify_released, start and healthy commands"},
		"commands without a service host":    {hosts + cmds, "no host has service: true"},
		"a missing command":                  {svcHost + "service: {drain: 'true', stop: 'true', start: 'true', healthy: 'true'}\n", "service.verify_released is empty"},
		"not YAML":                           {"hosts: [", "invalid fleet file"},
		"a lane's unknown suite":             {hosts + "github: {labels: {gpu-test: {suite: full, topology: single}}}\n", `suite "full"`},
		"a lane's unknown topology":          {hosts + "github: {labels: {gpu-test: {suite: smoke, topology: trio}}}\n", `topology "trio"`},
		"an unknown role":                    {hosts + "github: {min_role: owner}\n", `MinRole "owner"`},
		"an empty runner label":              {hosts + "github: {runner_labels: [self-hosted, '']}\n", "a runner label is empty"},
		"a merge queue on no branch":         {hosts + "github: {merge_queue: {suite: smoke, topology: single}}\n", "merge queue: name the base branches"},
		"a merge queue's unknown key":        {hosts + "github: {merge_queue: {suite: smoke, topology: single, branch: main}}\n", "branch"},
		"a schedule without a name":          {hosts + "schedules: [{repo: o/r, branch: main, class: benchmark, suite: performance, at: '03:00'}]\n", "needs a name of its own"},
		"two schedules of one name":          {hosts + "schedules: [" + sched("at: '03:00'") + ", " + sched("at: '04:00'") + "]\n", "needs a name of its own"},
		"a schedule of development":          {hosts + "schedules: [{name: n, repo: o/r, branch: main, class: development, suite: smoke, at: '03:00'}]\n", `class "development": a schedule asks for`},
		"a schedule with no time":            {hosts + "schedules: [" + sched("") + "]\n", "exactly one of at"},
		"a schedule with two times":          {hosts + "schedules: [" + sched("at: '03:00', every: 6h") + "]\n", "exactly one of at"},
		"a schedule at no time of day":       {hosts + "schedules: [" + sched("at: '25:00'") + "]\n", "want HH:MM in UTC"},
		"a schedule too often":               {hosts + "schedules: [" + sched("every: 1m") + "]\n", "at least 10m0s"},
		"a schedule's bad repo":              {hosts + "schedules: [{name: n, repo: r, branch: main, class: benchmark, suite: performance, at: '03:00'}]\n", `repo "r": want owner/name`},
		"a schedule's bad topology":          {hosts + "schedules: [" + sched("at: '03:00', topology: trio") + "]\n", `topology "trio"`},
		"a schedule's bad duration":          {hosts + "schedules: [" + sched("at: '03:00', duration: soon") + "]\n", `duration "soon"`},
		"an unknown engine":                  {hosts + "engine: slurm\n", `engine "slurm"`},
		"dstack without its settings":        {hosts + "engine: dstack\n", "needs its dstack: block"},
		"dstack settings without dstack":     {hosts + "dstack: {url: 'https://d', project: p, fleet: f, token_file: /t}\n", "set engine: dstack"},
		"dstack without its fleet":           {hosts + "engine: dstack\ndstack: {url: 'https://d', project: p, token_file: /t, suites: {smoke: [a], performance: [b]}}\n", "dstack.fleet is required"},
		"dstack without a suite's commands":  {hosts + "engine: dstack\ndstack: {url: 'https://d', project: p, fleet: f, token_file: /t, suites: {smoke: [a]}}\n", "dstack.suites.performance"},
		"dstack on a host without the agent": {hosts + "engine: dstack\ndstack: {url: 'https://d', project: p, fleet: f, token_file: /t, suites: {smoke: [a], performance: [b]}}\n", "needs the host agent on every managed host"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Load([]byte(tc.file))
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v, want ErrInvalid saying %q", err, tc.want)
			}
		})
	}
}

// The service's commands are the controller's ResidentService: exit 0 is
// done; a failure names the step, the exit status and the output's last
// line, never the command (which may carry host names or credentials).
func TestServiceCommands_FailuresNameTheStepNotTheCommand(t *testing.T) {
	s := &ShellService{DrainCmd: "true", StopCmd: "echo stopping; echo still holding 3 GiB >&2; exit 3",
		VerifyReleasedCmd: "true", StartCmd: "exit 1", HealthyCmd: "true"}
	ctx := context.Background()
	if err := s.Drain(ctx); err != nil {
		t.Errorf("drain: %v", err)
	}
	err := s.Stop(ctx)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 || err.Error() != "resident service stop command: exit status 3: still holding 3 GiB" {
		t.Errorf("stop: %v", err)
	}
	if err := s.Start(ctx); !errors.As(err, &exit) || exit.ExitCode() != 1 || strings.Contains(err.Error(), "exit 1") || !strings.Contains(err.Error(), "start command: exit status 1") {
		t.Errorf("start: %v", err)
	}
}

// The fleet file is outside input: it loads or is refused with ErrInvalid,
// never a panic, and a loaded fleet always has hosts and, for a service
// host, every command.
func FuzzLoadFleet(f *testing.F) {
	f.Add(Example)
	f.Add([]byte("hosts:\n  - {name: a, managed: true}\ndurations: {development: 1h}\n"))
	f.Add([]byte("hosts: [{name: a, service: true}]\nservice: {drain: x}\n"))
	f.Add([]byte("hosts: [{name: a}]\nschedules: [{name: n, repo: o/r, branch: main, class: merge-ci, suite: smoke, every: 6h, duration: 1h}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		f, err := Load(data)
		opts := f.Options
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("an error outside ErrInvalid: %v", err)
			}
			return
		}
		if len(opts.Hosts) == 0 {
			t.Fatal("a fleet without hosts loaded")
		}
		for _, h := range opts.Hosts {
			if h.Service && opts.Service == nil {
				t.Fatal("a service host without its commands loaded")
			}
		}
		for class, d := range opts.Durations {
			if d <= 0 {
				t.Fatalf("class %s has lease length %s", class, d)
			}
		}
		for _, s := range f.Schedules {
			if next := s.next(time.Unix(0, 0)); !next.After(time.Unix(0, 0)) || s.Name == "" || s.Duration < 0 {
				t.Fatalf("schedule %+v loaded (next %s)", s, next)
			}
		}
	})
}

// Seed 004: "Deckard restore fails: … alert with the health-check
// failure". The fleet file's alert_command runs for each alert with the
// alert in its environment, off the controller's loop; a failing command
// is logged without the command or its output.
func TestAlertCommandReceivesTheAlert(t *testing.T) {
	out := filepath.Join(t.TempDir(), "alert")
	f, err := Load([]byte("hosts: [{name: a, managed: true}]\nalert_command: env | grep '^SPARK_ALERT_' | sort > " + out + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	a := &Alerter{Command: f.AlertCommand, Log: slog.New(slog.NewTextHandler(&logs, nil))}
	at := time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)
	a.Send(spark.Event{Kind: "restore-failed", Host: "spark-1", Detail: "healthy: exit status 22", At: at, Alert: true})
	a.Wait()
	got, _ := os.ReadFile(out)
	want := "SPARK_ALERT_AT=2026-11-29T03:00:00Z\nSPARK_ALERT_DETAIL=healthy: exit status 22\nSPARK_ALERT_HOST=spark-1\nSPARK_ALERT_KIND=restore-failed\nSPARK_ALERT_REQUEST=\n"
	if string(got) != want {
		t.Errorf("the command saw:\n%s\nwant:\n%s", got, want)
	}
	a.Command = "echo https://hooks.example/T0K3N >&2; exit 7"
	a.Send(spark.Event{Kind: "lend-failed", Host: "spark-1", Alert: true})
	a.Wait()
	if !strings.Contains(logs.String(), "sparkd.alert_failed kind=lend-failed host=spark-1") || strings.Contains(logs.String(), "T0K3N") {
		t.Errorf("log:\n%s", logs.String())
	}
}
