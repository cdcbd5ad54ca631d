package testsys

import "errors"

// ErrNoFifo is returned by Mkfifo on a platform without named pipes.
var ErrNoFifo = errors.New("testsys: no named pipes on this platform")
