//go:build linux

package agent

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A sweep whose walk could not look everywhere is never a clean one: a
// file of the runner's user past the place the walk failed (here a tree
// deeper than a path may be long) is not known to be gone. (Root only.)
func TestSweep_AWalkErrorIsNeverAClean(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving a file to another user needs root")
	}
	root := t.TempDir()
	fd, err := syscall.Open(root, syscall.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2100 { // "a/d/d/...": longer than PATH_MAX
		name := "d"
		if i == 0 {
			name = "a"
		}
		syscall.Mkdirat(fd, name, 0o755)
		next, err := syscall.Openat(fd, name, syscall.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		syscall.Close(fd)
		fd = next
	}
	syscall.Close(fd)
	z := filepath.Join(root, "z")
	os.WriteFile(z, nil, 0o644)
	os.Chown(z, 65534, 65534)
	if err := sweepUser([]string{root}, 65534); !errors.Is(err, ErrLeftovers) {
		t.Errorf("a sweep whose walk failed: %v, want ErrLeftovers", err)
	}
}

// A runner user who can log in is refused: what a login starts runs
// outside every job's namespaces.
func TestCheckNoLogin_ARunnerUserWhoCanLogInIsRefused(t *testing.T) {
	if err := checkNoLogin("nobody"); err != nil {
		t.Skipf("nobody has a login shell here: %v", err)
	}
	if err := checkNoLogin("root"); !errors.Is(err, ErrConfig) {
		t.Errorf("root, whose shell logs in: %v, want ErrConfig", err)
	}
	if err := checkNoLogin("no-such-user-4f1c"); !errors.Is(err, ErrConfig) {
		t.Errorf("a user whose shell cannot be read: %v, want ErrConfig", err)
	}
}
