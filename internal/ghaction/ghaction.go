// Package ghaction writes what a GitHub Actions step reports: step outputs
// ($GITHUB_OUTPUT), the job summary ($GITHUB_STEP_SUMMARY) and workflow
// command annotations. The examples share it; outside Actions (the variables
// unset) every write is a no-op, so the same binary runs locally.
package ghaction

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/gpugate/gpugate/internal/textlimit"
)

// Env is the part of a step's environment this package uses.
type Env struct {
	Actions bool   // GITHUB_ACTIONS is "true"
	Output  string // path in GITHUB_OUTPUT
	Summary string // path in GITHUB_STEP_SUMMARY
	// Echo, when set, receives each SetOutputs call's pairs as one JSON
	// object on a line of its own, in or outside Actions: a command's
	// -json output (JSONFlag). A value that is itself a JSON object or
	// array is embedded as JSON; every other value is a string, exactly as
	// the step output carries it.
	Echo io.Writer
	// JSON says stdout carries only JSON (JSONFlag sets it): annotations
	// then go to stderr, where the runner reads workflow commands too.
	JSON bool
}

// FromEnv reads the environment through getenv (os.Getenv in a main).
func FromEnv(getenv func(string) string) Env {
	return Env{Actions: getenv("GITHUB_ACTIONS") == "true", Output: getenv("GITHUB_OUTPUT"), Summary: getenv("GITHUB_STEP_SUMMARY")}
}

// Fail reports a command's failure: an ::error:: annotation in Actions
// (Annotate), and the plain message on stderr always.
func (e Env) Fail(stdout, stderr io.Writer, err error) {
	e.Annotate(stdout, stderr, err.Error())
	fmt.Fprintln(stderr, err)
}

// Annotate reports msg as an ::error:: annotation in Actions, on stdout
// (on stderr when stdout carries only JSON), and says nothing elsewhere:
// for a failure the command's own output has already explained.
func (e Env) Annotate(stdout, stderr io.Writer, msg string) {
	switch {
	case e.Actions && e.JSON:
		Error(stderr, msg)
	case e.Actions:
		Error(stdout, msg)
	}
}

// Warn reports msg as a ::warning:: annotation on stdout in Actions, and
// as a plain line on stderr elsewhere.
func (e Env) Warn(stdout, stderr io.Writer, msg string) { e.say(stdout, stderr, "warning", msg) }

// Note reports msg as a ::notice:: annotation on stdout in Actions, and as
// a plain line on stderr elsewhere.
func (e Env) Note(stdout, stderr io.Writer, msg string) { e.say(stdout, stderr, "notice", msg) }

func (e Env) say(stdout, stderr io.Writer, kind, msg string) {
	if e.Actions {
		out := stdout // workflow commands are read from stdout
		if e.JSON {
			out = stderr // and from stderr: stdout carries only JSON
		}
		command(out, kind, msg)
		return
	}
	fmt.Fprintln(stderr, msg)
}

var outputName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// SetOutputs appends name=value pairs, in the order given, to the step's
// output file. Multi-line values use a random heredoc delimiter, so a value
// can never forge another output.
func (e Env) SetOutputs(pairs ...[2]string) error {
	for _, kv := range pairs {
		if !outputName.MatchString(kv[0]) {
			return fmt.Errorf("ghaction: output name %q: use letters, digits, '_' and '-'", kv[0])
		}
	}
	if e.Echo != nil {
		if _, err := fmt.Fprintf(e.Echo, "%s\n", outputsJSON(pairs)); err != nil {
			return fmt.Errorf("ghaction: print the outputs: %w", err)
		}
	}
	if e.Output == "" {
		return nil
	}
	var b strings.Builder
	for _, kv := range pairs {
		name, value := kv[0], kv[1]
		if !strings.ContainsAny(value, "\r\n") {
			fmt.Fprintf(&b, "%s=%s\n", name, value)
			continue
		}
		var raw [16]byte
		if _, err := rand.Read(raw[:]); err != nil {
			return fmt.Errorf("ghaction: delimiter: %w", err)
		}
		delim := "ghadelim_" + hex.EncodeToString(raw[:])
		fmt.Fprintf(&b, "%s<<%s\n%s\n%s\n", name, delim, value, delim)
	}
	return appendFile(e.Output, b.String())
}

// JSONFlag adds -json to fs. Given, it sends the command's text to
// io.Discard and prints its outputs instead: each SetOutputs call of gha as
// one JSON object on the stdout the command was given. stdout and gha are
// the command's own, so call JSONFlag before it writes anything; a later
// -json=false undoes it.
func JSONFlag(fs *flag.FlagSet, stdout *io.Writer, gha *Env) {
	fs.BoolFunc("json", "print the outputs as JSON, one object, instead of text", func(v string) error {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return err
		}
		switch {
		case on && gha.Echo == nil:
			gha.Echo, *stdout = *stdout, io.Discard
		case !on && gha.Echo != nil:
			*stdout, gha.Echo = gha.Echo, nil
		}
		gha.JSON = on
		return nil
	})
}

// JSONRequested reports whether a command line asks for -json output, for
// a command that reports a failure after its subcommand has parsed it:
// its annotations then go to stderr (Env.JSON).
func JSONRequested(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		for _, on := range []string{"-json", "--json", "-json=true", "--json=true", "-json=1", "--json=1"} {
			if a == on {
				return true
			}
		}
	}
	return false
}

// outputsJSON renders pairs as one JSON object, in their order (see
// Env.Echo).
func outputsJSON(pairs [][2]string) []byte {
	b := []byte{'{'}
	for i, kv := range pairs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(appendString(b, kv[0]), ':')
		if v := strings.TrimSpace(kv[1]); strings.HasPrefix(v, "{") || strings.HasPrefix(v, "[") {
			var compact bytes.Buffer
			if json.Compact(&compact, []byte(v)) == nil { // Compact refuses what is not JSON
				b = append(b, compact.Bytes()...)
				continue
			}
		}
		b = appendString(b, kv[1])
	}
	return append(b, '}')
}

// appendString appends s as a JSON string, leaving <, > and & as they are
// (a nextest filterset reads better with its &).
func appendString(b []byte, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(s) // a string always encodes
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}

// MaxStepSummary is GitHub's limit on one step's summary: the runner
// uploads none of a larger one ("$GITHUB_STEP_SUMMARY upload aborted").
const MaxStepSummary = 1 << 20

// AppendSummary appends Markdown to the job summary. What would take the
// step's summary over MaxStepSummary is cut, with a note, so that the rest
// is still shown.
func (e Env) AppendSummary(markdown string) error {
	if e.Summary == "" {
		return nil
	}
	used := 0
	if fi, err := os.Stat(e.Summary); err == nil {
		used = int(fi.Size())
	}
	markdown = textlimit.Cut(markdown, MaxStepSummary-used, "\n\n… (truncated: GitHub shows none of a step summary over 1 MiB)\n")
	if markdown == "" {
		return nil
	}
	return appendFile(e.Summary, markdown)
}

func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("ghaction: %w", err)
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return fmt.Errorf("ghaction: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("ghaction: close %s: %w", path, err)
	}
	return nil
}

// Error writes an ::error:: workflow command. Outside Actions the runner
// never reads it and a person sees a readable line.
func Error(w io.Writer, msg string) { command(w, "error", msg) }

// Warning writes a ::warning:: workflow command.
func Warning(w io.Writer, msg string) { command(w, "warning", msg) }

// command writes one workflow command whose message stays one line.
func command(w io.Writer, kind, msg string) {
	fmt.Fprintf(w, "::%s::%s\n", kind, escapeData(msg))
}

// escapeData escapes a workflow command's message as the runner expects.
func escapeData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

// MarkdownCell escapes text for one cell of a Markdown table.
func MarkdownCell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "\r", " ", "`", "'").Replace(s)
}
