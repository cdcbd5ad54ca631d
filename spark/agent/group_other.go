//go:build !unix

package agent

import "os/exec"

// newGroup leaves cmd as it is: process groups are a Unix host's.
func newGroup(*exec.Cmd) {}

// killGroup kills cmd.
func killGroup(cmd *exec.Cmd) { _ = cmd.Process.Kill() }
