//go:build !(linux || darwin || freebsd)

package spark

import (
	"fmt"
	"runtime"
)

// Free cannot measure free space on this system: the error makes the disk
// check, and so the preflight, fail closed.
func (StatfsDisk) Free(path string) (uint64, error) {
	return 0, fmt.Errorf("statfs %s: free disk space is not measured on %s", path, runtime.GOOS)
}
