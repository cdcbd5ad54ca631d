package dstack_test

import (
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/dstack"
	"github.com/gpugate/gpugate/spark/dstack/dstacktest"
)

func TestVerifyEnrollment_IdleAndBusyInstancesAreEnrolled(t *testing.T) {
	f := newFixture(t, "cluster")
	f.srv.SetInstanceStatus("10.0.0.2", dstacktest.Busy)
	if err := f.b.VerifyEnrollment(ctx, []string{"spark-1", "spark-2", "spark-3"}); err != nil {
		t.Fatalf("VerifyEnrollment = %v, want nil: idle and busy instances are enrolled", err)
	}
}

func TestVerifyEnrollment_AHostThatIsNotAnIdleOrBusyInstanceIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(*dstacktest.Server)
	}{
		{"missing", func(s *dstacktest.Server) { s.RemoveInstance("10.0.0.2") }},
		{"terminated", func(s *dstacktest.Server) { s.SetInstanceStatus("10.0.0.2", dstacktest.Terminated) }},
		{"terminating", func(s *dstacktest.Server) { s.SetInstanceStatus("10.0.0.2", dstacktest.Terminating) }},
		{"provisioning", func(s *dstacktest.Server) { s.SetInstanceStatus("10.0.0.2", dstacktest.Provisioning) }},
		{"pending", func(s *dstacktest.Server) { s.SetInstanceStatus("10.0.0.2", dstacktest.Pending) }},
		{"unreachable", func(s *dstacktest.Server) { s.SetUnreachable("10.0.0.2", true) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "cluster")
			tc.spoil(f.srv)
			err := f.b.VerifyEnrollment(ctx, []string{"spark-1", "spark-2", "spark-3"})
			if !errors.Is(err, dstack.ErrNotEnrolled) {
				t.Fatalf("VerifyEnrollment = %v, want ErrNotEnrolled", err)
			}
			if msg := err.Error(); !strings.Contains(msg, "host spark-2") || strings.Contains(msg, "host spark-1") || strings.Contains(msg, "host spark-3") {
				t.Errorf("the error %q should name spark-2, and only it", msg)
			}
		})
	}
}

func TestVerifyEnrollment_AMissingOrCloudFleetIsRefused(t *testing.T) {
	srv := dstacktest.New()
	c, _ := dstack.NewClient(dstacktest.BaseURL, dstacktest.Token, dstacktest.Project, srv.Client())
	b := newBackend(t, c)
	err := b.VerifyEnrollment(ctx, []string{"spark-1"})
	if !errors.Is(err, dstack.ErrNotEnrolled) || !errors.Is(err, dstack.ErrNotFound) {
		t.Fatalf("no fleet: VerifyEnrollment = %v, want ErrNotEnrolled and ErrNotFound", err)
	}
	srv.AddFleet(dstacktest.FleetSpec{Name: fleetName, Cloud: true})
	if err := b.VerifyEnrollment(ctx, []string{"spark-1"}); !errors.Is(err, dstack.ErrNotEnrolled) {
		t.Fatalf("a cloud fleet: VerifyEnrollment = %v, want ErrNotEnrolled", err)
	}
}

func TestStart_ACILeaseIsATaskOnExactlyTheLeasedHost(t *testing.T) {
	f := newFixture(t, "cluster")
	name, err := f.b.Start(ctx, ciWork("r-0a1b2c3d4e5f6071", "spark-2"))
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Progress()
	r, ok := f.srv.Run(name)
	if !ok {
		t.Fatalf("no run %s", name)
	}
	if r.Type != "task" || r.Nodes != 1 || r.Status != "running" {
		t.Errorf("run is a %s of %d nodes, %s; want a running one-node task", r.Type, r.Nodes, r.Status)
	}
	if !slices.Equal(r.Hosts, []string{"10.0.0.2"}) || !slices.Equal(r.Selectors, []string{"hostname=10.0.0.2"}) || !slices.Equal(r.Fleets, []string{fleetName}) {
		t.Errorf("run placed on %v, targeting %v in fleets %v; want exactly 10.0.0.2 of fleet spark", r.Hosts, r.Selectors, r.Fleets)
	}
	if !slices.Equal(r.Commands, []string{"make test"}) {
		t.Errorf("commands %q", r.Commands)
	}
	want := map[string]string{dstack.EnvLeaseID: "r-0a1b2c3d4e5f6071", dstack.EnvRepo: "acme/butter", dstack.EnvSHA: "0123456789abcdef0123456789abcdef01234567",
		dstack.EnvSuite: "smoke", dstack.EnvHosts: "spark-2", dstack.EnvClass: string(spark.ManualPR), dstack.EnvTopology: "single"}
	for k, v := range want {
		if r.Env[k] != v {
			t.Errorf("env %s = %q, want %q", k, r.Env[k], v)
		}
	}
	if st := f.srv.InstanceStatus("10.0.0.1"); st != dstacktest.Idle {
		t.Errorf("spark-1 is %s: a host outside the lease must stay idle", st)
	}
}

func TestStart_APairIsOneTwoNodeTaskOnExactlyTheLeasedHosts(t *testing.T) {
	f := newFixture(t, "cluster")
	name, err := f.b.Start(ctx, ciWork("r-00000000000000aa", "spark-1", "spark-3"))
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Progress()
	if n := len(f.srv.Runs()); n != 1 {
		t.Fatalf("%d runs, want one two-node task", n)
	}
	r, _ := f.srv.Run(name)
	if r.Type != "task" || r.Nodes != 2 || r.Status != "running" {
		t.Fatalf("run is a %s of %d nodes, %s; want a running two-node task", r.Type, r.Nodes, r.Status)
	}
	if got, want := sorted(r.Hosts), leasedHostnames("spark-1", "spark-3"); !slices.Equal(got, want) {
		t.Errorf("nodes placed on %v, want exactly %v", got, want)
	}
	if st := f.srv.InstanceStatus("10.0.0.2"); st != dstacktest.Idle {
		t.Errorf("spark-2 is %s: the host outside the pair must stay idle", st)
	}
}

func TestStart_TheTargetingIsWhatPinsTheRun(t *testing.T) {
	// Without configuration.instances dstack would take any idle
	// instance; the fake does the same, so the pin is what places the
	// lease on spark-3 rather than the first idle host.
	f := newFixture(t, "cluster")
	name, err := f.b.Start(ctx, ciWork("r-00000000000000ab", "spark-3"))
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Progress()
	if r, _ := f.srv.Run(name); !slices.Equal(r.Hosts, []string{"10.0.0.3"}) {
		t.Fatalf("placed on %v, want [10.0.0.3] (the first idle instance is 10.0.0.1)", r.Hosts)
	}
}

func TestStart_APairNeedsAClusterFleet(t *testing.T) {
	f := newFixture(t, "")
	_, err := f.b.Start(ctx, ciWork("r-00000000000000ac", "spark-1", "spark-2"))
	if !errors.Is(err, dstack.ErrNotCluster) {
		t.Fatalf("Start = %v, want ErrNotCluster", err)
	}
	if !strings.Contains(err.Error(), "placement: cluster") {
		t.Errorf("the error %q should say to set placement: cluster", err)
	}
	if n := f.srv.Count(applyPath); n != 0 {
		t.Errorf("%d applies, want none", n)
	}
}

func TestStart_ADevelopmentLeaseIsADevEnvironment(t *testing.T) {
	f := newFixture(t, "cluster")
	name, err := f.b.Start(ctx, devWork("r-00000000000000d1", "spark-1"))
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Progress()
	r, _ := f.srv.Run(name)
	if r.Type != "dev-environment" || !slices.Equal(r.Hosts, []string{"10.0.0.1"}) {
		t.Fatalf("run is a %s on %v, want a dev environment on 10.0.0.1", r.Type, r.Hosts)
	}
	if !strings.Contains(string(r.Spec), `"ide":"vscode"`) {
		t.Errorf("spec %s: want the configured IDE", r.Spec)
	}
}

func TestStart_ARestartNeverSubmitsTwice(t *testing.T) {
	f := newFixture(t, "cluster")
	w := ciWork("r-00000000000000b1", "spark-1")
	first, err := f.b.Start(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	restarted := newBackend(t, f.c) // a new controller process
	again, err := restarted.Start(ctx, w)
	if err != nil || again != first {
		t.Fatalf("Start after a restart = %q, %v; want %q", again, err, first)
	}
	// Even once the run finished (dstack would replace a finished run
	// of the same name on apply), the lease is not run again.
	f.srv.Progress()
	f.srv.Finish(first, false)
	if again, err := restarted.Start(ctx, w); err != nil || again != first {
		t.Fatalf("Start after the run finished = %q, %v; want %q", again, err, first)
	}
	if n := f.srv.Count(applyPath); n != 1 {
		t.Fatalf("%d applies, want 1", n)
	}
	if n := len(f.srv.Runs()); n != 1 {
		t.Fatalf("%d runs, want 1", n)
	}
}

func TestStart_ALostApplyAnswerIsNotSubmittedAgain(t *testing.T) {
	f := newFixture(t, "cluster")
	f.srv.AddFault(dstacktest.Fault{Path: applyPath, LoseResponse: true})
	name, err := f.b.Start(ctx, ciWork("r-00000000000000b2", "spark-2"))
	if err != nil {
		t.Fatalf("Start = %v: the run was submitted, its answer lost; Start should find it", err)
	}
	if _, err := f.b.Start(ctx, ciWork("r-00000000000000b2", "spark-2")); err != nil {
		t.Fatal(err)
	}
	if n := f.srv.Count(applyPath); n != 1 {
		t.Fatalf("%d applies, want 1", n)
	}
	if _, ok := f.srv.Run(name); !ok {
		t.Fatal("no run")
	}
}

func TestStart_AnUnenrolledHostIsRefusedBeforeSubmitting(t *testing.T) {
	f := newFixture(t, "cluster")
	f.srv.SetInstanceStatus("10.0.0.3", dstacktest.Terminated)
	_, err := f.b.Start(ctx, ciWork("r-00000000000000b3", "spark-1", "spark-3"))
	if !errors.Is(err, dstack.ErrNotEnrolled) {
		t.Fatalf("Start = %v, want ErrNotEnrolled", err)
	}
	if n := f.srv.Count(applyPath); n != 0 {
		t.Fatalf("%d applies, want none", n)
	}
}

func TestStart_ARunNameTakenByAnotherRunIsAConflict(t *testing.T) {
	f := newFixture(t, "cluster")
	w := ciWork("r-00000000000000b4", "spark-1")
	// Someone else's run under the lease's name.
	if _, err := f.c.ApplyRun(ctx, dstack.RunSpec{RunName: f.b.RunName(w.LeaseID), Configuration: dstack.RunConfiguration{Type: "task", Commands: []string{"true"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.b.Start(ctx, w); !errors.Is(err, dstack.ErrConflict) {
		t.Fatalf("Start = %v, want ErrConflict", err)
	}
}

func TestStart_ALeaseThatCannotBeARunIsRefused(t *testing.T) {
	f := newFixture(t, "cluster")
	noCommands := ciWork("r-1", "spark-1")
	noCommands.Commands = nil
	noSHA := ciWork("r-2", "spark-1")
	noSHA.SHA = ""
	devPair := devWork("r-3", "spark-1")
	devPair.Hosts, devPair.Topology = []string{"spark-1", "spark-2"}, spark.Pair
	service := ciWork("r-4", "spark-1")
	service.Class = spark.ServiceStart
	samePair := ciWork("r-5", "spark-1", "spark-1")
	oneHostPair := ciWork("r-6", "spark-1")
	oneHostPair.Topology = spark.Pair
	for name, w := range map[string]dstack.LeaseWork{
		"no commands": noCommands, "no sha": noSHA, "a development pair": devPair, "service start": service,
		"a pair of one host twice": samePair, "a pair with one host": oneHostPair, "no id": ciWork("", "spark-1"),
	} {
		if _, err := f.b.Start(ctx, w); !errors.Is(err, dstack.ErrInvalidLease) {
			t.Errorf("%s: Start = %v, want ErrInvalidLease", name, err)
		}
	}
	if n := len(f.srv.Requests()); n != 0 {
		t.Errorf("%d requests, want none", n)
	}
}

func TestRunName_IsDeterministicAndAValidDstackName(t *testing.T) {
	f := newFixture(t, "cluster")
	valid := regexp.MustCompile(`^[a-z][a-z0-9-]{1,40}$`)
	seen := map[string]string{}
	for _, id := range []string{"r-0123456789abcdef", "R-UPPER", "a_b", "x", "", strings.Repeat("a", 60), "r-0123456789abcdee", "ümlaut", "-"} {
		name := f.b.RunName(id)
		if !valid.MatchString(name) {
			t.Errorf("RunName(%q) = %q, not a valid dstack name", id, name)
		}
		if f.b.RunName(id) != name {
			t.Errorf("RunName(%q) changed between calls", id)
		}
		if other, ok := seen[name]; ok {
			t.Errorf("RunName(%q) = RunName(%q) = %q", id, other, name)
		}
		seen[name] = id
	}
	if got := f.b.RunName("r-0123456789abcdef"); got != "spark-r-0123456789abcdef" {
		t.Errorf("RunName = %q: a lease ID that is a valid name is kept readable", got)
	}
}

func TestNewBackend_RefusesASettingItCannotWorkWith(t *testing.T) {
	f := newFixture(t, "cluster")
	for name, cfg := range map[string]dstack.Config{
		"no fleet":       {},
		"bad prefix":     {Fleet: "spark", RunPrefix: "Spark_"},
		"unknown ide":    {Fleet: "spark", IDE: "emacs"},
		"spark env":      {Fleet: "spark", Env: map[string]string{"SPARK_LEASE_ID": "x"}},
		"bad env name":   {Fleet: "spark", Env: map[string]string{"A-B": "x"}},
		"empty host":     {Fleet: "spark", Hosts: map[string]string{"spark-1": " "}},
		"spark secret":   {Fleet: "spark", Secrets: map[string]string{"SPARK_SHA": "clone"}},
		"bad secret":     {Fleet: "spark", Secrets: map[string]string{"GIT_TOKEN": "clone token"}},
		"env and secret": {Fleet: "spark", Env: map[string]string{"GIT_TOKEN": "x"}, Secrets: map[string]string{"GIT_TOKEN": "clone"}},
	} {
		if _, err := dstack.NewBackend(f.c, cfg); !errors.Is(err, dstack.ErrConfig) {
			t.Errorf("%s: NewBackend = %v, want ErrConfig", name, err)
		}
	}
}

func TestStop_ReleaseStopsTheRun(t *testing.T) {
	f := newFixture(t, "cluster")
	name, err := f.b.Start(ctx, ciWork("r-00000000000000c1", "spark-1", "spark-2"))
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Progress()
	if err := f.b.Stop(ctx, name); err != nil {
		t.Fatal(err)
	}
	r, _ := f.srv.Run(name)
	if !r.StopRequested || r.Status != "terminating" {
		t.Fatalf("run %s after Stop: stop requested %v; want terminating", r.Status, r.StopRequested)
	}
	f.srv.Progress()
	if r, _ := f.srv.Run(name); r.Status != "terminated" {
		t.Fatalf("run %s, want terminated", r.Status)
	}
	for _, h := range []string{"10.0.0.1", "10.0.0.2"} {
		if st := f.srv.InstanceStatus(h); st != dstacktest.Idle {
			t.Errorf("%s is %s after the run ended, want idle", h, st)
		}
	}
}

func TestStop_ReleaseStopsTheRunEvenAfterADroppedAnswer(t *testing.T) {
	f := newFixture(t, "cluster")
	name, err := f.b.Start(ctx, ciWork("r-00000000000000c2", "spark-3"))
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Progress()
	f.srv.AddFault(dstacktest.Fault{Path: stopPath, LoseResponse: true})
	if err := f.b.Stop(ctx, name); err == nil {
		t.Fatal("Stop = nil although its answer was lost; the caller must retry")
	}
	if r, _ := f.srv.Run(name); !r.StopRequested {
		t.Fatal("the stop took effect on the server")
	}
	if err := f.b.Stop(ctx, name); err != nil {
		t.Fatalf("the retried Stop = %v, want nil", err)
	}
	f.srv.Progress()
	if err := f.b.Stop(ctx, name); err != nil {
		t.Fatalf("Stop of a terminated run = %v, want nil", err)
	}
}

func TestStop_ARunAlreadyGoneIsSuccess(t *testing.T) {
	f := newFixture(t, "cluster")
	if err := f.b.Stop(ctx, f.b.RunName("r-never-started")); err != nil {
		t.Fatalf("Stop of a run that never existed = %v, want nil", err)
	}
}

func TestStop_RefusesARunThatIsNotThisBackends(t *testing.T) {
	f := newFixture(t, "cluster")
	if err := f.b.Stop(ctx, "someone-elses-run"); !errors.Is(err, dstack.ErrInvalidLease) {
		t.Fatalf("Stop = %v, want ErrInvalidLease", err)
	}
	if n := f.srv.Count(stopPath); n != 0 {
		t.Fatalf("%d stops sent", n)
	}
}

func TestSweep_StopsTheRunsOfEndedLeasesOnly(t *testing.T) {
	f := newFixture(t, "cluster")
	ended, _ := f.b.Start(ctx, ciWork("r-00000000000000e1", "spark-1"))
	live, _ := f.b.Start(ctx, devWork("r-00000000000000e2", "spark-2"))
	// Runs that are not this backend's: another prefix, another fleet.
	f.c.ApplyRun(ctx, dstack.RunSpec{RunName: "manual-run", Configuration: dstack.RunConfiguration{Type: "task", Commands: []string{"true"}, Env: map[string]string{dstack.EnvLeaseID: "r-00000000000000e1"}}})
	other, _ := dstack.NewBackend(f.c, dstack.Config{Fleet: "elsewhere", Hosts: hostnames})
	f.c.ApplyRun(ctx, dstack.RunSpec{RunName: other.RunName("r-00000000000000e3"), Configuration: dstack.RunConfiguration{Type: "task", Commands: []string{"true"}, Fleets: []string{"elsewhere"}, Env: map[string]string{dstack.EnvLeaseID: "r-00000000000000e3"}}})
	f.srv.Progress()
	active := func(id string) (bool, error) { return id == "r-00000000000000e2", nil }
	stopped, err := f.b.Sweep(ctx, active)
	if err != nil || !slices.Equal(stopped, []string{ended}) {
		t.Fatalf("Sweep = %v, %v; want [%s]", stopped, err, ended)
	}
	for _, r := range f.srv.Runs() {
		if r.StopRequested != (r.Name == ended) {
			t.Errorf("run %s: stop requested %v", r.Name, r.StopRequested)
		}
	}
	if r, _ := f.srv.Run(live); r.Status != "running" {
		t.Errorf("the active lease's run is %s", r.Status)
	}
	// A second sweep has nothing left to do.
	if stopped, err := f.b.Sweep(ctx, active); err != nil || len(stopped) != 0 {
		t.Fatalf("second Sweep = %v, %v; want nothing", stopped, err)
	}
}

func TestSweep_ALeaseThatCannotBeJudgedIsLeftAndNamed(t *testing.T) {
	f := newFixture(t, "cluster")
	name, _ := f.b.Start(ctx, ciWork("r-00000000000000f1", "spark-1"))
	errDown := errors.New("store down")
	stopped, err := f.b.Sweep(ctx, func(string) (bool, error) { return false, errDown })
	if !errors.Is(err, errDown) || len(stopped) != 0 {
		t.Fatalf("Sweep = %v, %v; want the store's error and nothing stopped", stopped, err)
	}
	if !strings.Contains(err.Error(), name) {
		t.Errorf("the error %q should name run %s", err, name)
	}
	if r, _ := f.srv.Run(name); r.StopRequested {
		t.Error("a run whose lease could not be judged was stopped")
	}
}

func TestSweep_AFailedStopNamesTheRuns(t *testing.T) {
	f := newFixture(t, "cluster")
	name, _ := f.b.Start(ctx, ciWork("r-00000000000000f2", "spark-1"))
	f.srv.AddFault(dstacktest.Fault{Path: stopPath, Status: 500})
	stopped, err := f.b.Sweep(ctx, func(string) (bool, error) { return false, nil })
	var apiErr *dstack.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 500 || len(stopped) != 0 {
		t.Fatalf("Sweep = %v, %v; want the 500 and nothing reported stopped", stopped, err)
	}
	if !strings.Contains(err.Error(), name) {
		t.Errorf("the error %q should name run %s", err, name)
	}
	if stopped, err := f.b.Sweep(ctx, func(string) (bool, error) { return false, nil }); err != nil || !slices.Equal(stopped, []string{name}) {
		t.Fatalf("the next Sweep = %v, %v; want [%s]", stopped, err, name)
	}
}

// A private repository's clone credential reaches the run as a dstack
// secret: the run spec holds only the reference, which dstack resolves
// when the run starts, never the value.
func TestStart_ASecretIsAReferenceInTheRunSpecNeverItsValue(t *testing.T) {
	f := newFixture(t, "cluster")
	b, err := dstack.NewBackend(f.c, dstack.Config{Fleet: fleetName, Hosts: hostnames, Secrets: map[string]string{"GIT_TOKEN": "spark-clone_1"}})
	if err != nil {
		t.Fatal(err)
	}
	name, err := b.Start(ctx, ciWork("r-0a1b2c3d4e5f6072", "spark-2"))
	if err != nil {
		t.Fatal(err)
	}
	r, ok := f.srv.Run(name)
	if !ok {
		t.Fatalf("no run %s", name)
	}
	if got := r.Env["GIT_TOKEN"]; got != "${{ secrets.spark-clone_1 }}" {
		t.Errorf("GIT_TOKEN = %q, want the reference to the project's secret", got)
	}
}
