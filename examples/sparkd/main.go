// Command sparkd runs the shared-fleet controller and its agent/CLI API.
//
//	sparkd [-addr 127.0.0.1:8765] [-db spark.db] [-token-file FILE] [-simulate=true]
//
// With no flags it starts on an embedded default: a SQLite file in a
// temporary directory, the seed's two hosts simulated (heartbeats and a
// resident service on spark-1), and a fresh API token written to a file
// readable only by you. sparkctl talks to it.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/sparktest"
	"github.com/gpugate/gpugate/spark/sqlitestore"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stderr, nil))
}

// run serves until ctx ends. ready, when set, receives the address and the
// token file once the API listens.
func run(ctx context.Context, args []string, stderr io.Writer, ready chan<- [2]string) int {
	fs := flag.NewFlagSet("sparkd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8765", "listen address")
	dbPath := fs.String("db", "", "SQLite file (default: a new temporary directory)")
	tokenFile := fs.String("token-file", "", "API token file (default: generated beside the database)")
	simulate := fs.Bool("simulate", true, "simulate the seed's two hosts and resident service")
	every := fs.Duration("reconcile", 2*time.Second, "admission cadence")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if *dbPath == "" {
		dir, err := os.MkdirTemp("", "sparkd-")
		if err != nil {
			fmt.Fprintln(stderr, "sparkd:", err)
			return 1
		}
		*dbPath = filepath.Join(dir, "spark.db")
	}
	token, file, err := loadToken(*tokenFile, filepath.Dir(*dbPath))
	if err != nil {
		fmt.Fprintln(stderr, "sparkd:", err)
		return 1
	}
	store, err := sqlitestore.Open(*dbPath)
	if err != nil {
		fmt.Fprintln(stderr, "sparkd:", err)
		return 1
	}
	defer store.Close()
	opts := spark.SeedOptions()
	opts.Log = log
	svc := &sparktest.Service{}
	opts.Service = svc // a simulated resident service; a real deployment supplies its own
	c, err := spark.New(store, opts)
	if err != nil {
		fmt.Fprintln(stderr, "sparkd:", err)
		return 1
	}
	h, err := spark.NewHandler(c, token)
	if err != nil {
		fmt.Fprintln(stderr, "sparkd:", err)
		return 1
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(stderr, "sparkd:", err)
		return 1
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	fmt.Fprintf(stderr, "sparkd: listening on http://%s (database %s); the API token is in %s\n", ln.Addr(), *dbPath, file)
	if ready != nil {
		ready <- [2]string{"http://" + ln.Addr().String(), file}
	}
	tick := time.NewTicker(*every)
	defer tick.Stop()
	for {
		if *simulate {
			for _, host := range []string{"spark-1", "spark-2"} {
				if err := c.Heartbeat(ctx, spark.HostReport{Host: host}); err != nil {
					log.Error("heartbeat", "host", host, "error", err)
				}
			}
		}
		if err := c.Reconcile(ctx); err != nil {
			log.Error("reconcile", "error", err) // fails closed: nothing was admitted
		}
		select {
		case <-ctx.Done():
			shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			srv.Shutdown(shut)
			return 0
		case <-tick.C:
		}
	}
}

// loadToken reads the token file, or creates one (0600) with a fresh
// random token. The token itself is never printed.
func loadToken(path, dir string) (string, string, error) {
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return "", "", err
		}
		return strings.TrimSpace(string(data)), path, nil
	}
	var b [24]byte
	rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	path = filepath.Join(dir, "api-token")
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return "", "", err
	}
	return token, path, nil
}
