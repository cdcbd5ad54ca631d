package spark

import "context"

// Store is the authoritative state: requests, leases, fencing tokens and
// hosts. Every read-then-write happens in one Tx; sqlitestore runs it as
// BEGIN IMMEDIATE. sparktest.Store is the in-memory fake.
type Store interface {
	Tx(ctx context.Context, fn func(Tx) error) error
	Close() error
}

// Tx is one transaction. Nothing it wrote is visible if fn returns an error.
//
// Admission reads the queue through Queue, which a store serves from an
// index in admission order, so a pass reads only the head of the queue
// it can place, whatever the queue's length.
type Tx interface {
	Hosts() ([]Host, error)
	PutHost(Host) error
	// Requests lists requests in the given states (all when none), in
	// submission order.
	Requests(states ...State) ([]Request, error)
	Request(id string) (Request, bool, error)
	PutRequest(Request) error
	// Queue calls fn with queued requests in admission order (priority,
	// highest first, then submission order) until fn returns false. With
	// borrowersOnly it calls fn only with requests for which Borrower is
	// true.
	Queue(borrowersOnly bool, fn func(Request) bool) error
	// QueueFor is Queue over the requests that name host ("": those that
	// name none), from an index on the host.
	QueueFor(host string, borrowersOnly bool, fn func(Request) bool) error
	// QueuedPairs lists the queued pairs, in submission order.
	QueuedPairs() ([]Request, error)
	// QueuedOf lists the queued requests of one class, in submission order.
	QueuedOf(class Class) ([]Request, error)
	// QueuedForPR lists the queued requests for one pull request, in
	// submission order.
	QueuedForPR(repo string, number int) ([]Request, error)
	// QueueLen is the number of queued requests.
	QueueLen() (int, error)
	// QueueAhead is the number of queued requests before r in admission
	// order.
	QueueAhead(r Request) (int, error)
	// NextToken returns a fencing token greater than every token ever
	// returned, across restarts.
	NextToken() (int64, error)
	// NextSeq returns the next submission sequence number.
	NextSeq() (int64, error)
	AppendEvent(Event) error
	Events(limit int) ([]Event, error)
	// EventsSince lists, oldest first, at most limit events whose ID is
	// greater than after: the event log read as a history, with each
	// event's ID set.
	EventsSince(after int64, limit int) ([]Event, error)
	// Lineage names this event log's timeline: event IDs are unique
	// within a lineage only. A new store, and a store restored from a
	// backup (whose log goes on from the backup's last ID), are new
	// lineages.
	Lineage() (string, error)
}

// EventLimit is how many events one read returns at most: limit, or 1000
// when limit is zero or negative. Every store applies it the same way.
func EventLimit(limit int) int {
	if limit <= 0 {
		return 1000
	}
	return limit
}

// Borrower reports whether r may take a host that other work of its
// priority may not: a host draining for development, or the resident
// service's host below the lending priority. That is development work, a
// pair, and a request that names its host. Stores index it, so that an
// admission pass that has run out of hosts for everyone else reads only
// these.
func Borrower(r Request) bool {
	return r.Class == Development || r.Topology == Pair || r.Host != ""
}

// Before reports whether a comes before b in admission order: higher
// priority first, then earlier submission.
func Before(a, b Request) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	return a.Seq < b.Seq
}
