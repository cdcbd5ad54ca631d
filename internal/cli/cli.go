// Package cli is what the example commands share about their command
// lines.
package cli

import (
	"errors"
	"flag"
	"fmt"
)

// Parse parses args into fs (made with flag.ContinueOnError) for a command
// that takes flags only. ok says whether the command goes on; when it does
// not, exit is the command's exit status: 0 after -h, 2 after a bad flag
// (which fs has reported) or a stray argument, which Parse names on
// fs.Output().
func Parse(fs *flag.FlagSet, args []string) (exit int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q: this command takes flags only (%s -h lists them)\n", fs.Name(), fs.Arg(0), fs.Name())
		return 2, false
	}
	return 0, true
}
