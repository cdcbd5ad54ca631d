package main

import (
	"context"
	"errors"
	"testing"

	"github.com/gpugate/gpugate/ghclient"
	"github.com/gpugate/gpugate/internal/githubtest"
	"github.com/gpugate/gpugate/runpod"
)

// GitHub App credentials work everywhere the README says: with an App
// configured and no GITHUB_TOKEN, provision gets past its credential check; with
// neither, it stops naming both ways to authenticate.
func TestRealMode_GitHubAppCredentialsAreEnough(t *testing.T) {
	githubtest.CheckCredentials(t, func(getenv func(string) string) error {
		cfg, _ := runpod.LoadConfig(runpod.ExampleConfig)
		_, err := connect(context.Background(), options{}, getenv, &cfg)
		return err
	}, func(err error) bool { return errors.Is(err, ghclient.ErrNoToken) })
}
