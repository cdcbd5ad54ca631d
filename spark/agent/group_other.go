//go:build !unix

package agent

import (
	"fmt"
	"os/exec"
)

// newGroup leaves cmd as it is: process groups are a Unix host's.
func newGroup(*exec.Cmd) {}

// killGroup kills cmd.
func killGroup(cmd *exec.Cmd) { _ = cmd.Process.Kill() }

// asUser is refused: switching users is a Unix host's.
func asUser(*exec.Cmd, string, runnerIDs) error {
	return fmt.Errorf("%w: a runner user needs a Unix host", ErrConfig)
}

func lookupUser(name string) (uint32, uint32, error) {
	return 0, 0, fmt.Errorf("%w: a runner user (%s) needs a Unix host", ErrConfig, name)
}

// claimHost returns the agent's ID; the one-agent lock is a Unix host's.
func claimHost(workRoot, host string) (string, func(), error) {
	id, err := agentID(workRoot, host)
	return id, func() {}, err
}

// killUser is a Unix host's.
func killUser(_, _ uint32) {}
