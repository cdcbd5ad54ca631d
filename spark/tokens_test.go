package spark_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
