package spark_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"

	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/sparktest"
)

func Example() {
	ctx := context.Background()
	opts := spark.DefaultOptions()
	opts.Service = &sparktest.Service{}
	c, _ := spark.New(sparktest.NewStore(), opts)
	for _, h := range []string{"spark-1", "spark-2"} {
		c.Heartbeat(ctx, spark.HostReport{Host: h})
	}
	c.Reconcile(ctx) // the resident service starts on spark-1

	ci, _ := c.Submit(ctx, spark.SubmitRequest{Class: spark.MergeCI})
	c.Reconcile(ctx)
	dev, _ := c.Submit(ctx, spark.SubmitRequest{Class: spark.Development})
	c.Reconcile(ctx)

	st, _ := c.Status(ctx, ci.ID)
	fmt.Println("CI:", st.Request.State, st.Request.Hosts)
	st, _ = c.Status(ctx, dev.ID)
	fmt.Println("development:", st.Request.State, "position", st.Position)
	fmt.Println("spark-2 draining:", strings.HasPrefix(st.Pending, "host spark-2 is running request"))
	// Output:
	// CI: active [spark-2]
	// development: queued position 1
	// spark-2 draining: true
}

// A managed host is schedulable only while it reports heartbeats; its
// agent reports them over the API (sparkctl heartbeat), with the number of
// compute processes on its GPU.
func ExampleAPIClient_Heartbeat() {
	ctx := context.Background()
	c, _ := spark.New(sparktest.NewStore(), spark.Options{Hosts: []spark.HostConfig{{Name: "gpu-a", Managed: true}}})
	// Each holder has its own token: the operator, and the host's agent,
	// which may report only gpu-a's heartbeat.
	h, _ := spark.NewAuthHandler(c, spark.Tokens{
		"an-operator-token-0123": {Role: spark.RoleOperator, Name: "ops"},
		"gpu-a-agent-token-0123": {Role: spark.RoleHost, Name: "gpu-a"},
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	cl, _ := spark.NewAPIClient(srv.URL, "an-operator-token-0123", srv.Client())
	host, _ := spark.NewAPIClient(srv.URL, "gpu-a-agent-token-0123", srv.Client())

	st, _ := cl.Request(ctx, spark.LeaseRequest{Class: spark.MergeCI})
	c.Reconcile(ctx)
	st, _ = cl.Status(ctx, st.Request.ID)
	fmt.Println("before any heartbeat:", st.Request.State)

	host.Heartbeat(ctx, "gpu-a", 0) // a clean GPU
	c.Reconcile(ctx)
	st, _ = cl.Status(ctx, st.Request.ID)
	fmt.Println("after one:", st.Request.State, st.Request.Hosts)

	_, err := cl.Request(ctx, spark.LeaseRequest{Class: spark.Development, DurationSeconds: 9 * 3600})
	fmt.Println("a 9h development lease:", errors.Is(err, spark.ErrInvalid))
	// Output:
	// before any heartbeat: queued
	// after one: active [gpu-a]
	// a 9h development lease: true
}
