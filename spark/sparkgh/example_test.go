package sparkgh_test

import (
	"fmt"

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
	_, err := sparkgh.New(sparkgh.SeedConfig(""), nil, nil, nil)
	fmt.Println(err)
	// Output: sparkgh: refusing to start without a webhook secret: set Config.WebhookSecret to the GitHub webhook's secret (8 characters or more)
}

// Serving GitHub's merge queue takes a lane and the base branches whose
// queue it serves; without branches the configuration is refused.
func ExampleMergeQueue() {
	c := sparkgh.SeedConfig("a-webhook-secret")
	c.MergeQueue = &sparkgh.MergeQueue{Lane: sparkgh.Lane{Suite: "smoke", Topology: spark.Single}}
	fmt.Println(c.Validate())
	c.MergeQueue.Branches = []string{"main"}
	fmt.Println(c.Validate())
	// Output:
	// sparkgh: invalid configuration: merge queue: name the base branches whose queue it serves (branches: [main])
	// <nil>
}
