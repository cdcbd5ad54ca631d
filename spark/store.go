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
type Tx interface {
	Hosts() ([]Host, error)
	PutHost(Host) error
	// Requests lists requests in the given states (all when none).
	Requests(states ...State) ([]Request, error)
	Request(id string) (Request, bool, error)
	PutRequest(Request) error
	// NextToken returns a fencing token greater than every token ever
	// returned, across restarts.
	NextToken() (int64, error)
	// NextSeq returns the next submission sequence number.
	NextSeq() (int64, error)
	AppendEvent(Event) error
	Events(limit int) ([]Event, error)
}
