package partition_test

import (
	"errors"
	"fmt"
	"strings"

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

// A Go inventory audited against its partition: the report, and the tests
// go test -run cannot run apart.
func ExampleAuditListing() {
	p, _ := partition.ParseTSVNamed(strings.NewReader("example.com/m\tTestAdd/small\thost\nexample.com/m\tTestAdd/huge\tsingle-gpu\n"), "go_test_partition.tsv")
	listing := `{"Action":"run","Package":"example.com/m","Test":"TestAdd/small"}` + "\n" + `{"Action":"run","Package":"example.com/m","Test":"TestAdd/huge"}` + "\n"
	a, _ := partition.AuditListing(strings.NewReader(listing), partition.FormatGo, p)
	fmt.Print(a)
	fmt.Println(a.OK())
	// Output:
	// 2 tests in the inventory, 2 partition lines
	// partition: every test is in exactly one category
	// 1 Go test(s) split across categories; go test -run runs a test with all its subtests, so put each test and its subtests in one category:
	//   example.com/m TestAdd is in host (TestAdd/small) and single-gpu (TestAdd/huge)
	// false
}

// The single-GPU lane as the pod runs it, and the NOT RUN list the gate
// publishes, cut to what one argument carries.
func ExampleConfig_Selection() {
	p, _ := partition.ParseTSV(strings.NewReader("core\ttests::add\thost\ncore::gpu\tgemm\tsingle-gpu\ncore::gpu\tallreduce\ttwo-device\n"))
	s, _ := partition.DefaultConfig().Selection(p, "single-gpu", true)
	filter, _ := s.Render("nextest")
	fmt.Print(filter)
	fmt.Println(partition.NotRunOutput(s.NotRun))
	// Output:
	// (binary_id(=core::gpu) & (test(=gemm)))
	// core::gpu allreduce (two-device)
}
