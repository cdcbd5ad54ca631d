package ghaction

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSetOutputs(t *testing.T) {
	dir := t.TempDir()
	e := Env{Output: filepath.Join(dir, "out")}
	if err := e.SetOutputs([2]string{"class", "code"}, [2]string{"multi", "a\nb=c"}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(e.Output)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(got), "\n")
	if lines[0] != "class=code" || !strings.HasPrefix(lines[1], "multi<<ghadelim_") || lines[2] != "a" || lines[3] != "b=c" || lines[4] != strings.TrimPrefix(lines[1], "multi<<") {
		t.Errorf("output file:\n%s", got)
	}
	if err := e.SetOutputs([2]string{"bad name", "x"}); err == nil {
		t.Error("want an error for an invalid output name")
	}
	if err := (Env{}).SetOutputs([2]string{"x", "y"}); err != nil {
		t.Errorf("outside Actions: %v, want a no-op", err)
	}
}

func TestAppendSummaryAndError(t *testing.T) {
	e := Env{Summary: filepath.Join(t.TempDir(), "sum")}
	if err := e.AppendSummary("# a\n"); err != nil {
		t.Fatal(err)
	}
	if err := e.AppendSummary("b\n"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(e.Summary); string(got) != "# a\nb\n" {
		t.Errorf("summary = %q", got)
	}
	var buf bytes.Buffer
	Error(&buf, "50% done\nnext")
	if got := buf.String(); got != "::error::50%25 done%0Anext\n" {
		t.Errorf("Error wrote %q", got)
	}
	if got := MarkdownCell("a|b\nc"); got != `a\|b c` {
		t.Errorf("MarkdownCell = %q", got)
	}
}
