package partition

// chunked builds a long slice without moving what it holds: append copies
// a slice each time it outgrows its capacity, and for large slices those
// copies add up to about four times the final size in garbage (a million
// partition lines are 88 MB of entries). Each chunk is a quarter of what
// came before it, so that there are few; flat makes them one slice.
//
// Both copy at most a few thousand elements at a time: one copy of a large
// slice of pointers cannot be preempted, and while it runs a garbage
// collection that needs to stop the goroutine spins (with the copy taking
// write barriers all along): a 176 MB copy took seconds, not 0.1 s.
type chunked[T any] struct {
	done [][]T
	last []T
	n    int
}

func (c *chunked[T]) add(v ...T) {
	for len(v) > 0 {
		if len(c.last) == cap(c.last) {
			if c.last != nil {
				c.done = append(c.done, c.last)
			}
			c.last = make([]T, 0, min(max(c.n/4, 256), 1<<15))
		}
		k := min(len(v), cap(c.last)-len(c.last), copyStep)
		c.last, v = append(c.last, v[:k]...), v[k:]
		c.n += k
	}
}

// flat is everything added, in one slice (nil if nothing was).
func (c *chunked[T]) flat() []T {
	if len(c.done) == 0 {
		if c.n == 0 {
			return nil
		}
		return c.last
	}
	out := make([]T, 0, c.n)
	for _, d := range append(c.done, c.last) {
		for len(d) > 0 {
			k := min(len(d), copyStep)
			out, d = append(out, d[:k]...), d[k:]
		}
	}
	return out
}

// copyStep is the most elements chunked copies at once.
const copyStep = 1 << 11
