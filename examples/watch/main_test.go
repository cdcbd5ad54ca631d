package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpugate/gpugate/runpod/rest"
	"github.com/gpugate/gpugate/runpod/runpodtest"
)

func TestSimulateDeletesThenCancels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{"-simulate"}, func(string) string { return "" }, &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		for _, want := range []string{"pods left running: 0; runs cancelled: [1]", "outcome: obsolete", "deleted: true; run cancelled: true"} {
			if !strings.Contains(stdout.String(), want) {
				t.Errorf("output lacks %q:\n%s", want, stdout.String())
			}
		}
	})
}

// A real watch without its pod, run or repository is a refused command
// line (exit 2, one line), with or without credentials.
func TestRealModeNeedsArguments(t *testing.T) {
	for _, env := range []map[string]string{{"RUNPOD_API_KEY": "k", "GITHUB_TOKEN": "t"}, nil} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), nil, func(k string) string { return env[k] }, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "-pod, -run-id and -repo are required") || stdout.Len() != 0 {
			t.Errorf("exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
		}
	}
}

// Real mode, against RunPod's and GitHub's loopback stand-ins (the fake
// RunPod through RUNPOD_API_URL, GitHub through GITHUB_API_URL): the pull
// request's head has moved, so the watchdog deletes the pod, and only then
// cancels the run it was told about.
func TestRealModeDeletesAnObsoletePodThenCancelsItsRun(t *testing.T) {
	fake := runpodtest.New(runpodtest.WithSchedule(0, 0))
	api, err := fake.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	pod, err := api.CreatePod(context.Background(), rest.CreatePodRequest{Name: "gpugate-55-1-c1", Image: "ghcr.io/actions/actions-runner:latest", GPU: rest.GPURequest{ID: "NVIDIA L4", Count: 1}})
	if err != nil {
		t.Fatal(err)
	}
	runpodURL := fake.Start()
	defer fake.Close()
	var mu sync.Mutex
	var calls []string
	runningAtCancel := -1
	gh := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		path := strings.TrimPrefix(r.URL.Path, "/api/v3") // the Enterprise prefix a GITHUB_API_URL implies
		calls = append(calls, r.Method+" "+path)
		switch r.Method + " " + path {
		case "GET /repos/o/r/pulls/7":
			fmt.Fprint(w, `{"number": 7, "state": "open", "head": {"sha": "bbbb"}}`)
		case "POST /repos/o/r/actions/runs/55/cancel":
			runningAtCancel = len(fake.Running())
			w.WriteHeader(http.StatusAccepted)
			fmt.Fprint(w, `{}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer gh.Close()
	env := map[string]string{"RUNPOD_API_KEY": runpodtest.APIKey, "RUNPOD_API_URL": runpodURL, "GITHUB_TOKEN": "ghs_watch_test", "GITHUB_API_URL": gh.URL + "/"}
	var stdout, stderr bytes.Buffer
	// A guard, not a wait: a watchdog that did not see the moved head would
	// poll until this ends the test, instead of hanging it.
	guard, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	code := run(guard, []string{"-pod", pod.ID, "-repo", "o/r", "-run-id", "55", "-run-attempt", "1", "-pr", "7", "-head", "aaaa"},
		func(k string) string { return env[k] }, &stdout, &stderr)
	if code != 1 || !strings.Contains(stdout.String(), "outcome: obsolete") || !strings.Contains(stdout.String(), "deleted: true; run cancelled: true") {
		t.Errorf("exit %d, want the obsolete pod deleted and its run cancelled (a visible failure):\n%s%s", code, stdout.String(), stderr.String())
	}
	if n := len(fake.Running()); n != 0 {
		t.Errorf("%d pods still running", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if runningAtCancel != 0 {
		t.Errorf("the run was cancelled with %d pods still running (calls %v): deletion comes first", runningAtCancel, calls)
	}
	if strings.Contains(stdout.String()+stderr.String(), runpodtest.APIKey) || strings.Contains(stdout.String()+stderr.String(), "ghs_watch_test") {
		t.Error("a credential was printed")
	}
}
