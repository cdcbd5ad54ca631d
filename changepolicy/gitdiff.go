package changepolicy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// ErrHistory is matched by FromGitDiff's error when the merge base of base
// and head is not in the local history (a shallow or partial clone).
var ErrHistory = errors.New("changepolicy: merge base not in local history")

// ErrNotCheckout is FromGitDiff's error for a directory that is not a git
// work tree.
var ErrNotCheckout = errors.New("changepolicy: not a git checkout")

// ErrNameStatus is matched by ParseNameStatus's errors.
var ErrNameStatus = errors.New("changepolicy: malformed name-status output")

// FromGitDiff lists the files changed between the merge base of base and
// head and head (git's three-dot range), with rename detection, by running
// git in dir. Renames and copies yield both paths. A missing merge base, as
// in a shallow clone, is an error that says how to fetch more history.
func FromGitDiff(ctx context.Context, dir, base, head string) ([]Change, error) {
	for _, rev := range []string{base, head} {
		if rev == "" || strings.HasPrefix(rev, "-") {
			return nil, fmt.Errorf("changepolicy: revision %q: pass a commit, branch or tag name", rev)
		}
	}
	if _, err := git(ctx, dir, "rev-parse", "--is-inside-work-tree"); err != nil {
		return nil, fmt.Errorf("%w: %s: run it in a clone of the repository, or pass its path (classify -dir)", ErrNotCheckout, dir)
	}
	if _, err := git(ctx, dir, "merge-base", base, head); err != nil {
		shallow, _ := git(ctx, dir, "rev-parse", "--is-shallow-repository")
		hint := "fetch both revisions with their history (git fetch origin <base> <head>)"
		if strings.TrimSpace(string(shallow)) == "true" {
			hint = "this clone is shallow: fetch full history (actions/checkout with fetch-depth: 0, or git fetch --unshallow)"
		}
		return nil, fmt.Errorf("%w: %s...%s: %s: %v", ErrHistory, base, head, hint, err)
	}
	out, err := git(ctx, dir, "diff", "--name-status", "-z", "-M", "--no-ext-diff", "--no-textconv", base+"..."+head, "--")
	if err != nil {
		return nil, fmt.Errorf("changepolicy: git diff %s...%s: %w", base, head, err)
	}
	return ParseNameStatus(out)
}

func git(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-c", "core.quotepath=off"}, args...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %w: %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// ReadNameStatus is ParseNameStatus over what r holds: a pipe from git
// diff --name-status, say.
func ReadNameStatus(r io.Reader) ([]Change, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("changepolicy: read the change list: %w", err)
	}
	return ParseNameStatus(data)
}

// ReadNameStatusFile is ParseNameStatus over the file at path.
func ReadNameStatusFile(path string) ([]Change, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("changepolicy: %w", err)
	}
	return ParseNameStatus(data)
}

// ParseNameStatus parses `git diff --name-status` output: the -z form (fields
// separated by NUL) when the data holds a NUL byte, else one change per line
// with tab-separated fields (C-quoted paths are unquoted).
func ParseNameStatus(data []byte) ([]Change, error) {
	var fields []string
	if bytes.IndexByte(data, 0) >= 0 {
		fields = strings.Split(strings.TrimSuffix(string(data), "\x00"), "\x00")
		if len(fields) == 1 && fields[0] == "" {
			return nil, nil
		}
	} else {
		for n, line := range strings.Split(string(data), "\n") {
			if strings.TrimSpace(line) == "" {
				continue
			}
			parts := strings.Split(line, "\t")
			for i, p := range parts[1:] {
				if strings.HasPrefix(p, `"`) {
					u, err := strconv.Unquote(p)
					if err != nil {
						return nil, fmt.Errorf("%w: line %d: bad quoted path %s", ErrNameStatus, n+1, p)
					}
					parts[i+1] = u
				}
			}
			if want := 2 + btoi(isCopyOrRename(parts[0])); len(parts) != want {
				return nil, fmt.Errorf("%w: line %d: want %d tab-separated fields, got %d", ErrNameStatus, n+1, want, len(parts))
			}
			fields = append(fields, parts...)
		}
	}
	var changes []Change
	for i := 0; i < len(fields); {
		code := fields[i]
		st, err := gitStatus(code)
		if err != nil {
			return nil, fmt.Errorf("%w: entry %d: %v", ErrNameStatus, len(changes)+1, err)
		}
		n := 1 + btoi(st == Renamed || st == Copied)
		if i+n >= len(fields) {
			return nil, fmt.Errorf("%w: entry %d (%s): missing path", ErrNameStatus, len(changes)+1, code)
		}
		ch := Change{Path: fields[i+n], Status: st}
		if n == 2 {
			ch.OldPath = fields[i+1]
		}
		if ch.Path == "" || (n == 2 && ch.OldPath == "") {
			return nil, fmt.Errorf("%w: entry %d (%s): empty path", ErrNameStatus, len(changes)+1, code)
		}
		changes = append(changes, ch)
		i += n + 1
	}
	return changes, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func isCopyOrRename(code string) bool {
	return strings.HasPrefix(code, "R") || strings.HasPrefix(code, "C")
}

// gitStatus maps git's status letter (with an optional similarity score for
// renames and copies) to a Status.
func gitStatus(code string) (Status, error) {
	if code == "" {
		return "", errors.New("empty status")
	}
	score := code[1:]
	if score != "" {
		if _, err := strconv.Atoi(score); err != nil || !isCopyOrRename(code) {
			return "", fmt.Errorf("status %q is not a git status letter", code)
		}
	}
	switch code[0] {
	case 'A':
		return Added, nil
	case 'D':
		return Removed, nil
	case 'M':
		return Modified, nil
	case 'T':
		return Changed, nil
	case 'R':
		return Renamed, nil
	case 'C':
		return Copied, nil
	case 'U':
		return "", fmt.Errorf("status %q: unmerged path; resolve the merge before classifying", code)
	}
	return "", fmt.Errorf("status %q is not a git status letter", code)
}
