package ghclient_test

import (
	"errors"
	"fmt"

	"github.com/gpugate/gpugate/ghclient"
)

// A command checks its GitHub credentials before it does anything paid:
// a token is enough, half of a GitHub App's settings is refused, and
// nothing at all names what to set. No call reaches GitHub.
func ExampleRequireCredentials() {
	for _, env := range []map[string]string{
		{"GITHUB_TOKEN": "a-token"},
		{"GITHUB_APP_ID": "12"},
		{},
	} {
		err := ghclient.RequireCredentials(func(k string) string { return env[k] })
		fmt.Println(err == nil, errors.Is(err, ghclient.ErrApp), errors.Is(err, ghclient.ErrNoToken))
	}
	// Output:
	// true false false
	// false true false
	// false false true
}
