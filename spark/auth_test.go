package spark_test

import (
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpugate/gpugate/spark"
)

// Each credential does only what its role may: a host reports and checks
// only itself, an agent asks only for development and service-start and
// acts only on its own leases, pull-request work never enters through the
// API, and only the operator terminates.
func TestAPI_EachCredentialDoesOnlyWhatItsRoleMay(t *testing.T) {
	f := newFleet(t)
	tokens := spark.Tokens{
		"operator-token-0123456": {Role: spark.RoleOperator, Name: "ops"},
		"spark-1-host-token-012": {Role: spark.RoleHost, Name: "spark-1"},
		"spark-2-host-token-012": {Role: spark.RoleHost, Name: "spark-2"},
		"alice-agent-token-0123": {Role: spark.RoleAgent, Name: "alice"},
		"bob-agent-token-012345": {Role: spark.RoleAgent, Name: "bob"},
	}
	h, err := spark.NewAuthHandler(f.c, tokens)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	as := func(tok string) *spark.APIClient { c, _ := spark.NewAPIClient(srv.URL, tok, srv.Client()); return c }
	ops, host1, host2, alice, bob := as("operator-token-0123456"), as("spark-1-host-token-012"), as("spark-2-host-token-012"), as("alice-agent-token-0123"), as("bob-agent-token-012345")

	// alice's development lease, granted on spark-2
	dev, err := alice.Request(ctx, spark.LeaseRequest{Class: spark.Development})
	if err != nil {
		t.Fatal(err)
	}
	f.beat(t, 0, 0)
	f.reconcile(t)
	st := f.status(t, dev.Request.ID)
	if st.Request.State != spark.Active || st.Request.Owner != "alice" {
		t.Fatalf("alice's lease: %+v", st.Request)
	}
	queued, err := alice.Request(ctx, spark.LeaseRequest{Class: spark.Development, Host: "spark-2"})
	if err != nil {
		t.Fatal(err)
	}
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, spark.ErrUnauthorized) {
			t.Errorf("%s: %v, want ErrUnauthorized", what, err)
		}
	}
	allowed := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v, want it allowed", what, err)
		}
	}
	_, err = alice.Request(ctx, spark.LeaseRequest{Class: spark.MergeCI})
	refused("an agent asking for merge CI", err)
	_, err = ops.Request(ctx, spark.LeaseRequest{Class: spark.ManualPR, PR: pr(3, "abc")})
	refused("the operator asking for PR work", err)
	_, err = alice.Request(ctx, spark.LeaseRequest{Class: spark.Development, PR: pr(3, "abc")})
	refused("an agent naming a PR", err)
	_, err = host2.Request(ctx, spark.LeaseRequest{Class: spark.Development})
	refused("a host asking for a lease", err)
	refused("a host reporting the other host", host2.Heartbeat(ctx, "spark-1", 0))
	refused("the operator reporting a host clean", ops.Heartbeat(ctx, "spark-2", 0))
	refused("a host checking the other host's fencing", host1.CheckToken(ctx, "spark-2", st.Request.Token))
	refused("a host releasing the other host's lease", host1.Release(ctx, dev.Request.ID, st.Request.Token))
	refused("an agent cancelling another's request", bob.Cancel(ctx, queued.Request.ID))
	refused("an agent releasing another's lease", bob.Release(ctx, dev.Request.ID, st.Request.Token))
	refused("an agent terminating", alice.Terminate(ctx, dev.Request.ID))
	refused("a host terminating", host2.Terminate(ctx, dev.Request.ID))

	allowed("a host reporting itself", host2.Heartbeat(ctx, "spark-2", 0))
	allowed("a host checking its own fencing", host2.CheckToken(ctx, "spark-2", st.Request.Token))
	allowed("an agent cancelling its own request", alice.Cancel(ctx, queued.Request.ID))
	allowed("the operator terminating", ops.Terminate(ctx, dev.Request.ID))
	if got := f.status(t, dev.Request.ID).Request.State; got != spark.Terminated {
		t.Errorf("after the operator's terminate the lease is %s", got)
	}
}

// Anyone may read a lease's state, but its fencing token (which releases
// the lease and passes the host's fencing check) only who may act on it:
// the operator, the agent that owns it and the hosts it holds.
func TestAPI_OnlyWhoMayActOnALeaseSeesItsFencingToken(t *testing.T) {
	f := newFleet(t)
	h, err := spark.NewAuthHandler(f.c, spark.Tokens{
		"operator-token-0123456": {Role: spark.RoleOperator, Name: "ops"},
		"spark-1-host-token-012": {Role: spark.RoleHost, Name: "spark-1"},
		"spark-2-host-token-012": {Role: spark.RoleHost, Name: "spark-2"},
		"alice-agent-token-0123": {Role: spark.RoleAgent, Name: "alice"},
		"bob-agent-token-012345": {Role: spark.RoleAgent, Name: "bob"},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	as := func(tok string) *spark.APIClient { c, _ := spark.NewAPIClient(srv.URL, tok, srv.Client()); return c }
	alice := as("alice-agent-token-0123")
	dev, err := alice.Request(ctx, spark.LeaseRequest{Class: spark.Development})
	if err != nil {
		t.Fatal(err)
	}
	f.beat(t, 0, 0)
	f.reconcile(t)
	want := f.status(t, dev.Request.ID).Request
	if want.State != spark.Active || want.Token == 0 || !slices.Equal(want.Hosts, []string{"spark-2"}) {
		t.Fatalf("alice's lease: %+v", want)
	}
	for _, c := range []struct {
		who, token string
		sees       bool
	}{
		{"the operator", "operator-token-0123456", true},
		{"the owner", "alice-agent-token-0123", true},
		{"the leased host", "spark-2-host-token-012", true},
		{"another agent", "bob-agent-token-012345", false},
		{"another host", "spark-1-host-token-012", false},
	} {
		cl := as(c.token)
		st, err := cl.Status(ctx, dev.Request.ID)
		if err != nil || st.Request.State != spark.Active {
			t.Fatalf("%s reading the lease: %+v %v", c.who, st.Request, err)
		}
		waited, err := cl.Wait(ctx, dev.Request.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, got := range []int64{st.Request.Token, waited.Request.Token} {
			if seen := got == want.Token; seen != c.sees {
				t.Errorf("%s sees the fencing token: %v, want %v", c.who, seen, c.sees)
			}
			if !c.sees && got != 0 {
				t.Errorf("%s got token %d", c.who, got)
			}
		}
	}
}

// An agent's lease is attributed to the agent that asked, whatever owner
// its request names.
func TestAPI_ALeaseIsAttributedToTheAgentThatAskedForIt(t *testing.T) {
	f := newFleet(t)
	h, _ := spark.NewAuthHandler(f.c, spark.Tokens{"alice-agent-token-0123": {Role: spark.RoleAgent, Name: "alice"}})
	srv := httptest.NewServer(h)
	defer srv.Close()
	alice, _ := spark.NewAPIClient(srv.URL, "alice-agent-token-0123", srv.Client())
	st, err := alice.Request(ctx, spark.LeaseRequest{Class: spark.Development, Owner: "the-maintainer"})
	if err != nil || st.Request.Owner != "alice" {
		t.Errorf("owner %q (%v), want alice", st.Request.Owner, err)
	}
}

// A token file holds only hashes; editing it adds, rotates and revokes
// tokens without a restart, and an edit that does not parse keeps the
// last good tokens and says why.
func TestTokenFile_HoldsOnlyHashesAndRotatesWithoutRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	oldTok, newTok := spark.NewToken(), spark.NewToken()
	write := func(content string, at time.Time) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(path, at, at) // a visible change, whatever the clock's resolution
	}
	start := time.Now()
	write("# the agents\nagent alice "+spark.HashToken(oldTok)+"\n", start)
	tf, err := spark.LoadTokenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := tf.Lookup(oldTok); !ok || c.Name != "alice" {
		t.Fatalf("the token in the file: %+v %v", c, ok)
	}
	write("agent alice "+spark.HashToken(newTok)+"\n", start.Add(time.Second))
	if _, ok := tf.Lookup(oldTok); ok {
		t.Error("the rotated-out token still works")
	}
	if c, ok := tf.Lookup(newTok); !ok || c.Role != spark.RoleAgent {
		t.Error("the new token does not work without a restart")
	}
	write("agent alice "+spark.HashToken(newTok)+"\nagent bob "+newTok+"\n", start.Add(2*time.Second)) // a plain token by mistake
	if _, ok := tf.Lookup(newTok); !ok {
		t.Error("a broken edit dropped the tokens whose lines still stand")
	}
	if !errors.Is(tf.Err(), spark.ErrInvalid) {
		t.Errorf("Err() = %v, want ErrInvalid for the broken edit", tf.Err())
	}
	data, _ := os.ReadFile(path)
	if _, err := spark.ParseTokens(data); !errors.Is(err, spark.ErrInvalid) || strings.Contains(err.Error(), newTok) {
		t.Errorf("a plain token in the file: %v, want ErrInvalid that does not repeat it", err)
	}
}

// A change of the token file that does not parse is reported once and
// takes effect only as a revocation: a token whose line the edit removed
// stops working at once, one whose line stands keeps working, and none is
// added until the file parses; removing the file revokes every token.
func TestTokenFile_ABrokenEditRevokesButNeverGrants(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	alice, bob, carol := spark.NewToken(), spark.NewToken(), spark.NewToken()
	start := time.Now()
	write := func(content string, at time.Duration) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(path, start.Add(at), start.Add(at))
	}
	line := func(name, tok string) string { return "agent " + name + " " + spark.HashToken(tok) + "\n" }
	write(line("alice", alice)+line("bob", bob), 0)
	var reported []error
	tf, err := spark.LoadTokenFile(path, spark.ReportRejected(func(err error) { reported = append(reported, err) }))
	if err != nil {
		t.Fatal(err)
	}
	// bob is revoked (his line removed), carol added, and a line broken.
	write(line("alice", alice)+line("carol", carol)+"agent dave not-a-hash\n", time.Second)
	works := func(tok string) bool { _, ok := tf.Lookup(tok); return ok }
	if !works(alice) {
		t.Error("alice's unchanged line stopped working")
	}
	if works(bob) {
		t.Error("bob's token, whose line the broken edit removed, still works")
	}
	if works(carol) {
		t.Error("carol's token was added by an edit that does not parse")
	}
	works(alice)
	if len(reported) != 1 || !errors.Is(reported[0], spark.ErrInvalid) || !errors.Is(tf.Err(), spark.ErrInvalid) {
		t.Errorf("reported %v (Err %v), want the rejected change once, as ErrInvalid", reported, tf.Err())
	}
	write(line("alice", alice)+line("carol", carol), 2*time.Second)
	if !works(carol) || tf.Err() != nil {
		t.Errorf("the fixed file: carol works %v, Err %v", works(carol), tf.Err())
	}
	os.Remove(path)
	if works(alice) || works(carol) {
		t.Error("a removed token file still grants its tokens")
	}
	if len(reported) != 2 {
		t.Errorf("the removal was reported %d time(s) in all, want once more", len(reported)-1)
	}
}

// The operator's token: a fresh one is written readable only by its
// owner; a file with a token shorter than MinTokenLength is refused.
func TestOperatorToken_AFreshOneIsPrivateAndAShortOneIsRefused(t *testing.T) {
	dir := t.TempDir()
	tok, file, err := spark.OperatorToken("", dir)
	if err != nil || len(tok) < spark.MinTokenLength {
		t.Fatalf("%q %v", tok, err)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: %v %v", file, fi.Mode(), err)
	}
	if again, _, err := spark.OperatorToken(file, dir); err != nil || again != tok {
		t.Errorf("reading it back: %q %v", again, err)
	}
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("tooshort\n"), 0o600)
	if _, _, err := spark.OperatorToken(short, dir); !errors.Is(err, spark.ErrInvalid) {
		t.Errorf("a short token: %v, want ErrInvalid", err)
	}
}

// Token-file parsing never panics, every refusal is ErrInvalid and
// repeats no field long enough to be a token, and what it accepts is a
// known role, a name (never an internal owner's, for an agent or an
// operator) and a hash.
func FuzzParseTokens(f *testing.F) {
	f.Add([]byte("agent alice " + spark.HashToken("a") + "\n# comment\nhost spark-1 " + spark.HashToken("b") + "\n"))
	f.Add([]byte("operator ops sha256:zz\n"))
	f.Add([]byte("agent a " + spark.HashToken("x") + "\nagent b " + spark.HashToken("x") + "\n"))
	f.Add([]byte("agent github " + spark.HashToken("a") + "\noperator schedule:nightly " + spark.HashToken("b") + "\n"))
	f.Add([]byte(spark.NewToken() + " alice " + spark.HashToken("a") + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := spark.ParseTokens(data)
		if err != nil {
			if !errors.Is(err, spark.ErrInvalid) {
				t.Fatalf("a token file error that is not ErrInvalid: %v", err)
			}
			for _, field := range strings.Fields(string(data)) {
				if len(field) >= spark.MinTokenLength && strings.Contains(err.Error(), field) {
					t.Fatalf("the error repeats the field %q: %v", field, err)
				}
			}
			return
		}
		for hash, c := range got {
			if !strings.HasPrefix(hash, "sha256:") || c.Name == "" || (c.Role != spark.RoleAgent && c.Role != spark.RoleHost && c.Role != spark.RoleOperator) {
				t.Fatalf("accepted %q %+v", hash, c)
			}
			if c.Role != spark.RoleHost && spark.ReservedName(c.Name) {
				t.Fatalf("accepted an %s named like an internal owner: %+v", c.Role, c)
			}
		}
	})
}
