//go:build !linux

package partition

import "time"

func maxRSS() int64                  { return -1 }
func cpuTime() time.Duration         { return -1 }
func childrenCPUTime() time.Duration { return -1 }

func syncFS() {}
