package cli_test

import (
	"bytes"
	"errors"
	"flag"
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
