package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpugate/gpugate/spark"
)

// sparkd token prints a fresh token once and appends only its hash; a
// role it does not know or a missing flag is a refused command line.
func TestToken_TheFileHoldsOnlyTheHashOfWhatIsPrintedOnce(t *testing.T) {
	file, tok := hostToken(t, t.TempDir(), "spark-1")
	data, _ := os.ReadFile(file)
	if strings.Contains(string(data), tok) || !strings.Contains(string(data), "host spark-1 "+spark.HashToken(tok)) {
		t.Errorf("token file %q for token %s", data, tok)
	}
	tf, err := spark.LoadTokenFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := tf.Lookup(tok); !ok || c != (spark.Credential{Role: spark.RoleHost, Name: "spark-1"}) {
		t.Errorf("the printed token resolves to %+v %v", c, ok)
	}
	for _, args := range [][]string{
		{"-tokens", file, "-role", "root", "-name", "x"},
		{"-tokens", file, "-role", "host"},
		{"-role", "host", "-name", "spark-2"},
	} {
		var out, errOut bytes.Buffer
		if code := mintToken(args, &out, &errOut); code != 2 || out.Len() != 0 {
			t.Errorf("%v: exit %d, printed %q", args, code, out.String())
		}
	}
	if after, _ := os.ReadFile(filepath.Clean(file)); !bytes.Equal(after, data) {
		t.Error("a refused command line changed the token file")
	}
}

// With -tokens and no -token-file sparkd generates no operator token: it
// writes none beside the database and its listening message claims no
// token file; the operators are the token file's operator lines.
func TestTokens_WithoutATokenFileFlagNoOperatorTokenIsGenerated(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	ops := mint(t, tokens, spark.RoleOperator, "ops")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := startSparkd(ctx, t, "-init", "-db", filepath.Join(dir, "spark.db"), "-tokens", tokens)
	cl, _ := spark.NewAPIClient(d.addr, ops, nil)
	if _, err := cl.Request(ctx, spark.LeaseRequest{Class: spark.MergeCI}); err != nil {
		t.Errorf("the token file's operator: %v", err)
	}
	cancel()
	if code := <-d.done; code != 0 {
		t.Fatalf("exit %d: %s", code, d.logs.String())
	}
	if d.tokenFile != "" {
		t.Errorf("sparkd reports an operator token file %s", d.tokenFile)
	}
	if _, err := os.Stat(filepath.Join(dir, "api-token")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an operator token was written beside the database: %v", err)
	}
	listening := ""
	for line := range strings.Lines(d.logs.String()) {
		if strings.HasPrefix(line, "sparkd: listening") {
			listening = line
		}
	}
	if listening == "" || strings.Contains(listening, "the API token is in") || !strings.Contains(listening, tokens) {
		t.Errorf("the listening message %q: it must name the token file's operator lines, not an operator token file", listening)
	}
	if strings.Contains(d.logs.String(), ops) {
		t.Error("the operator's token was logged")
	}
}
