package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCmd(t *testing.T, stdin string, args ...string) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, func(string) string { return "" }, strings.NewReader(stdin), &out, &errOut)
	return code, out.String() + errOut.String()
}

func TestExampleCheckFailsOnTheUnclassifiedTest(t *testing.T) {
	code, out := runCmd(t, "")
	if code != 1 || !strings.Contains(out, "+ tenferro-cuda::capability\ttwo_device_registration\t<category>") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

func TestCheckSelectShards(t *testing.T) {
	dir := t.TempDir()
	tsv := filepath.Join(dir, "p.tsv")
	os.WriteFile(tsv, []byte("example.com/m\tTestA\thost\nexample.com/m\tTestB\tsingle-gpu\n"), 0o644)
	inv := `{"Action":"run","Package":"example.com/m","Test":"TestA"}` + "\n" + `{"Action":"run","Package":"example.com/m","Test":"TestB"}` + "\n"
	if code, out := runCmd(t, inv, "check", "-format", "go", tsv); code != 0 || !strings.Contains(out, "every test is in exactly one category") {
		t.Errorf("check: exit %d\n%s", code, out)
	}
	if code, out := runCmd(t, "", "select", "-category", "single-gpu", "-render", "go", tsv); code != 0 || out != "example.com/m\t^(TestB)$\n" {
		t.Errorf("select: exit %d %q", code, out)
	}
	units := filepath.Join(dir, "units.json")
	os.WriteFile(units, []byte(`[{"name":"a.cu","cost":"3h"},{"name":"b.cu","cost":"2h"},{"name":"c.cu","cost":"1h"}]`), 0o644)
	if code, out := runCmd(t, "", "shards", "-n", "2", units); code != 0 || !strings.Contains(out, "shard 0: 3h0m0s of compiling: a.cu") || !strings.Contains(out, "shard 1: 3h0m0s of compiling: b.cu c.cu") {
		t.Errorf("shards: exit %d\n%s", code, out)
	}
	if code, _ := runCmd(t, "", "bogus"); code != 2 {
		t.Error("unknown subcommand must exit 2")
	}
}

func TestARefusedCommandLineExitsTwoAndSaysWhyOnce(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"an unknown flag":         {[]string{"select", "-nope", "p.tsv"}, "flag provided but not defined: -nope"},
		"shards without a file":   {[]string{"shards", "-n", "2"}, "partition shards: name one units file"},
		"shards with two files":   {[]string{"shards", "a.json", "b.json"}, "partition shards: name one units file"},
		"check with a bad -value": {[]string{"check", "-example=maybe"}, `invalid boolean value "maybe"`},
	} {
		t.Run(name, func(t *testing.T) {
			code, out := runCmd(t, "", tc.args...)
			if code != 2 || strings.Count(out, tc.want) != 1 || strings.Contains(out, "::error::") {
				t.Errorf("exit %d, output:\n%s\nwant exit 2 and %q once", code, out, tc.want)
			}
		})
	}
}
