package cost_test

// The summary's GPU and day tables: an unknown cost is never $0.

import (
	"path/filepath"
	"testing"

	"github.com/gpugate/gpugate/cost"
)

// Unknown, not zero: a run listed apart (no deletion evidence, an unknown
// start or price) is in neither the spend nor the stages, and the GPU
// table must not count its pod as $0.00 accepted either: the RTX 6000 Ada
// row of the bundled evidence read "1 pod, 0.00", a GPU that looked free.
// Its pod belongs in no per-GPU row, or in one that says its cost is
// unknown.
func TestSummary_AnExcludedPodIsNeverAZeroDollarPodInTheGPUTable(t *testing.T) {
	s, err := cost.Summarize(filepath.Join("..", "examples", "costreport", "testdata", "evidence"))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Excluded) == 0 {
		t.Fatal("the bundled evidence has no excluded run any more")
	}
	excluded := map[string]int{}
	for _, x := range s.Excluded {
		excluded[x.GPU]++
	}
	for _, g := range s.PerGPU {
		if n := excluded[g.GPU]; n > 0 && g.Accepted == 0 && g.Rejected == 0 {
			t.Errorf("%s: %d pods at $%.2f accepted, $%.2f rejected, but %d of them is listed apart with an unknown cost", g.GPU, g.Pods, g.Accepted, g.Rejected, n)
		}
	}
}
