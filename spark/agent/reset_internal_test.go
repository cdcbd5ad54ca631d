//go:build linux

package agent

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
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
	if err := sweepUser([]string{root}, jobFiles{uid: 65534}); !errors.Is(err, ErrLeftovers) {
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

// POSIX message queues live in /dev/mqueue, outside every IPC namespace
// a job's runner gets: a queue a job leaves there, and what it holds, is
// swept by default like any other file of the runner's user. (Root: the
// test mounts a queue file system of its own.)
func TestSweep_APOSIXQueueOfTheRunnersUserIsSweptByDefault(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a queue file system needs root")
	}
	if !slices.Contains(runnerIDs{}.scratchRoots(nil), "/dev/mqueue") {
		t.Errorf("the default sweep %v leaves /dev/mqueue, where a job's POSIX queues stay", runnerIDs{}.scratchRoots(nil))
	}
	mq := t.TempDir()
	if err := syscall.Mount("none", mq, "mqueue", 0, ""); err != nil {
		t.Skipf("no mqueue file system here: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(mq, 0) })
	queue := filepath.Join(mq, "job-left-this")
	fd, err := syscall.Open(queue, syscall.O_CREAT|syscall.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	syscall.Close(fd)
	os.Chown(queue, 65534, 65534)
	if err := sweepUser([]string{mq}, jobFiles{uid: 65534}); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if _, err := os.Lstat(queue); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the runner user's queue outlived the sweep: %v", err)
	}
}

// A scratch directory that is a link (a home on another disk, a -scratch
// path behind a link, /tmp on macOS) is swept where it leads.
func TestSweep_AScratchRootThatIsALinkIsSweptWhereItLeads(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving a file to another user needs root")
	}
	dir := t.TempDir()
	real, link := filepath.Join(dir, "real"), filepath.Join(dir, "scratch")
	os.Mkdir(real, 0o777)
	os.Chmod(real, os.ModeSticky|0o777)
	os.Symlink(real, link)
	left := filepath.Join(real, "poison")
	os.WriteFile(left, nil, 0o644)
	os.Chown(left, 65534, 65534)
	if err := sweepUser([]string{link}, jobFiles{uid: 65534}); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if _, err := os.Lstat(left); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file of the runner's user behind a linked scratch root outlived the sweep: %v", err)
	}
}

// A runner user who may write its own home, or replace or make it, is
// refused: what a job sets on the home itself (its mode, times, ACL), or
// a home it put in its place, is no file a sweep removes.
func TestCheckHome_ARunnerUserWhoMayWriteItsHomeIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving a directory to another user needs root")
	}
	dir := t.TempDir()
	own, shared, roots := filepath.Join(dir, "own"), filepath.Join(dir, "shared"), filepath.Join(dir, "roots")
	for _, d := range []string{own, shared, roots} {
		os.Mkdir(d, 0o755)
	}
	os.Chown(own, 65534, 65534)
	os.Chmod(shared, 0o777)
	os.Mkdir(filepath.Join(shared, "home"), 0o755) // root's, in a directory the user may write
	for home, refused := range map[string]bool{own: true, shared: true, roots: false, filepath.Join(dir, "none"): false,
		filepath.Join(shared, "home"): true, filepath.Join(shared, "none"): true} {
		err := checkHome(runnerIDs{uid: 65534, gid: 65534, groups: []uint32{65534}, home: home})
		if refused != errors.Is(err, ErrConfig) {
			t.Errorf("home %s: %v, want refused %v", home, err, refused)
		}
	}
}

// A runner user with subordinate IDs is refused, named by its name or its
// uid: with newuidmap a job could run processes and own files as them,
// out of the reach of the sweep and the kill of the runner's user.
func TestCheckNoSubIDs_ARunnerUserWithSubordinateIDsIsRefused(t *testing.T) {
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		return p
	}
	others := file("others", "alice:100000:65536\nbob:165536:65536\n")
	byName := file("byname", "alice:100000:65536\nrunner:165536:65536\n")
	byUID := file("byuid", "1001:100000:65536\n")
	missing := filepath.Join(dir, "missing")
	if err := checkNoSubIDs("runner", 1001, []string{others, missing}); err != nil {
		t.Errorf("no line of its own: %v", err)
	}
	for _, f := range []string{byName, byUID} {
		if err := checkNoSubIDs("runner", 1001, []string{others, f}); !errors.Is(err, ErrConfig) {
			t.Errorf("%s gives it subordinate IDs: %v, want ErrConfig", filepath.Base(f), err)
		}
	}
}

// A sticky directory (/tmp) guards the entries it has, not a name not
// made yet: a home or swept directory that does not exist yet in one is
// refused, as the runner's user could make it first.
func TestCheckAbove_APathNotYetMadeInAStickyDirectoryIsRefused(t *testing.T) {
	dir := t.TempDir()
	sticky := filepath.Join(dir, "sticky")
	os.Mkdir(sticky, 0o777)
	os.Chmod(sticky, os.ModeSticky|0o777)
	made := filepath.Join(sticky, "made")
	os.Mkdir(made, 0o755) // root's: the user cannot rename it away
	r := runnerIDs{name: "nobody", uid: 65534, gid: 65534, groups: []uint32{65534}}
	for path, refused := range map[string]bool{filepath.Join(made, "x"): false, filepath.Join(sticky, "later"): true,
		filepath.Join(sticky, "a", "b"): true} {
		if err := r.checkAbove(path, "the test's path", "a test"); refused != errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want refused %v", path, err, refused)
		}
	}
}

// A host where users may hard-link files they do not own is refused: a
// job could leave links to root's files for the next, which no sweep by
// owner finds.
func TestCheckHardlinks_AHostWhereUsersLinkOthersFilesIsRefused(t *testing.T) {
	dir := t.TempDir()
	off, on := filepath.Join(dir, "off"), filepath.Join(dir, "on")
	os.WriteFile(off, []byte("0\n"), 0o644)
	os.WriteFile(on, []byte("1\n"), 0o644)
	if err := checkHardlinks(off); !errors.Is(err, ErrConfig) {
		t.Errorf("protected_hardlinks 0: %v, want ErrConfig", err)
	}
	if err := checkHardlinks(on); err != nil {
		t.Errorf("protected_hardlinks 1: %v", err)
	}
	if err := checkHardlinks(filepath.Join(dir, "none")); err != nil {
		t.Errorf("no such setting (not Linux): %v", err)
	}
}
