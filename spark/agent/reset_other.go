//go:build !unix

package agent

import (
	"fmt"
	"os"
)

// runnerIDs is a Unix host's: a runner user needs one.
type runnerIDs struct{ uid, gid uint32 }

func lookupRunner(name string) (runnerIDs, error) {
	_, _, err := lookupUser(name)
	return runnerIDs{}, err
}

func (runnerIDs) scratchRoots([]string) []string { return nil }

func checkInstall(string, string, runnerIDs) error { return nil }
func freshRunner(string, string, runnerIDs) error  { return nil }
func sweepUser([]string, uint32) error             { return nil }
func checkNoLogin(string) error                    { return nil }

// removeTree removes path and all it holds.
func removeTree(path string) error {
	if err := os.RemoveAll(path); err != nil {
		return fmt.Errorf("agent: remove %s: %w", shorten(path), err)
	}
	return nil
}
