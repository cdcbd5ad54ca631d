package runpod_test

import (
	"testing"

	"github.com/gpugate/gpugate/runpod/rest"
	"github.com/gpugate/gpugate/runpod/runpodtest"
)

// setup and podRequest are runpodtest's.
func setup(t *testing.T, opts ...rest.Option) (*runpodtest.Server, *rest.Client) {
	t.Helper()
	return runpodtest.Setup(t, opts...)
}

func podRequest(name, gpu string) rest.CreatePodRequest {
	return runpodtest.SecretPodRequest(name, gpu)
}
