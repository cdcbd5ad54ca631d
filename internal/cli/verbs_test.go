package cli_test

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpugate/gpugate/internal/cli"
	"github.com/gpugate/gpugate/internal/ghaction"
)

// refused is a library's refusal of a step's inputs.
type refused struct{}

func (refused) Error() string   { return "lib: give -n" }
func (refused) Refusal() string { return "give -n" }

// plan is a step's report.
type plan struct{ n int }

func (p plan) String() string       { return strings.Repeat("x", p.n) + "\n" }
func (p plan) Outputs() [][2]string { return [][2]string{{"n", strings.Repeat("x", p.n)}} }

// Every verb parses its own flags, with -json; its report is printed and
// its outputs written, or printed as JSON instead of the text; a library's
// refusal of its inputs refuses the command line in one line; a failure
// with no outputs writes none.
func TestVerbs_OneStepStyle(t *testing.T) {
	outFile := filepath.Join(t.TempDir(), "out")
	gha := ghaction.Env{Output: outFile}
	verb := func(fs *flag.FlagSet) cli.Work {
		n := fs.Int("n", 0, "")
		return cli.Work{Run: func(s cli.Step) ([][2]string, error) {
			switch *n {
			case 0:
				return nil, refused{}
			case 9:
				return nil, errors.New("the work failed")
			}
			return cli.Show(s)(plan{*n}, nil)
		}}
	}
	for name, tc := range map[string]struct {
		args                    []string
		status                  int
		stdout, stderr, outputs string
	}{
		"a report":         {[]string{"plan", "-n", "2"}, 0, "xx\n", "", "n=xx\n"},
		"-json":            {[]string{"plan", "-json", "-n", "3"}, 0, `{"n":"xxx"}` + "\n", "", "n=xxx\n"},
		"a refused input":  {[]string{"plan"}, 2, "", "tool plan: give -n\n", ""},
		"a failed step":    {[]string{"plan", "-n", "9"}, 1, "", "", ""},
		"a stray argument": {[]string{"plan", "-n", "2", "x"}, 2, "", "", ""},
	} {
		t.Run(name, func(t *testing.T) {
			os.Remove(outFile)
			var stdout, stderr bytes.Buffer
			err := cli.Dispatch("tool", &stderr, tc.args, cli.Verbs("tool", gha, nil, &stdout, &stderr, cli.Verb{Name: "plan", Flags: verb})...)
			written, _ := os.ReadFile(outFile)
			if got := cli.Status(err); got != tc.status || stdout.String() != tc.stdout || string(written) != tc.outputs {
				t.Errorf("status %d, stdout %q, outputs %q; want %d, %q, %q (%v)", got, stdout.String(), written, tc.status, tc.stdout, tc.outputs, err)
			}
			if tc.stderr != "" && stderr.String() != tc.stderr {
				t.Errorf("stderr %q, want %q", stderr.String(), tc.stderr)
			}
		})
	}
}
