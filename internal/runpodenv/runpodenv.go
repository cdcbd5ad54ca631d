// Package runpodenv is what the RunPod commands that call both RunPod and
// GitHub (provision, watch, reap) share about a real run: the two clients
// from the environment, and the order in which a run without what it
// needs is refused, each refusal prefixed with the command's name.
package runpodenv

import (
	"context"
	"fmt"

	"github.com/google/go-github/v66/github"

	"github.com/gpugate/gpugate/ghclient"
	"github.com/gpugate/gpugate/runpod/rest"
)

// ErrNoAPIKey is returned when RUNPOD_API_KEY is not set.
var ErrNoAPIKey = fmt.Errorf("%s is not set (or use -simulate)", rest.EnvAPIKey)

// Clients builds a real run's RunPod client (rest.ClientFromEnv) and
// GitHub client (ghclient.New, its error prefixed with command). Before
// building either it refuses, in this order: a missing RUNPOD_API_KEY
// ("<command>: RUNPOD_API_KEY is not set (or use -simulate)", ErrNoAPIKey);
// missing GitHub credentials ("<command>: <needs>: ...", matching
// ghclient.ErrNoToken), where needs says what the command reads GitHub
// for; and settings, the error of the run's other settings, when not nil.
func Clients(ctx context.Context, getenv func(string) string, command, needs string, settings error) (*rest.Client, *github.Client, error) {
	if getenv(rest.EnvAPIKey) == "" {
		return nil, nil, fmt.Errorf("%s: %w", command, ErrNoAPIKey)
	}
	if err := ghclient.RequireCredentials(getenv); err != nil {
		return nil, nil, fmt.Errorf("%s: %s: %w", command, needs, err)
	}
	if settings != nil {
		return nil, nil, settings
	}
	api, err := rest.ClientFromEnv(getenv)
	if err != nil {
		return nil, nil, err
	}
	gh, err := ghclient.New(ctx, getenv)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", command, err)
	}
	return api, gh, nil
}
