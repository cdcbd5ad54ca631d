//go:build !linux

package smoke

import "errors"

// OpenCUDA needs Linux, where the pods run.
func OpenCUDA(libDir string) (CUDA, error) {
	return nil, errors.New("smoke: the real CUDA backend runs on Linux only")
}
