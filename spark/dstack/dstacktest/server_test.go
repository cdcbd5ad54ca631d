package dstacktest_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpugate/gpugate/spark/dstack/dstacktest"
)

const applyPath = "/api/project/main/runs/apply"

func apply(t *testing.T, srv *dstacktest.Server, body string) (int, error) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, dstacktest.BaseURL+applyPath, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+dstacktest.Token)
	resp, err := srv.Client().Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func task(name, extra string) string {
	return `{"plan": {"run_spec": {"run_name": "` + name + `", "configuration": {"type": "task", "commands": ["true"]` + extra + `}}, "current_resource": null}, "force": false}`
}

func newServer(placement string) *dstacktest.Server {
	srv := dstacktest.New()
	srv.AddFleet(dstacktest.FleetSpec{Name: "f", Placement: placement, Hosts: []string{"h1", "h2", "h3"}})
	return srv
}

func TestFault_AStatusHitsTheNextNCallsToItsPath(t *testing.T) {
	srv := newServer("")
	srv.AddFault(dstacktest.Fault{Path: applyPath, Status: 503, Times: 2})
	for i, want := range []int{503, 503, 200} {
		if got, err := apply(t, srv, task("r"+string(rune('a'+i)), "")); err != nil || got != want {
			t.Fatalf("call %d = %d, %v; want %d", i, got, err, want)
		}
	}
	if n := len(srv.Runs()); n != 1 {
		t.Fatalf("%d runs, want 1: a failed call has no effect", n)
	}
}

func TestFault_AHungCallEndsWithTheRequestsContextAndHasNoEffect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newServer("")
		srv.AddFault(dstacktest.Fault{Path: applyPath, Hang: true})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, dstacktest.BaseURL+applyPath, strings.NewReader(task("ra", "")))
		req.Header.Set("Authorization", "Bearer "+dstacktest.Token)
		start := time.Now()
		_, err := srv.Client().Do(req)
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != time.Minute {
			t.Fatalf("hung call = %v after %v; want the context's deadline after 1m", err, time.Since(start))
		}
		if len(srv.Runs()) != 0 {
			t.Fatal("a hung call took effect")
		}
	})
}

func TestFault_ALostAnswerTakesEffectADroppedCallDoesNot(t *testing.T) {
	srv := newServer("")
	srv.AddFault(dstacktest.Fault{Path: applyPath, LoseResponse: true})
	if _, err := apply(t, srv, task("ra", "")); err == nil {
		t.Fatal("a lost answer reached the client")
	}
	srv.AddFault(dstacktest.Fault{Path: applyPath, Drop: true})
	if _, err := apply(t, srv, task("rb", "")); err == nil {
		t.Fatal("a dropped call reached the client")
	}
	var names []string
	for _, r := range srv.Runs() {
		names = append(names, r.Name)
	}
	if !slices.Equal(names, []string{"ra"}) {
		t.Fatalf("runs %v, want [ra]", names)
	}
}

func TestProgress_PlacesATargetedRunOnlyOnItsInstances(t *testing.T) {
	srv := newServer("cluster")
	apply(t, srv, task("pair", `, "nodes": 2, "fleets": ["f"], "instances": [{"hostname": "h3"}, {"hostname": "H2"}], "creation_policy": "reuse"`))
	srv.Progress()
	r, _ := srv.Run("pair")
	if r.Status != "running" || !slices.Equal(r.Hosts, []string{"h2", "h3"}) {
		t.Fatalf("pair %s on %v, want running on h2 and h3", r.Status, r.Hosts)
	}
	if srv.InstanceStatus("h1") != dstacktest.Idle || srv.InstanceStatus("h2") != dstacktest.Busy {
		t.Fatal("instances not marked")
	}
	// A busy target waits; a missing one fails the run.
	apply(t, srv, task("waits", `, "instances": [{"hostname": "h2"}]`))
	apply(t, srv, task("fails", `, "instances": [{"hostname": "h9"}]`))
	srv.Progress()
	if r, _ := srv.Run("waits"); r.Status != "submitted" {
		t.Errorf("a run targeting a busy instance is %s, want submitted", r.Status)
	}
	if r, _ := srv.Run("fails"); r.Status != "failed" {
		t.Errorf("a run targeting a missing instance is %s, want failed", r.Status)
	}
}

func TestProgress_AMultiNodeTaskNeedsAClusterFleet(t *testing.T) {
	srv := newServer("")
	apply(t, srv, task("pair", `, "nodes": 2, "instances": [{"hostname": "h1"}, {"hostname": "h2"}]`))
	srv.Progress()
	if r, _ := srv.Run("pair"); r.Status != "failed" {
		t.Fatalf("a two-node task in a fleet without placement cluster is %s, want failed", r.Status)
	}
}

func TestApply_AFinishedRunOfTheNameIsReplaced(t *testing.T) {
	srv := newServer("")
	apply(t, srv, task("same", ""))
	srv.Progress()
	srv.Finish("same", false)
	if got, _ := apply(t, srv, task("same", "")); got != 200 {
		t.Fatalf("apply over a finished run = %d, want 200 (dstack deletes it and submits anew)", got)
	}
	runs := srv.Runs()
	if len(runs) != 2 || !runs[0].Deleted || runs[1].Deleted || runs[1].Status != "submitted" {
		t.Fatalf("runs %+v", runs)
	}
}
