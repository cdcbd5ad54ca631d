package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/gpugate/gpugate/internal/cli"
	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/sqlitestore"
)

// database runs sparkd backup (a consistent copy of the live database,
// while sparkd serves) and sparkd restore (the controller stopped: the
// backup replaces the database, its epoch advanced so that no fencing
// token is reissued).
func database(ctx context.Context, cmd string, args []string, stderr io.Writer) int {
	fl := flag.NewFlagSet("sparkd "+cmd, flag.ContinueOnError)
	fl.SetOutput(stderr)
	db := fl.String("db", "", "the fleet's SQLite database (required)")
	file := fl.String("file", "", "the backup file: written by backup (must not exist), read by restore (required)")
	if exit, ok := cli.Parse(fl, args); !ok {
		return exit
	}
	if err := cli.Require(fl, "db", "file"); err != nil {
		return cli.Status(err)
	}
	if cmd == "restore" {
		if err := sqlitestore.Restore(*file, *db); err != nil {
			fmt.Fprintln(stderr, "sparkd restore:", err)
			return 1
		}
		fmt.Fprintf(stderr, "restored %s from %s; its epoch advanced, so fencing tokens continue above every one issued before\n", *db, *file)
		return 0
	}
	store, err := sqlitestore.Open(*db)
	if err != nil {
		fmt.Fprintln(stderr, "sparkd backup:", err)
		return 1
	}
	defer store.Close()
	if err := store.Backup(ctx, *file); err != nil {
		fmt.Fprintln(stderr, "sparkd backup:", err)
		return 1
	}
	fmt.Fprintf(stderr, "backed up %s to %s\n", *db, *file)
	return 0
}

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
	tok, err := spark.AddToken(*file, spark.Role(*role), *name)
	if errors.Is(err, spark.ErrInvalid) {
		return cli.Status(cli.Refuse(fs, "%v", err)) // an unknown role, or a file that does not parse
	}
	if err != nil {
		fmt.Fprintln(stderr, "sparkd token:", err)
		return 1
	}
	fmt.Fprintf(stderr, "sparkd token: a %s token for %s, added to %s; it is shown once, here:\n", *role, *name, *file)
	fmt.Fprintln(stdout, tok)
	return 0
}
