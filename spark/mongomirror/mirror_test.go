package mongomirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/sparktest"
)

// secrets is what a fleet knows and the mirror must never store.
var secrets = []string{
	"spark-1", "spark-2", // host names: the mirror shows display names
	"alice",                          // a username
	"/srv/models/llama-70b",          // a model path
	"CUDA_VISIBLE_DEVICES=0",         // an environment value
	"systemctl stop inference",       // a command
	"ghp_0123456789abcdefghijklmnop", // a credential
}

var displayNames = map[string]string{"spark-1": "Spark One", "spark-2": "Spark Two"}

// busyFleet is a controller with both hosts leased, work queued for a
// pull request, and events whose free text holds every secret.
func busyFleet(t *testing.T) (*spark.Controller, []int64) {
	t.Helper()
	ctx := t.Context()
	var tokens []int64
	opts := spark.DefaultOptions()
	opts.Service = &sparktest.Service{}
	opts.OnGrant = func(r spark.Request) { tokens = append(tokens, r.Token) }
	store := sparktest.NewStore()
	c, err := spark.New(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	// tokens far from any count or position, so that finding one stored
	// means a token was stored
	store.Tx(ctx, func(tx spark.Tx) error {
		for range 1_000_000 {
			tx.NextToken()
		}
		return nil
	})
	for _, h := range []string{"spark-1", "spark-2"} {
		c.Heartbeat(ctx, spark.HostReport{Host: h})
	}
	for i, class := range []spark.Class{spark.MergeCI, spark.ManualPR, spark.Benchmark, spark.BackgroundCI, spark.ManualPR} {
		r, err := c.Submit(ctx, spark.SubmitRequest{Class: class, Owner: "alice", Suite: "suite",
			PR:          &spark.PRRef{Repo: "o/r", Number: 40 + i, SHA: "0123456789abcdef0123456789abcdef01234567"},
			Annotations: map[string]string{"cmd": "systemctl stop inference", "env": "CUDA_VISIBLE_DEVICES=0", "model": "/srv/models/llama-70b", "token": "ghp_0123456789abcdefghijklmnop"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Annotate(ctx, r.ID, "note", "alice ran it"); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	return c, tokens
}

// stored is every document in every collection of db.
func stored(t *testing.T, db *mongo.Database) map[string][]bson.M {
	t.Helper()
	out := map[string][]bson.M{}
	names, err := db.ListCollectionNames(t.Context(), bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		cur, err := db.Collection(n).Find(t.Context(), bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		var docs []bson.M
		if err := cur.All(t.Context(), &docs); err != nil {
			t.Fatal(err)
		}
		out[n] = docs
	}
	return out
}

// walk calls fn with every scalar inside v.
func walk(v any, fn func(any)) {
	switch v := v.(type) {
	case bson.M:
		for k, e := range v {
			fn(k)
			walk(e, fn)
		}
	case bson.D:
		for _, e := range v {
			fn(e.Key)
			walk(e.Value, fn)
		}
	case bson.A:
		for _, e := range v {
			walk(e, fn)
		}
	default:
		fn(v)
	}
}

func database(t *testing.T, client *mongo.Client) (*mongo.Database, string) {
	name := regexp.MustCompile(`[^A-Za-z0-9]`).ReplaceAllString(t.Name(), "_")
	name = name[:min(len(name), 20)]
	db := client.Database(name)
	t.Cleanup(func() { db.Drop(context.Background()) })
	return db, name
}

// What the server stored holds the state a dashboard needs, under
// display names, and none of the fleet's secrets: no host name, username,
// path, environment value, command, credential, or fencing token.
func TestSync_TheServerStoresTheSanitizedStateAndNothingSecret(t *testing.T) {
	client := testClient(t, ferretURI(t))
	db, name := database(t, client)
	c, tokens := busyFleet(t)
	// an event whose free text holds secrets
	if err := c.Heartbeat(t.Context(), spark.HostReport{Host: "spark-2", GPUProcesses: 3}); err != nil {
		t.Fatal(err)
	}
	m := New(c, client, Options{Database: name, Names: displayNames})
	if err := m.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	docs := stored(t, db)
	for coll, ds := range docs {
		for _, d := range ds {
			walk(d, func(v any) {
				switch v := v.(type) {
				case string:
					for _, s := range secrets {
						if strings.Contains(v, s) {
							t.Errorf("%s stores %q, which holds %q", coll, v, s)
						}
					}
				case int64, int32:
					n, _ := strconv.ParseInt(fmt.Sprint(v), 10, 64)
					if n != 0 && slices.Contains(tokens, n) {
						t.Errorf("%s stores %d, a fencing token", coll, n)
					}
				}
			})
		}
	}
	snap, err := c.Dashboard(t.Context(), displayNames)
	if err != nil {
		t.Fatal(err)
	}
	var hosts []string
	for _, h := range docs["hosts"] {
		hosts = append(hosts, h["_id"].(string))
	}
	slices.Sort(hosts)
	if d := cmp.Diff([]string{"Spark One", "Spark Two"}, hosts); d != "" {
		t.Errorf("hosts (-want +got):\n%s", d)
	}
	if got := len(docs["reservations"]); got != len(snap.Reservations) || got == 0 {
		t.Errorf("%d reservations mirrored, the dashboard shows %d", got, len(snap.Reservations))
	}
	for _, r := range docs["reservations"] {
		if r["repo"] != "o/r" || r["sha"] != "0123456" || r["kind"] == "" || r["topology"] == "" {
			t.Errorf("a reservation lacks its linkage or kind: %v", r)
		}
	}
	history, err := c.History(t.Context(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(docs["history"]) != len(history) || len(history) == 0 {
		t.Errorf("%d history documents, the controller has %d events", len(docs["history"]), len(history))
	}
	if len(docs["fleet"]) != 1 || docs["fleet"][0]["queued"] != int32(snap.Queued) {
		t.Errorf("fleet document %v, want queued %d", docs["fleet"], snap.Queued)
	}
}

// historyIDs is the mirrored history's event IDs, in order.
func historyIDs(t *testing.T, db *mongo.Database) []int64 {
	t.Helper()
	var ids []int64
	for _, d := range stored(t, db)["history"] {
		ids = append(ids, d["seq"].(int64))
	}
	slices.Sort(ids)
	return ids
}

func controllerIDs(t *testing.T, c *spark.Controller) []int64 {
	t.Helper()
	events, err := c.History(t.Context(), 0, 100_000)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, e := range events {
		ids = append(ids, e.ID)
	}
	return ids
}

// A MongoDB outage fails the pass (ErrMirror), leaves admission alone,
// and the pass after it catches the history up: every event, once.
func TestSync_AnOutageNeverStopsAdmissionAndIsCaughtUpAfterwards(t *testing.T) {
	p, uri := newProxy(t, ferretURI(t))
	client := testClient(t, uri)
	db, name := database(t, client)
	c, _ := busyFleet(t)
	m := New(c, client, Options{Database: name, Names: displayNames})
	if err := m.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	p.Cut()
	for i := range 5 {
		if _, err := c.Submit(t.Context(), spark.SubmitRequest{Class: spark.BackgroundCI, Owner: "alice"}); err != nil {
			t.Fatalf("admission during the outage: %v", err)
		}
		if err := c.Reconcile(t.Context()); err != nil {
			t.Fatalf("admission during the outage: %v", err)
		}
		if err := m.Sync(t.Context()); !errors.Is(err, ErrMirror) {
			t.Fatalf("pass %d during the outage: %v, want ErrMirror", i, err)
		}
	}
	p.Restore()
	if err := m.Sync(t.Context()); err != nil {
		t.Fatalf("the pass after the outage: %v", err)
	}
	if d := cmp.Diff(controllerIDs(t, c), historyIDs(t, db)); d != "" {
		t.Errorf("the history after the outage (-controller +mirror):\n%s", d)
	}
}

// A server that does not answer holds the mirror's pass, never the
// controller: admission goes on while the pass waits.
func TestSync_ASlowServerNeverHoldsAdmission(t *testing.T) {
	p, uri := newProxy(t, ferretURI(t))
	client := testClient(t, uri)
	_, name := database(t, client)
	c, _ := busyFleet(t)
	m := New(c, client, Options{Database: name, Names: displayNames})
	if err := m.Sync(t.Context()); err != nil { // connected, indexes made
		t.Fatal(err)
	}
	p.Hold()
	done := make(chan error, 1)
	go func() { done <- m.Sync(t.Context()) }()
	<-p.held // the pass is waiting on the server
	if _, err := c.Submit(t.Context(), spark.SubmitRequest{Class: spark.BackgroundCI}); err != nil {
		t.Fatal(err)
	}
	if err := c.Reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	p.Release()
	if err := <-done; err != nil && !errors.Is(err, ErrMirror) {
		t.Fatalf("the held pass: %v", err)
	}
}

// A restarted mirror goes on from what the server holds, and an event a
// failed pass already wrote is not written twice.
func TestSync_AppendsEachEventOnceAcrossRestartsAndRepeats(t *testing.T) {
	client := testClient(t, ferretURI(t))
	db, name := database(t, client)
	c, _ := busyFleet(t)
	if err := New(c, client, Options{Database: name, Batch: 3}).Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	c.Submit(t.Context(), spark.SubmitRequest{Class: spark.BackgroundCI})
	again := New(c, client, Options{Database: name, Batch: 3})
	if err := again.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	again.after = 2 // as if a pass had written events it never learned it wrote
	if err := again.Sync(t.Context()); err != nil {
		t.Fatalf("appending events already mirrored: %v", err)
	}
	if d := cmp.Diff(controllerIDs(t, c), historyIDs(t, db)); d != "" {
		t.Errorf("the history (-controller +mirror):\n%s", d)
	}
}

// The indexes a dashboard's queries use exist after the first pass.
func TestSync_MakesTheDashboardIndexes(t *testing.T) {
	client := testClient(t, ferretURI(t))
	db, name := database(t, client)
	c, _ := busyFleet(t)
	if err := New(c, client, Options{Database: name}).Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	for coll, want := range Indexes {
		cur, err := db.Collection(coll).Indexes().List(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var got []struct {
			Key bson.D `bson:"key"`
		}
		if err := cur.All(t.Context(), &got); err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if !slices.ContainsFunc(got, func(g struct {
				Key bson.D `bson:"key"`
			}) bool {
				return fmt.Sprint(g.Key) == fmt.Sprint(normalize(w))
			}) {
				t.Errorf("%s has no index on %v (it has %v)", coll, w, got)
			}
		}
	}
}

// normalize writes index directions as the server reports them.
func normalize(keys bson.D) bson.D {
	out := bson.D{}
	for _, k := range keys {
		out = append(out, bson.E{Key: k.Key, Value: int32(k.Value.(int))})
	}
	return out
}

// While MongoDB fails, Run warns once per failed pass and waits a second,
// then twice as long each time, never more than MaxBackoff; the pass that
// succeeds logs the catch-up and the period is Every again; stopping, it
// makes one last pass.
func TestRun_BacksOffBoundedWhileMongoFailsAndCatchesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs recorder
		opts := Options{Every: 15 * time.Second, MaxBackoff: 10 * time.Second, Log: slog.New(&logs)}
		opts.defaults()
		var at []time.Duration
		start := time.Now()
		fail := 6
		ctx, cancel := context.WithCancel(t.Context())
		pass := func(context.Context) error {
			at = append(at, time.Since(start))
			if len(at) == 9 {
				cancel()
			}
			if fail > 0 {
				fail--
				return fmt.Errorf("%w: connection refused", ErrMirror)
			}
			return nil
		}
		if err := run(ctx, pass, opts); !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		var gaps []time.Duration
		for i := 1; i < len(at); i++ {
			gaps = append(gaps, at[i]-at[i-1])
		}
		s := time.Second
		want := []time.Duration{s, 2 * s, 4 * s, 8 * s, 10 * s, 10 * s, 15 * s, 15 * s, 0}
		if d := cmp.Diff(want, gaps); d != "" {
			t.Errorf("the waits between passes (-want +got):\n%s", d)
		}
		if d := cmp.Diff([]string{"WARN mongomirror.behind", "WARN mongomirror.behind", "WARN mongomirror.behind",
			"WARN mongomirror.behind", "WARN mongomirror.behind", "WARN mongomirror.behind", "INFO mongomirror.caught_up"}, logs.lines()); d != "" {
			t.Errorf("the log (-want +got):\n%s", d)
		}
	})
}

// recorder keeps the level and message of each record.
type recorder struct{ records []slog.Record }

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.records = append(r.records, rec)
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }
func (r *recorder) lines() []string {
	var out []string
	for _, rec := range r.records {
		out = append(out, rec.Level.String()+" "+rec.Message)
	}
	return out
}

// A mongo_uri the driver refuses is ErrBadURI, and the error never
// repeats it: it may hold a password.
func TestConnect_ABadURIIsRefusedWithoutRepeatingIt(t *testing.T) {
	_, err := Connect("mongodb://gpugate:hunter2-s3cret@db.internal:notaport/")
	if !errors.Is(err, ErrBadURI) {
		t.Fatalf("%v, want ErrBadURI", err)
	}
	if strings.Contains(err.Error(), "hunter2-s3cret") || strings.Contains(err.Error(), "db.internal") {
		t.Errorf("the error repeats the URI: %v", err)
	}
}

// A mongodb+srv name that does not resolve now (a DNS outage as sparkd
// starts) is a server out of reach, retried, never a URI refused; the
// error repeats neither the name nor the password.
func TestConnect_AnUnresolvableSRVNameIsUnreachableNotABadURI(t *testing.T) {
	driverErr := fmt.Errorf("error parsing uri: lookup _mongodb._tcp.cluster0.example: %w",
		&net.DNSError{Err: "server misbehaving", Name: "_mongodb._tcp.cluster0.example", IsTemporary: true})
	err := connectError(driverErr)
	if errors.Is(err, ErrBadURI) || !errors.Is(err, ErrUnreachable) || !errors.Is(err, ErrMirror) {
		t.Errorf("%v, want ErrUnreachable (an ErrMirror), not ErrBadURI", err)
	}
	if strings.Contains(err.Error(), "cluster0") {
		t.Errorf("the error repeats the URI's host: %v", err)
	}
	if err := connectError(errors.New("error parsing uri: scheme must be \"mongodb\" or \"mongodb+srv\"")); !errors.Is(err, ErrBadURI) {
		t.Errorf("a malformed URI: %v, want ErrBadURI", err)
	}
}
