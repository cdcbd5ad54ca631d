package compileplan

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// write writes text to name in dir and returns its path.
func write(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadUnits_CostsAreDurationsAndAnEmptyListIsRefused(t *testing.T) {
	dir := t.TempDir()
	got, err := ReadUnits(write(t, dir, "units.json", `[{"name":"a.cu","cost":"40m"},{"name":"b.cu","cost":"1h30m","objects":["b1.o","b2.o"]}]`))
	want := []Unit{{Name: "a.cu", Cost: 40 * time.Minute}, {Name: "b.cu", Cost: 90 * time.Minute, Objects: []string{"b1.o", "b2.o"}}}
	if diff := cmp.Diff(want, got); diff != "" || err != nil {
		t.Errorf("%v (-want +got):\n%s", err, diff)
	}
	for name, text := range map[string]string{
		"no units":   `[]`,
		"not JSON":   `units: a.cu`,
		"a bad cost": `[{"name":"a.cu","cost":"40 minutes"}]`,
		"no cost":    `[{"name":"a.cu"}]`,
	} {
		if _, err := ReadUnits(write(t, dir, "bad.json", text)); !errors.Is(err, ErrUnits) {
			t.Errorf("%s: %v, want ErrUnits", name, err)
		}
	}
	if _, err := ReadUnits(filepath.Join(dir, "missing.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}

func TestMatrix_AShardWithNothingToCompileGetsNoJob(t *testing.T) {
	ss, err := Shards([]Unit{{Name: "a.cu", Cost: time.Hour}, {Name: "b.cu", Cost: time.Minute}}, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := []MatrixCell{{0, []string{"a.cu"}, []string{"a.cu.o"}}, {1, []string{"b.cu"}, []string{"b.cu.o"}}}
	if diff := cmp.Diff(want, Matrix(ss)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestVerifyObjectFiles_ReadsTheListingsAndCountsTheShardObjects(t *testing.T) {
	dir := t.TempDir()
	a, b, c := strings.Repeat("a", 64), strings.Repeat("b", 64), strings.Repeat("c", 64)
	shard0 := write(t, dir, "shard-0.sha256", a+"  build/gemv.o\n")
	shard1 := write(t, dir, "shard-1.sha256", b+"  build/attn.o\n")
	if n, err := VerifyObjectFiles(write(t, dir, "link.sha256", a+"  build/gemv.o\n"+b+"  build/attn.o\n"), shard0, shard1); n != 2 || err != nil {
		t.Errorf("reused: %d, %v", n, err)
	}
	var oe *ObjectError
	if _, err := VerifyObjectFiles(write(t, dir, "rebuilt.sha256", a+"  build/gemv.o\n"+c+"  build/attn.o\n"), shard0, shard1); !errors.As(err, &oe) || !cmp.Equal(oe.Changed, []string{"build/attn.o"}) {
		t.Errorf("rebuilt: %v, want an ObjectError naming build/attn.o", err)
	}
	if _, err := VerifyObjectFiles(shard0, write(t, dir, "bad.sha256", "abc  x.o\n")); !errors.Is(err, ErrSums) {
		t.Errorf("a malformed manifest: %v, want ErrSums", err)
	}
	if _, err := VerifyObjectFiles(filepath.Join(dir, "missing.sha256"), shard0); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing listing: %v", err)
	}
}

func TestCheckCells_EveryCellFitsAnArtifactNameOnce(t *testing.T) {
	if err := CheckCells("natten", "pytorch3d", "cu12-py3.11"); err != nil {
		t.Errorf("plain names: %v", err)
	}
	for _, cells := range [][]string{{""}, {" natten"}, {"cu12/py3"}, {"cu12:py3"}, {"a\nb"}, {"a", "b", "a"}} {
		if err := CheckCells(cells...); !errors.Is(err, ErrCellName) {
			t.Errorf("%q: %v, want ErrCellName", cells, err)
		}
	}
}

// The cells come as the matrix has them (a JSON array) or as a person
// types them (a,b); ParseCells keeps each name as given for CheckCells.
func TestParseCells_AJSONArrayOrACommaSeparatedList(t *testing.T) {
	for list, want := range map[string][]string{
		`["natten","pytorch3d"]`: {"natten", "pytorch3d"},
		` ["natten"] `:           {"natten"},
		"natten,pytorch3d":       {"natten", "pytorch3d"},
		" natten,pytorch3d\n":    {"natten", "pytorch3d"},
		"natten, pytorch3d":      {"natten", " pytorch3d"}, // CheckCells refuses the second
		"natten,,xformers":       {"natten", "", "xformers"},
		`[]`:                     {},
		"":                       nil,
		"  ":                     nil,
		`["cu12/py3"]`:           {"cu12/py3"},
		`["natten","natten"]`:    {"natten", "natten"},
		`[null, "natten", "" ]`:  {"", "natten", ""},
		`["a\u002fb"]`:           {"a/b"},
	} {
		got, err := ParseCells(list)
		if err != nil {
			t.Errorf("%q: %v", list, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", list, diff)
		}
	}
	for _, list := range []string{`["natten",`, ` [1] `, `["natten"] ["pytorch3d"]`, `[natten]`} {
		_, err := ParseCells(list)
		var le *CellListError
		if !errors.Is(err, ErrCellList) || !errors.As(err, &le) || le.List != strings.TrimSpace(list) || le.Err == nil {
			t.Errorf("%q: %v, want a CellListError quoting the list", list, err)
		}
	}
}

func TestRecordCell_CreatesTheFileAndNeverMovesACellBack(t *testing.T) {
	file := filepath.Join(t.TempDir(), "state.json")
	if _, err := RecordCell(file, "natten", CellState{Link: 1}); err != nil {
		t.Fatal(err)
	}
	s, err := RecordCell(file, "pytorch3d", CellState{Link: 2, Done: true})
	if want := (ChainState{"natten": {Link: 1}, "pytorch3d": {Link: 2, Done: true}}); err != nil || !cmp.Equal(want, s) {
		t.Errorf("%v, %v", s, err)
	}
	data, _ := os.ReadFile(file)
	if read, err := ParseChainState(data); err != nil || !cmp.Equal(s, read) {
		t.Errorf("the file holds %v (%v), want %v", read, err, s)
	}
	if _, err := RecordCell(file, "pytorch3d", CellState{Link: 1}); !errors.Is(err, ErrCell) {
		t.Errorf("a link going back: %v, want ErrCell", err)
	}
	if _, err := RecordCell(write(t, t.TempDir(), "stray.json", "[1, 2]"), "natten", CellState{Link: 1}); !errors.Is(err, ErrChainState) {
		t.Errorf("a file that is no state: %v, want ErrChainState", err)
	}
}

func TestReadChainStates_FoldsFilesAndDirectoriesAndSkipsWhatIsNotThere(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "chain-state-natten-1/state.json", `{"natten": {"link": 1}}`)
	write(t, dir, "chain-state-natten-2/state.json", `{"natten": {"link": 2}}`)
	write(t, dir, "chain-state-natten-2/notes.txt", `not a state`)
	one := write(t, t.TempDir(), "xformers.json", `{"xformers": {"link": 1, "done": true}}`)
	s, n, err := ReadChainStates(dir, one, filepath.Join(dir, "missing"))
	if want := (ChainState{"natten": {Link: 2}, "xformers": {Link: 1, Done: true}}); err != nil || n != 3 || !cmp.Equal(want, s) {
		t.Errorf("%v from %d file(s), %v; want %v from 3", s, n, err, want)
	}
	if s, n, err := ReadChainStates(filepath.Join(dir, "missing")); err != nil || n != 0 || len(s) != 0 {
		t.Errorf("nothing downloaded yet: %v, %d, %v", s, n, err)
	}
	write(t, dir, "stray.json", `[1, 2]`)
	if _, _, err := ReadChainStates(dir); !errors.Is(err, ErrChainState) {
		t.Errorf("a stray file: %v, want ErrChainState", err)
	}
}

func TestCheckpointFiles_ARoundTripAndNoCheckpointInsideItsTree(t *testing.T) {
	src := buildTree(t)
	ckpt := filepath.Join(t.TempDir(), "ckpt.tar")
	st, err := WriteCheckpointFile(ckpt, src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "fresh-runner", "source") // restore makes it
	rst, err := RestoreCheckpointFile(ckpt, dst)
	if err != nil || !cmp.Equal(st, rst) {
		t.Fatalf("restored %v, %v; wrote %v", rst, err, st)
	}
	if diff := cmp.Diff(snapshot(t, src), snapshot(t, dst)); diff != "" {
		t.Errorf("restored tree (-checkpointed +restored):\n%s", diff)
	}
	for _, inside := range []string{filepath.Join(src, "ckpt.tar"), filepath.Join(src, "source", "ckpt.tar"), src} {
		if _, err := WriteCheckpointFile(inside, src); !errors.Is(err, ErrInsideTree) {
			t.Errorf("%s: %v, want ErrInsideTree", inside, err)
		}
	}
	if _, err := os.Stat(filepath.Join(src, "ckpt.tar")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused checkpoint was written: %v", err)
	}
	// A checkpoint that fails leaves no file to upload.
	failed := filepath.Join(t.TempDir(), "failed.tar")
	if _, err := WriteCheckpointFile(failed, t.TempDir()); !errors.Is(err, ErrCheckpoint) {
		t.Errorf("an empty tree: %v, want ErrCheckpoint", err)
	}
	if _, err := os.Stat(failed); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("half a checkpoint was left: %v", err)
	}
	if _, err := RestoreCheckpointFile(write(t, t.TempDir(), "bad.tar", "not a tar"), t.TempDir()); !errors.Is(err, ErrCheckpoint) {
		t.Errorf("a bad checkpoint: %v, want ErrCheckpoint", err)
	}
}
