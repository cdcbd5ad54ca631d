package changepolicy

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func runGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main", "-c", "protocol.file.allow=always"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func writeFile(t *testing.T, dir, name, body string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// newRepo makes a repository whose main has three commits and a feature
// branch forked from the second that renames, deletes, adds and modifies.
func newRepo(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	runGit(t, dir, "init", "-q")
	writeFile(t, dir, "src/lib.rs", "fn main() {}\n"+strings.Repeat("// filler line\n", 20))
	writeFile(t, dir, "docs/old.md", "# Old\n"+strings.Repeat("text\n", 20))
	writeFile(t, dir, "README.md", "hello\n")
	runGit(t, dir, "add", ".")
	runGit(t, dir, "commit", "-q", "-m", "one")
	writeFile(t, dir, "docs/extra.md", "x\n")
	runGit(t, dir, "add", ".")
	runGit(t, dir, "commit", "-q", "-m", "two")
	runGit(t, dir, "checkout", "-q", "-b", "feature")
	runGit(t, dir, "mv", "docs/old.md", "docs/new name.md")
	runGit(t, dir, "rm", "-q", "README.md")
	writeFile(t, dir, "docs/extra.md", "changed\n")
	writeFile(t, dir, "docs/added.md", "new\n")
	runGit(t, dir, "add", ".")
	runGit(t, dir, "commit", "-q", "-m", "feature")
	runGit(t, dir, "checkout", "-q", "main")
	// A later main commit must not show up in the three-dot range.
	writeFile(t, dir, "src/main_only.rs", "x\n")
	runGit(t, dir, "add", ".")
	runGit(t, dir, "commit", "-q", "-m", "three")
	return dir
}

func TestFromGitDiff_MergeBaseRangeWithRenames(t *testing.T) {
	dir := newRepo(t)
	got, err := FromGitDiff(context.Background(), dir, "main", "feature")
	if err != nil {
		t.Fatal(err)
	}
	want := []Change{
		{Path: "README.md", Status: Removed},
		{Path: "docs/added.md", Status: Added},
		{Path: "docs/extra.md", Status: Modified},
		{Path: "docs/new name.md", OldPath: "docs/old.md", Status: Renamed},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestFromGitDiff_ShallowHistoryIsAnError(t *testing.T) {
	src := newRepo(t)
	dst := filepath.Join(t.TempDir(), "clone")
	runGit(t, filepath.Dir(dst), "clone", "-q", "--depth", "1", "--no-single-branch", "file://"+src, dst)
	_, err := FromGitDiff(context.Background(), dst, "origin/main", "origin/feature")
	if !errors.Is(err, ErrHistory) {
		t.Fatalf("err = %v, want ErrHistory", err)
	}
	if !strings.Contains(err.Error(), "fetch-depth: 0") {
		t.Errorf("err = %v; it should say how to fetch more history", err)
	}
}

func TestFromGitDiff_BadRevisions(t *testing.T) {
	dir := newRepo(t)
	for _, revs := range [][2]string{{"", "main"}, {"main", "--output=x"}, {"main", "no-such-branch"}} {
		if _, err := FromGitDiff(context.Background(), dir, revs[0], revs[1]); err == nil {
			t.Errorf("FromGitDiff(%q, %q) succeeded; want an error", revs[0], revs[1])
		}
	}
}

func TestParseNameStatus(t *testing.T) {
	tests := map[string]struct {
		in   string
		want []Change
	}{
		"empty":  {"", nil},
		"-z":     {"M\x00a.go\x00R087\x00old.md\x00new.md\x00D\x00gone\x00", []Change{{Path: "a.go", Status: Modified}, {Path: "new.md", OldPath: "old.md", Status: Renamed}, {Path: "gone", Status: Removed}}},
		"lines":  {"A\tdocs/a.md\nC100\tsrc/a.rs\tsrc/b.rs\nT\tlink\n", []Change{{Path: "docs/a.md", Status: Added}, {Path: "src/b.rs", OldPath: "src/a.rs", Status: Copied}, {Path: "link", Status: Changed}}},
		"quoted": {"M\t\"docs/tab\\there.md\"\n", []Change{{Path: "docs/tab\there.md", Status: Modified}}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseNameStatus([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	for name, in := range map[string]string{
		"unknown letter":     "Q\ta\n",
		"unmerged":           "U\x00a\x00",
		"rename missing new": "R100\x00old\x00",
		"score on M":         "M100\ta\n",
		"line fields":        "R100\ta\n",
		"bad quote":          "M\t\"a\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseNameStatus([]byte(in)); !errors.Is(err, ErrNameStatus) {
				t.Errorf("err = %v, want ErrNameStatus", err)
			}
		})
	}
}
