package dstack_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/dstack"
	"github.com/gpugate/gpugate/spark/dstack/dstacktest"
)

// The test fleet: three managed hosts in the SSH fleet "spark", a cluster.
var hostnames = map[string]string{"spark-1": "10.0.0.1", "spark-2": "10.0.0.2", "spark-3": "10.0.0.3"}

const (
	fleetName = "spark"
	applyPath = "/api/project/main/runs/apply"
	stopPath  = "/api/project/main/runs/stop"
	getPath   = "/api/project/main/runs/get"
	fleetPath = "/api/project/main/fleets/get"
	listPath  = "/api/runs/list"
)

type fixture struct {
	srv *dstacktest.Server
	c   *dstack.Client
	b   *dstack.Backend
}

func newFixture(t testing.TB, placement string) fixture {
	t.Helper()
	srv := dstacktest.New()
	srv.AddFleet(dstacktest.FleetSpec{Name: fleetName, Placement: placement, Hosts: []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}})
	c, err := dstack.NewClient(dstacktest.BaseURL, dstacktest.Token, dstacktest.Project, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	return fixture{srv: srv, c: c, b: newBackend(t, c)}
}

func newBackend(t testing.TB, c *dstack.Client) *dstack.Backend {
	t.Helper()
	b, err := dstack.NewBackend(c, dstack.Config{Fleet: fleetName, Hosts: hostnames, IDE: "vscode"})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func ciWork(id string, hosts ...string) dstack.LeaseWork {
	topo := spark.Single
	if len(hosts) == 2 {
		topo = spark.Pair
	}
	return dstack.LeaseWork{LeaseID: id, Class: spark.ManualPR, Hosts: hosts, Topology: topo, Suite: "smoke",
		Commands: []string{"make test"}, Repo: "acme/butter", SHA: "0123456789abcdef0123456789abcdef01234567", Duration: 2 * time.Hour}
}

func devWork(id, host string) dstack.LeaseWork {
	return dstack.LeaseWork{LeaseID: id, Class: spark.Development, Hosts: []string{host}, Topology: spark.Single, Duration: 8 * time.Hour}
}

// leasedHostnames are the dstack hostnames of controller hosts, sorted.
func leasedHostnames(hosts ...string) []string {
	var out []string
	for _, h := range hosts {
		out = append(out, hostnames[h])
	}
	slices.Sort(out)
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

var ctx = context.Background()
