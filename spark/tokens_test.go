package spark_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpugate/gpugate/internal/faketime"
	"github.com/gpugate/gpugate/spark"
)

// No agent or operator token is named like an owner the controller's own
// integrations submit requests as (pull requests' "github", the merge
// queue's, a schedule's "schedule:NAME", the agent tools' "agent"): the
// API treats a request whose owner is an agent's name as that agent's, so
// such a token would read a pull request lease's fencing token and
// release it. A host may have any name.
func TestTokens_AnAgentOrOperatorIsNeverNamedLikeAnInternalOwner(t *testing.T) {
	hash := spark.HashToken(spark.NewToken())
	for _, tc := range []struct {
		role spark.Role
		name string
	}{
		{spark.RoleAgent, spark.OwnerGitHub},
		{spark.RoleAgent, "GitHub"},
		{spark.RoleOperator, spark.OwnerMergeQueue},
		{spark.RoleAgent, spark.OwnerSchedulePrefix + "nightly"},
		{spark.RoleOperator, spark.OwnerSchedulePrefix},
		{spark.RoleAgent, spark.OwnerAgentTools},
		{spark.RoleAgent, spark.OwnerOperator}, // the plain operator token's holder
		{spark.RoleAgent, "agent:alice"},
		{spark.RoleAgent, "alice:laptop"},
	} {
		line := string(tc.role) + " " + tc.name + " " + hash + "\n"
		_, err := spark.ParseTokens([]byte(line))
		if !errors.Is(err, spark.ErrInvalid) || !strings.Contains(err.Error(), "owner") {
			t.Errorf("%q: %v, want ErrInvalid saying the name is a request owner's", line, err)
		}
		path := filepath.Join(t.TempDir(), "tokens")
		if tok, err := spark.AddToken(path, tc.role, tc.name); !errors.Is(err, spark.ErrInvalid) || tok != "" {
			t.Errorf("AddToken(%s, %q): %q %v, want ErrInvalid", tc.role, tc.name, tok, err)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("AddToken(%s, %q) wrote the file: %v", tc.role, tc.name, err)
		}
		if !spark.ReservedName(tc.name) {
			t.Errorf("ReservedName(%q) is false", tc.name)
		}
	}
	for _, ok := range []string{"agent alice " + hash, "operator ops " + hash, "host github " + hash, "agent github-bot " + hash} {
		if _, err := spark.ParseTokens([]byte(ok + "\n")); err != nil {
			t.Errorf("%q: %v, want it accepted", ok, err)
		}
	}
}

// A line whose first field is not a role (the raw token pasted there, say)
// is refused without repeating that field.
func TestTokens_ALineWithoutARoleIsRefusedWithoutEchoingIt(t *testing.T) {
	tok := spark.NewToken()
	for _, line := range []string{tok + " alice " + spark.HashToken(tok), "Agent alice " + spark.HashToken(tok)} {
		_, err := spark.ParseTokens([]byte(line + "\n"))
		first := strings.Fields(line)[0]
		if !errors.Is(err, spark.ErrInvalid) || strings.Contains(err.Error(), first) || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("%q: %v, want ErrInvalid naming the line, not repeating its first field", line, err)
		}
	}
	if _, err := spark.AddToken(filepath.Join(t.TempDir(), "tokens"), spark.Role(tok), "alice"); !errors.Is(err, spark.ErrInvalid) || strings.Contains(err.Error(), tok) {
		t.Errorf("AddToken with a token for a role: %v, want ErrInvalid that does not repeat it", err)
	}
}

// A token file replaced by one of the same size and modification time
// (cp -p, rsync -t of a rotated file) is noticed by its content within a
// second, by the controller's clock, with the same rules as any change:
// a broken edit revokes and never grants, and is reported once; a
// removed file revokes every token, and the same file back grants them
// again.
func TestTokenFile_ARotationWithTheSameSizeAndTimeIsNoticed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "tokens")
		stamp := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
		write := func(content string) {
			t.Helper()
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(path, stamp, stamp); err != nil {
				t.Fatal(err)
			}
		}
		line := func(name, tok string) string { return "agent " + name + " " + spark.HashToken(tok) + "\n" }
		alice, rotated, bob := spark.NewToken(), spark.NewToken(), spark.NewToken()
		write(line("alice", alice) + line("bob", bob))
		var reported []error
		tf, err := spark.LoadTokenFile(path, spark.ReportRejected(func(err error) { reported = append(reported, err) }))
		if err != nil {
			t.Fatal(err)
		}
		works := func(tok string) bool { _, ok := tf.Lookup(tok); return ok }
		if !works(alice) || !works(bob) {
			t.Fatal("the tokens in the file do not work")
		}
		fi, _ := os.Stat(path)
		write(line("alice", rotated) + line("bob", bob)) // alice's token rotated: same size, same time
		if after, _ := os.Stat(path); after.Size() != fi.Size() || !after.ModTime().Equal(fi.ModTime()) {
			t.Fatal("the rotated file's size or time differs: the scenario tests nothing")
		}
		faketime.Advance(time.Second)
		if works(alice) {
			t.Error("the rotated-out token still works a second after the rotation")
		}
		if !works(rotated) || !works(bob) {
			t.Error("the rotated file's tokens do not work a second after the rotation")
		}

		// A broken edit of the same size and time: bob's line broken,
		// carol's added in place of alice's.
		carol := spark.NewToken()
		broken := line("carol", carol) + strings.Replace(line("bob", bob), "sha256:", "sha257:", 1)
		broken = strings.Replace(broken, "carol", "alice", 1) // alice's name, carol's token: a new entry
		write(broken)
		faketime.Advance(time.Second)
		if works(bob) || works(rotated) {
			t.Error("a token whose line the broken edit removed or broke still works")
		}
		if works(carol) {
			t.Error("a broken edit granted a token")
		}
		faketime.Advance(time.Second)
		works(bob)
		if len(reported) != 1 || !errors.Is(reported[0], spark.ErrInvalid) || !errors.Is(tf.Err(), spark.ErrInvalid) {
			t.Errorf("reported %v (Err %v), want the rejected change once, as ErrInvalid", reported, tf.Err())
		}

		// The good file back, then removed, then back again as it was.
		good := line("alice", rotated) + line("bob", bob)
		write(good)
		faketime.Advance(time.Second)
		if !works(rotated) || tf.Err() != nil {
			t.Errorf("the fixed file: rotated works %v, Err %v", works(rotated), tf.Err())
		}
		os.Remove(path)
		if works(rotated) || works(bob) {
			t.Error("a removed token file still grants its tokens")
		}
		write(good)
		if !works(rotated) || !works(bob) {
			t.Error("the token file back as it was does not grant its tokens")
		}
		if len(reported) != 2 {
			t.Errorf("%d rejected changes reported, want 2 (the broken edit, the removal)", len(reported))
		}
	})
}
