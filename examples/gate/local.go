package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// errDirty: the checkout has changes HEAD does not hold, so a lane run
// there would not test HEAD.
var errDirty = errors.New("gate: the checkout has uncommitted changes")

// cleanHead is the full SHA of dir's HEAD, refused while a file the lane
// would see differs from it: a tracked file changed, or an untracked one
// not ignored (the lane would vouch for a file HEAD does not have).
func cleanHead(ctx context.Context, dir string) (string, error) {
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
		return "", fmt.Errorf("%w (%s …): the lane would not test %s; commit or stash them", errDirty, strings.TrimSpace(first), head[:7])
	}
	return head, nil
}

// runLane runs the lane's command in dir, its output on this command's
// stderr (stdout carries the outputs). It gets no GitHub or RunPod
// credential: it runs the pull request's code.
func runLane(ctx context.Context, dir, lane string) error {
	cmd := exec.CommandContext(ctx, "sh", "-c", lane)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, os.Stderr, os.Stderr
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "GITHUB_TOKEN", "GH_TOKEN", "RUNPOD_API_KEY", "GITHUB_APP_PRIVATE_KEY_FILE":
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%q: %w", lane, err)
	}
	return nil
}
