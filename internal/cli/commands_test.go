package cli_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode"

	"github.com/gpugate/gpugate/internal/cli"
	"github.com/gpugate/gpugate/smoke/tiers"
)

// scratch holds what the command tests share: the commands, built once,
// and the files they read.
var scratch string

func TestMain(m *testing.M) {
	code := m.Run()
	if scratch != "" {
		os.RemoveAll(scratch)
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	buildErr  error
)

// root is the repository's root.
func root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// commands builds every command (examples/*) once and returns where.
func commands(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds every command")
	}
	buildOnce.Do(func() {
		if scratch, buildErr = os.MkdirTemp("", "gpugate-commands-"); buildErr != nil {
			return
		}
		build := exec.Command("go", "build", "-o", filepath.Join(scratch, "bin")+string(filepath.Separator), "./examples/...")
		build.Dir = root()
		if out, err := build.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(scratch, "bin")
}

// command runs a built command in a directory of its own (what it writes,
// a cost report say, stays out of the tree), without credentials or
// GitHub Actions; env adds to that environment.
func command(t *testing.T, env []string, name string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(commands(t), name), args...)
	cmd.Dir = t.TempDir()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), out.String(), errOut.String()
	}
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return 0, out.String(), errOut.String()
}

func oneLine(s string) bool {
	return strings.Count(strings.TrimRight(s, "\n"), "\n") == 0 && strings.TrimSpace(s) != ""
}

// One command-line contract for every command and subcommand: -h exits 0;
// an unknown flag, a stray argument, an unknown or missing subcommand, or
// a required flag left out exits 2 with one line on stderr and nothing on
// stdout, before any credential or service is needed (the commands run
// without either); -json writes only JSON to stdout, and an empty list in
// it is [], never null.
func TestEveryCommand_HelpIsZeroAndARefusedCommandLineIsTwoInOneLine(t *testing.T) {
	bin := commands(t)
	commands := []struct {
		name    string
		help    []string   // exits 0
		stray   []string   // exits 2, one line
		missing [][]string // a required flag (or argument) left out: exits 2, one line
	}{
		{"cachecheck", []string{"-h"}, []string{"stray"}, [][]string{{"-find", "k"}, {"-require", "lib/*.so"}, {"-explain", "old.json"}}},
		{"classify", []string{"-h"}, []string{"stray"}, [][]string{{}, {"-pr", "1"}, {"-example", "-changes", "c.txt"}}},
		{"cleanup", []string{"-h"}, []string{"stray"}, [][]string{{}, {"-pod", ""}}},
		{"costreport", []string{"-h"}, []string{"no-such-subcommand"}, [][]string{{}}},
		{"costreport", []string{"collect", "-h"}, []string{"collect", "stray"}, [][]string{{"collect"}, {"collect", "-since", "2026-10-06", "-until", "2026-10-06", "-dir", "d"}}},
		{"costreport", []string{"summarize", "-h"}, []string{"summarize", "stray"}, [][]string{{"summarize"}}},
		{"gate", []string{"-h"}, []string{"no-such-subcommand"}, [][]string{{}}},
		{"gate", []string{"reuse", "-h"}, []string{"reuse", "stray"}, [][]string{{"reuse"}, {"reuse", "-repo", "o/r", "-head", "h"}}},
		{"gate", []string{"authorize", "-h"}, []string{"authorize", "stray"}, [][]string{{"authorize", "-repo", "o/r", "-pr", "1"}, {"authorize", "-repo", "o/r", "-actor", "a"}}},
		{"gate", []string{"publish", "-h"}, []string{"publish", "stray"}, [][]string{{"publish", "-repo", "o/r", "-head", "h", "-tested-ref", "r"}}},
		{"gate", []string{"local-relay", "-h"}, []string{"local-relay", "stray"}, [][]string{{"local-relay", "-repo", "o/r", "-pr", "1", "-sha", "s"}}},
		{"gate", []string{"local-run", "-h"}, []string{"local-run", "stray"}, [][]string{{"local-run", "-repo", "o/r", "-pr", "1"}, {"local-run", "-repo", "o/r", "-lane", "make gpu-test"}}},
		{"gate", []string{"recover", "-h"}, []string{"recover", "stray"}, [][]string{{"recover", "-repo", "o/r"}, {"recover", "-pr", "1"}}},
		{"gateflow", []string{"-h"}, []string{"stray"}, [][]string{{"-real"}, {"-real", "-repo", "o/r", "-pr", "4", "-actor", "m", "-run-id", "9"}}},
		{"nvrtcpin", []string{"-h"}, nil, [][]string{{}}}, // its arguments are Packages files
		{"partition", []string{"-h"}, []string{"no-such-subcommand"}, nil},
		{"partition", []string{"check", "-h"}, []string{"check", "-example", "stray"}, [][]string{{"check"}}},
		{"partition", []string{"select", "-h"}, nil, [][]string{{"select"}}},
		{"partition", []string{"shards", "-h"}, []string{"shards", "a.json", "b.json"}, [][]string{{"shards"}}},
		{"partition", []string{"verify-objects", "-h"}, nil, [][]string{{"verify-objects", "s.sha256"}}},
		{"partition", []string{"chain", "-h"}, []string{"chain", "-estimate", "1h", "stray"}, [][]string{{"chain"}}},
		{"partition", []string{"chain-state", "-h"}, []string{"chain-state", "stray"}, [][]string{{"chain-state", "-cell", "a"}}},
		{"partition", []string{"chain-status", "-h"}, nil, [][]string{{"chain-status", "dir"}}},
		{"partition", []string{"batches", "-h"}, []string{"batches", "stray"}, nil},
		{"partition", []string{"checkpoint", "-h"}, nil, [][]string{{"checkpoint", "dir"}}},
		{"partition", []string{"restore", "-h"}, nil, [][]string{{"restore", "dir"}}},
		{"provision", []string{"-h"}, []string{"stray"}, [][]string{{}, {"-repo", "o/r", "-run-id", "9"}}},
		{"reap", []string{"-h"}, []string{"stray"}, [][]string{{}}},
		{"smoke", []string{"-h"}, []string{"stray"}, [][]string{{}}},
		{"sparkctl", []string{"-h"}, []string{"no-such-command"}, [][]string{{}}},
		{"sparkctl", []string{"request", "-h"}, []string{"request", "extra"}, nil},
		{"sparkctl", []string{"wait", "-h"}, []string{"wait", "r-1", "extra"}, [][]string{{"wait"}}},
		{"sparkctl", []string{"status", "-h"}, []string{"status", "r-1", "extra"}, [][]string{{"status"}}},
		{"sparkctl", []string{"release", "-h"}, []string{"release", "r-1", "7", "extra"}, [][]string{{"release", "r-1"}}},
		{"sparkctl", []string{"cancel", "-h"}, []string{"cancel", "r-1", "extra"}, [][]string{{"cancel"}}},
		{"sparkctl", []string{"hosts", "-h"}, []string{"hosts", "extra", "args"}, nil},
		{"sparkctl", []string{"heartbeat", "-h"}, []string{"heartbeat", "extra"}, nil},
		{"sparkctl", []string{"preflight", "-h"}, []string{"preflight", "r-1", "extra"}, [][]string{{"preflight"}}},
		{"sparkctl", []string{"mcp", "-h"}, []string{"mcp", "extra"}, nil},
		{"sparkd", []string{"-h"}, []string{"stray"}, [][]string{{"-webhook-secret-file", "secret"}}},
		{"sparkd", []string{"backup", "-h"}, []string{"backup", "stray"}, [][]string{{"backup"}, {"backup", "-db", "spark.db"}}},
		{"sparkd", []string{"restore", "-h"}, []string{"restore", "stray"}, [][]string{{"restore", "-file", "backup.db"}}},
		{"sparkd", []string{"token", "-h"}, []string{"token", "stray"}, [][]string{{"token", "-role", "host", "-name", "spark-1"}, {"token", "-tokens", "t", "-name", "spark-1"}}},
		{"watch", []string{"-h"}, []string{"stray"}, [][]string{{}, {"-pod", "p1", "-repo", "o/r"}}},
	}
	tabled := map[string]bool{}
	for _, c := range commands {
		tabled[c.name] = true
	}
	built, _ := os.ReadDir(bin)
	for _, b := range built {
		if !tabled[b.Name()] {
			t.Errorf("examples/%s is a command the table does not run", b.Name())
		}
	}
	refused := func(name string, args []string) {
		t.Helper()
		if code, stdout, stderr := command(t, nil, name, args...); code != 2 || stdout != "" || !oneLine(stderr) {
			t.Errorf("%s %q: exit %d, stdout %q, stderr %q; want 2 and one line on stderr", name, args, code, stdout, stderr)
		}
	}
	for _, c := range commands {
		if code, _, stderr := command(t, nil, c.name, c.help...); code != 0 {
			t.Errorf("%s %v: exit %d, want 0\n%s", c.name, c.help, code, stderr)
		}
		refused(c.name, append(append([]string{}, c.help[:len(c.help)-1]...), "-no-such-flag"))
		if c.stray != nil {
			refused(c.name, c.stray)
		}
		for _, m := range c.missing {
			refused(c.name, m)
		}
	}
	for _, o := range jsonOutputs(t) {
		if o.code != o.want || !json.Valid([]byte(o.stdout)) {
			t.Errorf("%v: exit %d, want %d; stdout is not only JSON: %q\n%s", o.args, o.code, o.want, cli.FirstLine(o.stdout, 100), o.stderr)
			continue
		}
		var doc any
		json.Unmarshal([]byte(o.stdout), &doc)
		for _, path := range o.empty {
			if v, ok := lookup(doc, path); !ok || !isEmptyList(v) {
				t.Errorf("%v: %s is %v, want [] (an empty result is [], not null)", o.args, or(path, "the document"), v)
			}
		}
	}
}

// The rule for durations in JSON: a Go duration string ("1m30s") or
// seconds with the unit in the field's name ("age_seconds"), never the
// nanoseconds a bare time.Duration field encodes to. Every command's JSON
// output is decoded, and a number whose name says it is a span of time
// without saying its unit is refused.
func TestJSON_DurationsAreStringsNeverNanoseconds(t *testing.T) {
	for _, o := range jsonOutputs(t) {
		var doc any
		if err := json.Unmarshal([]byte(o.stdout), &doc); err != nil {
			t.Errorf("%v: %v", o.args, err)
			continue
		}
		for _, p := range nanosecondDurations(doc, "") {
			t.Errorf("%v: %s is a number with no unit in its name: a duration is a string (\"1m30s\") or seconds named so", o.args, p)
		}
	}
	// The check itself: what a time.Duration field encodes to is caught.
	for doc, caught := range map[string]bool{
		`{"steps":[{"step":"driver","duration":1234567}]}`: true,
		`{"request":{"duration":10800000000000}}`:          true,
		`{"compile_budget":19800000000000}`:                true,
		`{"steps":[{"duration":"1.235s"}]}`:                false,
		`{"age_seconds":60,"compile_timeout_seconds":5}`:   false,
		`{"cost":0.5,"seconds":12}`:                        false,
	} {
		var v any
		json.Unmarshal([]byte(doc), &v)
		if got := len(nanosecondDurations(v, "")) > 0; got != caught {
			t.Errorf("%s: caught %v, want %v", doc, got, caught)
		}
	}
}

// spanWords name a span of time.
var spanWords = []string{"duration", "elapsed", "timeout", "budget", "wait", "interval", "poll", "deadline", "lifetime", "grace", "delay", "latency", "backoff", "age", "ttl", "period", "cadence", "uptime"}

// providerRecords are keys whose objects are a provider's own record,
// carried verbatim in its wire format as evidence (and read back as such):
// RunPod's pod record, whose runtime.uptime is RunPod's, in seconds.
var providerRecords = []string{"pod_snapshot"}

// nanosecondDurations lists the paths in doc of numbers whose names say
// they are spans of time but not in seconds.
func nanosecondDurations(doc any, path string) []string {
	var out []string
	switch v := doc.(type) {
	case map[string]any:
		for k, x := range v {
			if slices.Contains(providerRecords, k) {
				continue
			}
			p := path + "." + k
			if _, isNumber := x.(float64); isNumber {
				words := keyWords(k)
				span := slices.ContainsFunc(words, func(w string) bool { return slices.Contains(spanWords, w) })
				seconds := slices.ContainsFunc(words, func(w string) bool { return w == "seconds" || w == "second" || w == "secs" || w == "s" })
				if span && !seconds {
					out = append(out, p)
				}
			}
			out = append(out, nanosecondDurations(x, p)...)
		}
	case []any:
		for i, x := range v {
			out = append(out, nanosecondDurations(x, fmt.Sprintf("%s[%d]", path, i))...)
		}
	}
	return out
}

// keyWords splits a JSON key into lower-case words: startup_seconds,
// compileBudget and CompileBudget all give two.
func keyWords(k string) []string {
	var words []string
	var w []rune
	flush := func() {
		if len(w) > 0 {
			words = append(words, strings.ToLower(string(w)))
			w = w[:0]
		}
	}
	for i, r := range k {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			flush()
		case unicode.IsUpper(r) && i > 0:
			flush()
			w = append(w, r)
		default:
			w = append(w, r)
		}
	}
	flush()
	return words
}

func lookup(doc any, path string) (any, bool) {
	if path == "" {
		return doc, true
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return nil, false
	}
	v, ok := m[path]
	return v, ok
}

func isEmptyList(v any) bool {
	l, ok := v.([]any)
	return ok && len(l) == 0
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// jsonOutput is one command's -json run.
type jsonOutput struct {
	args           []string
	code, want     int
	stdout, stderr string
	empty          []string // its keys ("" for the document) that are empty lists here
}

var (
	jsonOnce sync.Once
	jsonRuns []jsonOutput
)

// jsonOutputs runs every command that prints JSON, once for the tests
// that check it: each -json mode, and sparkctl (always JSON) against a
// sparkd started for it.
func jsonOutputs(t *testing.T) []jsonOutput {
	t.Helper()
	bin := commands(t)
	jsonOnce.Do(func() {
		dir := filepath.Join(scratch, "json")
		os.MkdirAll(filepath.Join(dir, "no-evidence", "runs"), 0o755)
		cfg, err := tiers.Load(tiers.Example)
		if err != nil {
			t.Fatal(err)
		}
		table, err := cfg.JSON()
		if err != nil {
			t.Fatal(err)
		}
		tiersFile := filepath.Join(dir, "tiers.json")
		os.WriteFile(tiersFile, []byte(table), 0o644)
		cases := []struct {
			args  []string
			want  int
			empty []string
		}{
			{[]string{"cachecheck", "-json", "-dir", root(), "-rules", filepath.Join(root(), ".github/cache-rules.yml")}, 0, []string{""}},
			{[]string{"classify", "-example", "-json"}, 0, nil},
			{[]string{"cleanup", "-simulate", "-json"}, 0, nil},
			{[]string{"costreport", "summarize", "-json", "-dir", filepath.Join(root(), "examples", "costreport", "testdata", "evidence")}, 0, nil},
			{[]string{"costreport", "summarize", "-json", "-dir", filepath.Join(dir, "no-evidence")}, 0, []string{"repeated_automatic_refs", "per_gpu", "per_day", "stages", "excluded_runs"}},
			{[]string{"gateflow", "-json"}, 0, nil},
			{[]string{"gateflow", "-json", "-simulate-fleet", "-merge-refs", "3"}, 0, nil},
			{[]string{"partition", "check", "-example", "-json"}, 1, nil}, // the example has a test nobody classified
			{[]string{"partition", "chain", "-estimate", "10h", "-json"}, 0, nil},
			{[]string{"partition", "batches", "-jobs", "0", "-json"}, 0, []string{"batches"}},
			{[]string{"provision", "-simulate", "-json"}, 0, nil},
			{[]string{"reap", "-simulate", "-json"}, 0, nil},
			{[]string{"smoke", "-json", "-tiers", tiersFile}, 10, nil}, // no GPU here: the driver step fails
			{[]string{"watch", "-simulate", "-json"}, 0, nil},
		}
		for _, c := range cases {
			code, stdout, stderr := command(t, nil, c.args[0], c.args[1:]...)
			jsonRuns = append(jsonRuns, jsonOutput{args: c.args, code: code, want: c.want, stdout: stdout, stderr: stderr, empty: c.empty})
		}
		jsonRuns = append(jsonRuns, sparkctlOutputs(t, bin, dir)...)
	})
	if len(jsonRuns) == 0 {
		t.Fatal("the JSON outputs were not collected (an earlier test failed collecting them)")
	}
	return jsonRuns
}

// sparkctlOutputs starts sparkd on its embedded defaults and runs the
// sparkctl commands that print JSON against it.
func sparkctlOutputs(t *testing.T, bin, dir string) []jsonOutput {
	t.Helper()
	d := exec.Command(filepath.Join(bin, "sparkd"), "-addr", "127.0.0.1:0", "-init", "-db", filepath.Join(dir, "sparkd", "spark.db"))
	os.MkdirAll(filepath.Join(dir, "sparkd"), 0o700)
	d.Env = []string{"PATH=/usr/bin:/bin"}
	logs, err := d.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		d.Process.Signal(os.Interrupt)
		d.Wait()
	}()
	// It says where it listens and where the token is once it serves.
	lines := bufio.NewScanner(logs)
	var addr, tokenFile string
	for addr == "" && lines.Scan() {
		line := lines.Text()
		if rest, ok := strings.CutPrefix(line, "sparkd: listening on "); ok {
			addr, _, _ = strings.Cut(rest, " ")
			_, tokenFile, _ = strings.Cut(rest, "the API token is in ")
		}
	}
	if addr == "" {
		t.Fatalf("sparkd did not start: %v", lines.Err())
	}
	go io.Copy(io.Discard, logs)
	env := []string{"SPARK_ADDR=" + addr, "SPARK_TOKEN_FILE=" + tokenFile}
	var out []jsonOutput
	// The lease's flags before the verb: sparkctl has always taken them
	// there (the verb's own flags after it are TestSparkctl_FlagsAfter...).
	for _, args := range [][]string{{"sparkctl", "-class", "benchmark", "-duration", "3h", "request"}, {"sparkctl", "hosts"}} {
		code, stdout, stderr := command(t, env, args[0], args[1:]...)
		out = append(out, jsonOutput{args: args, code: code, stdout: stdout, stderr: stderr})
		if args[len(args)-1] != "request" || code != 0 {
			continue
		}
		var st struct {
			Request struct {
				ID string `json:"id"`
			} `json:"request"`
		}
		json.Unmarshal([]byte(stdout), &st)
		code, stdout, stderr = command(t, env, "sparkctl", "status", st.Request.ID)
		out = append(out, jsonOutput{args: []string{"sparkctl", "status", st.Request.ID}, code: code, stdout: stdout, stderr: stderr})
	}
	return out
}
