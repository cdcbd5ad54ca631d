package runpodtest

import (
	"testing"

	"github.com/gpugate/gpugate/runpod/rest"
)

// Setup returns a fresh fake and a client wired to it in process; a
// client that cannot be built fails the test.
func Setup(t testing.TB, opts ...rest.Option) (*Server, *rest.Client) {
	t.Helper()
	srv := New()
	c, err := srv.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return srv, c
}

// SecretPodRequest is a create on one GPU of type gpu whose runner
// config (JITSECRET-abcdef) and startup command (STARTUPSECRET-123456)
// are secrets, for tests that check neither is ever printed.
func SecretPodRequest(name, gpu string) rest.CreatePodRequest {
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
