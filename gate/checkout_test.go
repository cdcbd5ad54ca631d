package gate_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpugate/gpugate/gate"
)

// A local run tests HEAD only: a changed tracked file or an untracked one
// that is not ignored refuses the checkout (ErrDirty); an ignored one does
// not.
func TestCleanHead_OnlyACheckoutThatIsHEADRuns(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	git("config", "user.email", "m@example.com")
	git("config", "user.name", "m")
	os.WriteFile(filepath.Join(dir, "kernel.cu"), []byte("// a kernel\n"), 0o644)
	os.WriteFile(filepath.Join(dir, ".gitignore"), []byte("build/\n"), 0o644)
	git("add", ".")
	git("commit", "-qm", "c")
	head := git("rev-parse", "HEAD")
	os.MkdirAll(filepath.Join(dir, "build"), 0o755)
	os.WriteFile(filepath.Join(dir, "build", "a.o"), nil, 0o644)
	if got, err := gate.CleanHead(ctx, dir); err != nil || got != head {
		t.Fatalf("a clean checkout with an ignored file: %q, %v; want %s", got, err, head)
	}
	os.WriteFile(filepath.Join(dir, "extra.cu"), []byte("// not committed\n"), 0o644)
	if _, err := gate.CleanHead(ctx, dir); !errors.Is(err, gate.ErrDirty) {
		t.Errorf("an untracked file: %v, want ErrDirty", err)
	}
	os.Remove(filepath.Join(dir, "extra.cu"))
	os.WriteFile(filepath.Join(dir, "kernel.cu"), []byte("// changed\n"), 0o644)
	if _, err := gate.CleanHead(ctx, dir); !errors.Is(err, gate.ErrDirty) {
		t.Errorf("a changed file: %v, want ErrDirty", err)
	}
}

// The lane runs the pull request's code: it inherits the environment but
// never a GitHub or RunPod credential.
func TestShellLane_TheLaneGetsNoCredential(t *testing.T) {
	t.Setenv("GITHUB_TOKEN", "ghs_secret")
	t.Setenv("RUNPOD_API_KEY", "rp_secret")
	t.Setenv("GH_TOKEN", "gho_secret")
	t.Setenv("GITHUB_APP_PRIVATE_KEY_FILE", "/keys/app.pem")
	t.Setenv("LANE_SETTING", "kept")
	var out bytes.Buffer
	if err := gate.ShellLane(t.TempDir(), "env", &out)(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"ghs_secret", "rp_secret", "gho_secret", "/keys/app.pem"} {
		if strings.Contains(out.String(), secret) {
			t.Errorf("the lane saw %s", secret)
		}
	}
	if !strings.Contains(out.String(), "LANE_SETTING=kept") {
		t.Error("the lane lost the rest of the environment")
	}
	var exit *exec.ExitError
	if err := gate.ShellLane(t.TempDir(), "exit 3", &out)(context.Background()); !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Errorf("a failing lane: %v", err)
	}
}
