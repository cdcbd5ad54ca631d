package econ_test

import (
	"errors"
	"fmt"

	"github.com/gpugate/gpugate/gateflow/econ"
)

// A failure model file overlays the default model; a rate outside [0, 1]
// is refused.
func ExampleParseModel() {
	m, err := econ.ParseModel("model.yml", []byte("outage: 0.5\nmax_tries_per_ref: 2\n"))
	fmt.Println(m.Outage, m.MaxTriesPerRef, m.NotDelivering, err)
	_, err = econ.ParseModel("model.yml", []byte("not_delivering: 1.5\n"))
	fmt.Println(errors.Is(err, econ.ErrModel))
	// Output:
	// 0.5 2 0.04 <nil>
	// true
}
