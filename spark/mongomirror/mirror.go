// Package mongomirror mirrors the fleet controller's sanitized state and
// the history of its reservations into MongoDB, for dashboards.
//
// SQLite on the controller stays authoritative for leases; MongoDB is a
// history and dashboard mirror, never a lock. The mirror reads the
// controller through its own read-only transactions and writes MongoDB
// outside them, so a MongoDB outage or slowness never blocks or changes
// admission: Run logs it, retries with bounded backoff, and catches up
// from the controller's event log when MongoDB is back. Nothing is lost:
// the history is an append-only copy of that log, keyed by each event's
// ID.
//
// What is mirrored is fixed by the document types: resource state,
// reservation kind, topology, queue position, resident-service health and
// GitHub linkage, under display names. Never host addresses, usernames,
// commands, environment values, model paths, credentials, raw logs or
// fencing tokens: no document type has a field for them, and an event's
// free-text detail is not mirrored.
//
// The collections (in the database Options.Database, "gpugate" by
// default):
//
//	hosts         one document per host: _id (display name), state, online,
//	              draining, service_healthy, updated
//	reservations  what the dashboard shows now: the active reservations and
//	              the head of the queue: _id, kind, topology, state,
//	              position, hosts, repo, pr, sha, updated
//	fleet         one document, _id "fleet": queued (the whole queue's
//	              length), updated
//	history       one document per controller event, never changed: _id
//	              (lineage:seq), lineage (the event log's timeline: a new
//	              database, or a restored one, starts a new one), seq (the
//	              event's number in it), at, kind, reservation, host, alert
package mongomirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gpugate/gpugate/internal/retry"
	"github.com/gpugate/gpugate/spark"
)

// Source is what the mirror reads: a *spark.Controller.
type Source interface {
	Dashboard(ctx context.Context, names map[string]string) (spark.DashboardSnapshot, error)
	History(ctx context.Context, after int64, limit int) ([]spark.Event, error)
	Lineage(ctx context.Context) (string, error)
}

var _ Source = (*spark.Controller)(nil)

// Options configure a Mirror. The zero value of each field is its default.
type Options struct {
	// Database is the MongoDB database the collections live in.
	Database string // default "gpugate"
	// Names maps host names to the display names mirrored (a host
	// missing from it is mirrored by its name).
	Names map[string]string
	// Every is the time between passes while MongoDB is reachable.
	Every time.Duration // default 15 s
	// Timeout bounds one pass.
	Timeout time.Duration // default 10 s
	// MaxBackoff bounds the wait between passes while MongoDB fails;
	// the wait starts at one second and doubles up to it.
	MaxBackoff time.Duration // default 2 min
	// Batch is how many history events one write carries.
	Batch int // default 500
	Log   *slog.Logger
}

func (o *Options) defaults() {
	if o.Database == "" {
		o.Database = "gpugate"
	}
	if o.Every <= 0 {
		o.Every = 15 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 2 * time.Minute
	}
	if o.Batch <= 0 {
		o.Batch = 500
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// ErrMirror wraps every failure to reach or write MongoDB.
var ErrMirror = errors.New("mongomirror: the MongoDB mirror is behind")

// Mirror copies a controller's state and history into MongoDB.
type Mirror struct {
	src     Source
	db      *mongo.Database
	opts    Options
	ready   bool   // the indexes exist
	lineage string // the event log's timeline after is in
	after   int64  // the newest event ID known to be mirrored; -1 until read from MongoDB
}

// New returns a mirror of src into the MongoDB client's database. It
// does not contact MongoDB: the first pass creates the indexes.
func New(src Source, client *mongo.Client, opts Options) *Mirror {
	opts.defaults()
	return &Mirror{src: src, db: client.Database(opts.Database), opts: opts, after: -1}
}

// Connect makes a MongoDB client for uri that fails fast (five seconds to
// find and connect to a server), as the mirror wants: a pass that cannot
// reach MongoDB is retried, not awaited. The URI may hold credentials:
// it is never logged, and errors do not repeat it.
func Connect(uri string) (*mongo.Client, error) {
	c, err := mongo.Connect(options.Client().ApplyURI(uri).
		SetServerSelectionTimeout(5 * time.Second).SetConnectTimeout(5 * time.Second).SetAppName("gpugate-sparkd"))
	if err != nil {
		return nil, connectError(err)
	}
	return c, nil
}

// connectError is what Connect reports for the driver's err, without the
// driver's text, which can quote the URI, credentials and all. A
// mongodb+srv URI is resolved through DNS as it is parsed: a name that
// does not resolve now is a server out of reach, to retry, not a URI to
// refuse.
func connectError(err error) error {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return fmt.Errorf("%w: %w", ErrUnreachable, errors.New("its DNS records did not resolve"))
	}
	return fmt.Errorf("%w: %w", ErrBadURI, errors.New("the driver refused it"))
}

// ErrUnreachable is returned by Connect when the URI is well formed but
// its server cannot be found now (a mongodb+srv name that does not
// resolve): connect again later. It wraps ErrMirror.
var ErrUnreachable = fmt.Errorf("%w: mongo_uri's server cannot be reached now", ErrMirror)

// ErrBadURI is returned when the mongo_uri setting is not a MongoDB URI
// the driver accepts.
var ErrBadURI = errors.New("mongomirror: mongo_uri is not a usable MongoDB URI (mongodb://[user:password@]host:port/)")

// The mirrored documents. Their fields are everything the mirror can
// store.
type (
	hostDoc struct {
		Name           string    `bson:"_id"`
		State          string    `bson:"state"`
		Online         bool      `bson:"online"`
		Draining       bool      `bson:"draining"`
		ServiceHealthy *bool     `bson:"service_healthy,omitempty"`
		Updated        time.Time `bson:"updated"`
	}
	reservationDoc struct {
		ID       string    `bson:"_id"`
		Kind     string    `bson:"kind"`
		Topology string    `bson:"topology"`
		State    string    `bson:"state"`
		Position int       `bson:"position,omitempty"`
		Hosts    []string  `bson:"hosts,omitempty"`
		Repo     string    `bson:"repo,omitempty"`
		PR       int       `bson:"pr,omitempty"`
		SHA      string    `bson:"sha,omitempty"`
		Updated  time.Time `bson:"updated"`
	}
	fleetDoc struct {
		ID      string    `bson:"_id"`
		Queued  int       `bson:"queued"`
		Updated time.Time `bson:"updated"`
	}
	transitionDoc struct {
		ID          string    `bson:"_id"` // lineage:seq
		Lineage     string    `bson:"lineage"`
		Seq         int64     `bson:"seq"`
		At          time.Time `bson:"at"`
		Kind        string    `bson:"kind"`
		Reservation string    `bson:"reservation,omitempty"`
		Host        string    `bson:"host,omitempty"`
		Alert       bool      `bson:"alert,omitempty"`
	}
)

// Indexes are the indexes a pass makes sure of, by collection.
var Indexes = map[string][]bson.D{
	"reservations": {{{Key: "state", Value: 1}, {Key: "position", Value: 1}}, {{Key: "repo", Value: 1}, {Key: "pr", Value: 1}}},
	"history":      {{{Key: "lineage", Value: 1}, {Key: "seq", Value: -1}}, {{Key: "reservation", Value: 1}, {Key: "at", Value: 1}}, {{Key: "at", Value: -1}}, {{Key: "kind", Value: 1}, {Key: "at", Value: -1}}},
}

func (m *Mirror) display(host string) string {
	if n, ok := m.opts.Names[host]; ok {
		return n
	}
	return host
}

// Sync is one pass: the controller's state replaces the mirrored state,
// and every event not yet in the history is appended. It returns an
// error wrapping ErrMirror when MongoDB fails, having written what it
// could; the next pass goes on from what MongoDB holds.
func (m *Mirror) Sync(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, m.opts.Timeout)
	defer cancel()
	if !m.ready {
		if err := m.indexes(ctx); err != nil {
			return err
		}
		m.ready = true
	}
	snap, err := m.src.Dashboard(ctx, m.opts.Names)
	if err != nil {
		return fmt.Errorf("mongomirror: read the controller's state: %w", err)
	}
	if err := m.state(ctx, snap); err != nil {
		return err
	}
	return m.history(ctx)
}

// indexes creates the indexes a collection lacks. It asks for the
// missing ones only: FerretDB v1.24 fails a request to create an index
// that exists, where MongoDB ignores it.
func (m *Mirror) indexes(ctx context.Context) error {
	for coll, keys := range Indexes {
		cur, err := m.db.Collection(coll).Indexes().List(ctx)
		if err != nil {
			return fmt.Errorf("%w: list the %s indexes: %w", ErrMirror, coll, err)
		}
		var have []struct {
			Key bson.Raw `bson:"key"`
		}
		if err := cur.All(ctx, &have); err != nil {
			return fmt.Errorf("%w: list the %s indexes: %w", ErrMirror, coll, err)
		}
		var models []mongo.IndexModel
		for _, k := range keys {
			if !slices.ContainsFunc(have, func(h struct {
				Key bson.Raw `bson:"key"`
			}) bool {
				return sameKeys(h.Key, k)
			}) {
				models = append(models, mongo.IndexModel{Keys: k})
			}
		}
		if len(models) == 0 {
			continue
		}
		if _, err := m.db.Collection(coll).Indexes().CreateMany(ctx, models); err != nil {
			return fmt.Errorf("%w: create the %s indexes: %w", ErrMirror, coll, err)
		}
	}
	return nil
}

// sameKeys reports whether an index's key document is keys: the same
// fields, in order, in the same directions.
func sameKeys(raw bson.Raw, keys bson.D) bool {
	elems, err := raw.Elements()
	if err != nil || len(elems) != len(keys) {
		return false
	}
	for i, e := range elems {
		dir, ok := e.Value().AsInt64OK()
		if !ok {
			f, isFloat := e.Value().DoubleOK()
			dir, ok = int64(f), isFloat
		}
		if !ok || e.Key() != keys[i].Key || dir != int64(keys[i].Value.(int)) {
			return false
		}
	}
	return true
}

// state replaces the mirrored hosts, reservations and fleet document.
func (m *Mirror) state(ctx context.Context, snap spark.DashboardSnapshot) error {
	at := snap.GeneratedAt
	var hosts []mongo.WriteModel
	for _, h := range snap.Hosts {
		hosts = append(hosts, mongo.NewReplaceOneModel().SetFilter(bson.D{{Key: "_id", Value: h.Name}}).SetUpsert(true).
			SetReplacement(hostDoc{Name: h.Name, State: string(h.State), Online: h.Online, Draining: h.Draining, ServiceHealthy: h.ServiceHealthy, Updated: at}))
	}
	if len(hosts) > 0 {
		if _, err := m.db.Collection("hosts").BulkWrite(ctx, hosts); err != nil {
			return fmt.Errorf("%w: write hosts: %w", ErrMirror, err)
		}
	}
	var resv []mongo.WriteModel
	ids := bson.A{}
	for _, r := range snap.Reservations {
		ids = append(ids, r.ID)
		resv = append(resv, mongo.NewReplaceOneModel().SetFilter(bson.D{{Key: "_id", Value: r.ID}}).SetUpsert(true).
			SetReplacement(reservationDoc{ID: r.ID, Kind: string(r.Kind), Topology: string(r.Topology), State: string(r.State),
				Position: r.Position, Hosts: r.Hosts, Repo: r.Repo, PR: r.PR, SHA: r.SHA, Updated: at}))
	}
	if len(resv) > 0 {
		if _, err := m.db.Collection("reservations").BulkWrite(ctx, resv); err != nil {
			return fmt.Errorf("%w: write reservations: %w", ErrMirror, err)
		}
	}
	if _, err := m.db.Collection("reservations").DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$nin", Value: ids}}}}); err != nil {
		return fmt.Errorf("%w: drop ended reservations: %w", ErrMirror, err)
	}
	_, err := m.db.Collection("fleet").ReplaceOne(ctx, bson.D{{Key: "_id", Value: "fleet"}},
		fleetDoc{ID: "fleet", Queued: snap.Queued, Updated: at}, options.Replace().SetUpsert(true))
	if err != nil {
		return fmt.Errorf("%w: write the fleet document: %w", ErrMirror, err)
	}
	return nil
}

// history appends the events MongoDB does not hold yet, oldest first,
// starting after the newest one it holds.
func (m *Mirror) history(ctx context.Context) error {
	coll := m.db.Collection("history")
	lineage, err := m.src.Lineage(ctx)
	if err != nil {
		return fmt.Errorf("mongomirror: read the controller's lineage: %w", err)
	}
	if lineage != m.lineage {
		// Another event log (a new database, or one restored from a
		// backup, whose IDs go on from the backup's): its events are
		// never the ones mirrored under another lineage.
		m.lineage, m.after = lineage, -1
	}
	if m.after < 0 {
		var last transitionDoc
		err := coll.FindOne(ctx, bson.D{{Key: "lineage", Value: lineage}}, options.FindOne().SetSort(bson.D{{Key: "seq", Value: -1}})).Decode(&last)
		switch {
		case errors.Is(err, mongo.ErrNoDocuments):
			m.after = 0
		case err != nil:
			return fmt.Errorf("%w: read the newest mirrored event: %w", ErrMirror, err)
		default:
			m.after = last.Seq
		}
	}
	for {
		events, err := m.src.History(ctx, m.after, m.opts.Batch)
		if err != nil {
			return fmt.Errorf("mongomirror: read the controller's history: %w", err)
		}
		if len(events) == 0 {
			return nil
		}
		docs := make([]any, len(events))
		for i, e := range events {
			doc := transitionDoc{ID: lineage + ":" + strconv.FormatInt(e.ID, 10), Lineage: lineage, Seq: e.ID, At: e.At, Kind: e.Kind, Reservation: e.Request, Alert: e.Alert}
			if e.Host != "" {
				doc.Host = m.display(e.Host)
			}
			docs[i] = doc
		}
		if _, err := coll.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false)); err != nil && !onlyDuplicates(err) {
			m.after = -1 // read again from MongoDB what it holds
			return fmt.Errorf("%w: append %d events after event %d: %w", ErrMirror, len(docs), events[0].ID-1, err)
		}
		m.after = events[len(events)-1].ID
	}
}

// onlyDuplicates reports whether every failed insert was of an event
// already mirrored (a pass that wrote it and failed before it knew).
func onlyDuplicates(err error) bool {
	var bwe mongo.BulkWriteException
	if !errors.As(err, &bwe) || bwe.WriteConcernError != nil || len(bwe.WriteErrors) == 0 {
		return false
	}
	for _, we := range bwe.WriteErrors {
		if !mongo.IsDuplicateKeyError(we) {
			return false
		}
	}
	return true
}

// Run mirrors until ctx ends: a pass every Options.Every while MongoDB
// is reachable; while it fails, a warning per failed pass and a wait that
// starts at one second and doubles up to Options.MaxBackoff; when it is
// back, the next pass catches up with everything that happened. When ctx
// ends it makes one last pass (within Options.Timeout), so that what
// happened just before a shutdown is mirrored too.
func (m *Mirror) Run(ctx context.Context) error {
	return run(ctx, m.Sync, m.opts)
}

// run is Run's loop over any pass, for tests.
func run(ctx context.Context, pass func(context.Context) error, opts Options) error {
	b := retry.Policy{Initial: time.Second, Multiplier: 2, Max: opts.MaxBackoff}.BackOff()
	failing := 0
	for {
		wait := opts.Every
		if err := pass(ctx); err != nil {
			if ctx.Err() != nil {
				return last(ctx, pass, opts)
			}
			failing++
			wait = b.NextBackOff()
			opts.Log.Warn("mongomirror.behind", "err", err, "failed_passes", failing, "retry_in", wait.String())
		} else {
			if failing > 0 {
				opts.Log.Info("mongomirror.caught_up", "failed_passes", failing)
			}
			failing = 0
			b.Reset()
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return last(ctx, pass, opts)
		case <-t.C:
		}
	}
}

// last is the pass as Run stops.
func last(ctx context.Context, pass func(context.Context) error, opts Options) error {
	if err := pass(context.WithoutCancel(ctx)); err != nil {
		opts.Log.Warn("mongomirror.behind", "err", err, "when", "the last pass before stopping")
	}
	return ctx.Err()
}
