package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpugate/gpugate/spark"
)

// sched is a schedule entry with the given time fields.
func sched(when string) string {
	if when != "" {
		when = ", " + when
	}
	return "{name: nightly, repo: o/butter, branch: main, class: benchmark, suite: performance" + when + "}"
}

// With -fleet nothing is simulated: a request waits until its host
// reports a heartbeat itself (sparkctl heartbeat, here the API client),
// and is granted then.
func TestFleetHostsAreAdmittedOnlyOnceTheyHeartbeat(t *testing.T) {
	dir := t.TempDir()
	fleet := filepath.Join(dir, "fleet.yml")
	os.WriteFile(fleet, []byte("hosts:\n  - {name: gpu-a, managed: true}\n"), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tokens, hostTok := hostToken(t, dir, "gpu-a")
	d := startSparkd(ctx, t, "-init", "-db", filepath.Join(dir, "spark.db"), "-fleet", fleet, "-tokens", tokens)
	cl, _ := spark.NewAPIClient(d.addr, mint(t, tokens, spark.RoleOperator, "ops"), nil)
	host, _ := spark.NewAPIClient(d.addr, hostTok, nil)
	st, err := cl.Request(ctx, spark.LeaseRequest{Class: spark.MergeCI})
	if err != nil || st.Request.State != spark.Queued || !strings.Contains(st.Pending, "gpu-a") {
		t.Fatalf("before any heartbeat: %+v %v", st, err)
	}
	if err := cl.Heartbeat(ctx, "gpu-a", 0); !errors.Is(err, spark.ErrUnauthorized) {
		t.Errorf("the operator's token reported the host: %v, want ErrUnauthorized", err)
	}
	if err := host.Heartbeat(ctx, "gpu-a", 0); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if st, err = cl.Wait(wctx, st.Request.ID); err != nil || st.Request.State != spark.Active || !cmp.Equal(st.Request.Hosts, []string{"gpu-a"}) {
		t.Fatalf("after the heartbeat: %+v %v", st, err)
	}
	cancel()
	if code := <-d.done; code != 0 {
		t.Errorf("exit %d: %s", code, d.logs.String())
	}
}

// -fleet and -simulate do not mix, and a bad fleet stops sparkd before it
// listens.
func TestFleetFlagRefusals(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.yml"), filepath.Join(dir, "bad.yml")
	os.WriteFile(good, []byte("hosts:\n  - {name: gpu-a, managed: true}\n"), 0o644)
	os.WriteFile(bad, []byte("hosts:\n  - {name: gpu-a, managed: true, service: true}\n"), 0o644)
	scheduled := filepath.Join(dir, "scheduled.yml")
	os.WriteFile(scheduled, []byte("hosts:\n  - {name: gpu-a, managed: true}\nschedules: ["+sched("at: '03:00'")+"]\n"), 0o644)
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"-simulate with -fleet":    {[]string{"-fleet", good, "-simulate"}, "a -fleet's hosts report their own heartbeats"},
		"no fleet, not simulated":  {[]string{"-simulate=false"}, "for real hosts give -fleet"},
		"a bad fleet":              {[]string{"-fleet", bad}, "bad.yml"},
		"a missing fleet":          {[]string{"-fleet", filepath.Join(dir, "missing.yml")}, "no such file"},
		"schedules without GitHub": {[]string{"-fleet", scheduled}, "the fleet's schedules dispatch workflows through GitHub"},
	} {
		var logs bytes.Buffer
		if code := run(context.Background(), append([]string{"-addr", "127.0.0.1:0", "-db", filepath.Join(dir, "spark.db")}, tc.args...), &logs, nil); code != 2 || !strings.Contains(logs.String(), tc.want) {
			t.Errorf("%s: exit %d: %s", name, code, logs.String())
		}
	}
}

// hostToken mints host's token with sparkd token into a token file in
// dir, returning the file and the token.
func hostToken(t *testing.T, dir, host string) (file, token string) {
	t.Helper()
	file = filepath.Join(dir, "tokens")
	return file, mint(t, file, spark.RoleHost, host)
}

// mint adds a token for role and name to the token file with sparkd
// token, returning the token.
func mint(t *testing.T, file string, role spark.Role, name string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := mintToken([]string{"-tokens", file, "-role", string(role), "-name", name}, &out, &errOut); code != 0 {
		t.Fatalf("sparkd token: exit %d: %s", code, errOut.String())
	}
	return strings.TrimSpace(out.String())
}
