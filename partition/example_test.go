package partition_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpugate/gpugate/partition"
)

func ExampleCheck() {
	inv := partition.Inventory{{Binary: "core", Name: "tests::add"}, {Binary: "core::gpu", Name: "gemm"}, {Binary: "core::gpu", Name: "fft"}}
	p, _ := partition.ParseTSV(strings.NewReader("core\ttests::add\thost\ncore::gpu\tgemm\tsingle-gpu\ncore::gpu\tfft2\tsingle-gpu\n"))
	fmt.Print(partition.Check(inv, p))
	// Output:
	// 1 test(s) in no category. Audit each body and its helpers, then add a line with its category (a name, feature gate or #[ignore] alone never decides it):
	// + core::gpu	fft	<category>
	// 1 stale line(s) for tests that no longer exist; remove them:
	// - line 3: core::gpu	fft2	single-gpu    # renamed? core::gpu fft is new
}

func ExamplePlanChain() {
	c, err := partition.PlanChain(10*time.Hour, 6*time.Hour, 2)
	fmt.Println(c.Links, c.CompileBudget, err)
	_, err = partition.PlanChain(20*time.Hour, 6*time.Hour, 2)
	fmt.Println(err != nil)
	// Output:
	// 2 5h30m0s <nil>
	// true
}

// Each cell of a chain leaves one state file per link; folded in any
// order, they say which cells the next link builds and from which
// checkpoint each resumes, and whether the chain is done.
func ExampleChainState_Resume() {
	state := partition.CombineChainStates(
		partition.ChainState{"natten": {Link: 2}},
		partition.ChainState{"pytorch3d": {Link: 1, Done: true}},
		partition.ChainState{"natten": {Link: 1}},
	)
	cells := []string{"natten", "pytorch3d", "xformers"}
	fmt.Println(state.Resume(cells))
	fmt.Println(state.Finished(cells))
	// Output:
	// [{natten 2} {xformers 0}]
	// partition: the checkpoint chain did not finish every cell: natten (at link 2), xformers (never checkpointed); re-run the failed jobs to resume each from its last checkpoint while the artifacts last, or raise the chain's depth
}

// A checkpoint chain link: the tree goes into a PAX tar and comes back with
// every modification time to the nanosecond, which ninja's restat needs.
func ExampleWriteCheckpoint() {
	src, _ := os.MkdirTemp("", "link1")
	dst, _ := os.MkdirTemp("", "link2")
	defer os.RemoveAll(src)
	defer os.RemoveAll(dst)
	obj := filepath.Join(src, "build", "gemv.o")
	os.MkdirAll(filepath.Dir(obj), 0o755)
	os.WriteFile(obj, []byte("object code"), 0o644)
	mtime := time.Date(2026, 8, 14, 9, 30, 0, 123456789, time.UTC)
	os.Chtimes(obj, mtime, mtime)

	var ckpt bytes.Buffer
	if _, err := partition.WriteCheckpoint(&ckpt, src); err != nil {
		panic(err)
	}
	st, err := partition.RestoreCheckpoint(&ckpt, dst)
	if err != nil {
		panic(err)
	}
	info, _ := os.Stat(filepath.Join(dst, "build", "gemv.o"))
	fmt.Println(st.Files, st.Dirs, st.Bytes)
	fmt.Println(info.ModTime().UTC().Format(time.RFC3339Nano))
	// Output:
	// 1 1 11
	// 2026-08-14T09:30:00.123456789Z
}

// A lane whose own filterset would not fit one argument is written as the
// complement of the rest of the checked partition.
func ExampleLane_NextestFilterWithin() {
	p, _ := partition.ParseTSV(strings.NewReader("core\ttests::add\thost\ncore\ttests::sub\thost\ncore::gpu\tgemm\tsingle-gpu\n"))
	gpu, _ := partition.Select(p, "single-gpu").NextestFilterWithin(p, partition.MaxFilterBytes)
	host, _ := partition.Select(p, "host").NextestFilterWithin(p, 50) // a small limit, to show the complement
	fmt.Println(gpu)
	fmt.Println(host)
	// Output:
	// (binary_id(=core::gpu) & (test(=gemm)))
	// not ((binary_id(=core::gpu) & (test(=gemm))))
}

// go test -run runs a parent test with all its subtests, so a Go test
// cannot be split across lanes.
func ExampleGoSplits() {
	p, _ := partition.ParseTSV(strings.NewReader("example.com/m\tTestAdd/small\thost\nexample.com/m\tTestAdd/huge\tsingle-gpu\nexample.com/m\tTestSub\thost\n"))
	for _, s := range partition.GoSplits(p) {
		fmt.Println(s)
	}
	_, err := partition.Select(p, "host").GoRunPatterns(p)
	fmt.Println(errors.Is(err, partition.ErrSplitTest))
	// Output:
	// example.com/m TestAdd is in host (TestAdd/small) and single-gpu (TestAdd/huge)
	// true
}
