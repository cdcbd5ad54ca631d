package partition_test

import (
	"fmt"
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
