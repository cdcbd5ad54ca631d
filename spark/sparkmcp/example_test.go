package sparkmcp_test

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/sparkmcp"
)

// queue stands in for the controller's API: every request is queued
// second in line.
type queue struct{}

func (queue) Request(_ context.Context, lr spark.LeaseRequest) (spark.Status, error) {
	return spark.Status{Request: spark.Request{ID: "r-1", Class: lr.Class, Topology: lr.Topology, State: spark.Queued}, Position: 2,
		Pending: "spark-2 is draining: its active job finishes first"}, nil
}
func (queue) Status(context.Context, string) (spark.Status, error) {
	return spark.Status{}, spark.ErrNotFound
}
func (queue) Wait(context.Context, string) (spark.Status, error) {
	return spark.Status{}, spark.ErrNotFound
}
func (queue) Release(context.Context, string, int64) error    { return spark.ErrNotFound }
func (queue) Cancel(context.Context, string) error            { return spark.ErrNotFound }
func (queue) Hosts(context.Context) ([]map[string]any, error) { return nil, nil }

// An agent's MCP client asks for a one-host development lease; sparkctl
// mcp serves the same server on stdio, over the controller's API client.
func ExampleNewServer() {
	ctx := context.Background()
	server := sparkmcp.NewServer(queue{}, sparkmcp.Options{Owner: "agent:alice"})
	st, ct := mcp.NewInMemoryTransports()
	if _, err := server.Connect(ctx, st, nil); err != nil {
		panic(err)
	}
	session, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		panic(err)
	}
	defer session.Close()
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "spark_request", Arguments: map[string]any{"topology": "single"}})
	if err != nil {
		panic(err)
	}
	lease := res.StructuredContent.(map[string]any)
	fmt.Println(lease["id"], lease["state"], lease["position"])
	fmt.Println(lease["pending"])
	fmt.Println(lease["next"])
	// Output:
	// r-1 queued 2
	// spark-2 is draining: its active job finishes first
	// call spark_wait with this id until the lease is active; do not reach the hosts before then
}
