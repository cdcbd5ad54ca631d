package main

// Review tests: each is named after the rule it checks.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gate local-run refuses a checkout whose lane would not test HEAD. A new
// file the maintainer forgot to `git add` is in the working tree, so the
// lane sees it and may pass, while HEAD (what the evidence vouches for)
// lacks it: an untracked file is as much "not HEAD" as an edited one.
func TestLocalRun_RefusesACheckoutWithAnUntrackedFileTheLaneWouldSee(t *testing.T) {
	dir, sha := checkout(t)
	os.WriteFile(filepath.Join(dir, "kernel_helper.cu"), []byte("// needed by kernel.cu, never committed\n"), 0o644)
	env, comments, dispatches := relayGitHub(t, sha)
	code, out := runGate(t, env, "local-run", "-pr", "7", "-dir", dir, "-lane", "touch lane.ran")
	if code != 1 || len(*comments) != 0 || len(*dispatches) != 0 {
		t.Errorf("exit %d, %d comments, %d dispatches: %s", code, len(*comments), len(*dispatches), out)
	}
	if _, err := os.Stat(filepath.Join(dir, "lane.ran")); err == nil {
		t.Error("the lane ran in a checkout holding a file HEAD does not have")
	}
}

// A command line the command cannot run exits 2 in one line, before any
// credential is needed: a value outside a flag's closed set is as much a
// refused command line as a missing flag (the flag package already exits
// 2 for -pr abc).
func TestEverySubcommand_AValueOutsideAFlagsChoicesExitsTwo(t *testing.T) {
	env := map[string]string{"GITHUB_REPOSITORY": "o/r"} // no token: the work would fail with 1
	for _, args := range [][]string{
		{"publish", "-head", head, "-tested-ref", merge, "-kind", "bogus"},
		{"publish", "-head", head, "-tested-ref", merge, "-kind", "paid", "-tests-passed", "maybe"},
		{"publish", "-head", head, "-tested-ref", merge, "-kind", "not-required", "-gpu-required", "maybe"},
		{"authorize", "-actor", "maint", "-pr", "7", "-min-role", "owner"},
	} {
		code, out := runGate(t, env, args...)
		if code != 2 || strings.Count(strings.TrimSpace(out), "\n") != 0 || strings.Contains(out, "GITHUB_TOKEN") {
			t.Errorf("gate %q: exit %d, %q; want 2 and one line naming the bad value", args, code, out)
		}
	}
}
