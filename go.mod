module github.com/gpugate/gpugate

go 1.25.0

require (
	github.com/bmatcuk/doublestar/v4 v4.10.4
	github.com/cenkalti/backoff/v4 v4.3.0
	github.com/google/go-cmp v0.7.0
	github.com/google/go-github/v66 v66.0.0
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3
	go.yaml.in/yaml/v3 v3.0.6
	golang.org/x/oauth2 v0.36.0
)

require (
	github.com/ebitengine/purego v0.11.3 // indirect
	github.com/google/go-querystring v1.1.0 // indirect
	golang.org/x/text v0.14.0 // indirect
)
