// Command ferretdb runs FerretDB, a MongoDB-wire-protocol server, with its
// SQLite backend on loopback, for the tests of the MongoDB mirror
// (spark/mongomirror). It prints the server's mongodb:// URI on its first
// line of output once it listens, and serves until its standard input
// closes or it is killed.
//
// It is its own module so that FerretDB's dependencies stay out of
// gpugate's: the tests build it with go build -C internal/tools/ferretdb.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/FerretDB/FerretDB/ferretdb"
)

func main() {
	dir := flag.String("dir", "", "directory for FerretDB's SQLite files (required)")
	flag.Parse()
	if *dir == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "ferretdb: usage: ferretdb -dir DIR")
		os.Exit(2)
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ferretdb:", err)
		os.Exit(1)
	}
	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{TCP: "127.0.0.1:0"},
		Logger:    slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Handler:   "sqlite",
		SQLiteURL: "file:" + abs + "/",
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "ferretdb:", err)
		os.Exit(1)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()
	fmt.Println(f.MongoDBURI()) // blocks until the listener has its address
	go func() {
		io.Copy(io.Discard, bufio.NewReader(os.Stdin))
		cancel()
	}()
	<-done
}
