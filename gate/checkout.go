package gate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"

	"github.com/gpugate/gpugate/internal/textlimit"
)

// ErrDirty means the checkout has changes HEAD does not hold, so a lane run
// there would not test HEAD.
var ErrDirty = errors.New("gate: the checkout has uncommitted changes")

// CleanHead is the full SHA of the git checkout dir's HEAD, for a local
// run's LocalRun.Head. It is ErrDirty while a file the lane would see
// differs from HEAD: a tracked file changed, or an untracked one not
// ignored (the lane would vouch for a file HEAD does not have).
func CleanHead(ctx context.Context, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, "git", "-C", dir, "rev-parse", "--verify", "HEAD^{commit}").Output()
	if err != nil {
		return "", fmt.Errorf("gate: %s is not a git checkout with a commit: %w", dir, err)
	}
	head := strings.TrimSpace(string(out))
	status, err := exec.CommandContext(ctx, "git", "-C", dir, "status", "--porcelain", "--untracked-files=normal").Output()
	if err != nil {
		return "", fmt.Errorf("gate: git status in %s: %w", dir, err)
	}
	if s := strings.TrimSpace(string(status)); s != "" {
		first, _, _ := strings.Cut(s, "\n")
		return "", fmt.Errorf("%w (%s …): the lane would not test %s; commit or stash them", ErrDirty, strings.TrimSpace(first), textlimit.ShortSHA(head))
	}
	return head, nil
}

// credentialEnv are the variables a lane never inherits: it runs the pull
// request's code.
var credentialEnv = []string{"GITHUB_TOKEN", "GH_TOKEN", "RUNPOD_API_KEY", "GITHUB_APP_PRIVATE_KEY_FILE"}

// ShellLane is a LocalRun.Lane made of a shell command run with sh -c in
// dir, its output on out. It gets this process's environment without any
// GitHub or RunPod credential (GITHUB_TOKEN, GH_TOKEN, RUNPOD_API_KEY,
// GITHUB_APP_PRIVATE_KEY_FILE): it runs the pull request's code.
func ShellLane(dir, lane string, out io.Writer) func(context.Context) error {
	return func(ctx context.Context) error {
		cmd := exec.CommandContext(ctx, "sh", "-c", lane)
		cmd.Dir, cmd.Stdout, cmd.Stderr = dir, out, out
		for _, kv := range os.Environ() {
			if name, _, _ := strings.Cut(kv, "="); !slices.Contains(credentialEnv, name) {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%q: %w", lane, err)
		}
		return nil
	}
}

// RunLocalCheckout is RunLocal in the git checkout dir: run.Head is the
// checkout's HEAD, which must be clean (CleanHead; ErrDirty otherwise, and
// nothing runs), and the lane is the shell command run.LaneName run there
// without credentials (ShellLane, its output on out). The evidence so
// vouches for exactly the commit that ran.
func RunLocalCheckout(ctx context.Context, repo Repo, comments Commenter, wf Workflows, dir string, run LocalRun, out io.Writer) (LocalRunResult, error) {
	head, err := CleanHead(ctx, dir)
	if err != nil {
		return LocalRunResult{}, err
	}
	run.Head, run.Lane = head, ShellLane(dir, run.LaneName, out)
	return RunLocal(ctx, repo, comments, wf, run)
}
