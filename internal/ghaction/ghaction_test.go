package ghaction

import (
	"bytes"
	"errors"
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

func TestFail(t *testing.T) {
	var out, errOut bytes.Buffer
	Env{}.Fail(&out, &errOut, errors.New("boom"))
	if out.Len() != 0 || errOut.String() != "boom\n" {
		t.Errorf("outside Actions: stdout %q stderr %q", out.String(), errOut.String())
	}
	out.Reset()
	errOut.Reset()
	FromEnv(func(k string) string { return map[string]string{"GITHUB_ACTIONS": "true"}[k] }).Fail(&out, &errOut, errors.New("boom"))
	if out.String() != "::error::boom\n" || errOut.String() != "boom\n" {
		t.Errorf("in Actions: stdout %q stderr %q", out.String(), errOut.String())
	}
}
