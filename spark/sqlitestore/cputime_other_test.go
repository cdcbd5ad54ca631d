//go:build !linux

package sqlitestore

import "time"

// threadCPU is not measured here: the CPU metrics read zero.
func threadCPU() time.Duration { return 0 }
