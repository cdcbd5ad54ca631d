package cli_test

import (
	"bytes"
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
