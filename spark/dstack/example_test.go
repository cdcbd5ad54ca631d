package dstack_test

import (
	"context"
	"fmt"

	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/dstack"
	"github.com/gpugate/gpugate/spark/dstack/dstacktest"
)

// Example runs a granted pair on dstack: the hosts are enrolled, the
// lease becomes one two-node task on exactly its two hosts, and its
// release stops the run.
func Example() {
	srv := dstacktest.New()
	srv.AddFleet(dstacktest.FleetSpec{Name: "spark", Placement: "cluster", Hosts: []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}})
	c, _ := dstack.NewClient(dstacktest.BaseURL, dstacktest.Token, dstacktest.Project, srv.Client())
	b, _ := dstack.NewBackend(c, dstack.Config{Fleet: "spark", Hosts: map[string]string{"spark-1": "10.0.0.1", "spark-2": "10.0.0.2", "spark-3": "10.0.0.3"}})
	ctx := context.Background()

	fmt.Println("enrolled:", b.VerifyEnrollment(ctx, []string{"spark-1", "spark-2", "spark-3"}))
	granted := spark.Request{ID: "r-00000000000000c1", Class: spark.ManualPR, Topology: spark.Pair, Hosts: []string{"spark-1", "spark-3"},
		Suite: "smoke", PR: &spark.PRRef{Repo: "acme/butter", Number: 7, SHA: "0123456789abcdef0123456789abcdef01234567"}}
	name, err := b.Start(ctx, dstack.WorkFor(granted, []string{"make test-distributed"}))
	fmt.Println("started:", name, err)
	srv.Progress() // dstack places the jobs
	r, _ := c.GetRun(ctx, name)
	fmt.Println(r.Type, r.Status, r.Hostnames())

	fmt.Println("released:", b.Stop(ctx, name))
	srv.Progress()
	r, _ = c.GetRun(ctx, name)
	fmt.Println(r.Status, r.TerminationReason)
	// Output:
	// enrolled: <nil>
	// started: spark-r-00000000000000c1 <nil>
	// task running [10.0.0.1 10.0.0.3]
	// released: <nil>
	// terminated stopped_by_user
}

// ExampleBackend_Sweep shows a release that happened while the controller
// was down: the next sweep stops the run.
func ExampleBackend_Sweep() {
	srv := dstacktest.New()
	srv.AddFleet(dstacktest.FleetSpec{Name: "spark", Hosts: []string{"spark-1", "spark-2"}})
	c, _ := dstack.NewClient(dstacktest.BaseURL, dstacktest.Token, dstacktest.Project, srv.Client())
	b, _ := dstack.NewBackend(c, dstack.Config{Fleet: "spark"})
	ctx := context.Background()
	dev, _ := b.Start(ctx, dstack.LeaseWork{LeaseID: "r-00000000000000d1", Class: spark.Development, Topology: spark.Single, Hosts: []string{"spark-1"}})
	ci, _ := b.Start(ctx, dstack.LeaseWork{LeaseID: "r-00000000000000d2", Class: spark.BackgroundCI, Topology: spark.Single, Hosts: []string{"spark-2"},
		Commands: []string{"make bench"}, Repo: "acme/butter", SHA: "89abcdef"})
	fmt.Println(dev, ci)

	// The restarted controller knows the development lease is still
	// active and the CI lease has ended.
	restarted, _ := dstack.NewBackend(c, dstack.Config{Fleet: "spark"})
	stopped, err := restarted.Sweep(ctx, func(lease string) (bool, error) { return lease == "r-00000000000000d1", nil })
	fmt.Println("stopped:", stopped, err)
	// Output:
	// spark-r-00000000000000d1 spark-r-00000000000000d2
	// stopped: [spark-r-00000000000000d2] <nil>
}

// ExampleBackend_VerifyEnrollment shows a host whose instance is gone.
func ExampleBackend_VerifyEnrollment() {
	srv := dstacktest.New()
	srv.AddFleet(dstacktest.FleetSpec{Name: "gpus", Hosts: []string{"10.0.0.1", "10.0.0.2"}})
	srv.SetInstanceStatus("10.0.0.2", dstacktest.Terminated)
	c, _ := dstack.NewClient(dstacktest.BaseURL, dstacktest.Token, dstacktest.Project, srv.Client())
	b, _ := dstack.NewBackend(c, dstack.Config{Fleet: "gpus", Hosts: map[string]string{"spark-1": "10.0.0.1", "spark-2": "10.0.0.2"}})
	fmt.Println(b.VerifyEnrollment(context.Background(), []string{"spark-1", "spark-2"}))
	// Output:
	// dstack: host not enrolled in the dstack fleet: host spark-2 (hostname "10.0.0.2"): instance gpus-1 is terminated; it must be idle or busy and reachable: wait for it to finish provisioning, check its SSH access, or re-apply the fleet
}
