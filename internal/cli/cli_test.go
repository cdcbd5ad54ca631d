package cli_test

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/gpugate/gpugate/internal/cli"
)

func TestParse(t *testing.T) {
	tests := map[string]struct {
		args     []string
		exit     int
		ok       bool
		stderr   string
		wantFlag string
	}{
		"flags":           {[]string{"-pod", "p1"}, 0, true, "", "p1"},
		"no arguments":    {nil, 0, true, "", ""},
		"help":            {[]string{"-h"}, 0, false, "Usage of tool", ""},
		"unknown flag":    {[]string{"-nope"}, 2, false, "flag provided but not defined: -nope", ""},
		"stray argument":  {[]string{"-pod", "p1", "extra"}, 2, false, `tool: unexpected argument "extra": this command takes flags only`, "p1"},
		"after a --":      {[]string{"--", "-pod"}, 2, false, `unexpected argument "-pod"`, ""},
		"missing a value": {[]string{"-pod"}, 2, false, "flag needs an argument: -pod", ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var stderr bytes.Buffer
			fs := flag.NewFlagSet("tool", flag.ContinueOnError)
			fs.SetOutput(&stderr)
			pod := fs.String("pod", "", "a pod")
			exit, ok := cli.Parse(fs, tt.args)
			if exit != tt.exit || ok != tt.ok || *pod != tt.wantFlag {
				t.Errorf("Parse = %d, %v (pod %q), want %d, %v (pod %q)", exit, ok, *pod, tt.exit, tt.ok, tt.wantFlag)
			}
			if tt.stderr == "" && stderr.Len() > 0 || !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("stderr = %q, want %q", stderr.String(), tt.stderr)
			}
		})
	}
}

func TestFlagsAndStatus_ForSubcommands(t *testing.T) {
	tests := map[string]struct {
		args      []string
		positions bool
		status    int
		stderr    string
	}{
		"flags only":                  {[]string{"-pod", "p1"}, false, 0, ""},
		"help":                        {[]string{"-h"}, false, 0, "Usage of tool"},
		"unknown flag":                {[]string{"-nope"}, false, 2, "flag provided but not defined: -nope"},
		"stray argument":              {[]string{"extra"}, false, 2, `unexpected argument "extra"`},
		"positional arguments":        {[]string{"-pod", "p1", "a.tsv", "b.tsv"}, true, 0, ""},
		"bad flag before positionals": {[]string{"-nope", "a.tsv"}, true, 2, "flag provided but not defined: -nope"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var stderr bytes.Buffer
			fs := flag.NewFlagSet("tool", flag.ContinueOnError)
			fs.SetOutput(&stderr)
			fs.String("pod", "", "a pod")
			parse := cli.Flags
			if tt.positions {
				parse = cli.FlagsAndArgs
			}
			err := parse(fs, tt.args)
			if got := cli.Status(err); got != tt.status {
				t.Errorf("Status(%v) = %d, want %d", err, got, tt.status)
			}
			if tt.status == 2 && !errors.Is(err, cli.ErrUsage) {
				t.Errorf("error %v does not wrap ErrUsage", err)
			}
			if tt.stderr == "" && stderr.Len() > 0 || !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("stderr = %q, want %q", stderr.String(), tt.stderr)
			}
		})
	}
	if got := cli.Status(errors.New("the work failed")); got != 1 {
		t.Errorf("Status of a failure = %d, want 1", got)
	}
}

func TestRunFlags_DefaultToTheRunTheCommandRunsIn(t *testing.T) {
	for name, tc := range map[string]struct {
		env     map[string]string
		args    []string
		id      int64
		attempt int
	}{
		"in Actions":        {map[string]string{"GITHUB_RUN_ID": "77", "GITHUB_RUN_ATTEMPT": "2"}, nil, 77, 2},
		"outside Actions":   {nil, nil, 0, 1},
		"given as flags":    {map[string]string{"GITHUB_RUN_ID": "77", "GITHUB_RUN_ATTEMPT": "2"}, []string{"-run-id", "9", "-run-attempt", "3"}, 9, 3},
		"a garbled attempt": {map[string]string{"GITHUB_RUN_ATTEMPT": "two"}, nil, 0, 1},
	} {
		t.Run(name, func(t *testing.T) {
			var id int64
			var attempt int
			fs := flag.NewFlagSet("tool", flag.ContinueOnError)
			cli.RunFlags(fs, func(k string) string { return tc.env[k] }, &id, &attempt, "of the job")
			if err := fs.Parse(tc.args); err != nil || id != tc.id || attempt != tc.attempt {
				t.Errorf("run %d attempt %d (%v), want %d attempt %d", id, attempt, err, tc.id, tc.attempt)
			}
		})
	}
}

func TestSplitRepo(t *testing.T) {
	if owner, name, err := cli.SplitRepo("x", "o/r"); err != nil || owner != "o" || name != "r" {
		t.Errorf("o/r: %q %q %v", owner, name, err)
	}
	for _, bad := range []string{"", "o", "o/", "/r", "o/r/extra"} {
		if _, _, err := cli.SplitRepo("gate", bad); !errors.Is(err, cli.ErrRepo) || !strings.HasPrefix(err.Error(), "gate: -repo ") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestFirstLine(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"one line", 20, "one line"},
		{"first\nsecond", 20, "first"},
		{"exactly ten", 11, "exactly ten"},
		{"a bit longer than that", 8, "a bit lo…"},
		{"ééééé", 3, "ééé…"}, // never half a character
		{"", 5, ""},
	} {
		if got := cli.FirstLine(tc.in, tc.n); got != tc.want {
			t.Errorf("FirstLine(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

func TestRequire_AFlagLeftOutOrGivenEmptyIsRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		args   []string
		env    string // -repo's default, as from GITHUB_REPOSITORY
		stderr string
	}{
		"all given":          {[]string{"-head", "h", "-pr", "7"}, "o/r", ""},
		"one left out":       {[]string{"-head", "h"}, "o/r", "tool: -pr is required (tool -h lists the flags)\n"},
		"two left out":       {nil, "o/r", "tool: -head and -pr are required (tool -h lists the flags)\n"},
		"given empty":        {[]string{"-head", "", "-pr", "7"}, "o/r", "tool: -head is required"},
		"no default":         {[]string{"-head", "h", "-pr", "7"}, "", "tool: -repo is required"},
		"a zero duration":    {[]string{"-head", "h", "-pr", "7", "-wait", "0s"}, "o/r", ""},
		"three of them gone": {[]string{"-pr", "0"}, "", "tool: -repo, -head and -pr are required"},
	} {
		t.Run(name, func(t *testing.T) {
			var stderr bytes.Buffer
			fs := flag.NewFlagSet("tool", flag.ContinueOnError)
			fs.SetOutput(&stderr)
			fs.String("repo", tc.env, "")
			fs.String("head", "", "")
			fs.Int("pr", 0, "")
			fs.Duration("wait", 0, "") // not required: its zero is a value
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := cli.Require(fs, "repo", "head", "pr")
			if (tc.stderr == "") != (err == nil) || err != nil && (!errors.Is(err, cli.ErrUsage) || cli.Status(err) != 2) {
				t.Errorf("Require = %v, want a refusal: %v", err, tc.stderr != "")
			}
			if !strings.HasPrefix(stderr.String(), tc.stderr) || tc.stderr == "" && stderr.Len() > 0 {
				t.Errorf("stderr %q, want %q", stderr.String(), tc.stderr)
			}
		})
	}
}

func TestDispatch_OneSubcommandStyle(t *testing.T) {
	var ran []string
	subs := []cli.Subcommand{
		{Name: "collect", Usage: "-dir DIR", Run: func(args []string) error {
			fs := flag.NewFlagSet("tool collect", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			dir := fs.String("dir", "", "")
			if err := cli.Flags(fs, args); err != nil {
				return err
			}
			ran = append(ran, "collect "+*dir)
			return nil
		}},
		{Name: "summarize", Usage: "", Run: func(args []string) error { ran = append(ran, "summarize"); return errors.New("the work failed") }},
	}
	for name, tc := range map[string]struct {
		args   []string
		status int
		ran    []string
		stderr string
	}{
		"its flags after the verb": {[]string{"collect", "-dir", "d"}, 0, []string{"collect d"}, ""},
		"a work failure":           {[]string{"summarize"}, 1, []string{"summarize"}, ""},
		"help":                     {[]string{"-h"}, 0, nil, "  tool collect -dir DIR\n"},
		"help as a word":           {[]string{"help"}, 0, nil, "tool SUBCOMMAND -h lists"},
		"no subcommand":            {nil, 2, nil, "usage: tool collect|summarize [flags] (tool -h lists them)\n"},
		"an unknown one":           {[]string{"publish"}, 2, nil, `tool: unknown subcommand "publish": use collect or summarize (tool -h lists them)` + "\n"},
		"a flag before the verb":   {[]string{"-dir", "d", "collect"}, 2, nil, `unknown subcommand "-dir"`},
		"a stray argument":         {[]string{"collect", "extra"}, 2, nil, ""},
	} {
		t.Run(name, func(t *testing.T) {
			ran = nil
			var stderr bytes.Buffer
			err := cli.Dispatch("tool", &stderr, tc.args, subs...)
			if got := cli.Status(err); got != tc.status || !slices.Equal(ran, tc.ran) {
				t.Errorf("status %d, ran %q; want %d, %q (%v)", got, ran, tc.status, tc.ran, err)
			}
			if !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("stderr %q, want %q", stderr.String(), tc.stderr)
			}
			if tc.status == 2 && strings.Count(strings.TrimSpace(stderr.String()), "\n") > 0 {
				t.Errorf("a refusal takes one line: %q", stderr.String())
			}
		})
	}
}

func TestList(t *testing.T) {
	for _, tc := range []struct {
		items []string
		want  string
	}{{nil, ""}, {[]string{"a"}, "a"}, {[]string{"a", "b"}, "a or b"}, {[]string{"a", "b", "c"}, "a, b or c"}} {
		if got := cli.List(tc.items, "or"); got != tc.want {
			t.Errorf("List(%q) = %q, want %q", tc.items, got, tc.want)
		}
	}
}

// -v logs events as text on the writer given; without it nothing is
// logged.
func TestLogger_TextWithVerboseElseNothing(t *testing.T) {
	var b bytes.Buffer
	cli.Logger(false, &b).Info("quiet")
	if b.Len() != 0 {
		t.Errorf("logged without -v: %q", b.String())
	}
	cli.Logger(true, &b).Info("loud", "pod", "p1")
	if !strings.Contains(b.String(), "msg=loud pod=p1") {
		t.Errorf("with -v: %q", b.String())
	}
}

// With -json stdout carries only the document: the text goes nowhere and
// the narration to stderr.
func TestWriters_WithJSONNoTextAndNarrationOnStderr(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if text, narration := cli.Writers(false, &stdout, &stderr); text != io.Writer(&stdout) || narration != io.Writer(&stdout) {
		t.Error("without -json both go to stdout")
	}
	if text, narration := cli.Writers(true, &stdout, &stderr); text != io.Discard || narration != io.Writer(&stderr) {
		t.Error("with -json the text goes nowhere and the narration to stderr")
	}
}

// Flags before a verb go after it, so the verb parses them as its own;
// a flag no verb knows is refused; "--" ends the flags.
func TestHoist_FlagsBeforeTheVerbAreTheVerbs(t *testing.T) {
	for name, tc := range map[string]struct {
		args, want []string
		status     int
	}{
		"flags before the verb":  {[]string{"-host", "h1", "heartbeat", "x"}, []string{"heartbeat", "-host", "h1", "x"}, 0},
		"flags after the verb":   {[]string{"heartbeat", "-host", "h1"}, []string{"heartbeat", "-host", "h1"}, 0},
		"a double dash":          {[]string{"-host", "h1", "--", "heartbeat"}, []string{"heartbeat", "-host", "h1"}, 0},
		"no verb":                {[]string{"-host", "h1"}, nil, 0},
		"a flag no verb takes":   {[]string{"-nope", "heartbeat"}, nil, 2},
		"no arguments at all":    {nil, nil, 0},
		"a boolean before it":    {[]string{"-v", "status", "r-1"}, []string{"status", "-v", "r-1"}, 0},
		"the verb's own -h here": {[]string{"status", "-h"}, []string{"status", "-h"}, 0},
	} {
		t.Run(name, func(t *testing.T) {
			pre := flag.NewFlagSet("tool", flag.ContinueOnError)
			pre.SetOutput(io.Discard)
			pre.String("host", "", "")
			pre.Bool("v", false, "")
			got, err := cli.Hoist(pre, tc.args)
			if cli.Status(err) != tc.status || !slices.Equal(got, tc.want) {
				t.Errorf("Hoist(%q) = %q, %v; want %q, status %d", tc.args, got, err, tc.want, tc.status)
			}
		})
	}
}

// A subcommand taking exact positional arguments refuses more or fewer,
// naming what it takes; its usage line lists its own flags, not the
// common ones, then the arguments.
func TestArgs_ExactlyTheNamedArgumentsAndTheirUsage(t *testing.T) {
	fs := func() *flag.FlagSet {
		fs := flag.NewFlagSet("tool release", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.String("addr", "", "")
		fs.Int("wait", 0, "")
		return fs
	}
	for _, tc := range []struct {
		args   []string
		status int
	}{
		{[]string{"r-1", "7"}, 0},
		{[]string{"-wait", "3", "r-1", "7"}, 0},
		{[]string{"r-1"}, 2},
		{[]string{"r-1", "7", "8"}, 2},
		{[]string{"-bad", "r-1", "7"}, 2},
	} {
		if got := cli.Status(cli.Args(fs(), tc.args, "ID", "TOKEN")); got != tc.status {
			t.Errorf("Args(%q): status %d, want %d", tc.args, got, tc.status)
		}
	}
	if got, want := cli.Usage(fs(), []string{"addr"}, "ID", "TOKEN"), "[-wait …] ID TOKEN"; got != want {
		t.Errorf("Usage = %q, want %q", got, want)
	}
}
