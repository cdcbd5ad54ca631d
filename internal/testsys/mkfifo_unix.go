//go:build unix

package testsys

import "syscall"

// Mkfifo makes a named pipe at path, readable and writable by its owner.
func Mkfifo(path string) error { return syscall.Mkfifo(path, 0o600) }
