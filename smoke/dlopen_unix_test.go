//go:build !windows

package smoke

import "github.com/ebitengine/purego"

// dlopenFake loads a C stand-in library the way the proof loads the real
// ones.
func dlopenFake(lib string) (uintptr, error) {
	return purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_GLOBAL)
}
