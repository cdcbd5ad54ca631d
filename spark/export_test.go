package spark

import (
	"context"
	"slices"
	"strings"
)

// ComparePlans returns, for every queued request, what the admission pass
// decides for it ("granted h1,h2" or why it waits) as Reconcile and Status
// compute it from the head of the queue, and as a pass over the whole
// queue would.
func ComparePlans(ctx context.Context, c *Controller) (head, full map[string]string, err error) {
	err = c.tx(ctx, func(tx Tx) error {
		p, err := c.plan(tx)
		if err != nil {
			return err
		}
		queued, err := tx.Requests(Queued)
		if err != nil {
			return err
		}
		slices.SortFunc(queued, func(a, b Request) int {
			if p.ahead(a, b) {
				return -1
			}
			return 1
		})
		all := &plan{c: c, now: p.now, grants: map[string][]string{}, pending: map[string]string{},
			taken: map[string]Request{}, byName: p.byName, anyHost: p.anyHost, placed: map[string]bool{}}
		for _, r := range queued {
			all.place(r)
		}
		head, full = map[string]string{}, map[string]string{}
		for _, r := range queued {
			head[r.ID], full[r.ID] = decision(p, r, p.reason(r)), decision(all, r, all.pending[r.ID])
		}
		return errRollback
	})
	if err == errRollback {
		err = nil
	}
	return head, full, err
}

func decision(p *plan, r Request, why string) string {
	if hosts, ok := p.grants[r.ID]; ok {
		return "granted " + strings.Join(hosts, ",")
	}
	return why
}
