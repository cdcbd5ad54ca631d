package cli_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/gpugate/gpugate/internal/cli"
)

// One command-line contract for every command: -h exits 0; an unknown
// flag, a stray argument or an unknown subcommand exits 2 with one line on
// stderr and nothing on stdout.
func TestEveryCommand_HelpIsZeroAndARefusedCommandLineIsTwoInOneLine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every command")
	}
	bin, work := t.TempDir(), t.TempDir()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	build := exec.Command("go", "build", "-o", bin+string(filepath.Separator), "./examples/...")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	commands := []struct {
		name  string
		help  []string // exits 0
		stray []string // exits 2, one line
	}{
		{"cachecheck", []string{"-h"}, []string{"stray"}},
		{"classify", []string{"-h"}, []string{"stray"}},
		{"cleanup", []string{"-h"}, []string{"stray"}},
		{"costreport", []string{"-h"}, []string{"no-such-subcommand"}},
		{"costreport", []string{"summarize", "-h"}, []string{"summarize", "stray"}},
		{"gate", []string{"publish", "-h"}, []string{"no-such-subcommand"}},
		{"gate", []string{"reuse", "-h"}, []string{"reuse", "stray"}},
		{"gateflow", []string{"-h"}, []string{"stray"}},
		{"nvrtcpin", []string{"-h"}, nil}, // its arguments are Packages files
		{"partition", []string{"check", "-h"}, []string{"no-such-subcommand"}},
		{"provision", []string{"-h"}, []string{"stray"}},
		{"reap", []string{"-h"}, []string{"stray"}},
		{"smoke", []string{"-h"}, []string{"stray"}},
		{"sparkctl", []string{"-h"}, []string{"hosts", "extra", "args"}},
		{"sparkctl", []string{"-h"}, []string{"no-such-command"}},
		{"sparkd", []string{"-h"}, []string{"stray"}},
		{"sparkd", []string{"backup", "-h"}, []string{"backup", "stray"}},
		{"watch", []string{"-h"}, []string{"stray"}},
	}
	run := func(name string, args ...string) (code int, stdout, stderr string) {
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.Dir = work // what a command writes (a cost report) stays out of the tree
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		cmd.Env = []string{"PATH=/usr/bin:/bin"} // no credentials, no GitHub Actions
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), out.String(), errOut.String()
		}
		if err != nil {
			t.Fatalf("%s %v: %v", name, args, err)
		}
		return 0, out.String(), errOut.String()
	}
	// -json writes only JSON to stdout, narration to stderr.
	for _, args := range [][]string{
		{"classify", "-example", "-json"}, {"cleanup", "-simulate", "-json"}, {"gateflow", "-json"},
		{"provision", "-simulate", "-json"}, {"reap", "-simulate", "-json"}, {"watch", "-simulate", "-json"},
	} {
		code, stdout, stderr := run(args[0], args[1:]...)
		if code != 0 || !json.Valid([]byte(stdout)) {
			t.Errorf("%v: exit %d; stdout is not only JSON: %q\n%s", args, code, cli.FirstLine(stdout, 100), stderr)
		}
	}
	oneLine := func(s string) bool {
		return strings.Count(strings.TrimRight(s, "\n"), "\n") == 0 && strings.TrimSpace(s) != ""
	}
	for _, c := range commands {
		if code, _, stderr := run(c.name, c.help...); code != 0 {
			t.Errorf("%s %v: exit %d, want 0\n%s", c.name, c.help, code, stderr)
		}
		flagArgs := append(append([]string{}, c.help[:len(c.help)-1]...), "-no-such-flag")
		if code, stdout, stderr := run(c.name, flagArgs...); code != 2 || stdout != "" || !oneLine(stderr) {
			t.Errorf("%s %v: exit %d, stdout %q, stderr %q; want 2 and one line on stderr", c.name, flagArgs, code, stdout, stderr)
		}
		if c.stray == nil {
			continue
		}
		if code, stdout, stderr := run(c.name, c.stray...); code != 2 || stdout != "" || !oneLine(stderr) {
			t.Errorf("%s %v: exit %d, stdout %q, stderr %q; want 2 and one line on stderr", c.name, c.stray, code, stdout, stderr)
		}
	}
}
