package sparkgh

import (
	"strings"
)

// Command is one comment command.
type Command struct {
	Verb  string // test, status, cancel, or the unknown verb
	Pair  bool   // test --pair
	Known bool
	Line  string // the command line as written
}

// ParseCommands finds commands anchored at the start of a line:
// "/spark test", "/spark test --pair", "/spark status", "/spark cancel".
// Anything else after the prefix is returned with Known false, so it gets
// a helpful reply rather than silence. Quoted lines ("> /spark test") and
// text in the middle of a line are not commands.
func ParseCommands(body, prefix string) []Command {
	var out []Command
	inFence := false
	for _, line := range strings.Split(strings.ReplaceAll(body, "\r\n", "\n"), "\n") {
		trimmed := strings.TrimRight(line, " \t")
		if strings.HasPrefix(strings.TrimSpace(trimmed), "```") {
			inFence = !inFence
			continue
		}
		if inFence || !strings.HasPrefix(trimmed, prefix) {
			continue
		}
		rest := strings.TrimPrefix(trimmed, prefix)
		if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
			continue // "/sparkle" is not ours
		}
		fields := strings.Fields(rest)
		c := Command{Line: trimmed}
		switch {
		case len(fields) == 1 && fields[0] == "test":
			c.Verb, c.Known = "test", true
		case len(fields) == 2 && fields[0] == "test" && fields[1] == "--pair":
			c.Verb, c.Pair, c.Known = "test", true, true
		case len(fields) == 1 && (fields[0] == "status" || fields[0] == "cancel"):
			c.Verb, c.Known = fields[0], true
		case len(fields) == 0:
			c.Verb = ""
		default:
			c.Verb = fields[0]
		}
		out = append(out, c)
	}
	return out
}
