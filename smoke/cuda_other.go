//go:build !linux

package smoke

import "fmt"

// OpenCUDA needs Linux, where the pods run.
func OpenCUDA(libDir string) (CUDA, error) {
	return nil, fmt.Errorf("%w: the real CUDA backend runs on Linux only", ErrLibrary)
}

// OpenNVRTC needs Linux too.
func OpenNVRTC(libDir string) (Compiler, error) {
	return nil, fmt.Errorf("%w: NVRTC is loaded on Linux only", ErrLibrary)
}
