// Command sparkctl is the command-line client of sparkd:
//
//	sparkctl request -class development [-topology single|pair] [-host spark-2] [-duration 2h]
//	sparkctl wait    ID      # blocks until the lease is active (or ends)
//	sparkctl status  ID      # state, queue position and pending reason
//	sparkctl release ID TOKEN
//	sparkctl cancel  ID      # queued work only
//	sparkctl hosts
//
// The API address is -addr or SPARK_ADDR (default http://127.0.0.1:8765);
// the token is SPARK_TOKEN or the file named by -token-file or
// SPARK_TOKEN_FILE.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gpugate/gpugate/spark"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sparkctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", or(getenv("SPARK_ADDR"), "http://127.0.0.1:8765"), "sparkd address")
	tokenFile := fs.String("token-file", getenv("SPARK_TOKEN_FILE"), "file holding the API token")
	class := fs.String("class", "development", "request: workload class")
	topology := fs.String("topology", "single", "request: single or pair")
	host := fs.String("host", "", "request: a specific host")
	duration := fs.Duration("duration", 0, "request: lease length (default per class)")
	owner := fs.String("owner", getenv("USER"), "request: who asks")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fmt.Fprintln(stderr, "usage: sparkctl [flags] request|wait|status|release|cancel|hosts [ID] [TOKEN]")
		return 2
	}
	token := getenv("SPARK_TOKEN")
	if token == "" && *tokenFile != "" {
		data, err := os.ReadFile(*tokenFile)
		if err != nil {
			fmt.Fprintln(stderr, "sparkctl:", err)
			return 2
		}
		token = strings.TrimSpace(string(data))
	}
	cl, err := spark.NewAPIClient(*addr, token, nil)
	if err != nil {
		fmt.Fprintln(stderr, "sparkctl:", err)
		return 2
	}
	print := func(v any) { out, _ := json.MarshalIndent(v, "", "  "); fmt.Fprintln(stdout, string(out)) }
	need := func(n int) bool {
		if len(rest) < n+1 {
			fmt.Fprintf(stderr, "sparkctl %s needs %d argument(s)\n", rest[0], n)
			return false
		}
		return true
	}
	switch rest[0] {
	case "request":
		var st spark.Status
		st, err = cl.Request(ctx, spark.LeaseRequest{Class: spark.Class(*class), Topology: spark.Topology(*topology), Host: *host,
			Owner: *owner, DurationSeconds: int(duration.Seconds())})
		if err == nil {
			print(st)
		}
	case "wait":
		if !need(1) {
			return 2
		}
		var st spark.Status
		wctx, cancel := context.WithTimeout(ctx, 24*time.Hour)
		defer cancel()
		st, err = cl.Wait(wctx, rest[1])
		if err == nil {
			print(st)
		}
	case "status":
		if !need(1) {
			return 2
		}
		var st spark.Status
		if st, err = cl.Status(ctx, rest[1]); err == nil {
			print(st)
		}
	case "release":
		if !need(2) {
			return 2
		}
		tok, perr := strconv.ParseInt(rest[2], 10, 64)
		if perr != nil {
			fmt.Fprintln(stderr, "sparkctl: TOKEN must be the lease's numeric fencing token")
			return 2
		}
		err = cl.Release(ctx, rest[1], tok)
	case "cancel":
		if !need(1) {
			return 2
		}
		err = cl.Cancel(ctx, rest[1])
	case "hosts":
		var hosts []map[string]any
		if hosts, err = cl.Hosts(ctx); err == nil {
			print(hosts)
		}
	default:
		fmt.Fprintf(stderr, "sparkctl: unknown command %q\n", rest[0])
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "sparkctl:", err)
		return 1
	}
	return 0
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
