//go:build unix && !linux

package agent_test

import "errors"

// setACL is Linux's.
func setACL(string, string, int) error { return errors.New("ACLs are set on Linux only") }
