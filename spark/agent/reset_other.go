//go:build !unix

package agent

import (
	"fmt"
	"os"
	"os/exec"
)

// runnerIDs is a Unix host's: a runner user needs one.
type runnerIDs struct {
	name     string
	uid, gid uint32
}

func lookupRunner(name string) (runnerIDs, error) {
	_, _, err := lookupUser(name)
	return runnerIDs{}, err
}

func (runnerIDs) scratchRoots([]string) []string { return nil }

var subIDFiles []string // a Unix host's

// installLinks and jobFiles are a Unix host's.
type installLinks struct{}

func (installLinks) leftovers() error { return nil }

type jobFiles struct {
	uid   uint32
	links installLinks
}

func checkInstall(string, string, runnerIDs) (installLinks, error) { return installLinks{}, nil }
func freshRunner(string, string, runnerIDs) error                  { return nil }
func sweepUser([]string, jobFiles) error                           { return nil }
func checkNoLogin(string) error                                    { return nil }
func checkNoSubIDs(string, uint32, []string) error                 { return nil }
func checkHardlinks(string) error                                  { return nil }

const protectedHardlinks = ""

func checkHome(runnerIDs) error                      { return nil }
func noCoreDumps(*exec.Cmd)                          {}
func (runnerIDs) checkWorkRoot(string, string) error { return nil }
func (runnerIDs) checkScratch([]string) error        { return nil }

// removeTree removes path and all it holds.
func removeTree(path string) error {
	if err := os.RemoveAll(path); err != nil {
		return fmt.Errorf("agent: remove %s: %w", shorten(path), err)
	}
	return nil
}
