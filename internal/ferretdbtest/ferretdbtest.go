// Package ferretdbtest starts FerretDB, a MongoDB-wire-protocol server,
// with its SQLite backend on loopback for tests that need a real MongoDB
// server. It builds the server from internal/tools/ferretdb (its own
// module, so FerretDB's dependencies stay out of gpugate's) and starts it
// once per test binary; call Stop from TestMain.
//
// Where FerretDB cannot be built or started, URI skips the test saying
// why, unless GPUGATE_REQUIRE_FERRETDB is set (as .ci/run sets it): then
// it fails.
package ferretdbtest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var server struct {
	once sync.Once
	uri  string
	err  error
	stop func()
}

// URI is the shared server's mongodb:// URI, starting it on first use.
func URI(t testing.TB) string {
	t.Helper()
	server.once.Do(func() { server.uri, server.stop, server.err = start() })
	if server.err != nil {
		if os.Getenv("GPUGATE_REQUIRE_FERRETDB") != "" {
			t.Fatalf("FerretDB is required here (GPUGATE_REQUIRE_FERRETDB): %v", server.err)
		}
		t.Skipf("skipping: this test needs a MongoDB-wire-protocol server and FerretDB could not be started: %v", server.err)
	}
	return server.uri
}

// Stop stops the server if it was started; TestMain calls it after
// m.Run.
func Stop() {
	if server.stop != nil {
		server.stop()
	}
}

func start() (uri string, stop func(), err error) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", nil, fmt.Errorf("find the module root: %w", err)
	}
	src := filepath.Join(filepath.Dir(strings.TrimSpace(string(gomod))), "internal", "tools", "ferretdb")
	dir, err := os.MkdirTemp("", "gpugate-ferretdb-")
	if err != nil {
		return "", nil, err
	}
	bin := filepath.Join(dir, "ferretdb")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("build FerretDB in %s: %w\n%s", src, err, out)
	}
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	cmd := exec.Command(bin, "-dir", data)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	cmd.Stderr = os.Stderr // shown with a failing test's output
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("start FerretDB: %w", err)
	}
	stop = func() {
		stdin.Close() // it stops when its input closes
		if cmd.Wait() != nil {
			cmd.Process.Kill()
		}
		os.RemoveAll(dir)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "mongodb://") {
		stop()
		return "", nil, fmt.Errorf("FerretDB printed no URI (%q): %v", line, err)
	}
	go io.Copy(io.Discard, stdout)
	return strings.TrimSpace(line), stop, nil
}
