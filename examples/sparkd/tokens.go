package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/gpugate/gpugate/internal/cli"
	"github.com/gpugate/gpugate/spark"
)

// mintToken is sparkd token: it makes a fresh API token for one holder,
// appends its hash to the -tokens file (which a running sparkd reads
// again), and prints the token once on stdout. The file never holds a
// token.
func mintToken(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sparkd token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("tokens", "", "the token file sparkd -tokens reads (created when missing; required)")
	role := fs.String("role", "", "host (one host's agent), agent (a developer or a local agent) or operator (required)")
	name := fs.String("name", "", "the host's name, or the person's or agent's (required)")
	if exit, ok := cli.Parse(fs, args); !ok {
		return exit
	}
	if err := cli.Require(fs, "tokens", "role", "name"); err != nil {
		return cli.Status(err)
	}
	tok := spark.NewToken()
	line := fmt.Sprintf("%s %s %s\n", *role, *name, spark.HashToken(tok))
	var existing []byte
	if data, err := os.ReadFile(*file); err == nil {
		existing = data
	} else if !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintln(stderr, "sparkd token:", err)
		return 1
	}
	if _, err := spark.ParseTokens(append(existing, line...)); err != nil {
		return cli.Status(cli.Refuse(fs, "%v", err)) // an unknown role, or a file that does not parse
	}
	f, err := os.OpenFile(*file, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err == nil {
		_, err = f.WriteString(line)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "sparkd token:", err)
		return 1
	}
	fmt.Fprintf(stderr, "sparkd token: a %s token for %s, added to %s; it is shown once, here:\n", *role, *name, *file)
	fmt.Fprintln(stdout, tok)
	return 0
}
