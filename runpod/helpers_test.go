package runpod_test

import (
	"testing"

	"github.com/gpugate/gpugate/runpod/rest"
	"github.com/gpugate/gpugate/runpod/runpodtest"
)

// setup returns a fake and a client wired to it in process.
func setup(t *testing.T, opts ...rest.Option) (*runpodtest.Server, *rest.Client) {
	t.Helper()
	srv := runpodtest.New()
	c, err := srv.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return srv, c
}

// podRequest is a create with a JIT config and a startup command, both
// secret, on one GPU of the given type.
func podRequest(name, gpu string) rest.CreatePodRequest {
	return rest.CreatePodRequest{
		Name:      name,
		Image:     "ghcr.io/actions/actions-runner:latest@sha256:0123",
		Env:       map[string]string{"GPUGATE_REPOSITORY": "o/r"},
		SecretEnv: map[string]rest.Secret{"RUNNER_JIT_CONFIG": "JITSECRET-abcdef"},
		Args:      "bash -c 'STARTUPSECRET-123456'",
		Disk:      40,
		Cloud:     "SECURE",
		GPU:       rest.GPURequest{ID: gpu, Count: 1, MinCUDAVersion: "12.6"},
	}
}
