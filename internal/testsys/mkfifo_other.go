//go:build !unix

package testsys

// Mkfifo returns ErrNoFifo: this platform has no named pipes.
func Mkfifo(string) error { return ErrNoFifo }
