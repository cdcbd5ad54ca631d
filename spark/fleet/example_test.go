package fleet_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gpugate/gpugate/spark/fleet"
)

// A fleet controller from its fleet file: Load reads the file, Start opens
// the database and builds the daemon, and Serve (not run here) serves its
// API and runs its rounds until the context ends.
func ExampleStart() {
	f, err := fleet.Load(fleet.Example)
	if err != nil {
		panic(err)
	}
	dir, _ := os.MkdirTemp("", "fleet-example-")
	defer os.RemoveAll(dir)
	d, err := fleet.Start(context.Background(), f, fleet.Settings{DB: filepath.Join(dir, "spark.db"), Init: true})
	if err != nil {
		panic(err)
	}
	defer d.Close()
	hosts, _ := d.Controller.Hosts(context.Background())
	for _, h := range hosts {
		fmt.Println(h.Name, "managed:", h.Managed, "service:", h.Service)
	}
	fmt.Println("operator token written beside the database:", filepath.Dir(d.TokenFile) == dir)
	// Output:
	// spark-1 managed: true service: true
	// spark-2 managed: true service: false
	// operator token written beside the database: true
}
