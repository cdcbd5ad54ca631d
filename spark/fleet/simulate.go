package fleet

import (
	"context"

	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/sparkgh"
)

// Simulated is the default fleet played in process, what sparkd runs
// without a fleet file: a demonstration, never a real fleet. Its resident
// service drains, stops, starts and passes its health check at once; give
// the Daemon SimulateHeartbeats for its hosts' heartbeats.
func Simulated() File {
	f := File{Options: spark.DefaultOptions(), GitHub: sparkgh.DefaultConfig("")}
	f.Options.Service = simulatedService{}
	return f
}

// SimulateHeartbeats makes d report a clean heartbeat for each of the
// simulated fleet's hosts at the start of each round.
func (d *Daemon) SimulateHeartbeats() {
	d.BeforeRound = func(ctx context.Context) {
		for _, h := range spark.DefaultOptions().Hosts {
			if err := d.Controller.Heartbeat(ctx, spark.HostReport{Host: h.Name}); err != nil && d.Log != nil {
				d.Log.Error("heartbeat", "host", h.Name, "error", err)
			}
		}
	}
}

// simulatedService is the simulated fleet's resident service: every step
// succeeds at once.
type simulatedService struct{}

func (simulatedService) Drain(context.Context) error          { return nil }
func (simulatedService) Stop(context.Context) error           { return nil }
func (simulatedService) VerifyReleased(context.Context) error { return nil }
func (simulatedService) Start(context.Context) error          { return nil }
func (simulatedService) Healthy(context.Context) error        { return nil }
