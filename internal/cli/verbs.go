package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/gpugate/gpugate/internal/ghaction"
)

// Verb is a subcommand in the commands' one style: Flags registers the
// verb's own flags on its flag set and returns its Work, which runs once
// the command line is parsed. Verbs makes verbs Dispatch's subcommands.
type Verb struct {
	Name, Usage string
	Flags       func(fs *flag.FlagSet) Work
}

// Work is a verb's work: Parse reads its command line (Flags when nil;
// FlagsAndArgs or FlagsThenFiles for positional arguments), then Run runs
// the step, writing its text to s.Out, and returns its step outputs.
type Work struct {
	Parse func(fs *flag.FlagSet, args []string) error
	Run   func(s Step) ([][2]string, error)
}

// Step is what a verb's work reads and writes.
type Step struct {
	In   io.Reader // the command's stdin
	Out  io.Writer // the step's text: stdout, or nowhere with -json
	JSON bool      // -json: the outputs are printed instead, as one JSON object
}

// refusal is a work's error that refuses the command line: a library's
// refusal of a step's inputs (compileplan.InputError, say), which says
// why in one line naming the flags.
type refusal interface{ Refusal() string }

// Verbs makes verbs command's subcommands, for Dispatch. Each parses its
// own flag set, "command verb", reporting on stderr, with -json
// (ghaction.JSONFlag); its work's outputs then go to $GITHUB_OUTPUT (and,
// with -json, to stdout) unless the work failed with none. Writing them
// can fail the verb; the work's own failure is returned after them. A
// work's error with a Refusal() string method refuses the command line
// (Refuse: exit 2, that one line).
func Verbs(command string, gha ghaction.Env, stdin io.Reader, stdout, stderr io.Writer, verbs ...Verb) []Subcommand {
	subs := make([]Subcommand, len(verbs))
	for i, v := range verbs {
		subs[i] = Subcommand{Name: v.Name, Usage: v.Usage, Run: func(args []string) error {
			fs := flag.NewFlagSet(command+" "+v.Name, flag.ContinueOnError)
			fs.SetOutput(stderr)
			out, gha := stdout, gha
			ghaction.JSONFlag(fs, &out, &gha)
			w := v.Flags(fs)
			parse := w.Parse
			if parse == nil {
				parse = Flags
			}
			if err := parse(fs, args); err != nil {
				return err
			}
			outputs, err := w.Run(Step{In: stdin, Out: out, JSON: gha.Echo != nil})
			var r refusal
			if errors.As(err, &r) {
				return Refuse(fs, "%s", r.Refusal())
			}
			if err != nil && outputs == nil {
				return err
			}
			if werr := gha.SetOutputs(outputs...); werr != nil {
				return werr
			}
			return err
		}}
	}
	return subs
}

// Report is a step's result: what a person reads, and the step outputs it
// hands on.
type Report interface {
	String() string
	Outputs() [][2]string
}

// Show is a verb's work for a step that returns a report: Show(s)(r, err)
// prints r on s.Out and returns its outputs, or returns err.
func Show(s Step) func(r Report, err error) ([][2]string, error) {
	return func(r Report, err error) ([][2]string, error) {
		if err != nil {
			return nil, err
		}
		fmt.Fprint(s.Out, r)
		return r.Outputs(), nil
	}
}
