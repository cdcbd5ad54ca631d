//go:build unix

package agent

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/gpugate/gpugate/internal/pathutil"
)

// maxInstallEntries bounds the runner's install: the Actions runner has a
// few thousand files, and a -runner outside a directory of its own would
// copy whatever surrounds it into every lease.
const maxInstallEntries = 50_000

// runnerIDs is the runner's user: its IDs and its groups.
type runnerIDs struct {
	name     string
	uid, gid uint32
	groups   []uint32
	home     string
}

// lookupRunner is user name's IDs, groups and home.
func lookupRunner(name string) (runnerIDs, error) {
	uid, gid, err := lookupUser(name)
	if err != nil {
		return runnerIDs{}, err
	}
	ids := runnerIDs{name: name, uid: uid, gid: gid, groups: []uint32{gid}}
	if u, err := user.Lookup(name); err == nil {
		ids.home = u.HomeDir
		gids, _ := u.GroupIds()
		for _, g := range gids {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				ids.groups = append(ids.groups, uint32(n))
			}
		}
	}
	return ids, nil
}

// noLoginShells are the shells that let no one log in.
var noLoginShells = []string{"/usr/sbin/nologin", "/sbin/nologin", "/usr/bin/nologin", "/bin/false", "/usr/bin/false"}

// checkNoLogin refuses a runner user who can log in: a login (ssh, a
// console) starts its processes outside every job's namespaces, where
// they could outlast a cleanup or reach the next job.
func checkNoLogin(name string) error {
	entry := ""
	if out, err := exec.Command("getent", "passwd", name).Output(); err == nil {
		entry = strings.TrimSpace(string(out))
	} else if data, err := os.ReadFile("/etc/passwd"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(line, name+":") {
				entry = line
			}
		}
	}
	f := strings.Split(entry, ":")
	if len(f) < 7 {
		return fmt.Errorf("%w: runner user %s: its login shell cannot be read: give it /usr/sbin/nologin (usermod -s /usr/sbin/nologin %s)", ErrConfig, name, name)
	}
	if !slices.Contains(noLoginShells, f[6]) {
		return fmt.Errorf("%w: runner user %s can log in (its shell is %s), and what a login starts runs outside the jobs' namespaces: usermod -s /usr/sbin/nologin %s", ErrConfig, name, f[6], name)
	}
	return nil
}

// subIDFiles list the subordinate IDs each user may map (newuidmap,
// newgidmap).
var subIDFiles = []string{"/etc/subuid", "/etc/subgid"}

// checkNoSubIDs refuses a runner user that files give subordinate IDs:
// with newuidmap a job could make a user namespace and own files and run
// processes as those IDs, out of reach of the sweep and of the kill of
// the runner's user. A file that does not exist gives none.
func checkNoSubIDs(name string, uid uint32, files []string) error {
	id := strconv.FormatUint(uint64(uid), 10)
	for _, file := range files {
		data, err := os.ReadFile(file)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%w: read %s to see that runner user %s has no subordinate IDs: %w", ErrConfig, file, name, err)
		}
		for n, line := range strings.Split(string(data), "\n") {
			if owner, _, _ := strings.Cut(strings.TrimSpace(line), ":"); owner == name || owner == id {
				return fmt.Errorf("%w: runner user %s has subordinate IDs (%s line %d): a job could run processes and own files as them, out of the cleanup's reach; remove them (usermod --del-subuids FIRST-LAST --del-subgids FIRST-LAST %s)", ErrConfig, name, file, n+1, name)
			}
		}
	}
	return nil
}

// protectedHardlinks is where Linux says whether users may hard-link
// files they do not own.
const protectedHardlinks = "/proc/sys/fs/protected_hardlinks"

// checkHardlinks refuses a host (file, when it exists, reads 0) where
// users may hard-link files they do not own: a job could leave links to
// any root-owned file where the next job reads them, and no sweep by
// owner finds them.
func checkHardlinks(file string) error {
	data, err := os.ReadFile(file)
	if err != nil || strings.TrimSpace(string(data)) != "0" {
		return nil
	}
	return fmt.Errorf("%w: %s is 0, so a job could hard-link files it does not own and leave them for the next: set it to 1 (sysctl fs.protected_hardlinks=1, in /etc/sysctl.d to keep it)", ErrConfig, file)
}

// checkAbove refuses a path (what names it) whose directories above it
// the runner's user may write, or a link above it that user owns: it
// could then put something of its own in its place (why says what that
// would do). A sticky directory (/tmp) guards what exists in it, not a
// name not made yet: below a part of the path that does not exist, the
// nearest directory that does must not be writable at all.
func (r runnerIDs) checkAbove(path, what, why string) error {
	_, err := os.Lstat(path)
	missing := errors.Is(err, fs.ErrNotExist) // the entry below dir is not made yet
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		var lst, st syscall.Stat_t
		lerr := syscall.Lstat(dir, &lst)
		err := syscall.Stat(dir, &st)
		switch {
		case errors.Is(lerr, syscall.ENOENT):
			missing = true
		case lerr != nil || err != nil:
			return fmt.Errorf("%w: %s %s: %w", ErrConfig, what, path, cmp.Or(lerr, err))
		default:
			cause := ""
			acl, aerr := aclOf(dir)
			switch {
			case lst.Mode&syscall.S_IFMT == syscall.S_IFLNK && lst.Uid == r.uid:
				cause = "owns the link " + dir
			case r.writableBy(&st, !missing):
				cause = "may write " + dir
			case aerr != nil:
				return fmt.Errorf("%w: %s, above %s %s: %w", ErrConfig, dir, what, path, aerr)
			case acl:
				cause = "may be let write " + dir + " by its ACL"
			}
			if cause != "" {
				return fmt.Errorf("%w: runner user %s %s, above %s %s: %s; make it root's, not writable by others, with no ACL", ErrConfig, r.name, cause, what, path, why)
			}
			missing = false
		}
		if dir == filepath.Dir(dir) {
			return nil
		}
	}
}

// checkHome refuses a runner user who may write its home, or replace or
// make it: what a job sets on the home itself (its mode, its times, an
// ACL) is not a file the sweep removes, and would reach the next job.
// Each job has a HOME of its own in its lease's directory; the user needs
// none.
func checkHome(r runnerIDs) error {
	if r.home == "" {
		return nil
	}
	fix := "each job gets a HOME of its own, so give the user none (usermod -d /nonexistent " + r.name + ")"
	var st syscall.Stat_t
	if syscall.Stat(r.home, &st) == nil {
		acl, err := aclOf(r.home)
		switch {
		case err != nil:
			return fmt.Errorf("%w: runner user %s's home %s: %w", ErrConfig, r.name, r.home, err)
		case r.writableBy(&st, false) || acl:
			return fmt.Errorf("%w: runner user %s may write its home %s (by its owner, mode or an ACL): %s, or make it root's, not writable by others, with no ACL", ErrConfig, r.name, r.home, fix)
		}
	}
	return r.checkAbove(r.home, "its home", "a job could put a home of its own there for the next ("+fix+")")
}

// checkScratch refuses a directory the sweep keeps (a scratch root) that
// the runner's user owns or could replace: what a job left on it or put
// in its place would outlive the sweep. A root that is a link is checked
// where it lies and where it leads.
func (r runnerIDs) checkScratch(roots []string) error {
	for _, root := range roots {
		paths := []string{root}
		if resolved, err := filepath.EvalSymlinks(root); err == nil && resolved != root {
			paths = append(paths, resolved)
		}
		for _, p := range paths {
			var st syscall.Stat_t
			if syscall.Lstat(p, &st) == nil && st.Uid == r.uid {
				return fmt.Errorf("%w: runner user %s owns %s, a directory swept after each lease (-scratch): what a job sets on it would reach the next; make it root's", ErrConfig, r.name, p)
			}
			if err := r.checkAbove(p, "the swept directory", "a job could put a directory of its own in its place, which the sweep keeps"); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkWorkRoot refuses a work root the runner's user owns, may write or
// could replace (what a job left in it, beside the lease directories,
// would reach the next; the agent's ID and lock are there), and one where
// links to the install cannot be made (another file system, or another
// mount of the same one): each job's runner is hard links to the install.
func (r runnerIDs) checkWorkRoot(runnerCmd, workRoot string) error {
	var st syscall.Stat_t
	if err := syscall.Stat(workRoot, &st); err != nil {
		return fmt.Errorf("%w: the work root: %w", ErrConfig, err)
	}
	acl, err := aclOf(workRoot)
	if err != nil || acl || r.writableBy(&st, false) {
		return fmt.Errorf("%w: runner user %s may write the work root %s (by its owner, mode or an ACL: %v): make it root's, not writable by others, with no ACL", ErrConfig, r.name, workRoot, err)
	}
	if err := r.checkAbove(workRoot, "the work root", "a job could put a work root of its own in its place"); err != nil {
		return err
	}
	// One name, removed first: a check a crash left behind is no link
	// to the install outside it for ever after.
	probe := filepath.Join(workRoot, ".link-check")
	if err := os.Remove(probe); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: the work root's link check: %w", ErrConfig, err)
	}
	if err := os.Link(runnerCmd, probe); err != nil {
		return fmt.Errorf("%w: the work root %s cannot hold links to the runner's install %s (%w): each job's runner is hard links to it, so put the work root on the same mount as the install", ErrConfig, workRoot, filepath.Dir(runnerCmd), err)
	}
	if err := os.Remove(probe); err != nil {
		return fmt.Errorf("%w: the work root's link check: %w", ErrConfig, err)
	}
	return nil
}

// noCoreDumps makes cmd, a job's runner, start with no core dumps, its
// hard limit too, so the job cannot raise it: a job's core dump could
// hold its secrets, and a crash handler writes it as another user, where
// no sweep finds it (systemd-coredump honours the limit). Only the job's:
// the agent and its other commands keep the host's.
func noCoreDumps(cmd *exec.Cmd) {
	cmd.Args = append([]string{"/bin/sh", "-c", `ulimit -c 0 && exec "$0" "$@"`}, cmd.Args...)
	cmd.Path = "/bin/sh"
}

// writableBy reports whether the runner's user may change the entry
// whose lstat is st: it owns it, or a write bit applies to it. A
// directory with the sticky bit (/tmp) lets it add entries, never rename
// another user's, so for what lies below only ownership counts there.
func (r runnerIDs) writableBy(st *syscall.Stat_t, sticky bool) bool {
	mode := uint32(st.Mode)
	switch {
	case st.Uid == r.uid:
		return true
	case sticky && mode&syscall.S_ISVTX != 0:
		return false
	case mode&0o002 != 0:
		return true
	case mode&0o020 != 0 && slices.Contains(r.groups, st.Gid):
		return true
	}
	return false
}

// fileID is a file's identity: its device and inode.
type fileID struct{ dev, ino uint64 }

// installFile is one of the install's files: a path to it and how many
// of the install's own paths name it.
type installFile struct {
	path  string
	nlink uint64
}

// installLinks are the install's regular files. Each job's copy links to
// them and the job owns the copy's directories, so it can move a link
// anywhere it can write on the same file system: a link left there, owned
// by root, is a file of the job's that no sweep by owner finds.
type installLinks struct {
	install string
	files   map[fileID]installFile
}

// leftovers names up to three install files with more links than the
// install's own paths to them: with no job's copy there, each extra one
// is a link a job moved out of its copy, somewhere on this file system
// (or a hard-linked copy of the install, which a job's looks the same
// as). Counted from the install alone, so a restarted agent sees them
// too. A file replaced or removed since the check (an upgrade) is not
// counted.
func (l installLinks) leftovers() error {
	var more []string
	for id, f := range l.files {
		var st syscall.Stat_t
		if err := syscall.Lstat(f.path, &st); err != nil || uint64(st.Dev) != id.dev || st.Ino != id.ino {
			continue
		}
		if n := uint64(st.Nlink); n > f.nlink {
			more = append(more, fmt.Sprintf("%s (%d links, %d in the install)", f.path, n, f.nlink))
		}
	}
	if len(more) == 0 {
		return nil
	}
	slices.Sort(more)
	return fmt.Errorf("%w: %d file(s) of the runner's install have links outside it, which a job can leave by moving its copy's files: %s: remove them (find / -xdev -samefile FILE), and keep no hard-linked copy of the install", ErrLeftovers, len(more), strings.Join(more[:min(3, len(more))], ", "))
}

// checkInstall refuses a runner install (the directory of run.sh) that the
// runner's user could change, as the path to it or anything in it (a job
// could then rewrite the runner of the next job), one with more than
// maxInstallEntries entries, and a work root inside it. It returns the
// install's files and their link counts.
func checkInstall(install, workRoot string, r runnerIDs) (installLinks, error) {
	fix := fmt.Sprintf("install the runner as root (chown -R root:root %s; chmod -R go-w %s): each job runs its own copy of it", install, install)
	if err := r.checkAbove(install, "the runner's install", "it could replace the runner"); err != nil {
		return installLinks{}, err
	}
	if pathutil.Within(install, workRoot) {
		return installLinks{}, fmt.Errorf("%w: the work root %s is inside the runner's install %s: put it elsewhere", ErrConfig, workRoot, install)
	}
	links := installLinks{install: install, files: map[fileID]installFile{}}
	n := 0
	err := filepath.WalkDir(install, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("%w: the runner's install: %w", ErrConfig, err)
		}
		if n++; n > maxInstallEntries {
			return fmt.Errorf("%w: the runner's install %s has more than %d entries: -runner must be the Actions runner's run.sh in a directory of its own", ErrConfig, install, maxInstallEntries)
		}
		if skipInstall(install, path) {
			return fs.SkipDir
		}
		info, err := d.Info()
		if err != nil {
			return fmt.Errorf("%w: the runner's install: %w", ErrConfig, err)
		}
		if d.Type()&fs.ModeSymlink != 0 {
			// A link's own mode means nothing; what it names is checked
			// in the install, and one that leaves it is refused (every
			// job's copy would name the same place outside).
			target, err := filepath.EvalSymlinks(path)
			if err != nil || !pathutil.Within(install, target) {
				return fmt.Errorf("%w: %s in the runner's install links outside it (%w): keep the runner's links inside its directory", ErrConfig, path, err)
			}
			return nil
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && r.writableBy(st, false) {
			return fmt.Errorf("%w: runner user %s can write %s in the runner's install: %s", ErrConfig, r.name, path, fix)
		} else if ok && d.Type().IsRegular() {
			id := fileID{uint64(st.Dev), st.Ino}
			f := links.files[id]
			if f.path == "" {
				f.path = path
			}
			f.nlink++
			links.files[id] = f
		}
		if acl, err := aclOf(path); err != nil {
			return fmt.Errorf("%w: the runner's install: %w", ErrConfig, err)
		} else if acl {
			return fmt.Errorf("%w: %s in the runner's install has an ACL, which may let runner user %s write it: remove it (setfacl -R -b %s)", ErrConfig, path, r.name, install)
		}
		return nil
	})
	if err != nil {
		return installLinks{}, err
	}
	return links, nil
}

// skipInstall reports whether path is a work or log folder at the top of
// the install (from a runner that ran there before): no job's copy has it.
func skipInstall(install, path string) bool {
	return filepath.Dir(path) == install && (filepath.Base(path) == "_work" || filepath.Base(path) == "_diag")
}

// freshRunner makes dst the lease's own copy of the runner's install:
// its directories made anew and owned by the runner's user, its files
// hard links to the install's (which that user cannot write), so whatever the job writes there, in whatever
// path (its work folder, logs, an update of the runner), goes with the
// lease's directory.
func freshRunner(install, dst string, r runnerIDs) error {
	return filepath.WalkDir(install, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if skipInstall(install, path) {
			return fs.SkipDir
		}
		rel, _ := filepath.Rel(install, path)
		to := filepath.Join(dst, rel)
		switch t := d.Type(); {
		case t.IsDir():
			info, err := d.Info()
			if err != nil {
				return err
			}
			if err := os.Mkdir(to, info.Mode().Perm()|0o700); err != nil {
				return err
			}
			return os.Lchown(to, int(r.uid), int(r.gid))
		case t&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case t.IsRegular():
			return os.Link(path, to)
		}
		return nil // a FIFO, socket or device: no runner's
	})
}

// scratchRoots are where the runner's user can leave files outside the
// lease's directory: its home and the directories a stock Linux lets
// every user write.
func (r runnerIDs) scratchRoots(extra []string) []string {
	roots := []string{"/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue", "/run/lock", "/var/crash"}
	if r.home != "" {
		roots = append(roots, r.home)
	}
	if extra != nil {
		roots = extra
	}
	return roots
}

// jobFiles are what a sweep removes: whatever the runner's user owns,
// and links to the install's files outside the install, which a job moved
// out of its copy (owned by root, no sweep by owner finds them).
type jobFiles struct {
	uid   uint32
	links installLinks
}

func (j jobFiles) match(path string, st *syscall.Stat_t) bool {
	if st.Uid == j.uid {
		return true
	}
	_, ok := j.links.files[fileID{uint64(st.Dev), st.Ino}]
	return ok && !pathutil.Within(j.links.install, path)
}

// sweepUser removes the job's files under roots (the roots themselves
// kept, a root that is a link walked where it leads; symbolic links
// below never followed; other file systems mounted below not entered),
// then looks again: what remains is ErrLeftovers, naming it, as is a link
// to the install's files anywhere on its file system.
func sweepUser(roots []string, job jobFiles) error {
	uid := job.uid
	var errs []error
	for _, root := range roots {
		err := walkOwned(root, job, func(path string) error {
			if err := removeTree(path); err != nil {
				errs = append(errs, err)
			}
			return nil
		})
		if err != nil {
			errs = append(errs, err)
		}
	}
	var left []string
	for _, root := range roots {
		_ = walkOwned(root, job, func(path string) error {
			left = append(left, shorten(path))
			if len(left) == 3 {
				return fs.SkipAll
			}
			return nil
		})
	}
	switch {
	case len(left) > 0:
		return fmt.Errorf("%w: %s and what else runner user %d owns there: %w", ErrLeftovers, strings.Join(left, ", "), uid, errors.Join(errs...))
	case len(errs) > 0:
		// What the walk could not reach may hold that user's files.
		return fmt.Errorf("%w: not every file runner user %d may own was looked at: %w", ErrLeftovers, uid, errors.Join(errs...))
	}
	return job.links.leftovers()
}

// walkOwned calls found for each entry under root that is the job's
// (found's fs.SkipAll stops the walk), not entering it, a symbolic link
// or another file system. A root that is a link is walked where it leads;
// one that does not exist has none.
func walkOwned(root string, job jobFiles, found func(string) error) error {
	if resolved, err := filepath.EvalSymlinks(root); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("agent: look for the runner user's files in %s: %w", root, err)
	} else {
		root = resolved
	}
	var top syscall.Stat_t
	if err := syscall.Lstat(root, &top); err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return nil
		}
		return fmt.Errorf("agent: look for the runner user's files in %s: %w", root, err)
	}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if path == root {
			return nil
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(path, &st); errors.Is(err, syscall.ENOENT) {
			return nil // gone since it was listed
		} else if err != nil {
			return err // what cannot be looked at is never clean
		}
		switch {
		case st.Dev != top.Dev:
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		case job.match(path, &st):
			if err := found(path); err != nil {
				return err
			}
			if d.IsDir() {
				return fs.SkipDir
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.SkipAll) {
		return fmt.Errorf("agent: look for the runner user's files in %s: %w", root, err)
	}
	return nil
}

// removeTree removes path and all it holds. A tree deeper than the
// process may hold descriptors for defeats os.RemoveAll, which keeps one
// open per level; GNU rm walks any depth, so it takes over then.
func removeTree(path string) error {
	err := os.RemoveAll(path)
	if err == nil {
		return nil
	}
	args := []string{"-rf", "--", path}
	if runtime.GOOS == "linux" {
		args = []string{"-rf", "--one-file-system", "--", path}
	}
	if exec.Command("rm", args...).Run() == nil {
		if _, serr := os.Lstat(path); errors.Is(serr, fs.ErrNotExist) {
			return nil
		}
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = &fs.PathError{Op: pe.Op, Path: shorten(pe.Path), Err: pe.Err}
	}
	return fmt.Errorf("agent: remove %s: %w", shorten(path), err)
}
