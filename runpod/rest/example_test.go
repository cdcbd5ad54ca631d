package rest_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/gpugate/gpugate/runpod/rest"
	"github.com/gpugate/gpugate/runpod/runpodtest"
)

func ExampleAPIError() {
	srv := runpodtest.New()
	srv.SetStock("NVIDIA L4", 0)
	c, _ := srv.NewClient()
	_, err := c.CreatePod(context.Background(), rest.CreatePodRequest{
		Name: "gpu-gate-c1", Image: "img", GPU: rest.GPURequest{ID: "NVIDIA L4", Count: 1},
	})
	fmt.Println(errors.Is(err, rest.ErrNoCapacity))
	var ae *rest.APIError
	if errors.As(err, &ae) {
		fmt.Println(ae.StatusCode, ae.Title)
	}
	// Output:
	// true
	// 400 Bad Request
}

// ClientFromEnv reads the key and, for a proxy or a test's stand-in, the
// server from the environment; here a loopback fake of RunPod.
func ExampleClientFromEnv() {
	fake := runpodtest.New()
	url := fake.Start()
	defer fake.Close()
	env := map[string]string{rest.EnvAPIKey: runpodtest.APIKey, rest.EnvAPIURL: url}
	c, err := rest.ClientFromEnv(func(k string) string { return env[k] })
	if err != nil {
		panic(err)
	}
	pods, err := c.ListPods(context.Background())
	fmt.Println(len(pods), err)
	_, err = rest.ClientFromEnv(func(k string) string {
		return map[string]string{rest.EnvAPIKey: "k", rest.EnvAPIURL: "http://proxy.example.com"}[k]
	})
	fmt.Println(errors.Is(err, rest.ErrBaseURL))
	// Output:
	// 0 <nil>
	// true
}
