package pathutil

import "testing"

// A path is within a directory only when no ".." step leaves it; a name
// that merely starts with ".." stays inside.
func TestWithin_OnlyAPathThatNeverLeavesTheDirectory(t *testing.T) {
	for path, want := range map[string]bool{
		"/opt/runner":           true,
		"/opt/runner/bin/x":     true,
		"/opt/runner/..data":    true,
		"/opt/runner/../etc":    false,
		"/opt/runner-2.330/bin": false,
		"/opt":                  false,
	} {
		if got := Within("/opt/runner", path); got != want {
			t.Errorf("Within(/opt/runner, %s) = %v, want %v", path, got, want)
		}
	}
}
