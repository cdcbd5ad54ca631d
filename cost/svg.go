package cost

import (
	"fmt"
	"html"
	"slices"
	"strings"
)

// SVG charts spend per day, stacked by GPU type, with rejected candidates
// and re-tested refs stacked apart from useful spend. Every bar segment
// carries its amount in data-usd, so the chart can be checked against the
// JSON totals.
func (s Summary) SVG() string {
	const (
		width, height = 860, 420
		left, bottom  = 70, 60
		top, right    = 50, 190
	)
	plotW, plotH := float64(width-left-right), float64(height-top-bottom)
	var gpus []string
	seen := map[string]bool{}
	maxDay := 0.0
	for _, d := range s.PerDay {
		for g := range d.ByGPU {
			if !seen[g] {
				seen[g] = true
				gpus = append(gpus, g)
			}
		}
		maxDay = max(maxDay, d.Spend.Total)
	}
	slices.Sort(gpus)
	palette := []string{"#4e79a7", "#59a14f", "#76b7b2", "#edc948", "#b07aa1", "#9c755f", "#bab0ac", "#86bcb6"}
	color := map[string]string{}
	for i, g := range gpus {
		color[g] = palette[i%len(palette)]
	}
	const rejectedColor, retestedColor = "#e15759", "#f28e2b"
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<title>GPU spend per day (USD): estimates, not invoices</title>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="15">GPU spend per day, USD (estimates, not invoices; storage excluded)</text>`+"\n", left)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>`+"\n", left, height-bottom, width-right, height-bottom)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>`+"\n", left, top, left, height-bottom)
	if maxDay > 0 {
		for i := 0; i <= 4; i++ {
			v := maxDay * float64(i) / 4
			y := float64(height-bottom) - plotH*float64(i)/4
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%.2f</text>`+"\n", left-6, y+4, v)
		}
	}
	n := max(len(s.PerDay), 1)
	slot := plotW / float64(n)
	barW := max(slot*0.7, 1)
	for i, d := range s.PerDay {
		x := float64(left) + slot*float64(i) + (slot-barW)/2
		y := float64(height - bottom)
		seg := func(label, fill string, usd float64) {
			if usd <= 0 || maxDay <= 0 {
				return
			}
			h := usd / maxDay * plotH
			y -= h
			fmt.Fprintf(&b, `<rect x="%.2f" y="%.2f" width="%.2f" height="%.2f" fill="%s" data-day="%s" data-series="%s" data-usd="%.6f"><title>%s %s: $%.2f</title></rect>`+"\n",
				x, y, barW, h, fill, d.Day, html.EscapeString(label), usd, d.Day, html.EscapeString(label), usd)
		}
		for _, g := range gpus {
			seg(g, color[g], d.ByGPU[g])
		}
		seg("rejected candidates", rejectedColor, d.Spend.Rejected)
		seg("re-tested refs", retestedColor, d.Spend.Retested)
		if n <= 31 || i%max(n/15, 1) == 0 {
			fmt.Fprintf(&b, `<text x="%.2f" y="%d" text-anchor="middle" font-size="10">%s</text>`+"\n", x+barW/2, height-bottom+16, d.Day[5:])
		}
	}
	legend := append(append([]string{}, gpus...), "rejected candidates", "re-tested refs")
	for i, l := range legend {
		c := color[l]
		switch l {
		case "rejected candidates":
			c = rejectedColor
		case "re-tested refs":
			c = retestedColor
		}
		y := top + 18*i
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", width-right+12, y, c, width-right+30, y+10, html.EscapeString(l))
	}
	b.WriteString("</svg>\n")
	return b.String()
}
