//go:build linux || darwin || freebsd

package spark

import (
	"fmt"
	"syscall"
)

// Free returns the bytes available to unprivileged users at path.
func (StatfsDisk) Free(path string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", path, err)
	}
	return uint64(st.Bavail) * uint64(st.Bsize), nil // the field types differ between systems
}
