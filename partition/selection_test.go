package partition

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The NOT RUN list reaches publish as one environment variable and one
// argument, each capped at 128 KiB by Linux: a large partition's list is
// cut to what fits, with what is left counted, never lost silently.
func TestNotRunOutput_FitsTheExecLimitsAndCountsTheRest(t *testing.T) {
	var all []string
	for i := range 3000 {
		all = append(all, fmt.Sprintf("tenferro-cuda::two_device tests::collective::allreduce_case_%04d (two-device)", i))
	}
	got := NotRunOutput(all)
	items := strings.Split(got, ",")
	last := items[len(items)-1]
	if len(got) > MaxNotRunOutput || !strings.HasPrefix(last, fmt.Sprintf("… and %d more", len(all)-(len(items)-1))) {
		t.Errorf("%d bytes, %d items, last %q", len(got), len(items), last)
	}
	if items[0] != all[0] || items[len(items)-2] != all[len(items)-2] {
		t.Errorf("the kept items are not the list's first ones: %q", items[:2])
	}
	// A list that fits is whole, commas inside an item made harmless.
	if got := NotRunOutput([]string{"a, b (two-device)", "c (trybuild)"}); got != "a; b (two-device),c (trybuild)" {
		t.Errorf("%q", got)
	}
	if got := NotRunOutput(nil); got != "" {
		t.Errorf("%q", got)
	}
}

func TestSelection_RendersTheLaneEachWay(t *testing.T) {
	p, err := ParseTSV(strings.NewReader("example.com/m\tTestA\thost\nexample.com/m\tTestB\tsingle-gpu\nexample.com/m\tTestC\ttwo-device\tneeds two GPUs\n"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := DefaultConfig().Selection(p, "single-gpu", true)
	if err != nil {
		t.Fatal(err)
	}
	for rendering, want := range map[string]string{
		"nextest": "(binary_id(=example.com/m) & (test(=TestB)))\n",
		"go":      "example.com/m\t^(TestB)$\n",
		"lines":   "example.com/m TestB\n",
		"not-run": "example.com/m TestC (two-device): needs two GPUs\n",
	} {
		if got, err := s.Render(rendering); got != want || err != nil {
			t.Errorf("%s: %q, %v; want %q", rendering, got, err, want)
		}
	}
	if len(Renderings) != 4 {
		t.Errorf("Renderings %q: a rendering without a case here", Renderings)
	}
	if _, err := s.Render("json"); !errors.Is(err, ErrRendering) {
		t.Errorf("an unknown rendering: %v, want ErrRendering", err)
	}
	if _, err := DefaultConfig().Selection(p, "singel-gpu", false); !errors.Is(err, ErrCategory) {
		t.Errorf("a misspelt category: %v, want ErrCategory", err)
	}
	if _, err := DefaultConfig().Selection(p, "trybuild", true); !errors.Is(err, ErrCategory) {
		t.Errorf("an empty lane, required: %v, want ErrCategory", err)
	}
	split, _ := ParseTSV(strings.NewReader("example.com/m\tTestB/a\thost\nexample.com/m\tTestB/b\tsingle-gpu\n"))
	s, err = DefaultConfig().Selection(split, "host", false)
	if _, rerr := s.Render("go"); err != nil || !errors.Is(rerr, ErrSplitTest) {
		t.Errorf("a split Go test: %v, %v; want ErrSplitTest", err, rerr)
	}
}

// The select step reads its files and selects in one call: only a
// refusal of the lane itself is ErrCategory (a caller says which lane it
// asked for), and the outputs are the filter, the NOT RUN list and the
// count.
func TestSelectFiles_OnlyTheLanesOwnRefusalIsErrCategory(t *testing.T) {
	tsv := filepath.Join(t.TempDir(), "p.tsv")
	os.WriteFile(tsv, []byte("example.com/m\tTestA\thost\nexample.com/m\tTestB\tsingle-gpu\nexample.com/m\tTestC\ttwo-device\tneeds two GPUs\n"), 0o644)
	s, err := DefaultConfig().SelectFiles("single-gpu", true, tsv)
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]string{{"filter", "(binary_id(=example.com/m) & (test(=TestB)))"}, {"not_run", "example.com/m TestC (two-device): needs two GPUs"}, {"tests", "1"}}
	if diff := cmp.Diff(want, s.Outputs()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := DefaultConfig().SelectFiles("singel-gpu", false, tsv); !errors.Is(err, ErrCategory) {
		t.Errorf("a misspelt category: %v, want ErrCategory", err)
	}
	if _, err := DefaultConfig().SelectFiles("single-gpu", false, filepath.Join(t.TempDir(), "missing.tsv")); err == nil || errors.Is(err, ErrCategory) {
		t.Errorf("a missing file: %v, want an error that is not ErrCategory", err)
	}
}
