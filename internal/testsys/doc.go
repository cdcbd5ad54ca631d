// Package testsys is what the tests and benchmarks ask of the operating
// system: a process's peak resident memory and CPU time (its own and its
// children's), sync(2) between timed phases, and a named pipe to read
// from. Where a platform has none of these, the measurements are -1 and
// Mkfifo returns ErrNoFifo, so a test can skip.
package testsys
