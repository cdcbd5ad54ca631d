package main

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/gpugate/gpugate/internal/ghaction"
	"github.com/gpugate/gpugate/internal/githubtest"
)

// GitHub App credentials work everywhere the README says: with an App
// configured and no GITHUB_TOKEN, watch gets past its credential check; with
// neither, it stops naming both ways to authenticate.
func TestRealMode_GitHubAppCredentialsAreEnough(t *testing.T) {
	for name, tc := range map[string]struct {
		env    map[string]string
		noCred bool
	}{
		"a GitHub App": {env: githubtest.AppEnv(t)},
		"a token":      {env: map[string]string{"GITHUB_TOKEN": "ghs_x"}},
		"neither":      {env: map[string]string{}, noCred: true},
	} {
		t.Run(name, func(t *testing.T) {
			tc.env["RUNPOD_API_KEY"] = "rpa_x"
			getenv := func(k string) string { return tc.env[k] }
			_, err := watch(context.Background(), options{}, getenv, io.Discard, io.Discard)
			if err == nil {
				t.Fatal("without the run's other settings the command must still stop")
			}
			if got := errors.Is(err, ghaction.ErrNoToken); got != tc.noCred {
				t.Errorf("err = %v; refused for want of a credential: %v, want %v", err, got, tc.noCred)
			}
		})
	}
}
