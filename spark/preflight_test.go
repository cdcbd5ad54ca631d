package spark_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpugate/gpugate/internal/faketime"
	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/sparktest"
)

func TestPreflight_RejectsEachUnsafeCondition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t)
		r := f.submit(t, spark.SubmitRequest{Class: spark.MergeCI})
		f.reconcile(t)
		tok := f.status(t, r.ID).Request.Token
		ok := func() (spark.PreflightChecks, spark.PreflightRequest) {
			ch := &sparktest.Checks{FreeBytes: 100 << 30}
			return spark.PreflightChecks{Token: f.c, GPU: ch, Disk: ch, Interconnect: ch, Service: ch},
				spark.PreflightRequest{Host: "spark-2", Token: tok, Topology: spark.Single, WorkDir: "/work", MinFree: 50 << 30}
		}
		c, req := ok()
		if err := spark.Preflight(ctx, c, req); err != nil {
			t.Fatal(err)
		}
		tests := map[string]struct {
			mutate func(*spark.PreflightChecks, *spark.PreflightRequest)
			check  string
		}{
			"stale fencing token":    {func(_ *spark.PreflightChecks, r *spark.PreflightRequest) { r.Token = tok - 1 }, "fencing"},
			"unknown resource state": {func(_ *spark.PreflightChecks, r *spark.PreflightRequest) { r.Host = "spark-1" }, "fencing"},
			"competing GPU process": {func(c *spark.PreflightChecks, _ *spark.PreflightRequest) {
				c.GPU = &sparktest.Checks{Apps: []string{"4242, python"}}
			}, "gpu-processes"},
			"unreadable GPU state": {func(c *spark.PreflightChecks, _ *spark.PreflightRequest) {
				c.GPU = &sparktest.Checks{AppsErr: errors.New("nvidia-smi failed")}
			}, "gpu-processes"},
			"insufficient disk": {func(c *spark.PreflightChecks, _ *spark.PreflightRequest) {
				c.Disk = &sparktest.Checks{FreeBytes: 1 << 30}
			}, "disk"},
			"failed interconnect": {func(c *spark.PreflightChecks, r *spark.PreflightRequest) {
				r.Topology, c.Interconnect = spark.Pair, &sparktest.Checks{LinkErr: errors.New("link down")}
			}, "interconnect"},
			"service not released": {func(c *spark.PreflightChecks, r *spark.PreflightRequest) {
				r.ServiceHost, c.Service = true, &sparktest.Checks{ServiceErr: errors.New("GPU still allocated")}
			}, "service-released"},
			"no fencing check at all": {func(c *spark.PreflightChecks, _ *spark.PreflightRequest) { c.Token = nil }, "fencing"},
		}
		for name, tt := range tests {
			c, req := ok()
			tt.mutate(&c, &req)
			err := spark.Preflight(ctx, c, req)
			var pe *spark.PreflightError
			if !errors.As(err, &pe) || pe.Check != tt.check || !errors.Is(err, spark.ErrPreflight) {
				t.Errorf("%s: %v, want check %s", name, err, tt.check)
			}
			if err != nil && !strings.Contains(err.Error(), "preflight "+tt.check+" failed") {
				t.Errorf("%s: the message %q does not name the check", name, err)
			}
		}
		// The cause stays reachable for callers that branch on it.
		cause := errors.New("nvidia-smi failed")
		c, req = ok()
		c.GPU = &sparktest.Checks{AppsErr: cause}
		if err := spark.Preflight(ctx, c, req); !errors.Is(err, cause) {
			t.Errorf("%v does not wrap its cause", err)
		}
	})
}

func TestPreflight_RealChecks(t *testing.T) {
	free, err := spark.StatfsDisk{}.Free(os.TempDir())
	if err != nil || free == 0 {
		t.Errorf("statfs: %d %v", free, err)
	}
	apps := spark.ParseComputeApps([]byte("1234, /usr/bin/python3\n\n5678, ollama\n"))
	if len(apps) != 2 {
		t.Errorf("%v", apps)
	}
	if apps := spark.ParseComputeApps([]byte("No running processes found\n")); len(apps) != 0 {
		t.Errorf("%v", apps)
	}
}

// What the compute-apps query printed on an H200 with nothing running
// (nothing at all) and with one CUDA process holding memory.
func TestParseComputeApps_ARealH200(t *testing.T) {
	for file, want := range map[string][]string{"apps-idle.txt": nil, "apps-busy.txt": {"907, python3"}} {
		out, err := os.ReadFile(filepath.Join("testdata", "h200", file))
		if err != nil {
			t.Fatal(err)
		}
		if got := spark.ParseComputeApps(out); !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", file, got, want)
		}
	}
}

// NvidiaSMIApps runs nvidia-smi's compute-apps query and reads its output;
// a failing nvidia-smi is an error, never "no processes".
func TestNvidiaSMIApps_RunsTheComputeAppsQuery(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the fake nvidia-smi is a shell script")
	}
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	smi := "#!/bin/sh\n[ \"$1 $2\" = '--query-compute-apps=pid,process_name --format=csv,noheader' ] || exit 9\necho '4242, ollama'\n"
	if err := os.WriteFile(filepath.Join(dir, "nvidia-smi"), []byte(smi), 0o755); err != nil {
		t.Fatal(err)
	}
	apps, err := spark.NvidiaSMIApps{}.ComputeApps(context.Background())
	if err != nil || !slices.Equal(apps, []string{"4242, ollama"}) {
		t.Errorf("ComputeApps = %v, %v", apps, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "nvidia-smi"), []byte("#!/bin/sh\nexit 9\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if apps, err := (spark.NvidiaSMIApps{}).ComputeApps(context.Background()); err == nil {
		t.Errorf("a failing nvidia-smi gave %v and no error", apps)
	}
}

func FuzzParseComputeApps(f *testing.F) {
	f.Add([]byte("1234, python\n"))
	if out, err := os.ReadFile(filepath.Join("testdata", "h200", "apps-busy.txt")); err == nil {
		f.Add(out)
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		for _, a := range spark.ParseComputeApps(out) {
			if a == "" {
				t.Fatal("empty app")
			}
		}
	})
}

// stateSays is the controller's fencing check with its host state
// replaced.
type stateSays struct {
	spark.TokenChecker
	st spark.HostState
}

func (s stateSays) HostState(context.Context, string) (spark.HostState, error) { return s.st, nil }

// A preflight fails closed when the controller sees the host offline, and
// the resident-service check runs wherever the controller's fleet puts
// the service, whatever the runner's environment says.
func TestPreflight_TheHostsStateComesFromTheController(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t)
		r := f.submit(t, spark.SubmitRequest{Class: spark.MergeCI})
		f.reconcile(t)
		tok := f.status(t, r.ID).Request.Token
		ch := &sparktest.Checks{FreeBytes: 100 << 30, ServiceErr: errors.New("GPU still allocated")}
		req := spark.PreflightRequest{Host: "spark-2", Token: tok, Topology: spark.Single, WorkDir: "/work", MinFree: 50 << 30}
		checks := spark.PreflightChecks{Token: f.c, GPU: ch, Disk: ch, Interconnect: ch, Service: ch}
		if err := spark.Preflight(ctx, checks, req); err != nil {
			t.Fatalf("spark-2, online and no service host: %v", err)
		}
		var pe *spark.PreflightError
		checks.Token = stateSays{f.c, spark.HostState{Online: true, Service: true}}
		if err := spark.Preflight(ctx, checks, req); !errors.As(err, &pe) || pe.Check != "service-released" {
			t.Errorf("the fleet's service host, ServiceHost unset: %v, want the service-released check", err)
		}
		checks.Token = f.c
		faketime.Advance(2 * time.Minute) // no heartbeat since, past the 90 s timeout
		if err := spark.Preflight(ctx, checks, req); !errors.As(err, &pe) || pe.Check != "host-online" {
			t.Errorf("an offline host: %v, want the host-online check", err)
		}
		if st, err := f.c.HostState(ctx, "spark-1"); err != nil || !st.Service {
			t.Errorf("spark-1 (the fleet's service host): %+v %v", st, err)
		}
	})
}
