package actiontest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
)

// needTools skips a test that drives the installer where bash, curl or tar
// is missing: scripts/install.sh needs them on every runner.
func needTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range append([]string{"bash", "curl", "tar"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("scripts/install.sh needs %s, which is not installed here", tool)
		}
	}
}

// release is a fake GitHub release server on loopback: it serves
// /<tag>/<asset> and records every request.
type release struct {
	*httptest.Server
	mu       sync.Mutex
	assets   map[string][]byte
	requests []string
}

func serveRelease(t *testing.T, assets map[string][]byte) *release {
	t.Helper()
	r := &release{assets: assets}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.requests = append(r.requests, req.URL.Path)
		data, ok := r.assets[req.URL.Path]
		r.mu.Unlock()
		if req.Header.Get("Authorization") != "" {
			t.Errorf("the installer sent credentials to %s", req.URL.Path)
		}
		switch {
		case !ok:
			http.NotFound(w, req)
		case data == nil: // a download that breaks
			http.Error(w, "denied", http.StatusForbidden)
		default:
			w.Write(data)
		}
	}))
	t.Cleanup(r.Close)
	return r
}

// took returns the paths requested so far, and forgets them.
func (r *release) took() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.requests
	r.requests = nil
	return got
}

// tarball packs files (name: content) as a release archive: flat,
// executable.
func tarball(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o755, Size: int64(len(files[n])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(files[n]))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	return buf.Bytes()
}

// fakeCommand is a release's stand-in command: it says what it is and
// where it was built for, records that it ran, and writes an output.
func fakeCommand(name, platform, tag string) string {
	return fmt.Sprintf("#!/usr/bin/env bash\necho \"fake %s %s %s ran: $*\"\necho ran >>\"$HOME/ran\"\necho \"class=from-%s\" >>\"${GITHUB_OUTPUT:-/dev/null}\"\n", name, platform, tag, tag)
}

// fakeReleases are tags v1.2.3 and v1.3.0, each with Linux amd64 and
// arm64 archives of classify and gate, and a macOS arm64 one of classify
// only (the CLIs), with their checksums.txt. corrupt, if set, rewrites a
// tag's checksums.txt.
func fakeReleases(t *testing.T, corrupt func(tag, sums string) string) map[string][]byte {
	t.Helper()
	assets := map[string][]byte{}
	for _, tag := range []string{"v1.2.3", "v1.3.0"} {
		var sums strings.Builder
		for _, p := range []string{"linux_amd64", "linux_arm64", "darwin_arm64"} {
			files := map[string]string{"classify": fakeCommand("classify", p, tag), "LICENSE": "MIT\n"}
			if strings.HasPrefix(p, "linux") {
				files["gate"] = fakeCommand("gate", p, tag)
			}
			name := "gpugate_" + strings.TrimPrefix(tag, "v") + "_" + p + ".tar.gz"
			data := tarball(t, files)
			assets["/"+tag+"/"+name] = data
			sum := sha256.Sum256(data)
			fmt.Fprintf(&sums, "%s  %s\n", hex.EncodeToString(sum[:]), name)
		}
		s := sums.String()
		if corrupt != nil {
			s = corrupt(tag, s)
		}
		if s != "" {
			assets["/"+tag+"/checksums.txt"] = []byte(s)
		}
	}
	return assets
}

// installed is what one run of scripts/install.sh did.
type installed struct {
	code    int
	log     string
	outputs map[string]string
}

// install runs scripts/install.sh as an action's install step runs it,
// with the runner's environment env (RUNNER_TEMP, RUNNER_OS, ...).
func install(t *testing.T, env map[string]string) installed {
	t.Helper()
	abs, _ := filepath.Abs(root)
	out := filepath.Join(t.TempDir(), "output")
	cmd := exec.Command("bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", installLine)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GITHUB_OUTPUT=" + out, "ACTION_PATH=" + abs}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	log, err := cmd.CombinedOutput()
	res := installed{log: string(log)}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		res.code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	written, _ := os.ReadFile(out)
	res.outputs = parseOutputs(string(written))
	return res
}

// parseOutputs reads a GITHUB_OUTPUT file: name=value lines and
// name<<DELIMITER blocks.
func parseOutputs(s string) map[string]string {
	out := map[string]string{}
	lines := strings.Split(s, "\n")
	for i := 0; i < len(lines); i++ {
		if name, delim, ok := strings.Cut(lines[i], "<<"); ok && !strings.Contains(name, "=") {
			var v []string
			for i++; i < len(lines) && lines[i] != delim; i++ {
				v = append(v, lines[i])
			}
			out[name] = strings.Join(v, "\n")
		} else if name, v, ok := strings.Cut(lines[i], "="); ok {
			out[name] = v
		}
	}
	return out
}

// actionRun is what running an action's steps did, as the runner runs a
// composite action: each run step under bash -eo pipefail with its env
// evaluated, a uses step (setup-go) only noted.
type actionRun struct {
	code    int
	log     string
	outputs map[string]string // the action's outputs
	setupGo bool              // whether its setup-go step would have run
}

var expression = regexp.MustCompile(`\$\{\{\s*(.*?)\s*\}\}`)

// runAction runs the action at rel (e.g. classify/action.yml) with inputs,
// at the ref, in the runner environment env.
func runAction(t *testing.T, rel, ref string, inputs map[string]string, env map[string]string) actionRun {
	t.Helper()
	a := loadActionFile(t, rel)
	abs, _ := filepath.Abs(root)
	github := map[string]string{
		"github.action_ref": ref, "github.action_path": filepath.Join(abs, filepath.Dir(rel)),
		"github.token": "ghs_action_test_token", "github.actor": "maint", "github.event.pull_request.number": "",
	}
	steps := map[string]map[string]string{}
	var eval func(expr string) string
	eval = func(expr string) string {
		if v, ok := github[expr]; ok {
			return v
		}
		if name, ok := strings.CutPrefix(expr, "inputs."); ok {
			if v, ok := inputs[name]; ok {
				return v
			}
			in, ok := a.Inputs[name]
			if !ok {
				t.Fatalf("%s: no input %s", rel, name)
			}
			return expression.ReplaceAllStringFunc(in.Default, func(m string) string { return eval(expression.FindStringSubmatch(m)[1]) })
		}
		if m := regexp.MustCompile(`^steps\.([a-z-]+)\.outputs\.([a-z_-]+)$`).FindStringSubmatch(expr); m != nil {
			return steps[m[1]][m[2]]
		}
		if m := regexp.MustCompile(`^(\S+) (==|!=) '([^']*)'$`).FindStringSubmatch(expr); m != nil {
			if (eval(m[1]) == m[3]) == (m[2] == "==") {
				return "true"
			}
			return "false"
		}
		t.Fatalf("%s: cannot evaluate %q", rel, expr)
		return ""
	}
	subst := func(s string) string {
		return expression.ReplaceAllStringFunc(s, func(m string) string { return eval(expression.FindStringSubmatch(m)[1]) })
	}
	var res actionRun
	var log strings.Builder
	for _, s := range a.Runs.Steps {
		if s.If != "" && eval(s.If) != "true" {
			continue
		}
		if s.Uses != "" {
			if !strings.HasPrefix(s.Uses, "actions/setup-go@") {
				t.Fatalf("%s: cannot run %s here", rel, s.Uses)
			}
			res.setupGo = true
			continue
		}
		out := filepath.Join(t.TempDir(), "output")
		cmd := exec.Command("bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", s.Run)
		cmd.Env = []string{"GITHUB_OUTPUT=" + out}
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		for k, v := range s.Env {
			cmd.Env = append(cmd.Env, k+"="+subst(v))
		}
		cmd.Dir = env["GITHUB_WORKSPACE"]
		got, err := cmd.CombinedOutput()
		log.Write(got)
		written, _ := os.ReadFile(out)
		steps[s.ID] = parseOutputs(string(written))
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			res.code = ee.ExitCode()
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	res.log = log.String()
	res.outputs = map[string]string{}
	if res.code == 0 {
		for name, out := range a.Outputs {
			res.outputs[name] = subst(out.Value)
		}
	}
	return res
}

// runnerEnv is a hosted runner's environment for one job: its own
// RUNNER_TEMP and HOME, the platform, and the release server. path is
// prepended to PATH.
func runnerEnv(t *testing.T, rel *release, runnerOS, arch, path string) map[string]string {
	abs, _ := filepath.Abs(root)
	p := os.Getenv("PATH")
	if path != "" {
		p = path + ":" + p
	}
	env := map[string]string{"PATH": p, "HOME": t.TempDir(), "RUNNER_TEMP": t.TempDir(), "RUNNER_OS": runnerOS, "RUNNER_ARCH": arch,
		"GITHUB_WORKSPACE": abs, "GITHUB_REPOSITORY": "o/r", "GITHUB_STEP_SUMMARY": filepath.Join(t.TempDir(), "summary")}
	if rel != nil {
		env["GPUGATE_RELEASE_URL"] = rel.URL
	}
	// Where a SHA pin's release tag is looked up: a repository with no
	// tag, on disk, unless a test gives one (releaseRepo).
	env["GPUGATE_RELEASE_REPO"] = releaseRepo(t, nil)
	return env
}

// releaseRepo is a bare git repository standing in for gpugate's, with a
// commit for each of tags (every other one an annotated tag); it returns
// its path and fills tags' values with their commits' SHAs.
func releaseRepo(t *testing.T, tags map[string]string) string {
	t.Helper()
	work, bare := t.TempDir(), t.TempDir()
	git := func(dir string, args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", dir, "-c", "user.email=r@example.com", "-c", "user.name=r"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git(work, "init", "-q")
	i := 0
	for tag := range tags {
		os.WriteFile(filepath.Join(work, "f"), []byte(tag), 0o644)
		git(work, "add", "f")
		git(work, "commit", "-qm", tag)
		if i%2 == 0 {
			git(work, "tag", "-a", "-m", tag, tag)
		} else {
			git(work, "tag", tag)
		}
		tags[tag] = git(work, "rev-parse", "HEAD")
		i++
	}
	git(bare, "init", "-q", "--bare")
	if len(tags) > 0 {
		git(work, "push", "-q", "--tags", bare)
	}
	return bare
}

// A pin to a released commit's SHA is that release: the Action installs
// the release of the tag that names the commit (annotated or not),
// verified as a tag pin is; a SHA no tag names builds from source.
func TestTheActionInstallsTheReleaseOfAReleasedCommitsSHA(t *testing.T) {
	needTools(t)
	rel := serveRelease(t, fakeReleases(t, nil))
	tags := map[string]string{"v1.2.3": "", "v1.3.0": ""}
	repo := releaseRepo(t, tags)
	for tag, sha := range tags {
		env := runnerEnv(t, rel, "Linux", "X64", "")
		env["GPUGATE_RELEASE_REPO"], env["GPUGATE_ACTION_REF"], env["GPUGATE_STEP"] = repo, sha, "classify"
		got := install(t, env)
		want := []string{"/" + tag + "/gpugate_" + tag[1:] + "_linux_amd64.tar.gz", "/" + tag + "/checksums.txt"}
		if took := rel.took(); got.code != 0 || !slices.Equal(took, want) || got.outputs["build"] != "false" || !strings.Contains(got.log, sha+" is release "+tag) {
			t.Errorf("%s (%s): exit %d, requested %v, outputs %v:\n%s", sha, tag, got.code, took, got.outputs, got.log)
		}
	}
}

// goStub is a go that must not run: a step installed from a release
// needs none.
func goStub(t *testing.T) string {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "go"), []byte("#!/bin/sh\necho \"go $* ran\" >&2\nexit 97\n"), 0o755)
	return dir
}

// The Action used at a release tag installs that release's binaries for
// the runner's OS and architecture (the ref it is used at, never another
// release), and the step runs them without Go.
func TestTheActionInstallsItsOwnReleasesBinaryForTheRunnersPlatform(t *testing.T) {
	needTools(t)
	rel := serveRelease(t, fakeReleases(t, nil))
	for _, tc := range []struct {
		runnerOS, arch, ref, asset, platform string
	}{
		{"Linux", "X64", "v1.2.3", "/v1.2.3/gpugate_1.2.3_linux_amd64.tar.gz", "linux_amd64"},
		{"Linux", "ARM64", "v1.2.3", "/v1.2.3/gpugate_1.2.3_linux_arm64.tar.gz", "linux_arm64"},
		{"macOS", "ARM64", "v1.2.3", "/v1.2.3/gpugate_1.2.3_darwin_arm64.tar.gz", "darwin_arm64"},
		{"Linux", "X64", "v1.3.0", "/v1.3.0/gpugate_1.3.0_linux_amd64.tar.gz", "linux_amd64"},
	} {
		t.Run(tc.ref+" "+tc.runnerOS+" "+tc.arch, func(t *testing.T) {
			env := runnerEnv(t, rel, tc.runnerOS, tc.arch, "")
			env["GPUGATE_ACTION_REF"], env["GPUGATE_STEP"] = tc.ref, "classify"
			got := install(t, env)
			if took := rel.took(); got.code != 0 || !slices.Equal(took, []string{tc.asset, "/" + tc.ref + "/checksums.txt"}) {
				t.Fatalf("exit %d, requested %v, want %s and its checksums.txt:\n%s", got.code, took, tc.asset, got.log)
			}
			bin := got.outputs["bin"]
			if got.outputs["build"] != "false" || bin == "" || !strings.Contains(got.log, "installed release "+tc.ref) {
				t.Fatalf("outputs %v:\n%s", got.outputs, got.log)
			}
			ran, err := exec.Command(filepath.Join(bin, "classify")).CombinedOutput()
			if want := "fake classify " + tc.platform + " " + tc.ref + " ran"; err != nil || !strings.Contains(string(ran), want) {
				t.Errorf("the installed classify says %q (%v), want %q", ran, err, want)
			}
		})
	}
	// On a runner without RUNNER_OS and RUNNER_ARCH (a self-hosted one's
	// shell), the platform is uname's.
	if runtime.GOOS == "linux" && (runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64") {
		t.Run("uname", func(t *testing.T) {
			env := runnerEnv(t, rel, "", "", "")
			delete(env, "RUNNER_OS")
			delete(env, "RUNNER_ARCH")
			env["GPUGATE_ACTION_REF"] = "v1.2.3"
			if got := install(t, env); got.code != 0 || !slices.Contains(rel.took(), "/v1.2.3/gpugate_1.2.3_linux_"+runtime.GOARCH+".tar.gz") {
				t.Errorf("exit %d:\n%s", got.code, got.log)
			}
		})
	}
	// github.action_ref is not promised inside a composite action: the
	// ref is then read from where the runner checked the action out.
	t.Run("the ref from the action's path", func(t *testing.T) {
		checkout := filepath.Join(t.TempDir(), "_actions", "gpugate", "gpugate", "v1.3.0")
		os.MkdirAll(filepath.Join(checkout, "classify"), 0o755)
		abs, _ := filepath.Abs(root)
		os.Symlink(filepath.Join(abs, "scripts"), filepath.Join(checkout, "scripts"))
		env := runnerEnv(t, rel, "Linux", "X64", "")
		env["ACTION_PATH"] = filepath.Join(checkout, "classify") + "/.."
		got := install(t, env)
		if took := rel.took(); got.code != 0 || len(took) == 0 || took[0] != "/v1.3.0/gpugate_1.3.0_linux_amd64.tar.gz" {
			t.Errorf("exit %d, requested %v:\n%s", got.code, took, got.log)
		}
	})
	// The macOS archives hold the CLIs only: a step whose command is not
	// among them builds it, and uses the ones that are.
	t.Run("a command the platform's archive lacks", func(t *testing.T) {
		env := runnerEnv(t, rel, "macOS", "ARM64", "")
		env["GPUGATE_ACTION_REF"], env["GPUGATE_STEP"] = "v1.2.3", "authorize"
		got := install(t, env)
		rel.took()
		if got.code != 0 || got.outputs["build"] != "true" || got.outputs["bin"] == "" || !strings.Contains(got.log, "because release v1.2.3 has no gate for darwin/arm64") {
			t.Errorf("exit %d, outputs %v:\n%s", got.code, got.outputs, got.log)
		}
	})
	// The whole action, as the runner runs it: no Go is set up or run,
	// and the step's output is the released command's.
	t.Run("classify/action.yml", func(t *testing.T) {
		env := runnerEnv(t, rel, "Linux", "ARM64", goStub(t))
		run := runAction(t, "classify/action.yml", "v1.2.3", map[string]string{"policy": "changepolicy/example_policy.yml", "base": "HEAD~1"}, env)
		rel.took()
		if run.code != 0 || run.setupGo || run.outputs["class"] != "from-v1.2.3" || !strings.Contains(run.log, "fake classify linux_arm64 v1.2.3 ran: -policy ") {
			t.Errorf("exit %d, setup-go %v, outputs %v:\n%s", run.code, run.setupGo, run.outputs, run.log)
		}
	})
}

// The steps of one job install the release once: RUNNER_TEMP is the
// job's, so a later step finds the verified commands there and downloads
// nothing.
func TestStepsOfOneJobDownloadTheReleaseOnce(t *testing.T) {
	needTools(t)
	rel := serveRelease(t, fakeReleases(t, nil))
	env := runnerEnv(t, rel, "Linux", "X64", "")
	env["GPUGATE_ACTION_REF"] = "v1.2.3"
	var bins []string
	for i, step := range []string{"classify", "authorize", "publish"} {
		env["GPUGATE_STEP"] = step
		got := install(t, env)
		took := rel.took()
		if got.code != 0 || got.outputs["build"] != "false" || i == 0 && len(took) != 2 || i > 0 && len(took) != 0 {
			t.Fatalf("step %d (%s): exit %d, requested %v, outputs %v:\n%s", i+1, step, got.code, took, got.outputs, got.log)
		}
		if i > 0 && !strings.Contains(got.log, "already installed in this job") {
			t.Errorf("step %s:\n%s", step, got.log)
		}
		bins = append(bins, got.outputs["bin"])
	}
	if bins[0] != bins[1] || bins[1] != bins[2] {
		t.Errorf("the steps' bins differ: %v", bins)
	}
	// Another job (its own RUNNER_TEMP) downloads again.
	env["RUNNER_TEMP"] = t.TempDir()
	if got := install(t, env); got.code != 0 || len(rel.took()) != 2 {
		t.Errorf("a new job: exit %d:\n%s", got.code, got.log)
	}
}

// A later step of the job checks the installed commands again: a command
// an earlier step's code changed is refused, never run.
func TestALaterStepRefusesAnInstalledCommandChangedSinceItWasVerified(t *testing.T) {
	needTools(t)
	rel := serveRelease(t, fakeReleases(t, nil))
	env := runnerEnv(t, rel, "Linux", "X64", "")
	env["GPUGATE_ACTION_REF"], env["GPUGATE_STEP"] = "v1.2.3", "classify"
	first := install(t, env)
	if first.code != 0 {
		t.Fatalf("exit %d:\n%s", first.code, first.log)
	}
	classify := filepath.Join(first.outputs["bin"], "classify")
	if err := os.WriteFile(classify, []byte("#!/bin/sh\necho planted\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	got := install(t, env)
	if got.code == 0 || got.outputs["bin"] != "" || !strings.Contains(got.log, "::error::gpugate: the commands of release v1.2.3 installed in") {
		t.Errorf("exit %d, outputs %v:\n%s", got.code, got.outputs, got.log)
	}
}

// A release archive whose SHA-256 is not the one its checksums.txt lists,
// or that no checksum covers, is refused before anything in it is
// extracted or run, and the step fails instead of building around it.
func TestTheActionRefusesABinaryWhoseChecksumDoesNotMatch(t *testing.T) {
	needTools(t)
	for name, tc := range map[string]struct {
		corrupt func(tag, sums string) string
		says    string
	}{
		"a wrong checksum": {func(tag, sums string) string {
			return regexp.MustCompile(`(?m)^[0-9a-f]{64}(  gpugate_\S+_linux_amd64)`).ReplaceAllString(sums, strings.Repeat("0", 64)+"$1")
		}, "::error::gpugate: refusing gpugate_1.2.3_linux_amd64.tar.gz of release v1.2.3: its SHA-256 is "},
		"no checksum for the archive": {func(tag, sums string) string {
			return regexp.MustCompile(`(?m)^.*_linux_amd64.*\n`).ReplaceAllString(sums, "")
		}, "::error::gpugate: release v1.2.3's checksums.txt lists no single SHA-256 for gpugate_1.2.3_linux_amd64.tar.gz"},
		"no checksums.txt": {func(tag, sums string) string { return "" }, "::error::gpugate: release v1.2.3 has gpugate_1.2.3_linux_amd64.tar.gz but no checksums.txt (HTTP 404): refusing to run an unverified binary"},
	} {
		t.Run(name, func(t *testing.T) {
			rel := serveRelease(t, fakeReleases(t, tc.corrupt))
			env := runnerEnv(t, rel, "Linux", "X64", goStub(t))
			run := runAction(t, "classify/action.yml", "v1.2.3", map[string]string{"policy": "changepolicy/example_policy.yml", "base": "HEAD~1"}, env)
			if run.code == 0 || !strings.Contains(run.log, tc.says) || run.setupGo {
				t.Errorf("exit %d, setup-go %v, want a refusal %q:\n%s", run.code, run.setupGo, tc.says, run.log)
			}
			if _, err := os.Stat(filepath.Join(env["HOME"], "ran")); err == nil || strings.Contains(run.log, "fake classify") {
				t.Error("a command of the refused archive ran")
			}
			// Nothing of the archive is left to run: no command was
			// extracted anywhere in the job's RUNNER_TEMP.
			filepath.WalkDir(env["RUNNER_TEMP"], func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					t.Errorf("the refused install left %s", p)
				}
				return nil
			})
		})
	}
}

// Used anywhere but at a release (a commit SHA, a branch, a major-version
// tag, a tag with no release, a local checkout), the Action says in the
// log that it builds from source, and why; it sets up Go and builds the
// step's command from its own checkout. Only a release-shaped ref asks the
// release server anything.
func TestTheActionBuildsFromSourceWhenItsRefIsNotARelease(t *testing.T) {
	needTools(t)
	assets := fakeReleases(t, nil)
	assets["/v2.0.0/gpugate_2.0.0_linux_amd64.tar.gz"] = nil
	rel := serveRelease(t, assets)
	sha := strings.Repeat("ab12", 10)
	for _, tc := range []struct {
		ref, because string
		asks         []string
	}{
		{sha, sha + " is not a release", nil},
		{"main", "main is not a release", nil},
		{"v1", "v1 is not a release", nil},
		{"v9.9.9", "v9.9.9 is not a release: " + rel.URL + "/v9.9.9/gpugate_9.9.9_linux_amd64.tar.gz is not there", []string{"/v9.9.9/gpugate_9.9.9_linux_amd64.tar.gz"}},
		{"", "the Action's ref is unknown", nil},
		// A download that breaks is no reason to fail the step: the
		// source is the Action's own, pinned checkout.
		{"v2.0.0", "the download of release v2.0.0 failed", []string{"/v2.0.0/gpugate_2.0.0_linux_amd64.tar.gz"}},
	} {
		t.Run("ref "+tc.ref, func(t *testing.T) {
			env := runnerEnv(t, rel, "Linux", "X64", "")
			env["GPUGATE_ACTION_REF"], env["GPUGATE_STEP"] = tc.ref, "classify"
			got := install(t, env)
			if took := rel.took(); got.code != 0 || !slices.Equal(took, tc.asks) {
				t.Errorf("exit %d, requested %v, want %v:\n%s", got.code, took, tc.asks, got.log)
			}
			if want := "gpugate: building classify from source (the Action's checkout) because " + tc.because; !strings.Contains(got.log, want) {
				t.Errorf("the log does not say %q:\n%s", want, got.log)
			}
			if got.outputs["build"] != "true" || got.outputs["bin"] != "" {
				t.Errorf("outputs %v, want build=true and no bin", got.outputs)
			}
			if warned := strings.Contains(got.log, "::warning::gpugate: could not download "+rel.URL+"/v2.0.0/"); warned != (tc.ref == "v2.0.0") {
				t.Errorf("warned %v:\n%s", warned, got.log)
			}
		})
	}
	// The whole action at a commit: Go is set up, and the step's command
	// is built from the action's own checkout, then run.
	t.Run("classify/action.yml", func(t *testing.T) {
		abs, _ := filepath.Abs(root)
		goDir := t.TempDir()
		os.WriteFile(filepath.Join(goDir, "go"), []byte(`#!/usr/bin/env bash
out=; prev=
for a in "$@"; do [ "$prev" = -o ] && out=$a; prev=$a; done
echo "$PWD $*" >>"$HOME/go-build"
mkdir -p "$(dirname "$out")"
printf '#!/usr/bin/env bash\necho "classify built from source ran"\necho class=built >>"$GITHUB_OUTPUT"\n' >"$out"
chmod +x "$out"
`), 0o755)
		env := runnerEnv(t, rel, "Linux", "X64", goDir)
		run := runAction(t, "classify/action.yml", sha, map[string]string{"policy": "changepolicy/example_policy.yml", "base": "HEAD~1"}, env)
		if run.code != 0 || !run.setupGo || run.outputs["class"] != "built" || !strings.Contains(run.log, "because "+sha+" is not a release") {
			t.Errorf("exit %d, setup-go %v, outputs %v:\n%s", run.code, run.setupGo, run.outputs, run.log)
		}
		built, _ := os.ReadFile(filepath.Join(env["HOME"], "go-build"))
		if want := abs + " build -o " + env["RUNNER_TEMP"] + "/gpugate-run/classify ./examples/classify\n"; string(built) != want {
			t.Errorf("go ran as %q, want %q (in the action's checkout)", built, want)
		}
		if took := rel.took(); len(took) != 0 {
			t.Errorf("a commit asked the release server for %v", took)
		}
	})
}
