package spark_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/sparktest"
)

func Example() {
	ctx := context.Background()
	opts := spark.SeedOptions()
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
