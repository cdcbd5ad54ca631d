package smoke_test

import (
	"fmt"

	"github.com/gpugate/gpugate/smoke"
)

func ExampleSelectTier() {
	cfg, _ := smoke.LoadConfig(smoke.ExampleConfig)
	for _, driver := range []string{"13.0", "12.8", "12.7", "12.4"} {
		v, _ := smoke.ParseVersion(driver)
		t, err := smoke.SelectTier(v, cfg.Tiers)
		if err != nil {
			fmt.Printf("driver %s: rejected\n", driver)
			continue
		}
		fmt.Printf("driver %s: %s tier, NVRTC %s\n", driver, t.Name, t.CUDA)
	}
	// Output:
	// driver 13.0: full tier, NVRTC 12.8
	// driver 12.8: full tier, NVRTC 12.8
	// driver 12.7: baseline tier, NVRTC 12.6
	// driver 12.4: rejected
}
