package runpod

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gpugate/gpugate/runpod/rest"
)

// Candidate is one single-GPU create attempt. Live candidates are priced
// from the catalog; static ones come from the reviewed tiers (Price 0:
// unknown until the pod reports its cost).
type Candidate struct {
	GPUTypeID string  `json:"gpu_type_id"`
	Tier      string  `json:"tier"`
	Price     float64 `json:"price,omitempty"` // USD/hour per GPU, live candidates only
	Live      bool    `json:"live"`
}

// CandidatePlan orders the attempts, purely:
//
//  1. drop offers outside the reviewed tiers (live data never adds a type),
//     excluded types, out-of-stock types (availability NONE), types without
//     an offer on the configured cloud, below min_vram_gb, or above the price
//     ceiling;
//  2. one single-GPU candidate per remaining type, cheapest first (ties by
//     tier order, then ID), capped by max_price_candidates;
//  3. reserve one static slot inside max_provision_attempts for every tier
//     the live prefix does not already reach, shrinking the prefix when
//     necessary;
//  4. append the remaining static candidates interleaved by tier (the
//     reserved slots first), skipping IDs already in the plan and types the
//     catalog showed to be ineligible.
//
// offers == nil means the catalog could not be read: static candidates only.
func CandidatePlan(cfg Config, offers []rest.GPUType) []Candidate {
	tierOf := map[string]int{}
	excluded := map[string]bool{}
	for _, id := range cfg.Exclude {
		excluded[id] = true
	}
	for i, t := range cfg.Tiers {
		for _, id := range t.GPUTypes {
			if _, dup := tierOf[id]; !dup && !excluded[id] {
				tierOf[id] = i
			}
		}
	}
	var live []Candidate
	ineligible := map[string]bool{}
	seenOffer := map[string]bool{}
	for _, o := range offers {
		ti, reviewed := tierOf[o.ID]
		if !reviewed || seenOffer[o.ID] {
			continue
		}
		seenOffer[o.ID] = true
		offered, price := o.Secure, o.SecurePrice
		if cfg.Cloud == "COMMUNITY" {
			offered, price = o.Community, o.CommunityPrice
		}
		switch {
		case !offered, o.MemoryGB < cfg.MinVRAMGB, price <= 0, cfg.MaxHourlyPrice > 0 && price > cfg.MaxHourlyPrice:
			ineligible[o.ID] = true
		case o.Availability == rest.AvailabilityNone:
			// Out of stock now; availability is advisory, so the type
			// stays a static fallback.
		default:
			live = append(live, Candidate{GPUTypeID: o.ID, Tier: cfg.Tiers[ti].Name, Price: price, Live: true})
		}
	}
	slices.SortStableFunc(live, func(a, b Candidate) int {
		return cmp.Or(cmp.Compare(a.Price, b.Price), cmp.Compare(tierOf[a.GPUTypeID], tierOf[b.GPUTypeID]), cmp.Compare(a.GPUTypeID, b.GPUTypeID))
	})
	n := min(len(live), max(cfg.MaxPriceCandidates, 0))
	covered := func(n int) []bool {
		c := make([]bool, len(cfg.Tiers))
		for _, cand := range live[:n] {
			c[tierOf[cand.GPUTypeID]] = true
		}
		return c
	}
	uncovered := func(c []bool) int {
		u := 0
		for i, ok := range c {
			if !ok && hasStatic(cfg.Tiers[i], tierOf, ineligible, live[:n]) {
				u++
			}
		}
		return u
	}
	for n > 0 && n+uncovered(covered(n)) > cfg.MaxProvisionAttempts {
		n--
	}
	plan := append([]Candidate(nil), live[:n]...)
	inPlan := map[string]bool{}
	for _, c := range plan {
		inPlan[c.GPUTypeID] = true
	}
	queues := make([][]string, len(cfg.Tiers))
	for i, t := range cfg.Tiers {
		for _, id := range t.GPUTypes {
			if ti, ok := tierOf[id]; ok && ti == i && !inPlan[id] && !ineligible[id] {
				queues[i] = append(queues[i], id)
			}
		}
	}
	// The reserved slots: the first static type of each tier not yet
	// reached, in tier order.
	cov := covered(n)
	for i := range queues {
		if !cov[i] && len(queues[i]) > 0 {
			plan = append(plan, Candidate{GPUTypeID: queues[i][0], Tier: cfg.Tiers[i].Name})
			queues[i] = queues[i][1:]
		}
	}
	// The rest, interleaved by tier.
	for more := true; more; {
		more = false
		for i := range queues {
			if len(queues[i]) > 0 {
				plan = append(plan, Candidate{GPUTypeID: queues[i][0], Tier: cfg.Tiers[i].Name})
				queues[i] = queues[i][1:]
				more = true
			}
		}
	}
	return plan
}

// hasStatic reports whether tier t still has a type to try statically.
func hasStatic(t Tier, tierOf map[string]int, ineligible map[string]bool, prefix []Candidate) bool {
	for _, id := range t.GPUTypes {
		if _, ok := tierOf[id]; !ok || ineligible[id] {
			continue
		}
		if !slices.ContainsFunc(prefix, func(c Candidate) bool { return c.GPUTypeID == id }) {
			return true
		}
	}
	return false
}

// ErrUnknownGPUType is matched by CheckGPUTypes' error: the configuration
// names a GPU type RunPod does not offer.
var ErrUnknownGPUType = errors.New("runpod: GPU type not in RunPod's catalog")

// PlanFromCatalog plans what a provisioning may buy, before anything is
// bought: it reads RunPod's live catalog of single-GPU offers on cfg's
// cloud at cfg's CUDA floor (a *rest.Client's ListGPUTypes), refuses a
// configured GPU type the catalog does not list (CheckGPUTypes, err), and
// orders the candidates (CandidatePlan). The catalog is advisory: when it
// cannot be read, the plan is the static candidates of the reviewed tiers
// and catalogErr says why, for the caller to report.
func PlanFromCatalog(ctx context.Context, catalog interface {
	ListGPUTypes(context.Context, rest.CatalogQuery) ([]rest.GPUType, error)
}, cfg Config) (plan []Candidate, catalogErr, err error) {
	offers, catalogErr := catalog.ListGPUTypes(ctx, rest.CatalogQuery{Cloud: cfg.Cloud, Count: 1, MinCUDAVersion: cfg.MinCUDAVersion})
	if catalogErr != nil {
		offers = nil
	}
	if err := CheckGPUTypes(cfg, offers); err != nil {
		return nil, catalogErr, err
	}
	return CandidatePlan(cfg, offers), catalogErr, nil
}

// PlanText renders a plan for a log: how many candidates it has and how
// many attempts maxAttempts allows, then one line per candidate with its
// GPU type, its tier, and its live price per hour, or "static" for a
// candidate priced only once its pod reports its cost.
func PlanText(plan []Candidate, maxAttempts int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "plan (%d candidates, %d attempts allowed):\n", len(plan), maxAttempts)
	for i, c := range plan {
		price := "static"
		if c.Live {
			price = fmt.Sprintf("$%.2f/h", c.Price)
		}
		fmt.Fprintf(&b, "  %d. %-32s %-15s %s\n", i+1, c.GPUTypeID, c.Tier, price)
	}
	return b.String()
}

// CheckGPUTypes validates the reviewed tiers' GPU type IDs against the
// catalog, before anything is bought ("validates configured GPU IDs
// against RunPod's live POST /pods OpenAPI request schema"; REST v2's pod
// request takes any string as gpu.id, and its catalog lists every GPU type
// whatever the availability filters, so the catalog is the live list). A
// misspelled ID would otherwise cost a create attempt per candidate and
// silently take a tier out of the ladder. An empty or unread catalog
// (offers == nil) checks nothing: the catalog is advisory, and its failure
// falls back to the static candidates.
func CheckGPUTypes(cfg Config, offers []rest.GPUType) error {
	if len(offers) == 0 {
		return nil
	}
	known := make(map[string]bool, len(offers))
	for _, o := range offers {
		known[o.ID] = true
	}
	var errs []error
	for _, t := range cfg.Tiers {
		for _, id := range t.GPUTypes {
			if known[id] {
				continue
			}
			hint := "use the catalog's id exactly"
			for _, o := range offers {
				if strings.EqualFold(strings.Join(strings.Fields(o.ID), " "), strings.Join(strings.Fields(id), " ")) {
					hint = fmt.Sprintf("did you mean %q?", o.ID)
				}
			}
			errs = append(errs, fmt.Errorf("%w: tier %q names %q, which GET /v2/catalog/gpus does not list (%d types): %s",
				ErrUnknownGPUType, t.Name, id, len(offers), hint))
		}
	}
	return errors.Join(errs...)
}
