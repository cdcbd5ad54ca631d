package actiontest

// Which release install.sh takes, and what each per-step action requires.

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The Action installs the binary of its own version. Inside another
// composite action, github.action_ref is the outer action's ref, not
// gpugate's (actions/runner#2473, comment of 2023-10-23): the ref the
// runner checked gpugate out at, .../_actions/gpugate/gpugate/REF/, is the
// one whose scripts run, so it is the release to install.
func TestInstall_TheReleaseIsTheOneTheActionIsCheckedOutAt(t *testing.T) {
	needTools(t)
	rel := serveRelease(t, fakeReleases(t, nil))
	checkout := filepath.Join(t.TempDir(), "_actions", "gpugate", "gpugate", "v1.3.0")
	os.MkdirAll(filepath.Join(checkout, "classify"), 0o755)
	abs, _ := filepath.Abs(root)
	os.Symlink(filepath.Join(abs, "scripts"), filepath.Join(checkout, "scripts"))
	env := runnerEnv(t, rel, "Linux", "X64", "")
	env["ACTION_PATH"] = filepath.Join(checkout, "classify") + "/.."
	// A wrapper action of the adopter's, used at its own v1.2.3, whose
	// ref is what github.action_ref says inside the nested gpugate step.
	env["GPUGATE_ACTION_REF"] = "v1.2.3"
	got := install(t, env)
	took := rel.took()
	if got.code != 0 || len(took) == 0 || took[0] != "/v1.3.0/gpugate_1.3.0_linux_amd64.tar.gz" {
		t.Errorf("exit %d, requested %v; want the release the action is checked out at (v1.3.0):\n%s", got.code, took, got.log)
	}
}

// required: true where required: a per-step action run with only its
// required inputs (the rest at their defaults) must never have its
// program refuse the command line (exit 2). Lacking a credential is a
// work failure (1), which is fine here. publish's program requires -head
// and -tested-ref, which publish/action.yml declares optional.
func TestEveryPerStepActionMarksRequiredWhatItsProgramRequires(t *testing.T) {
	if testing.Short() {
		t.Skip("builds gate")
	}
	needTools(t)
	abs, _ := filepath.Abs(root)
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/", "./examples/gate")
	build.Dir = abs
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	placeholders := map[string]string{
		"pr": "7", "head-sha": strings.Repeat("1", 40), "tested-ref": strings.Repeat("2", 40), "kind": "paid",
	}
	github := map[string]string{"${{ github.actor }}": "maint", "${{ github.event.pull_request.number }}": "", "${{ github.token }}": ""}
	for _, step := range []string{"authorize", "reuse", "publish", "local-relay", "recover"} {
		t.Run(step, func(t *testing.T) {
			a := loadActionFile(t, step+"/action.yml")
			env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "RUNNER_TEMP=" + t.TempDir(),
				"GITHUB_REPOSITORY=o/r", "GITHUB_WORKSPACE=" + abs, "ACTION_PATH=" + abs, "GPUGATE_STEP=" + step, "GPUGATE_BIN=" + bin}
			for name, in := range a.Inputs {
				v := in.Default
				if g, ok := github[v]; ok {
					v = g
				}
				if in.Required {
					p, ok := placeholders[name]
					if !ok {
						t.Fatalf("no placeholder for required input %s", name)
					}
					v = p
				}
				if envName(name) == "GITHUB_TOKEN" {
					continue // no credential: the program stops at it with exit 1
				}
				env = append(env, envName(name)+"="+v)
			}
			cmd := exec.Command("bash", filepath.Join(abs, "scripts/action.sh"))
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if errors.As(err, &ee) && ee.ExitCode() == 2 {
				t.Errorf("%s/action.yml with its required inputs only: the program refused its command line (exit 2): %s", step, strings.TrimSpace(string(out)))
			}
		})
	}
}

// Probes that held: a checksums.txt listing the archive twice, a line for
// another file only, a redirect to another host (over http), a runner
// architecture no release has, and pre-release and build-suffixed tags.
func TestInstall_ReviewProbesThatHeld(t *testing.T) {
	needTools(t)
	t.Run("the archive listed twice", func(t *testing.T) {
		rel := serveRelease(t, fakeReleases(t, func(tag, sums string) string { return sums + sums }))
		env := runnerEnv(t, rel, "Linux", "X64", "")
		env["GPUGATE_ACTION_REF"] = "v1.2.3"
		if got := install(t, env); got.code == 0 || !strings.Contains(got.log, "lists no single SHA-256") {
			t.Errorf("exit %d:\n%s", got.code, got.log)
		}
	})
	t.Run("a line for a look-alike file only", func(t *testing.T) {
		rel := serveRelease(t, fakeReleases(t, func(tag, sums string) string {
			return strings.ReplaceAll(sums, "  gpugate_1.2.3_linux_amd64.tar.gz", "  x/gpugate_1.2.3_linux_amd64.tar.gz")
		}))
		env := runnerEnv(t, rel, "Linux", "X64", "")
		env["GPUGATE_ACTION_REF"] = "v1.2.3"
		if got := install(t, env); got.code == 0 {
			t.Errorf("exit 0:\n%s", got.log)
		}
	})
	t.Run("an unknown architecture", func(t *testing.T) {
		rel := serveRelease(t, fakeReleases(t, nil))
		env := runnerEnv(t, rel, "Linux", "ARM", "")
		env["GPUGATE_ACTION_REF"] = "v1.2.3"
		if got := install(t, env); got.code != 0 || got.outputs["build"] != "true" || len(rel.took()) != 0 {
			t.Errorf("exit %d, %v:\n%s", got.code, got.outputs, got.log)
		}
	})
	t.Run("pre-release tag", func(t *testing.T) {
		rel := serveRelease(t, fakeReleases(t, nil))
		env := runnerEnv(t, rel, "Linux", "X64", "")
		env["GPUGATE_ACTION_REF"] = "v1.2.3-rc.1"
		got := install(t, env)
		if took := rel.took(); got.code != 0 || len(took) != 1 || took[0] != "/v1.2.3-rc.1/gpugate_1.2.3-rc.1_linux_amd64.tar.gz" {
			t.Errorf("exit %d, requested %v:\n%s", got.code, took, got.log)
		}
	})
	t.Run("a redirect to another host", func(t *testing.T) {
		other := serveRelease(t, fakeReleases(t, nil))
		redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+r.URL.Path, http.StatusFound)
		}))
		t.Cleanup(redirect.Close)
		env := runnerEnv(t, nil, "Linux", "X64", "")
		env["GPUGATE_RELEASE_URL"], env["GPUGATE_ACTION_REF"] = redirect.URL, "v1.2.3"
		got := install(t, env)
		// curl --proto-redir =https: an http redirect is not followed.
		if took := other.took(); got.code != 0 || got.outputs["build"] != "true" || len(took) != 0 {
			t.Errorf("exit %d, the other host was asked %v:\n%s", got.code, took, got.log)
		}
	})
}
