package dstacktest_test

import (
	"context"
	"fmt"

	"github.com/gpugate/gpugate/spark/dstack"
	"github.com/gpugate/gpugate/spark/dstack/dstacktest"
)

// Example scripts a lost answer: the stop takes effect on the server, the
// client sees an error, and the retried stop succeeds.
func Example() {
	srv := dstacktest.New()
	srv.AddFleet(dstacktest.FleetSpec{Name: "spark", Placement: "cluster", Hosts: []string{"10.0.0.1", "10.0.0.2"}})
	c, _ := dstack.NewClient(dstacktest.BaseURL, dstacktest.Token, dstacktest.Project, srv.Client())
	ctx := context.Background()
	spec := dstack.RunSpec{RunName: "pair-1", Configuration: dstack.RunConfiguration{Type: "task", Nodes: 2, Commands: []string{"make test"},
		Fleets: []string{"spark"}, Instances: []dstack.InstanceSelector{{Hostname: "10.0.0.1"}, {Hostname: "10.0.0.2"}}, CreationPolicy: "reuse"}}
	if _, err := c.ApplyRun(ctx, spec); err != nil {
		panic(err)
	}
	srv.Progress()
	r, _ := srv.Run("pair-1")
	fmt.Println(r.Status, r.Hosts)

	srv.AddFault(dstacktest.Fault{Path: "/api/project/main/runs/stop", LoseResponse: true})
	fmt.Println("stop:", c.StopRuns(ctx, []string{"pair-1"}, false) != nil)
	r, _ = srv.Run("pair-1")
	fmt.Println(r.Status, r.StopRequested)
	fmt.Println("retried stop:", c.StopRuns(ctx, []string{"pair-1"}, false))
	fmt.Println("stop calls:", srv.Count("/api/project/main/runs/stop"))
	// Output:
	// running [10.0.0.1 10.0.0.2]
	// stop: true
	// terminating true
	// retried stop: <nil>
	// stop calls: 2
}
