package main

import (
	"bytes"
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
