package agent

import (
	"cmp"
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gpugate/gpugate/spark"
)

// Flags are the host side's command-line settings (sparkctl agent and
// sparkctl preflight), for any command that runs the agent or its
// preflight: RegisterAgent or RegisterPreflight puts them on a flag set,
// Config and Preflight read them back.
type Flags struct {
	Host                   string
	WorkRoot, Runner, SMI  string
	RunnerUser, RunnerWork string
	Scratch                string
	Every                  time.Duration
	MinFreeGB              int
	pf                     PreflightOptions
	svc                    spark.ShellService
}

// register puts the named flags on fs.
func (f *Flags) register(fs *flag.FlagSet, getenv func(string) string, names ...string) {
	for _, name := range names {
		switch name {
		case "host":
			fs.StringVar(&f.Host, name, getenv("SPARK_HOST"), "the managed host this runs on (default SPARK_HOST)")
		case "work-root":
			fs.StringVar(&f.WorkRoot, name, "/var/lib/spark/work", "each lease's work directory is created in it and removed when the lease ends")
		case "runner":
			fs.StringVar(&f.Runner, name, "/opt/actions-runner/run.sh", "the Actions runner's run.sh, started with the lease's one-job config")
		case "runner-user":
			fs.StringVar(&f.RunnerUser, name, "", "the user the runner runs as (the agent runs as root); set it, so that the job cannot read this host's credential: each job then runs its own copy of the runner's install, which that user must not be able to write, and what that user owns in -scratch is removed after each lease")
		case "runner-work":
			fs.StringVar(&f.RunnerWork, name, "", "without -runner-user: the runner's own work folder, removed at each cleanup (default: _work beside -runner)")
		case "scratch":
			fs.StringVar(&f.Scratch, name, "", "with -runner-user: comma-separated directories where that user can leave files; everything it owns there is removed after each lease (default: /tmp,/var/tmp,/dev/shm,/dev/mqueue,/run/lock,/var/crash and its home directory)")
		case "every":
			fs.DurationVar(&f.Every, name, 10*time.Second, "heartbeat and poll cadence")
		case "nvidia-smi":
			fs.StringVar(&f.SMI, name, "nvidia-smi", "the nvidia-smi that counts the GPU's processes")
		case "workdir":
			fs.StringVar(&f.pf.WorkDir, name, ".", "the job's work directory")
		case "min-free-gb":
			fs.IntVar(&f.MinFreeGB, name, 50, "free space a job needs in its work directory, GiB")
		case "service-host":
			fs.BoolVar(&f.pf.ServiceHost, name, getenv("SPARK_SERVICE_HOST") == "true", "run the service-released check here too (it runs on the controller's service host whatever this says; default: SPARK_SERVICE_HOST=true)")
		case "interconnect-cmd":
			fs.StringVar(&f.pf.Interconnect, name, getenv("SPARK_INTERCONNECT_CMD"), "pair leases: a shell command that exits 0 when the link to the other host works (default SPARK_INTERCONNECT_CMD)")
		case "service-released-cmd":
			fs.StringVar(&f.pf.ServiceReleased, name, getenv("SPARK_SERVICE_RELEASED_CMD"), "a shell command that exits 0 when the resident service holds nothing on the GPU (default SPARK_SERVICE_RELEASED_CMD)")
		default:
			dst := map[string]*string{"service-drain-cmd": &f.svc.DrainCmd, "service-stop-cmd": &f.svc.StopCmd, "service-verify-cmd": &f.svc.VerifyReleasedCmd,
				"service-start-cmd": &f.svc.StartCmd, "service-healthy-cmd": &f.svc.HealthyCmd}[name]
			if dst == nil {
				panic("agent: no flag -" + name)
			}
			fs.StringVar(dst, name, "", "on the resident service's host: the service's "+strings.TrimSuffix(strings.TrimPrefix(name, "service-"), "-cmd")+" command (all five, or none)")
		}
	}
}

// AgentFlags and PreflightFlags are the flags RegisterAgent and
// RegisterPreflight define.
var (
	AgentFlags = []string{"host", "work-root", "runner", "runner-user", "runner-work", "scratch", "every", "nvidia-smi", "min-free-gb", "interconnect-cmd", "service-released-cmd",
		"service-drain-cmd", "service-stop-cmd", "service-verify-cmd", "service-start-cmd", "service-healthy-cmd"}
	PreflightFlags = []string{"host", "workdir", "min-free-gb", "service-host", "interconnect-cmd", "service-released-cmd"}
)

// RegisterAgent defines the agent's flags (AgentFlags) on fs.
func (f *Flags) RegisterAgent(fs *flag.FlagSet, getenv func(string) string) {
	f.register(fs, getenv, AgentFlags...)
}

// RegisterPreflight defines the preflight's flags (PreflightFlags) on fs.
func (f *Flags) RegisterPreflight(fs *flag.FlagSet, getenv func(string) string) {
	f.register(fs, getenv, PreflightFlags...)
}

// Config is the agent's Config from the flags, calling the controller
// through cl: no host, or some but not all five service commands, is
// ErrConfig.
func (f *Flags) Config(cl *spark.APIClient, log *slog.Logger) (Config, error) {
	if f.Host == "" {
		return Config{}, fmt.Errorf("%w: needs -host or SPARK_HOST: the managed host this agent runs on", ErrConfig)
	}
	// On the service host, the preflight's service-released check is the
	// service's own verify command unless another is given.
	var scratch []string
	if f.Scratch != "" {
		for _, d := range strings.Split(f.Scratch, ",") {
			if d = strings.TrimSpace(d); !filepath.IsAbs(d) {
				return Config{}, fmt.Errorf("%w: -scratch %q: each directory must be an absolute path", ErrConfig, d)
			}
			scratch = append(scratch, filepath.Clean(d))
		}
	}
	cfg := Config{Client: cl, Host: f.Host, Scratch: scratch, GPU: spark.NvidiaSMIApps{Path: f.SMI}, WorkRoot: f.WorkRoot, RunnerCmd: f.Runner, RunnerUser: f.RunnerUser, RunnerWork: f.RunnerWork,
		MinFree: uint64(max(f.MinFreeGB, 0)) << 30, Interconnect: f.pf.Interconnect, ServiceReleased: cmp.Or(f.pf.ServiceReleased, f.svc.VerifyReleasedCmd),
		Every: f.Every, Log: log}
	switch cmds := []string{f.svc.DrainCmd, f.svc.StopCmd, f.svc.VerifyReleasedCmd, f.svc.StartCmd, f.svc.HealthyCmd}; {
	case !slices.Contains(cmds, ""):
		svc := f.svc
		cfg.Service = &svc
	case slices.ContainsFunc(cmds, func(c string) bool { return c != "" }):
		return Config{}, fmt.Errorf("%w: the resident service needs all five -service-*-cmd commands (drain, stop, verify, start, healthy), or none on a host without it", ErrConfig)
	}
	return cfg, nil
}

// Preflight is the preflight's options from the flags. The host is what
// this machine says it is (-host or SPARK_HOST), never taken from the
// lease: none is ErrConfig.
func (f *Flags) Preflight() (PreflightOptions, error) {
	pf := f.pf
	pf.Host, pf.MinFree = f.Host, uint64(max(f.MinFreeGB, 0))<<30
	if pf.Host == "" {
		return pf, fmt.Errorf("%w: needs -host or SPARK_HOST: the managed host this job runs on, which the lease must hold (set it in the runner's environment, as for heartbeat)", ErrConfig)
	}
	return pf, nil
}
