package changepolicy

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpugate/gpugate/internal/ghaction"
)

// String is the decision as a person reads it in a log: the class and
// what it requires, why, each lane, each required job (run with its
// profile, or no-op) with its reason, and each file with the rule (and
// glob) that decided it.
func (d Decision) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "class: %s (docs: %s, ci: %s, gpu: %s)\n", d.Class, yesNo(d.Docs), yesNo(d.CI), yesNo(d.GPU))
	fmt.Fprintf(&b, "why:   %s\n", d.Reason)
	for _, name := range slices.Sorted(maps.Keys(d.Lanes)) {
		fmt.Fprintf(&b, "lane %s: %s\n", name, yesNo(d.Lanes[name]))
	}
	b.WriteString("jobs:\n")
	for _, j := range d.Jobs {
		profile := ""
		if j.Profile != "" {
			profile = " [" + j.Profile + "]"
		}
		fmt.Fprintf(&b, "  %-5s %s%s: %s\n", j.Outcome, j.Name, profile, j.Reason)
	}
	b.WriteString("files:\n")
	for _, f := range d.Files {
		fmt.Fprintf(&b, "  %-9s %-5s %s (%s)\n", f.Status, f.Kind, f.displayPath(), f.rule())
	}
	return b.String()
}

// Markdown is the decision as a job summary: the class and why, a table
// of the required jobs and one of the files.
func (d Decision) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "### Change classification: %s\n\n%s\n\n", d.Class, ghaction.MarkdownCell(d.Reason))
	b.WriteString("| job | outcome | reason |\n| --- | --- | --- |\n")
	for _, j := range d.Jobs {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", ghaction.MarkdownCell(j.Name), j.Outcome, ghaction.MarkdownCell(j.Reason))
	}
	b.WriteString("\n| file | rule | kind |\n| --- | --- | --- |\n")
	for _, f := range d.Files {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", ghaction.MarkdownCell(f.displayPath()), ghaction.MarkdownCell(f.rule()), f.Kind)
	}
	return b.String()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// displayPath is the path, marked when it is a rename's or copy's source.
func (f FileDecision) displayPath() string {
	if f.Old {
		return f.Path + " (old side)"
	}
	return f.Path
}

// rule is the rule that decided, with its glob when one did.
func (f FileDecision) rule() string {
	if f.Pattern == "" {
		return f.Rule
	}
	return f.Rule + " " + f.Pattern
}
