package runpod

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gpugate/gpugate/runpod/rest"
)

// seedCatalog is the catalog as the seed describes it: the reviewed types in
// stock, an H100 that must never be chosen, and a cheap card outside the
// allowlist that live data must not add.
func seedCatalog() []rest.GPUType {
	return []rest.GPUType{
		{ID: "NVIDIA GeForce RTX 4090", MemoryGB: 24, Secure: true, SecurePrice: 0.69, Availability: "HIGH"},
		{ID: "NVIDIA L4", MemoryGB: 24, Secure: true, SecurePrice: 0.43, Availability: "MEDIUM"},
		{ID: "NVIDIA L40S", MemoryGB: 48, Secure: true, SecurePrice: 0.86, Availability: "LOW"},
		{ID: "NVIDIA RTX 6000 Ada Generation", MemoryGB: 48, Secure: true, SecurePrice: 0.77, Availability: "LOW"},
		{ID: "NVIDIA A100-SXM4-80GB", MemoryGB: 80, Secure: true, SecurePrice: 1.49, Availability: "HIGH"},
		{ID: "NVIDIA H100 80GB HBM3", MemoryGB: 80, Secure: true, SecurePrice: 0.10, Availability: "HIGH"},
		{ID: "NVIDIA RTX A4000", MemoryGB: 16, Secure: true, SecurePrice: 0.25, Availability: "HIGH"},
	}
}

func ids(plan []Candidate) []string {
	var out []string
	for _, c := range plan {
		out = append(out, c.GPUTypeID)
	}
	return out
}

func TestCandidatePlan_SeedSteps(t *testing.T) {
	cfg := exampleConfig(t)
	with := func(f func([]rest.GPUType) []rest.GPUType) []rest.GPUType { return f(seedCatalog()) }
	tests := map[string]struct {
		offers []rest.GPUType
		want   []Candidate
	}{
		"cheapest first, capped, then interleaved static": {
			offers: seedCatalog(),
			want: []Candidate{
				{GPUTypeID: "NVIDIA L4", Tier: "cost-preferred", Price: 0.43, Live: true},
				{GPUTypeID: "NVIDIA GeForce RTX 4090", Tier: "cost-preferred", Price: 0.69, Live: true},
				{GPUTypeID: "NVIDIA RTX 6000 Ada Generation", Tier: "premium", Price: 0.77, Live: true},
				{GPUTypeID: "NVIDIA A100-SXM4-80GB", Tier: "a100"},
				{GPUTypeID: "NVIDIA L40S", Tier: "premium"},
			},
		},
		"catalog failed: static candidates only": {
			offers: nil,
			want: []Candidate{
				{GPUTypeID: "NVIDIA GeForce RTX 4090", Tier: "cost-preferred"},
				{GPUTypeID: "NVIDIA L40S", Tier: "premium"},
				{GPUTypeID: "NVIDIA A100-SXM4-80GB", Tier: "a100"},
				{GPUTypeID: "NVIDIA L4", Tier: "cost-preferred"},
				{GPUTypeID: "NVIDIA RTX 6000 Ada Generation", Tier: "premium"},
			},
		},
		"out of stock drops from the live list but stays a static fallback": {
			offers: with(func(g []rest.GPUType) []rest.GPUType { g[1].Availability = "NONE"; return g }),
			want: []Candidate{
				{GPUTypeID: "NVIDIA GeForce RTX 4090", Tier: "cost-preferred", Price: 0.69, Live: true},
				{GPUTypeID: "NVIDIA RTX 6000 Ada Generation", Tier: "premium", Price: 0.77, Live: true},
				{GPUTypeID: "NVIDIA L40S", Tier: "premium", Price: 0.86, Live: true},
				{GPUTypeID: "NVIDIA A100-SXM4-80GB", Tier: "a100"},
				{GPUTypeID: "NVIDIA L4", Tier: "cost-preferred"},
			},
		},
		"no secure offer, too little VRAM or above the ceiling: dropped entirely": {
			offers: with(func(g []rest.GPUType) []rest.GPUType {
				g[0].Secure = false  // 4090
				g[1].MemoryGB = 16   // L4
				g[4].SecurePrice = 2 // A100 above 1.49
				return g
			}),
			want: []Candidate{
				{GPUTypeID: "NVIDIA RTX 6000 Ada Generation", Tier: "premium", Price: 0.77, Live: true},
				{GPUTypeID: "NVIDIA L40S", Tier: "premium", Price: 0.86, Live: true},
			},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := CandidatePlan(cfg, tt.offers)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			checkPlanProperties(t, cfg, tt.offers, got)
		})
	}
}

func TestCandidatePlan_ReservesAStaticSlotPerTier(t *testing.T) {
	// Five cheap live types all in the first tier and a budget of three
	// attempts: the live prefix shrinks to one so premium and a100 stay
	// reachable.
	cfg := Config{
		Tiers: []Tier{
			{Name: "cheap", GPUTypes: []string{"A", "B", "C", "D", "E"}},
			{Name: "premium", GPUTypes: []string{"P"}},
			{Name: "top", GPUTypes: []string{"T"}},
		},
		MaxPriceCandidates: 5, MaxProvisionAttempts: 3, Cloud: "SECURE",
	}
	var offers []rest.GPUType
	for i, id := range []string{"A", "B", "C", "D", "E", "P", "T"} {
		offers = append(offers, rest.GPUType{ID: id, MemoryGB: 24, Secure: true, SecurePrice: 0.1 + float64(i)*0.1, Availability: "HIGH"})
	}
	got := CandidatePlan(cfg, offers)
	if diff := cmp.Diff([]string{"A", "P", "T", "B", "C", "D", "E"}, ids(got)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	checkPlanProperties(t, cfg, offers, got)
}

func TestCandidatePlan_LiveDataNeverAddsATypeAndExcludesH100(t *testing.T) {
	got := CandidatePlan(exampleConfig(t), seedCatalog())
	for _, id := range ids(got) {
		if id == "NVIDIA H100 80GB HBM3" || id == "NVIDIA RTX A4000" {
			t.Errorf("plan contains %s", id)
		}
	}
}

func TestCandidatePlan_EqualPricesAreDeterministic(t *testing.T) {
	cfg := Config{Tiers: []Tier{{Name: "a", GPUTypes: []string{"Y", "X"}}, {Name: "b", GPUTypes: []string{"Z"}}}, MaxPriceCandidates: 3, MaxProvisionAttempts: 6, Cloud: "SECURE"}
	offers := []rest.GPUType{
		{ID: "Z", MemoryGB: 24, Secure: true, SecurePrice: 0.5, Availability: "HIGH"},
		{ID: "X", MemoryGB: 24, Secure: true, SecurePrice: 0.5, Availability: "HIGH"},
		{ID: "Y", MemoryGB: 24, Secure: true, SecurePrice: 0.5, Availability: "HIGH"},
	}
	want := []string{"X", "Y", "Z"} // tier order, then ID
	for range 20 {
		rand.Shuffle(len(offers), func(i, j int) { offers[i], offers[j] = offers[j], offers[i] })
		if diff := cmp.Diff(want, ids(CandidatePlan(cfg, offers))); diff != "" {
			t.Fatalf("(-want +got):\n%s", diff)
		}
	}
}

// checkPlanProperties asserts the invariants every plan must hold.
func checkPlanProperties(t testing.TB, cfg Config, offers []rest.GPUType, plan []Candidate) {
	t.Helper()
	tierOf := map[string]string{}
	for _, tr := range cfg.Tiers {
		for _, id := range tr.GPUTypes {
			tierOf[id] = tr.Name
		}
	}
	seen := map[string]bool{}
	lastPrice := 0.0
	liveDone := false
	for i, c := range plan {
		if tierOf[c.GPUTypeID] == "" || tierOf[c.GPUTypeID] != c.Tier {
			t.Fatalf("candidate %d %s (tier %q) is outside the allowlist", i, c.GPUTypeID, c.Tier)
		}
		if slices.Contains(cfg.Exclude, c.GPUTypeID) {
			t.Fatalf("candidate %d %s is excluded", i, c.GPUTypeID)
		}
		if seen[c.GPUTypeID] {
			t.Fatalf("candidate %d %s is a duplicate", i, c.GPUTypeID)
		}
		seen[c.GPUTypeID] = true
		if c.Live {
			if liveDone || c.Price < lastPrice {
				t.Fatalf("live candidate %d %s is out of price order", i, c.GPUTypeID)
			}
			if cfg.MaxHourlyPrice > 0 && c.Price > cfg.MaxHourlyPrice {
				t.Fatalf("candidate %d %s at %v is above the ceiling", i, c.GPUTypeID, c.Price)
			}
			lastPrice = c.Price
		} else {
			liveDone = true
		}
	}
	if offers == nil && len(plan) > 0 && plan[0].Live {
		t.Fatal("a failed catalog cannot give live candidates")
	}
	// Every tier with an eligible type is reachable within the budget.
	ineligible := map[string]bool{}
	for _, o := range offers {
		price := o.SecurePrice
		if !o.Secure || o.MemoryGB < cfg.MinVRAMGB || price <= 0 || (cfg.MaxHourlyPrice > 0 && price > cfg.MaxHourlyPrice) {
			ineligible[o.ID] = true
		}
	}
	budget := plan[:min(len(plan), cfg.MaxProvisionAttempts)]
	for _, tr := range cfg.Tiers {
		eligible := slices.ContainsFunc(tr.GPUTypes, func(id string) bool { return !ineligible[id] && !slices.Contains(cfg.Exclude, id) })
		reached := slices.ContainsFunc(budget, func(c Candidate) bool { return c.Tier == tr.Name })
		if eligible && !reached {
			t.Fatalf("tier %s is not reachable within %d attempts: %v", tr.Name, cfg.MaxProvisionAttempts, ids(plan))
		}
	}
}

func TestCandidatePlan_Properties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		cfg, offers := randomPlanInput(r, 1+r.IntN(5), 1+r.IntN(6))
		if r.IntN(5) == 0 {
			offers = nil
		}
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			checkPlanProperties(t, cfg, offers, CandidatePlan(cfg, offers))
		})
	}
}

func randomPlanInput(r *rand.Rand, tiers, perTier int) (Config, []rest.GPUType) {
	cfg := Config{Cloud: "SECURE", MinVRAMGB: 20, MaxPriceCandidates: r.IntN(6), MaxProvisionAttempts: tiers + r.IntN(6), MaxHourlyPrice: float64(r.IntN(3))}
	var offers []rest.GPUType
	n := 0
	for ti := range tiers {
		tr := Tier{Name: fmt.Sprintf("t%d", ti)}
		for range perTier {
			id := fmt.Sprintf("gpu-%d", n)
			n++
			tr.GPUTypes = append(tr.GPUTypes, id)
			offers = append(offers, rest.GPUType{ID: id, MemoryGB: 8 + r.IntN(80), Secure: r.IntN(6) > 0,
				SecurePrice: float64(r.IntN(30)) / 10, Availability: []string{"NONE", "LOW", "HIGH", ""}[r.IntN(4)]})
		}
		cfg.Tiers = append(cfg.Tiers, tr)
	}
	offers = append(offers, rest.GPUType{ID: "outsider", MemoryGB: 80, Secure: true, SecurePrice: 0.01, Availability: "HIGH"})
	if r.IntN(2) == 0 {
		cfg.Exclude = []string{"outsider"}
	}
	r.Shuffle(len(offers), func(i, j int) { offers[i], offers[j] = offers[j], offers[i] })
	return cfg, offers
}

// BenchmarkCandidatePlan plans over a realistic catalog (50 types, the seed's
// tiers) and a 500-type catalog with 100 reviewed types.
func BenchmarkCandidatePlan(b *testing.B) {
	for _, tc := range []struct{ tiers, perTier, extra int }{{3, 2, 44}, {10, 10, 400}} {
		r := rand.New(rand.NewPCG(3, 4))
		cfg, offers := randomPlanInput(r, tc.tiers, tc.perTier)
		for i := range tc.extra {
			offers = append(offers, rest.GPUType{ID: fmt.Sprintf("unreviewed-%d", i), MemoryGB: 48, Secure: true, SecurePrice: 1, Availability: "HIGH"})
		}
		b.Run(fmt.Sprintf("catalog=%d", len(offers)), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				CandidatePlan(cfg, offers)
			}
		})
	}
}

// Seed 000: before any archive build or pod allocation the trusted
// workflow "validates configured GPU IDs against RunPod's live POST /pods
// OpenAPI request schema". v2 takes any string as gpu.id, so the live list
// is the catalog, which lists every type whatever its availability.
func TestCheckGPUTypes_ConfiguredIDsMustBeInTheLiveCatalog(t *testing.T) {
	cfg := DefaultConfig()
	if err := CheckGPUTypes(cfg, seedCatalog()); err != nil {
		t.Errorf("the seed's tiers against the seed's catalog: %v", err)
	}
	// An out-of-stock type is still a known type.
	soldOut := seedCatalog()
	soldOut[2].Availability = "NONE"
	if err := CheckGPUTypes(cfg, soldOut); err != nil {
		t.Errorf("a sold-out type is known: %v", err)
	}
	cfg.Tiers = []Tier{{Name: "cost-preferred", GPUTypes: []string{"NVIDIA GeForce RTX 4090", "nvidia  l4"}}, {Name: "premium", GPUTypes: []string{"NVIDIA L40"}}}
	err := CheckGPUTypes(cfg, seedCatalog())
	if !errors.Is(err, ErrUnknownGPUType) {
		t.Fatalf("err = %v, want ErrUnknownGPUType", err)
	}
	for _, want := range []string{`tier "cost-preferred" names "nvidia  l4"`, `did you mean "NVIDIA L4"?`, `tier "premium" names "NVIDIA L40"`, "use the catalog's id exactly"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q:\n%v", want, err)
		}
	}
	// An unread (or empty) catalog checks nothing: it is advisory, and the
	// static candidates still run.
	for _, offers := range [][]rest.GPUType{nil, {}} {
		if err := CheckGPUTypes(cfg, offers); err != nil {
			t.Errorf("offers %v: %v", offers, err)
		}
	}
}
