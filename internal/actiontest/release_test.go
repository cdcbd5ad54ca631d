package actiontest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/gpugate/gpugate/internal/workflowtest"
)

// The CLIs a person runs on a laptop: the macOS archives hold these.
var clis = []string{"cachecheck", "classify", "costreport", "nvrtcpin", "partition", "sparkctl"}

// A release is built by scripts/release.sh, run as the release workflow
// runs it: one archive per OS/arch, every command for Linux amd64 and
// arm64 and the CLIs for macOS, each built with CGO_ENABLED=0 -trimpath
// -buildvcs=false and no build ID (the proof as smoke.ProofBuildArgs
// builds it), and checksums.txt. Built twice, under another umask and at
// other times, it is the same bytes; and scripts/install.sh installs it.
func TestTheReleaseIsBuiltReproduciblyForEveryPlatform(t *testing.T) {
	needTools(t, "gzip", "sha256sum")
	if v, err := exec.Command("tar", "--version").Output(); err != nil || !strings.Contains(string(v), "GNU tar") {
		t.Skip("scripts/release.sh needs GNU tar (--sort, --owner), as on the release workflow's ubuntu runner")
	}
	abs, _ := filepath.Abs(root)
	// A go that records each build and writes a stand-in command saying
	// what it is and what it was built for.
	stub := t.TempDir()
	os.WriteFile(filepath.Join(stub, "go"), []byte(`#!/usr/bin/env bash
[ "$1" = build ] || exit 99
out=; prev=
for a in "$@"; do [ "$prev" = -o ] && out=$a; prev=$a; done
printf '%s\n' "CGO_ENABLED=$CGO_ENABLED GOOS=$GOOS GOARCH=$GOARCH $*" >>"$GOLOG"
printf '#!/usr/bin/env bash\necho "%s %s/%s"\n' "$(basename "$prev")" "$GOOS" "$GOARCH" >"$out"
`), 0o755)
	var commands []string
	mains, _ := filepath.Glob(filepath.Join(abs, "examples", "*", "main.go"))
	for _, m := range mains {
		commands = append(commands, filepath.Base(filepath.Dir(m)))
	}
	build := func(t *testing.T, umask string) (string, string) {
		t.Helper()
		out, golog := t.TempDir(), filepath.Join(t.TempDir(), "go.log")
		cmd := exec.Command("bash", "-c", `umask "$1"; exec bash scripts/release.sh v1.2.3 "$2"`, "release", umask, out)
		cmd.Dir = abs
		cmd.Env = []string{"PATH=" + stub + ":" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "TMPDIR=" + t.TempDir(), "GOLOG=" + golog, "SOURCE_DATE_EPOCH=1767225600"}
		if log, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("release.sh: %v\n%s", err, log)
		}
		return out, golog
	}
	first, golog := build(t, "022")
	second, _ := build(t, "077")

	archives := map[string][]string{
		"gpugate_1.2.3_linux_amd64.tar.gz": commands, "gpugate_1.2.3_linux_arm64.tar.gz": commands,
		"gpugate_1.2.3_darwin_amd64.tar.gz": clis, "gpugate_1.2.3_darwin_arm64.tar.gz": clis,
	}
	files, _ := os.ReadDir(first)
	var names []string
	for _, f := range files {
		names = append(names, f.Name())
	}
	want := []string{"checksums.txt"}
	for name := range archives {
		want = append(want, name)
	}
	sort.Strings(want)
	if !slices.Equal(names, want) {
		t.Fatalf("release.sh wrote %v, want %v", names, want)
	}
	var sums strings.Builder
	for _, name := range want[1:] { // the archives: checksums.txt sorts first
		data, _ := os.ReadFile(filepath.Join(first, name))
		again, _ := os.ReadFile(filepath.Join(second, name))
		if !bytes.Equal(data, again) {
			t.Errorf("%s differs between two builds of the same commit", name)
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(&sums, "%s  %s\n", hex.EncodeToString(sum[:]), name)
		list, err := exec.Command("tar", "-tzvf", filepath.Join(first, name)).Output()
		if err != nil {
			t.Fatal(err)
		}
		var members []string
		for _, line := range strings.Split(strings.TrimSpace(string(list)), "\n") {
			f := strings.Fields(line)
			members = append(members, f[len(f)-1])
			if mode := f[0]; mode != "-rwxr-xr-x" && !(mode == "-rw-r--r--" && f[len(f)-1] == "LICENSE") || f[1] != "0/0" {
				t.Errorf("%s: %s", name, line)
			}
		}
		if wantMembers := append(slices.Clone(archives[name]), "LICENSE"); !slices.Equal(sorted(members), sorted(wantMembers)) {
			t.Errorf("%s holds %v, want %v", name, members, wantMembers)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(first, "checksums.txt")); sortedLines(string(got)) != sortedLines(sums.String()) {
		t.Errorf("checksums.txt:\n%s\nwant:\n%s", got, sums.String())
	}
	log, _ := os.ReadFile(golog)
	builds := strings.Split(strings.TrimSpace(string(log)), "\n")
	if len(builds) != 2*len(commands)+2*len(clis) {
		t.Errorf("%d builds, want %d", len(builds), 2*len(commands)+2*len(clis))
	}
	for _, b := range builds {
		for _, flag := range []string{"CGO_ENABLED=0 ", " build -trimpath -buildvcs=false -ldflags=-s -w -buildid= "} {
			if !strings.Contains(b, flag) {
				t.Errorf("a build without %q: %s", flag, b)
			}
		}
		if strings.HasSuffix(b, "./examples/smoke") != strings.Contains(b, " -gcflags=all=-l ") {
			t.Errorf("only the proof is built without inlining (smoke.ProofBuildArgs): %s", b)
		}
	}

	// What release.sh publishes is what install.sh installs.
	assets := map[string][]byte{}
	for _, name := range want {
		data, _ := os.ReadFile(filepath.Join(first, name))
		assets["/v1.2.3/"+name] = data
	}
	rel := serveRelease(t, assets)
	env := runnerEnv(t, rel, "Linux", "ARM64", "")
	env["GPUGATE_ACTION_REF"], env["GPUGATE_STEP"] = "v1.2.3", "provision"
	got := install(t, env)
	// The proof runs on the pods (linux/amd64), so on an ARM64 runner Go
	// builds it for them (scripts/action.sh); the rest is the release's.
	if got.code != 0 || got.outputs["build"] != "true" || got.outputs["bin"] == "" || !strings.Contains(got.log, "linux/amd64") {
		t.Fatalf("exit %d, outputs %v:\n%s", got.code, got.outputs, got.log)
	}
	for _, c := range []string{"provision", "smoke"} {
		ran, err := exec.Command(filepath.Join(got.outputs["bin"], c)).Output()
		if err != nil || strings.TrimSpace(string(ran)) != c+" linux/arm64" {
			t.Errorf("the installed %s says %q (%v)", c, ran, err)
		}
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

func sortedLines(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}

// The release workflow runs scripts/release.sh on a release tag with a
// read-only token, and only its publish job, which runs none of the
// repository's code, may write: it checks the archives against
// checksums.txt and publishes them with the workflow's own token.
func TestTheReleaseWorkflowPublishesWhatReleaseShBuilds(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, ".github/workflows/release.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var wf workflowtest.Workflow
	var grants struct {
		On struct {
			Push map[string][]string `yaml:"push"`
		} `yaml:"on"`
		Permissions map[string]string `yaml:"permissions"`
		Jobs        map[string]struct {
			Permissions map[string]string `yaml:"permissions"`
		} `yaml:"jobs"`
	}
	if err := yaml.Unmarshal(data, &wf); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &grants); err != nil {
		t.Fatal(err)
	}
	if tags := grants.On.Push["tags"]; len(grants.On.Push) != 1 || len(tags) != 1 || tags[0] != "v[0-9]+.[0-9]+.[0-9]+*" {
		t.Errorf("on push %v: want release tags vMAJOR.MINOR.PATCH only (what install.sh takes for a release)", grants.On.Push)
	}
	if grants.Permissions == nil || len(grants.Permissions) != 0 {
		t.Errorf("the workflow's permissions %v: want none (permissions: {})", grants.Permissions)
	}
	for job, want := range map[string]string{"build": "read", "publish": "write"} {
		if p := grants.Jobs[job].Permissions; len(p) != 1 || p["contents"] != want {
			t.Errorf("job %s's permissions %v, want contents: %s only", job, p, want)
		}
	}
	build, publish := wf.Jobs["build"], wf.Jobs["publish"]
	releaseSh := build.Step(t, "running release.sh", workflowtest.Runs(`bash scripts/release.sh "$TAG" dist`))
	if releaseSh.Env["TAG"] != "${{ github.ref_name }}" {
		t.Errorf("release.sh's tag: %q", releaseSh.Env["TAG"])
	}
	check := publish.Step(t, "checking the checksums", workflowtest.Runs("sha256sum --check --strict checksums.txt"))
	gh := publish.Step(t, "gh release create", workflowtest.Runs(`gh release create "$TAG"`))
	if check.WorkingDirectory != "dist" || gh.Env["GH_TOKEN"] != "${{ github.token }}" || !publish.NeedsJob("build") {
		t.Errorf("publish: %+v %+v", check, gh)
	}
	for _, s := range publish.Steps {
		if s.Uses != "" && !strings.HasPrefix(s.Uses, "actions/download-artifact@") {
			t.Errorf("the publish job runs %s: it holds the write token, so it runs no code but gh's", s.Uses)
		}
	}
	for id, job := range wf.Jobs {
		for _, s := range job.Steps {
			if s.Uses != "" && !pinnedByRef.MatchString(strings.Fields(s.Uses)[0]) {
				t.Errorf("%s: %s is not pinned by SHA", id, s.Uses)
			}
			if strings.HasPrefix(s.Uses, "actions/checkout@") && s.With["persist-credentials"] != "false" {
				t.Errorf("%s: checkout keeps its credentials", id)
			}
			if strings.HasPrefix(s.Uses, "actions/setup-go@") && s.With["cache"] != "false" {
				t.Errorf("%s: setup-go saves a cache", id)
			}
		}
	}
}
