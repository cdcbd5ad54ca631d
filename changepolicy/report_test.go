package changepolicy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
)

// The job summary is a Markdown table a cell at a time: a pipe, a line
// break or a backquote in a reason or a path never breaks its row.
func TestDecision_MarkdownKeepsEveryRowOneRow(t *testing.T) {
	d := Decision{Class: Code, Reason: "a | b\nc",
		Jobs:  []Job{{Name: "GPU `gate`", Outcome: Run, Reason: "x|y"}},
		Files: []FileDecision{{Path: "a|b.go", Old: true, Kind: KindCode, Rule: RuleUnknown}}}
	md := d.Markdown()
	for _, want := range []string{"### Change classification: code\n\na \\| b c\n", "| GPU 'gate' | run | x\\|y |\n", "| `a\\|b.go (old side)` | unknown | code |\n"} {
		if !strings.Contains(md, want) {
			t.Errorf("lacks %q:\n%s", want, md)
		}
	}
	if got := strings.Count(md, "\n"); got != 11 {
		t.Errorf("%d lines, want 11:\n%s", got, md)
	}
}

func TestReadNameStatus_AStreamOrAFileReadsAsTheBytesDo(t *testing.T) {
	want, err := ParseNameStatus([]byte("M\tsrc/lib.rs\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ReadNameStatus(strings.NewReader("M\tsrc/lib.rs\n")); err != nil || len(got) != 1 || got[0] != want[0] {
		t.Errorf("stream: %v, %v", got, err)
	}
	if _, err := ReadNameStatus(iotest.ErrReader(os.ErrClosed)); !errors.Is(err, os.ErrClosed) {
		t.Errorf("a failing stream: %v", err)
	}
	file := filepath.Join(t.TempDir(), "changes.txt")
	os.WriteFile(file, []byte("M\tsrc/lib.rs\n"), 0o644)
	if got, err := ReadNameStatusFile(file); err != nil || len(got) != 1 || got[0] != want[0] {
		t.Errorf("file: %v, %v", got, err)
	}
	if _, err := ReadNameStatusFile(filepath.Join(t.TempDir(), "missing.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}
