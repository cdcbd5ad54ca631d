package compileplan

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func units(n int) []Unit {
	var us []Unit
	for i := range n {
		us = append(us, Unit{Name: fmt.Sprintf("kernels/k%03d.cu", i), Cost: time.Duration(1+(i*37)%90) * time.Minute})
	}
	return us
}

func TestShards_BalancedDeterministicAndStable(t *testing.T) {
	us := units(60)
	a, err := Shards(us, 4)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Shards(append(us[30:], us[:30]...), 4) // order of the input does not matter
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("not deterministic (-a +b):\n%s", diff)
	}
	lo, hi := a[0].Cost, a[0].Cost
	var total time.Duration
	for _, s := range a {
		lo, hi = min(lo, s.Cost), max(hi, s.Cost)
		total += s.Cost
		if len(s.Manifest) != len(s.Units) {
			t.Errorf("shard %d manifest %v", s.Index, s.Manifest)
		}
	}
	if hi-lo > 90*time.Minute { // LPT bound: within one unit's cost
		t.Errorf("unbalanced: %v..%v", lo, hi)
	}
	// Adding a small unit moves no other unit.
	c, _ := Shards(append(us, Unit{Name: "kernels/tiny.cu", Cost: time.Second}), 4)
	moved := 0
	where := map[string]int{}
	for _, s := range a {
		for _, u := range s.Units {
			where[u] = s.Index
		}
	}
	for _, s := range c {
		for _, u := range s.Units {
			if idx, ok := where[u]; ok && idx != s.Index {
				moved++
			}
		}
	}
	if moved != 0 {
		t.Errorf("adding a small unit moved %d others", moved)
	}
	if _, err := Shards([]Unit{{Name: "a"}, {Name: "a"}}, 2); !errors.Is(err, ErrShards) {
		t.Errorf("duplicate unit: %v", err)
	}
	if _, err := Shards(us, 0); !errors.Is(err, ErrShards) {
		t.Errorf("zero shards: %v", err)
	}
}

func TestVerifyObjects_ASilentFullRecompileIsImpossible(t *testing.T) {
	manifests := [][]Object{{{"a.o", "d1"}, {"b.o", "d2"}}, {{"c.o", "d3"}}}
	if err := VerifyObjects(manifests, []Object{{"a.o", "d1"}, {"b.o", "d2"}, {"c.o", "d3"}}); err != nil {
		t.Fatal(err)
	}
	err := VerifyObjects(manifests, []Object{{"a.o", "d1"}, {"b.o", "rebuilt"}, {"d.o", "x"}})
	var oe *ObjectError
	if !errors.As(err, &oe) || !errors.Is(err, ErrObjects) {
		t.Fatalf("err = %v", err)
	}
	want := &ObjectError{Missing: []string{"c.o"}, Changed: []string{"b.o"}, Extra: []string{"d.o"}}
	if diff := cmp.Diff(want, oe); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, part := range []string{"missing c.o", "rebuilt or changed b.o", "compiled outside any shard d.o"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("message %q lacks %q", err, part)
		}
	}
	// Empty manifests prove nothing, even when the link compiled nothing
	// either.
	for _, present := range [][]Object{nil, {{"a.o", "d1"}}} {
		if err := VerifyObjects([][]Object{{}, nil}, present); !errors.Is(err, ErrObjects) || !strings.Contains(err.Error(), "list no object") {
			t.Errorf("empty manifests, present %v: err = %v", present, err)
		}
	}
}

func TestPlanChain_SixHourCapAndTheWiredDepth(t *testing.T) {
	c, err := PlanChain(10*time.Hour, 6*time.Hour, 2)
	if err != nil || c.Links != 2 || c.CompileBudget != 5*time.Hour+30*time.Minute {
		t.Errorf("%+v %v", c, err)
	}
	c, err = PlanChain(12*time.Hour, 6*time.Hour, 2)
	if !errors.Is(err, ErrChain) || c.Links != 3 {
		t.Errorf("a 12 h build on a 2-link chain must fail loudly: %+v %v", c, err)
	}
	if c, err := PlanChain(time.Hour, 6*time.Hour, 1); err != nil || c.Links != 1 {
		t.Errorf("%+v %v", c, err)
	}
	if _, err := PlanChain(time.Hour, 20*time.Minute, 3); !errors.Is(err, ErrChain) {
		t.Errorf("cap below the margin: %v", err)
	}
}

func TestMergeChainState_OneCellsDoneNeverMarksAnother(t *testing.T) {
	s := ChainState{"linux-py312": {Link: 1}, "windows-py312": {Link: 1}}
	s, err := MergeChainState(s, "linux-py312", CellState{Link: 2, Done: true})
	if err != nil {
		t.Fatal(err)
	}
	if s["windows-py312"].Done || !s["linux-py312"].Done {
		t.Errorf("%v", s)
	}
	if got := s.Pending(); !cmp.Equal(got, []string{"windows-py312"}) {
		t.Errorf("pending %v", got)
	}
	// A later, not-done update from the same cell cannot undo done, and links never go back.
	s, _ = MergeChainState(s, "linux-py312", CellState{Link: 2})
	if !s["linux-py312"].Done {
		t.Error("done was undone")
	}
	if _, err := MergeChainState(s, "windows-py312", CellState{Link: 0}); !errors.Is(err, ErrCell) {
		t.Errorf("backwards link: %v", err)
	}
}

// The compile-sharding ADR: "a chain that runs out loses its compute
// (checkpoints are same-run artifacts)" and "the chain done flag is a
// matrix job output, which is last-writer-wins across cells and can starve
// an unfinished cell". Each cell and link leaves its own state file; folded
// in any order, every cell is at its furthest link, done stays done, and
// every unfinished cell resumes from its own last checkpoint.
func TestAChainResumesEachUnfinishedCellFromItsFurthestCheckpoint(t *testing.T) {
	files := []ChainState{
		{"linux-py312": {Link: 1}},
		{"windows-py312": {Link: 1}},
		{"linux-py312": {Link: 2, Done: true}},
		{"windows-py312": {Link: 3}}, // the last link ran out: its checkpoint is kept
		{"windows-py312": {Link: 2}}, // an earlier link's file, listed later
	}
	cells := []string{"windows-py312", "linux-py312", "macos-py312"}
	for _, order := range [][]int{{0, 1, 2, 3, 4}, {4, 3, 2, 1, 0}, {2, 4, 0, 3, 1}} {
		var in []ChainState
		for _, i := range order {
			in = append(in, files[i])
		}
		s := CombineChainStates(in...)
		want := ChainState{"linux-py312": {Link: 2, Done: true}, "windows-py312": {Link: 3}}
		if diff := cmp.Diff(want, s); diff != "" {
			t.Errorf("order %v (-want +got):\n%s", order, diff)
		}
		if diff := cmp.Diff([]ResumePoint{{"windows-py312", 3}, {"macos-py312", 0}}, s.Resume(cells)); diff != "" {
			t.Errorf("order %v: resume (-want +got):\n%s", order, diff)
		}
	}
	s := CombineChainStates(files...)
	if err := s.Finished(cells); !errors.Is(err, ErrUnfinished) {
		t.Errorf("two unfinished cells: %v", err)
	}
	if err := s.Finished([]string{"linux-py312"}); err != nil {
		t.Errorf("the done cell alone: %v", err)
	}
	if got := CombineChainStates().Resume(nil); got == nil || len(got) != 0 {
		t.Errorf("no cells: %#v, want an empty list (a matrix of none)", got)
	}
}

func TestParseChainState(t *testing.T) {
	s, err := ParseChainState([]byte(`{"natten": {"link": 2}, "pytorch3d": {"link": 1, "done": true}}`))
	if diff := cmp.Diff(ChainState{"natten": {Link: 2}, "pytorch3d": {Link: 1, Done: true}}, s); diff != "" || err != nil {
		t.Errorf("%v (-want +got):\n%s", err, diff)
	}
	for name, in := range map[string]string{
		"not JSON":        `natten=2`,
		"a list":          `[1, 2]`,
		"null":            `null`,
		"an unknown key":  `{"natten": {"link": 2, "checkpoint": "x"}}`,
		"a negative link": `{"natten": {"link": -1}}`,
		"an unnamed cell": `{" ": {"link": 1}}`,
		"two documents":   `{} {}`,
	} {
		if _, err := ParseChainState([]byte(in)); !errors.Is(err, ErrChainState) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func FuzzParseChainState(f *testing.F) {
	f.Add([]byte(`{"natten": {"link": 2}, "pytorch3d": {"link": 1, "done": true}}`))
	f.Add([]byte(`{"a": {"link": -1}}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseChainState(data)
		if err != nil {
			if !errors.Is(err, ErrChainState) {
				t.Fatalf("error %v does not match ErrChainState", err)
			}
			return
		}
		cells := make([]string, 0, len(s))
		for c, st := range s {
			if st.Link < 0 || strings.TrimSpace(c) == "" {
				t.Fatalf("accepted cell %q at link %d", c, st.Link)
			}
			cells = append(cells, c)
		}
		// Folding a state with itself changes nothing, and every cell
		// resumes at a link the state recorded.
		if diff := cmp.Diff(s, CombineChainStates(s, s)); diff != "" {
			t.Fatalf("combining with itself changed the state (-want +got):\n%s", diff)
		}
		for _, r := range s.Resume(cells) {
			if r.Link != s[r.Cell].Link || s[r.Cell].Done {
				t.Fatalf("resume %+v from %+v", r, s[r.Cell])
			}
		}
	})
}

func TestBatches_ClearWellInsideTheTwentyFourHourQueueCap(t *testing.T) {
	got, err := Batches(2100, 40, time.Hour, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{480, 480, 480, 480, 180}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := Batches(10, 4, 13*time.Hour, 24*time.Hour); !errors.Is(err, ErrBatches) {
		t.Errorf("a job longer than half the cap: %v", err)
	}
	if got, _ := Batches(0, 4, time.Hour, 24*time.Hour); len(got) != 0 {
		t.Errorf("%v", got)
	}
}

func TestParseSHA256Sums_ReadsWhatSha256sumPrints(t *testing.T) {
	a, b := strings.Repeat("a", 64), strings.Repeat("B", 64)
	got, err := ParseSHA256Sums(strings.NewReader(a + "  build/gemv.o\n" + b + " *build/attn kernel.o\r\n\n" + a + "  build/gemv.o\n"))
	want := []Object{{"build/gemv.o", a}, {"build/attn kernel.o", strings.ToLower(b)}}
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// GNU sha256sum escapes a name holding a backslash, newline or
	// carriage return, and marks its line with a leading backslash.
	got, err = ParseSHA256Sums(strings.NewReader(`\` + a + `  obj/a\\b.o` + "\n" + `\` + b + `  obj/n\nl\r.o` + "\n"))
	if want := []Object{{`obj/a\b.o`, a}, {"obj/n\nl\r.o", strings.ToLower(b)}}; err != nil || !cmp.Equal(want, got) {
		t.Errorf("escaped names: %q, %v", got, err)
	}
	if sha256sum, err := exec.LookPath("sha256sum"); err == nil {
		dir := t.TempDir()
		names := []string{`a\b.o`, "n\nl.o", "c\rr.o", "plain.o"}
		for _, n := range names {
			if err := os.WriteFile(filepath.Join(dir, n), []byte(n), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command(sha256sum, names...)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseSHA256Sums(bytes.NewReader(out))
		if err != nil || len(got) != len(names) {
			t.Fatalf("the real sha256sum's listing %q: %v, %v", out, got, err)
		}
		for i, o := range got {
			sum := sha256.Sum256([]byte(names[i]))
			if o.Name != names[i] || o.Digest != hex.EncodeToString(sum[:]) {
				t.Errorf("line %d: %q %s, want %q", i+1, o.Name, o.Digest, names[i])
			}
		}
	}
	for name, in := range map[string]string{
		"short digest":         "abc  x.o\n",
		"no name":              a + "  \n",
		"not hex":              strings.Repeat("z", 64) + "  x.o\n",
		"one name two digests": a + "  x.o\n" + strings.Repeat("c", 64) + "  x.o\n",
	} {
		if _, err := ParseSHA256Sums(strings.NewReader(in)); !errors.Is(err, ErrSums) || !strings.Contains(err.Error(), "line ") {
			t.Errorf("%s: %v, want ErrSums naming the line", name, err)
		}
	}
}

func FuzzParseSHA256Sums(f *testing.F) {
	f.Add([]byte(strings.Repeat("a", 64) + "  build/gemv.o\n" + strings.Repeat("b", 64) + " *x.o\n"))
	f.Add([]byte("\n \n"))
	f.Add([]byte(`\` + strings.Repeat("c", 64) + `  a\\b\nc.o` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := ParseSHA256Sums(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrSums) {
				t.Fatalf("unwrapped error %v", err)
			}
			return
		}
		for _, o := range objs {
			if o.Name == "" || len(o.Digest) != 64 || strings.ToLower(o.Digest) != o.Digest {
				t.Fatalf("accepted %+v", o)
			}
		}
	})
}
