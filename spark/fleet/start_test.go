package fleet_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/fleet"
)

// Start refuses what it cannot run before it opens anything: schedules
// without the GitHub integration make no database.
func TestStart_RefusesSchedulesWithoutGitHubBeforeOpeningAnything(t *testing.T) {
	f, err := fleet.Load([]byte("hosts:\n  - {name: gpu-a, managed: true}\nschedules:\n  - {name: nightly, repo: o/butter, branch: main, class: benchmark, suite: performance, at: '03:00'}\n"))
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "spark.db")
	if _, err := fleet.Start(context.Background(), f, fleet.Settings{DB: db, Init: true}); !errors.Is(err, fleet.ErrSettings) {
		t.Fatalf("schedules without GitHub: %v, want ErrSettings", err)
	}
	if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused Start made the database: %v", err)
	}
}

// A change of the token file that does not parse is logged and sent as an
// alert, naming neither the file's path nor any token; the tokens whose
// lines stand keep working.
func TestStart_ARejectedTokenFileChangeIsLoggedAndAlerted(t *testing.T) {
	dir := t.TempDir()
	alerted := filepath.Join(dir, "alerts")
	f, err := fleet.Load([]byte("hosts:\n  - {name: gpu-a, managed: true}\nalert_command: printf '%s|%s\\n' \"$SPARK_ALERT_KIND\" \"$SPARK_ALERT_DETAIL\" >> " + alerted + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(dir, "tokens")
	tok, err := spark.AddToken(tokens, spark.RoleAgent, "alice")
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	d, err := fleet.Start(context.Background(), f, fleet.Settings{DB: filepath.Join(dir, "spark.db"), Init: true, TokensFile: tokens,
		Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(d.API)
	defer srv.Close()
	data, _ := os.ReadFile(tokens)
	os.WriteFile(tokens, append(data, "agent bob "+spark.NewToken()+"\n"...), 0o600) // a plain token by mistake
	later := time.Now().Add(time.Second)
	os.Chtimes(tokens, later, later)
	alice, _ := spark.NewAPIClient(srv.URL, tok, nil)
	if _, err := alice.Hosts(context.Background()); err != nil {
		t.Errorf("alice's standing token stopped working: %v", err)
	}
	d.Close() // waits for the alert in flight
	got, _ := os.ReadFile(alerted)
	if !strings.HasPrefix(string(got), "token-file-rejected|") || strings.Contains(string(got), tokens) {
		t.Errorf("alerts %q, want one token-file-rejected without the file's path", got)
	}
	if !strings.Contains(logs.String(), "sparkd.tokens_rejected") || strings.Contains(logs.String(), tok) {
		t.Errorf("the log does not name the rejected change, or shows a token:\n%s", logs.String())
	}
}

// With a token file and no operator token file, Start generates no
// operator token: the operators are the token file's operator lines, so
// the operator's credential is hashed, and rotated or revoked without a
// restart. Without a token file (the quick start) one is generated.
func TestStart_WithATokenFileTheOperatorsAreItsOperatorLines(t *testing.T) {
	dir := t.TempDir()
	f, err := fleet.Load([]byte("hosts:\n  - {name: gpu-a, managed: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(dir, "tokens")
	oldTok, err := spark.AddToken(tokens, spark.RoleOperator, "ops")
	if err != nil {
		t.Fatal(err)
	}
	d, err := fleet.Start(context.Background(), f, fleet.Settings{DB: filepath.Join(dir, "spark.db"), Init: true, TokensFile: tokens})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.TokenFile != "" {
		t.Errorf("Start reports an operator token file %s, want none", d.TokenFile)
	}
	if _, err := os.Stat(filepath.Join(dir, "api-token")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an operator token was written beside the database: %v", err)
	}
	srv := httptest.NewServer(d.API)
	defer srv.Close()
	operator := func(tok string) error {
		cl, _ := spark.NewAPIClient(srv.URL, tok, nil)
		_, err := cl.Request(context.Background(), spark.LeaseRequest{Class: spark.MergeCI}) // an operator's request
		return err
	}
	if err := operator(oldTok); err != nil {
		t.Fatalf("the token file's operator: %v", err)
	}
	// The operator's token rotated in the file: no restart.
	newTok := spark.NewToken()
	if err := os.WriteFile(tokens, []byte("operator ops "+spark.HashToken(newTok)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Second)
	os.Chtimes(tokens, later, later)
	var ae *spark.APIError
	if err := operator(oldTok); !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized {
		t.Errorf("the rotated-out operator token: %v, want 401", err)
	}
	if err := operator(newTok); err != nil {
		t.Errorf("the rotated-in operator token: %v", err)
	}

	quick, err := fleet.Start(context.Background(), f, fleet.Settings{DB: filepath.Join(t.TempDir(), "spark.db"), Init: true})
	if err != nil {
		t.Fatal(err)
	}
	defer quick.Close()
	if data, err := os.ReadFile(quick.TokenFile); err != nil || len(strings.TrimSpace(string(data))) < spark.MinTokenLength {
		t.Errorf("the quick start's operator token file %q: %v", quick.TokenFile, err)
	}
}

// The simulated fleet runs with no real host: its heartbeats come from the
// daemon's rounds and its resident service comes online at once.
func TestSimulated_TheDefaultFleetRunsWithNoRealHost(t *testing.T) {
	ctx := context.Background()
	d, err := fleet.Start(ctx, fleet.Simulated(), fleet.Settings{DB: filepath.Join(t.TempDir(), "spark.db"), Init: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d.SimulateHeartbeats()
	d.BeforeRound(ctx)
	if err := d.Controller.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	hosts, _ := d.Controller.Hosts(ctx)
	modes := map[string]spark.Mode{}
	for _, h := range hosts {
		modes[h.Name] = h.Mode
	}
	if modes["spark-1"] != spark.ServiceRunning || modes["spark-2"] != spark.Idle {
		t.Errorf("after one simulated round the hosts are %v, want the service running on spark-1 and spark-2 idle", modes)
	}
}
