package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpugate/gpugate/gate"
)

// checkout is a git repository with one commit; it returns its path and
// HEAD.
func checkout(t *testing.T) (string, string) {
	t.Helper()
	dir := t.TempDir()
	for _, args := range [][]string{{"init", "-q"}, {"config", "user.email", "m@example.com"}, {"config", "user.name", "m"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	os.WriteFile(filepath.Join(dir, "kernel.cu"), []byte("// a kernel\n"), 0o644)
	for _, args := range [][]string{{"add", "."}, {"commit", "-qm", "c"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	out, err := exec.Command("git", "-C", dir, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	return dir, strings.TrimSpace(string(out))
}

// relayGitHub serves PR #7 at prHead with the local-validation label, and
// records comments and dispatches.
func relayGitHub(t *testing.T, prHead string) (env map[string]string, comments, dispatches *[]string) {
	t.Helper()
	comments, dispatches = new([]string), new([]string)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /repos/o/r/pulls/7", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"number":7,"state":"open","head":{"sha":"%s","repo":{"id":1}},"base":{"repo":{"id":1}},"labels":[{"name":"gpu-validated-locally"}]}`, prHead)
	})
	mux.HandleFunc("POST /repos/o/r/issues/7/comments", func(w http.ResponseWriter, r *http.Request) {
		var c struct{ Body string }
		json.NewDecoder(r.Body).Decode(&c)
		*comments = append(*comments, c.Body)
		fmt.Fprint(w, `{"id":1}`)
	})
	mux.HandleFunc("GET /repos/o/r", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"default_branch":"main"}`) })
	mux.HandleFunc("POST /repos/o/r/actions/workflows/local-gpu-relay.yml/dispatches", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		*dispatches = append(*dispatches, string(b))
		w.WriteHeader(204)
	})
	srv := httptest.NewServer(http.StripPrefix("/api/v3", mux))
	t.Cleanup(srv.Close)
	return map[string]string{"GITHUB_TOKEN": "tok-s3cret", "GITHUB_API_URL": srv.URL, "GITHUB_REPOSITORY": "o/r"}, comments, dispatches
}

// gate local-run runs the lane at the checkout's HEAD without any
// credential, posts the SHA-bound evidence and dispatches the relay on
// the default branch.
func TestLocalRun_RunsTheLaneAtHEADPostsTheEvidenceAndDispatchesTheRelay(t *testing.T) {
	dir, sha := checkout(t)
	env, comments, dispatches := relayGitHub(t, sha)
	t.Setenv("GITHUB_TOKEN", "tok-s3cret") // as a maintainer's shell may have it
	code, out := runGate(t, env, "local-run", "-pr", "7", "-dir", dir, "-lane", `test -z "$GITHUB_TOKEN" && touch lane.ran`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "lane.ran")); err != nil {
		t.Errorf("the lane did not run, or saw GITHUB_TOKEN: %v", err)
	}
	if len(*comments) != 1 || !strings.HasPrefix((*comments)[0], gate.EvidenceMarker(sha)+"\n") {
		t.Errorf("comments %q, want one whose first line is the marker for %s", *comments, sha)
	}
	if len(*dispatches) != 1 || !strings.Contains((*dispatches)[0], `"ref":"main"`) || !strings.Contains((*dispatches)[0], `"sha":"`+sha+`"`) || !strings.Contains((*dispatches)[0], `"pr":"7"`) {
		t.Errorf("dispatches %q", *dispatches)
	}
	if strings.Contains(out, "tok-s3cret") {
		t.Error("the token was printed")
	}
}

// HEAD that is not the PR's head, or a checkout with uncommitted changes,
// is refused before the lane runs: nothing is posted or dispatched.
func TestLocalRun_RefusesAHEADThatIsNotThePRsHeadOrADirtyCheckout(t *testing.T) {
	dir, sha := checkout(t)
	for name, tc := range map[string]struct {
		prHead string
		dirty  bool
	}{
		"HEAD is not the PR's head": {prHead: strings.Repeat("e", 40)},
		"uncommitted changes":       {prHead: sha, dirty: true},
	} {
		t.Run(name, func(t *testing.T) {
			env, comments, dispatches := relayGitHub(t, tc.prHead)
			if tc.dirty {
				os.WriteFile(filepath.Join(dir, "kernel.cu"), []byte("// edited\n"), 0o644)
				t.Cleanup(func() { exec.Command("git", "-C", dir, "checkout", "--", ".").Run() })
			}
			code, out := runGate(t, env, "local-run", "-pr", "7", "-dir", dir, "-lane", "touch lane.ran")
			if code != 1 || len(*comments) != 0 || len(*dispatches) != 0 {
				t.Errorf("exit %d, %d comments, %d dispatches: %s", code, len(*comments), len(*dispatches), out)
			}
			if _, err := os.Stat(filepath.Join(dir, "lane.ran")); err == nil {
				t.Error("the lane ran")
			}
		})
	}
}
