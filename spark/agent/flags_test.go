package agent_test

import (
	"errors"
	"flag"
	"io"
	"testing"

	"github.com/gpugate/gpugate/spark/agent"
)

// The agent's flags make its Config: a host is required (SPARK_HOST by
// default), the resident service takes all five commands or none, and on
// the service host the preflight's service-released check is the
// service's verify command unless another is given; -scratch takes
// absolute directories only.
func TestFlags_AHostAndAllFiveServiceCommandsOrNone(t *testing.T) {
	env := map[string]string{"SPARK_HOST": "spark-1"}
	parse := func(args ...string) (agent.Config, error) {
		var f agent.Flags
		fs := flag.NewFlagSet("agent", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f.RegisterAgent(fs, func(k string) string { return env[k] })
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return f.Config(nil, nil)
	}
	cfg, err := parse("-min-free-gb", "2")
	if err != nil || cfg.Host != "spark-1" || cfg.MinFree != 2<<30 || cfg.Service != nil {
		t.Errorf("defaults: %+v %v", cfg, err)
	}
	all := []string{"-service-drain-cmd", "d", "-service-stop-cmd", "s", "-service-verify-cmd", "v", "-service-start-cmd", "st", "-service-healthy-cmd", "h"}
	if cfg, err := parse(all...); err != nil || cfg.Service == nil || cfg.ServiceReleased != "v" {
		t.Errorf("all five service commands: %+v %v; the preflight's service-released check %q, want the verify command", cfg.Service, err, cfg.ServiceReleased)
	}
	if _, err := parse(all[:4]...); !errors.Is(err, agent.ErrConfig) {
		t.Errorf("two of five service commands: %v, want ErrConfig", err)
	}
	if cfg, err := parse("-scratch", "/tmp, /scratch/"); err != nil || len(cfg.Scratch) != 2 || cfg.Scratch[1] != "/scratch" {
		t.Errorf("-scratch: %q %v", cfg.Scratch, err)
	}
	if _, err := parse("-scratch", "/tmp,scratch"); !errors.Is(err, agent.ErrConfig) {
		t.Errorf("a relative -scratch directory: %v, want ErrConfig", err)
	}
	delete(env, "SPARK_HOST")
	if _, err := parse(); !errors.Is(err, agent.ErrConfig) {
		t.Errorf("no host: %v, want ErrConfig", err)
	}
}
