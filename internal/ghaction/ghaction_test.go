package ghaction

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
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

// Warn and Note annotate stdout in Actions (one line, escaped) and print a
// plain line on stderr elsewhere.
func TestWarnAndNote(t *testing.T) {
	actions := FromEnv(func(k string) string { return map[string]string{"GITHUB_ACTIONS": "true"}[k] })
	for name, tc := range map[string]struct {
		say            func(Env, io.Writer, io.Writer, string)
		env            Env
		stdout, stderr string
	}{
		"warn in Actions": {Env.Warn, actions, "::warning::50%25 done%0Anext\n", ""},
		"note in Actions": {Env.Note, actions, "::notice::50%25 done%0Anext\n", ""},
		"warn elsewhere":  {Env.Warn, Env{}, "", "50% done\nnext\n"},
		"note elsewhere":  {Env.Note, Env{}, "", "50% done\nnext\n"},
	} {
		var out, errOut bytes.Buffer
		tc.say(tc.env, &out, &errOut, "50% done\nnext")
		if out.String() != tc.stdout || errOut.String() != tc.stderr {
			t.Errorf("%s: stdout %q stderr %q", name, out.String(), errOut.String())
		}
	}
}

// Echo prints each call's outputs as one JSON object, in order, in or
// outside Actions: a JSON object or array value is embedded, every other
// value stays the string the step output carries.
func TestSetOutputs_EchoesOneJSONObjectPerCall(t *testing.T) {
	var echo bytes.Buffer
	e := Env{Echo: &echo}
	if err := e.SetOutputs([2]string{"ok", "true"}, [2]string{"links", "3"}, [2]string{"matrix", `[{"shard": 0}]`},
		[2]string{"filter", "test(=a) & test(=b)"}, [2]string{"sha", "0123456789"}, [2]string{"broken", "[not json"}); err != nil {
		t.Fatal(err)
	}
	if err := e.SetOutputs([2]string{"second", "call"}); err != nil {
		t.Fatal(err)
	}
	want := `{"ok":"true","links":"3","matrix":[{"shard":0}],"filter":"test(=a) & test(=b)","sha":"0123456789","broken":"[not json"}` + "\n" + `{"second":"call"}` + "\n"
	if echo.String() != want {
		t.Errorf("echo:\n%s\nwant:\n%s", echo.String(), want)
	}
	if err := e.SetOutputs([2]string{"bad name", "x"}); err == nil || strings.Contains(echo.String(), "bad name") {
		t.Errorf("an invalid output name: %v, echoed %q", err, echo.String())
	}
}

// -json sends the command's text to io.Discard and its outputs, as JSON,
// to the stdout it was given; a later -json=false undoes it.
func TestJSONFlag(t *testing.T) {
	tests := map[string]struct {
		args     []string
		wantText string
		wantJSON string
	}{
		"text by default":       {nil, "human\n", ""},
		"-json":                 {[]string{"-json"}, "", `{"k":"v"}` + "\n"},
		"-json=false":           {[]string{"-json=false"}, "human\n", ""},
		"-json then false":      {[]string{"-json", "-json=false"}, "human\n", ""},
		"-json given twice":     {[]string{"-json", "-json"}, "", `{"k":"v"}` + "\n"},
		"false then -json=true": {[]string{"-json=false", "-json=true"}, "", `{"k":"v"}` + "\n"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			var stdout io.Writer = &out
			var gha Env
			fs := flag.NewFlagSet("tool", flag.ContinueOnError)
			JSONFlag(fs, &stdout, &gha)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintln(stdout, "human")
			if err := gha.SetOutputs([2]string{"k", "v"}); err != nil {
				t.Fatal(err)
			}
			if want := tt.wantText + tt.wantJSON; out.String() != want {
				t.Errorf("stdout %q, want %q", out.String(), want)
			}
		})
	}
}

// Whatever the values, -json prints one valid JSON object whose keys are
// the output names in order, and a value that is not embedded JSON reads
// back as the string the step output carries (invalid UTF-8 aside, which
// JSON cannot carry).
func FuzzOutputsJSON(f *testing.F) {
	f.Add("true", `[{"shard":0}]`)
	f.Add("a & b <c>", "{not json")
	f.Add("line\nbreak", `  {"k": [1, 2]}  `)
	f.Fuzz(func(t *testing.T, a, b string) {
		out := outputsJSON([][2]string{{"a", a}, {"b", b}})
		if !json.Valid(out) {
			t.Fatalf("invalid JSON for %q, %q: %s", a, b, out)
		}
		var got map[string]json.RawMessage
		if err := json.Unmarshal(out, &got); err != nil || len(got) != 2 {
			t.Fatalf("%s: %v", out, err)
		}
		for name, v := range map[string]string{"a": a, "b": b} {
			var s string
			if json.Unmarshal(got[name], &s) == nil && utf8.ValidString(v) && s != v {
				t.Errorf("%s: %q reads back as %q", name, v, s)
			}
		}
	})
}

// GitHub uploads none of a step summary over 1 MiB. Appends that would
// pass it are cut, with a note, and what fits is kept.
func TestAppendSummary_AStepSummaryNeverExceedsGitHubsLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "summary")
	e := Env{Summary: path}
	if err := e.AppendSummary("# Report\n"); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("| a row of a long table |\n", 50_000) // 1.3 MB
	if err := e.AppendSummary(big); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if len(data) > MaxStepSummary || !strings.HasPrefix(string(data), "# Report\n| a row") || !strings.HasSuffix(string(data), "(truncated: GitHub shows none of a step summary over 1 MiB)\n") {
		t.Errorf("%d bytes, ending %q", len(data), data[max(0, len(data)-80):])
	}
	// A full summary takes nothing more, and is not an error.
	if err := e.AppendSummary("more\n"); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(path); len(after) != len(data) {
		t.Errorf("a full summary grew from %d to %d bytes", len(data), len(after))
	}
}

// Annotate says a failure the command's output already explained: an
// annotation in Actions (on stderr when stdout is JSON), nothing
// elsewhere.
func TestAnnotate_OnlyInActions(t *testing.T) {
	for name, tc := range map[string]struct {
		env            Env
		stdout, stderr string
	}{
		"outside Actions":   {Env{}, "", ""},
		"in Actions":        {Env{Actions: true}, "::error::differs\n", ""},
		"in Actions, -json": {Env{Actions: true, JSON: true}, "", "::error::differs\n"},
	} {
		var out, errOut bytes.Buffer
		tc.env.Annotate(&out, &errOut, "differs")
		if out.String() != tc.stdout || errOut.String() != tc.stderr {
			t.Errorf("%s: stdout %q stderr %q, want %q %q", name, out.String(), errOut.String(), tc.stdout, tc.stderr)
		}
	}
}
