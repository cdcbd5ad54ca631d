package sparkgh_test

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/sparkgh"
)

// Comment commands are anchored at the start of a line; quoted lines and
// fenced code are not commands, and an unknown verb is reported so the
// integration can answer it.
func ExampleParseCommands() {
	body := "Looks good.\n/spark test --pair\n> /spark cancel\n/spark deploy\n"
	for _, c := range sparkgh.ParseCommands(body, "/spark") {
		fmt.Printf("%q known=%v pair=%v\n", c.Verb, c.Known, c.Pair)
	}
	// Output:
	// "test" known=true pair=true
	// "deploy" known=false pair=false
}

// The integration refuses to start without a webhook secret, because
// go-github accepts unsigned payloads when no secret is expected.
func ExampleNew() {
	_, err := sparkgh.New(sparkgh.DefaultConfig(""), nil, nil, nil)
	fmt.Println(err)
	// Output: sparkgh: refusing to start without a webhook secret: set Config.WebhookSecret to the GitHub webhook's secret (8 characters or more)
}

// Serving GitHub's merge queue takes a lane and the base branches whose
// queue it serves; without branches the configuration is refused.
func ExampleMergeQueue() {
	c := sparkgh.DefaultConfig("a-webhook-secret")
	c.MergeQueue = &sparkgh.MergeQueue{Lane: sparkgh.Lane{Suite: "smoke", Topology: spark.Single}}
	fmt.Println(c.Validate())
	c.MergeQueue.Branches = []string{"main"}
	fmt.Println(c.Validate())
	// Output:
	// sparkgh: invalid configuration: merge queue: name the base branches whose queue it serves (branches: [main])
	// <nil>
}

// memLog is an App's delivery log in memory, newest first.
type memLog struct {
	attempts []sparkgh.Delivery
	sent     []int64
}

func (m *memLog) Deliveries(context.Context, string) ([]sparkgh.Delivery, string, error) {
	return m.attempts, "", nil
}

func (m *memLog) Redeliver(_ context.Context, id int64) error {
	m.sent = append(m.sent, id)
	return nil
}

// A sweep redelivers what never reached the receiver (its newest attempt
// failed) and, with the receiver's record, what it accepted but could not
// process, which GitHub's log shows as delivered.
func ExampleRedeliverer() {
	at := time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)
	log := &memLog{attempts: []sparkgh.Delivery{
		{ID: 3, GUID: "labeled-7", At: at.Add(2 * time.Minute)},       // sparkd was down
		{ID: 2, GUID: "comment-9", At: at.Add(time.Minute), OK: true}, // accepted, then GitHub's API failed
		{ID: 1, GUID: "labeled-8", At: at, OK: true},                  // processed
	}}
	receiver := unprocessed{"comment-9": at.Add(time.Minute)}
	r := &sparkgh.Redeliverer{Log: log, Unprocessed: receiver}
	guids, err := r.Sweep(context.Background(), at.Add(-time.Hour))
	fmt.Println(guids, log.sent, err)
	// Output: [comment-9 labeled-7] [2 3] <nil>
}

// unprocessed is a receiver's record (sparkgh.Webhook keeps one).
type unprocessed map[string]time.Time

func (u unprocessed) Unprocessed() map[string]time.Time { return maps.Clone(u) }
func (u unprocessed) Forget(guid string)                { delete(u, guid) }
