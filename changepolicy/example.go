package changepolicy

import _ "embed"

// ExamplePolicy is the shipped example policy (YAML): the example project's Rust
// workspace with a paid CUDA lane and a macOS lane. Load it, or copy it as a
// starting point.
//
//go:embed example_policy.yml
var ExamplePolicy []byte
