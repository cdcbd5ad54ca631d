package main

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/gpugate/gpugate/ghclient"
	"github.com/gpugate/gpugate/internal/githubtest"
)

// GitHub App credentials work everywhere the README says: with an App
// configured and no GITHUB_TOKEN, watch gets past its credential check; with
// neither, it stops naming both ways to authenticate.
func TestRealMode_GitHubAppCredentialsAreEnough(t *testing.T) {
	githubtest.CheckCredentials(t, func(getenv func(string) string) error {
		_, err := watch(context.Background(), options{}, getenv, io.Discard, io.Discard)
		return err
	}, func(err error) bool { return errors.Is(err, ghclient.ErrNoToken) })
}
