// Package cli is what the example commands share about their command
// lines: exit status 0 after -h, 2 after a command line they refuse, 1 when
// the work itself fails.
package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrUsage wraps a refused command line whose reason is already printed on
// the flag set's output (a bad flag, which the flag package reports with
// the usage, or a stray argument). Status maps it to exit status 2.
var ErrUsage = errors.New("cli: command line refused")

// Parse parses args into fs (made with flag.ContinueOnError) for a command
// that takes flags only. ok says whether the command goes on; when it does
// not, exit is the command's exit status: 0 after -h, 2 after a bad flag
// (which fs has reported) or a stray argument, which Parse names on
// fs.Output().
func Parse(fs *flag.FlagSet, args []string) (exit int, ok bool) {
	err := Flags(fs, args)
	return Status(err), err == nil
}

// Flags parses args into fs (made with flag.ContinueOnError) for a
// subcommand that takes flags only. It returns nil to go on, flag.ErrHelp
// after -h, or an error wrapping ErrUsage after a bad flag or a stray
// argument, both reported on fs.Output().
func Flags(fs *flag.FlagSet, args []string) error {
	if err := FlagsAndArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q: this command takes flags only (%s -h lists them)\n", fs.Name(), fs.Arg(0), fs.Name())
		return fmt.Errorf("%w: unexpected argument %q", ErrUsage, fs.Arg(0))
	}
	return nil
}

// FlagsAndArgs is Flags for a subcommand that also takes positional
// arguments (fs.Args()).
//
// A bad flag is reported in one line, naming -h; the usage is printed only
// for -h.
func FlagsAndArgs(fs *flag.FlagSet, args []string) error {
	out, usage := fs.Output(), fs.Usage
	var quiet bytes.Buffer
	fs.SetOutput(&quiet) // the flag package's own message and usage
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.SetOutput(out)
	fs.Usage = usage
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		if usage != nil {
			usage()
		} else {
			fmt.Fprintf(out, "Usage of %s:\n", fs.Name())
			fs.PrintDefaults()
		}
		return err
	}
	fmt.Fprintf(out, "%s: %v (%s -h lists the flags)\n", fs.Name(), err, fs.Name())
	return fmt.Errorf("%w: %w", ErrUsage, err)
}

// FlagsThenFiles is FlagsAndArgs for a command that takes flags, then
// files: a flag after the files is refused (exit 2, "flags go before the
// files"), never opened as a file.
func FlagsThenFiles(fs *flag.FlagSet, args []string) error {
	if err := FlagsAndArgs(fs, args); err != nil {
		return err
	}
	for _, a := range fs.Args() {
		if len(a) > 1 && a[0] == '-' {
			return Refuse(fs, "%s after the files: flags go before the files (%s -h)", a, fs.Name())
		}
	}
	return nil
}

// Refuse reports a command line the command refuses (a required flag
// missing, the wrong number of arguments) on fs.Output() and returns an
// error wrapping ErrUsage.
func Refuse(fs *flag.FlagSet, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintf(fs.Output(), "%s: %s\n", fs.Name(), msg)
	return fmt.Errorf("%w: %s", ErrUsage, msg)
}

// Require refuses the command line (Refuse) when a flag named in names
// still has its zero value: empty, 0 or 0s, whether it was left out or
// given empty (-head ""). A default from the environment counts as given.
func Require(fs *flag.FlagSet, names ...string) error {
	var missing []string
	for _, n := range names {
		f := fs.Lookup(n)
		if f == nil {
			panic("cli: Require: no flag -" + n)
		}
		switch f.Value.String() {
		case "", "0", "0s":
			missing = append(missing, "-"+n)
		}
	}
	switch len(missing) {
	case 0:
		return nil
	case 1:
		return Refuse(fs, "%s is required (%s -h lists the flags)", missing[0], fs.Name())
	}
	return Refuse(fs, "%s are required (%s -h lists the flags)", List(missing, "and"), fs.Name())
}

// List joins items as prose: "a", "a and b", "a, b and c" (with "or" for
// alternatives).
func List(items []string, and string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " " + and + " " + items[len(items)-1]
}

// Subcommand is one verb of a command that has several:
//
//	command VERB [flags] [arguments]
//
// Run gets the arguments after the verb, parses them into the verb's own
// flag set (Flags, or FlagsAndArgs for positional arguments), refuses
// what it cannot run (Refuse, Require) and does the work; its error goes
// to Status.
type Subcommand struct {
	Name  string
	Usage string // one line: its flags and arguments, for the command's help
	Run   func(args []string) error
}

// Dispatch runs the subcommand args[0] names with the arguments after it:
// every command with subcommands takes its verb first and each verb its
// own flags after it. Alone, -h, -help, --help or help lists the
// subcommands on stderr and returns flag.ErrHelp; no subcommand, or one it
// does not know, is refused in one line on stderr (an error wrapping
// ErrUsage).
func Dispatch(command string, stderr io.Writer, args []string, subs ...Subcommand) error {
	names := make([]string, len(subs))
	for i, s := range subs {
		names[i] = s.Name
	}
	if len(args) == 0 {
		fmt.Fprintf(stderr, "usage: %s %s [flags] (%s -h lists them)\n", command, strings.Join(names, "|"), command)
		return fmt.Errorf("%w: no subcommand", ErrUsage)
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stderr, "usage:")
		for _, s := range subs {
			fmt.Fprintf(stderr, "  %s %s %s\n", command, s.Name, s.Usage)
		}
		fmt.Fprintf(stderr, "\n%s SUBCOMMAND -h lists a subcommand's flags.\n", command)
		return flag.ErrHelp
	}
	for _, s := range subs {
		if s.Name == args[0] {
			return s.Run(args[1:])
		}
	}
	fmt.Fprintf(stderr, "%s: unknown subcommand %q: use %s (%s -h lists them)\n", command, args[0], List(names, "or"), command)
	return fmt.Errorf("%w: unknown subcommand %q", ErrUsage, args[0])
}

// Status is the exit status for what a command's work returned: 0 for nil
// and flag.ErrHelp, 2 for ErrUsage, 1 for anything else (which the caller
// reports).
func Status(err error) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, ErrUsage):
		return 2
	}
	return 1
}

// RunFlags registers -run-id and -run-attempt on fs into id and attempt:
// the GitHub Actions workflow run a command belongs to, by default the one
// it runs in (GITHUB_RUN_ID, GITHUB_RUN_ATTEMPT; an attempt is at least 1).
// what says what the run is for, in the flags' help.
func RunFlags(fs *flag.FlagSet, getenv func(string) string, id *int64, attempt *int, what string) {
	runID, _ := strconv.ParseInt(getenv("GITHUB_RUN_ID"), 10, 64)
	runAttempt, _ := strconv.Atoi(getenv("GITHUB_RUN_ATTEMPT"))
	fs.Int64Var(id, "run-id", runID, "the workflow run "+what+" (default GITHUB_RUN_ID)")
	fs.IntVar(attempt, "run-attempt", max(runAttempt, 1), "that run's attempt (default GITHUB_RUN_ATTEMPT)")
}

// ErrRepo is matched by SplitRepo's error.
var ErrRepo = errors.New("want owner/name")

// SplitRepo splits a repository given as owner/name (a -repo flag, by
// default GITHUB_REPOSITORY). The error is prefixed with command and says
// how to set it.
func SplitRepo(command, repo string) (owner, name string, err error) {
	owner, name, ok := ParseRepo(repo)
	if !ok {
		return "", "", fmt.Errorf("%s: -repo %q: %w (pass -repo or set GITHUB_REPOSITORY)", command, repo, ErrRepo)
	}
	return owner, name, nil
}

// ParseRepo is the one reading of a repository's owner/name, for the
// libraries that take one (a schedule's repo, a webhook's repository):
// two non-empty parts, one slash.
func ParseRepo(repo string) (owner, name string, ok bool) {
	owner, name, ok = strings.Cut(repo, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return "", "", false
	}
	return owner, name, true
}

// Logger is a command's event log for -v (verbose): text records on w
// when verbose, and none otherwise.
func Logger(verbose bool, w io.Writer) *slog.Logger {
	if verbose {
		return slog.New(slog.NewTextHandler(w, nil))
	}
	return slog.New(slog.DiscardHandler)
}

// Writers are where a command with -json (jsonOut) writes: its text
// output goes to stdout, or nowhere with -json, which prints its document
// there instead; its narration of what it does goes to stdout, or to
// stderr with -json, so that stdout carries only the document.
func Writers(jsonOut bool, stdout, stderr io.Writer) (text, narration io.Writer) {
	if jsonOut {
		return io.Discard, stderr
	}
	return stdout, stdout
}

// FirstLine is s's first line, cut to at most n characters (runes, so a
// multi-byte character is never split) and marked "…" where it was cut:
// one table cell of a multi-line reason.
func FirstLine(s string, n int) string {
	s, _, _ = strings.Cut(s, "\n")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

// Hoist moves the flags given before a subcommand's verb after it
// (command -host H verb ARG → command verb -host H ARG), for Dispatch:
// pre holds every verb's flags, so it finds the verb, which then parses
// them as its own and refuses one it does not take. A flag pre does not
// know is refused (ErrUsage, reported on pre's output).
func Hoist(pre *flag.FlagSet, args []string) ([]string, error) {
	if err := FlagsAndArgs(pre, args); err != nil {
		return nil, err
	}
	rest := pre.Args()
	before := args[:len(args)-len(rest)]
	if n := len(before); n > 0 && before[n-1] == "--" {
		before = before[:n-1]
	}
	if len(rest) == 0 {
		return nil, nil
	}
	return append(append([]string{rest[0]}, before...), rest[1:]...), nil
}

// Args parses args into fs for a subcommand that takes exactly the named
// positional arguments (fs.Args()): FlagsAndArgs, then a refusal naming
// them when there are more or fewer.
func Args(fs *flag.FlagSet, args []string, names ...string) error {
	if err := FlagsAndArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() != len(names) {
		want := "no arguments"
		if len(names) > 0 {
			want = strings.Join(names, " ")
		}
		return Refuse(fs, "takes %s, got %q (flags go before the arguments)", want, fs.Args())
	}
	return nil
}

// Usage is a Subcommand's Usage line: each of fs's flags but those named
// in common, then the positional arguments.
func Usage(fs *flag.FlagSet, common []string, args ...string) string {
	var parts []string
	fs.VisitAll(func(f *flag.Flag) {
		if !slices.Contains(common, f.Name) {
			parts = append(parts, "[-"+f.Name+" …]")
		}
	})
	return strings.Join(append(parts, args...), " ")
}
