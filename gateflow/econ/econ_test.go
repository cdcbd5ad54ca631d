package econ

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/gpugate/gpugate/runpod"
)

func TestSimulation_ReuseKeepsOnePaidRunPerTestedMergeRef(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := Options{Seed: 3, MergeRefs: 20, RunsPerUpstreamRun: 3}
		base, m, gpus := simSetup(t)
		gg, err := simulatePolicy(context.Background(), o, base, m, gpus, policies[0])
		if err != nil {
			t.Fatal(err)
		}
		noReuse, err := simulatePolicy(context.Background(), o, base, m, gpus, Policy{Name: "no reuse", NoReuse: true})
		if err != nil {
			t.Fatal(err)
		}
		premium, err := simulatePolicy(context.Background(), o, base, m, gpus, Policy{Name: "premium", Premium: true})
		if err != nil {
			t.Fatal(err)
		}
		if gg.Validated != o.MergeRefs || gg.PaidRuns > o.MergeRefs*m.MaxTriesPerRef {
			t.Errorf("gpugate: %+v", gg)
		}
		if noReuse.PaidRuns < 2*gg.PaidRuns {
			t.Errorf("without reuse every delivery should pay: %d paid runs vs %d", noReuse.PaidRuns, gg.PaidRuns)
		}
		if ratio(premium.Dollars, float64(premium.Validated)) <= ratio(gg.Dollars, float64(gg.Validated)) {
			t.Errorf("the premium tier should cost more per validated ref: %+v vs %+v", premium, gg)
		}
		if or := oracleBound(o, base, m, gpus); ratio(or.Dollars, float64(or.Validated)) > ratio(gg.Dollars, float64(gg.Validated)) {
			t.Errorf("the oracle is a lower bound: %+v vs %+v", or, gg)
		}
	})
}

func simSetup(t *testing.T) (runpod.Config, FailureModel, []string) {
	t.Helper()
	base, m, gpus, err := simConfig()
	if err != nil {
		t.Fatal(err)
	}
	return base, m, gpus
}

func TestFailureModelFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	m, err := LoadModel(write("ok.yml", "outage: 0.5\nproof_fail: {\"NVIDIA L4\": 1}\n"))
	if err != nil || m.Outage != 0.5 || m.ProofFail["NVIDIA L4"] != 1 || m.NotDelivering != DefaultModel().NotDelivering {
		t.Errorf("%+v %v", m, err)
	}
	for name, body := range map[string]string{"unknown.yml": "outages: 0.1\n", "rate.yml": "not_delivering: 1.5\n", "tries.yml": "max_tries_per_ref: 0\n", "nan.yml": "outage: .nan\n"} {
		if _, err := LoadModel(write(name, body)); !errors.Is(err, ErrModel) {
			t.Errorf("%s: accepted %q", name, body)
		}
	}
	// Every provider outage: nothing is ever paid for, nothing validated.
	// The fake's clock: the client's retries of each refused create pass
	// instantly.
	down := write("down.yml", "outage: 1\n")
	synctest.Test(t, func(t *testing.T) {
		m, err := LoadModel(down)
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		if _, err := Simulate(context.Background(), Options{MergeRefs: 3, RunsPerUpstreamRun: 3, Seed: 1, Model: m}, &out); err != nil || !strings.Contains(out.String(), "gpugate                       0.00") {
			t.Errorf("%v:\n%s", err, out.String())
		}
	})
}

func FuzzParseModel(f *testing.F) {
	f.Add([]byte("outage: 0.5\nproof_fail: {\"NVIDIA L4\": 1}\n"))
	f.Add([]byte("max_tries_per_ref: 2\nstock_out: {a: 0}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseModel("fuzz.yml", data)
		if err != nil {
			return
		}
		if !(m.Outage >= 0 && m.Outage <= 1) || !(m.NotDelivering >= 0 && m.NotDelivering <= 1) || m.MaxTriesPerRef < 1 {
			t.Fatalf("accepted an invalid model %+v", m)
		}
	})
}
