//go:build !linux

package testsys

import "time"

// MaxRSS is -1: this platform's peak resident memory is not read.
func MaxRSS() int64 { return -1 }

// CPUTime is -1: this platform's CPU time is not read.
func CPUTime() time.Duration { return -1 }

// ChildrenCPUTime is -1: this platform's CPU time is not read.
func ChildrenCPUTime() time.Duration { return -1 }

// SyncFS does nothing here.
func SyncFS() {}
