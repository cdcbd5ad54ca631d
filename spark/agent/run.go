package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpugate/gpugate/internal/wait"
	"github.com/gpugate/gpugate/spark"
)

// Config is one host's agent: sparkctl agent is its flags.
type Config struct {
	// Client calls the controller with this host's own credential.
	Client *spark.APIClient
	Host   string
	// GPU counts the host's compute processes (default nvidia-smi); Disk
	// its free space (default statfs).
	GPU  spark.GPUProcesses
	Disk spark.DiskSpace
	// Processes finds what is left of a lease's job after its runner's
	// process group was stopped (default ProcEnviron on Linux; elsewhere
	// only the process group is stopped).
	Processes LeaseProcesses
	// WorkRoot holds each lease's work directory, WorkRoot/<lease>,
	// created for its job and removed when the lease ends.
	WorkRoot string
	// RunnerCmd starts the official Actions runner (its run.sh) for one
	// job; the lease's one-job config reaches it as the runner's
	// --jitconfig input through ACTIONS_RUNNER_INPUT_JITCONFIG, so it never
	// shows in the host's process list. RunnerEnv is added to the
	// runner's environment.
	RunnerCmd string
	RunnerEnv []string
	// RunnerWork is the runner's own work folder when it runs as the
	// agent's user, where the job's checkout, actions and tools go
	// (default: _work beside RunnerCmd, the Actions runner's); it is
	// removed at each cleanup.
	RunnerWork string
	// RunnerUser, when set, is the user the runner runs as (the agent
	// must be able to switch to it: root, or CAP_SETUID and CAP_SETGID),
	// owning the lease's work directory. Run the runner as a user of its
	// own: code under test then cannot read the agent's environment, its
	// token file or its memory, and so never holds the host's credential.
	// Each job then runs its own copy of the runner's install (the
	// directory of RunnerCmd, which that user must not be able to write)
	// in the lease's directory, with its HOME and TMPDIR there too, in
	// PID and IPC namespaces of its own (on Linux), with no core dumps,
	// and after the lease everything that user owns in Scratch is
	// removed: nothing a job writes reaches the next. A user who can log
	// in, or write its own home, is refused.
	RunnerUser string
	// Scratch are the directories where the runner's user can leave
	// files outside the lease's directory (default: /tmp, /var/tmp,
	// /dev/shm, /dev/mqueue, /run/lock, /var/crash and its home directory).
	Scratch []string
	// The preflight's settings: free bytes the job needs, a pair's link
	// check and the service-released check (shell commands).
	MinFree                       uint64
	Interconnect, ServiceReleased string
	// Service, on the resident service's host, runs the steps the
	// controller orders (drain, stop, verify released, start, healthy)
	// with the host's own commands.
	Service spark.ResidentService
	// Every is the heartbeat and poll cadence (default 10 s).
	Every time.Duration
	// JobGrace is how long, after the runner exited, the lease may stay
	// active before the agent releases it itself (GitHub's report of the
	// job's end normally releases it first, and a missed report is
	// delivered again within sparkd's 5-minute redelivery sweep, so the
	// default, 10 min, outlasts it).
	JobGrace time.Duration
	Log      *slog.Logger
	// OnEvent, when set, is told each step the agent takes (its Kind):
	// heartbeat, runner-started, runner-exited, preflight-failed,
	// released, cleaned, order.
	OnEvent func(Event)
}

// Event is one step of the agent.
type Event struct {
	Kind  string
	Lease string
	Err   error
}

// ErrConfig marks a Config the agent cannot run with.
var ErrConfig = errors.New("agent: invalid configuration")

// credentialEnv are the variables a job never inherits from the agent.
var credentialEnv = []string{"SPARK_TOKEN", "SPARK_TOKEN_FILE", "GITHUB_TOKEN", "GH_TOKEN", "RUNPOD_API_KEY", "GITHUB_APP_PRIVATE_KEY_FILE"}

// job is the runner the agent started for one lease.
type job struct {
	lease   string
	token   int64
	cmd     *exec.Cmd
	done    chan struct{} // closed when the runner exited
	exited  time.Time
	release bool // the agent released the lease itself
}

// Run is the host agent until ctx ends: every Every it heartbeats with
// the GPU's process count (none sent when it cannot be counted), takes
// the runner config of a lease granted here (once, over the API, held in
// memory only), runs the preflight and starts the runner for exactly that
// job, releases a lease whose runner exited without GitHub reporting the
// job's end, and after a lease ends stops what is left of its job, removes
// its work directory, counts the GPU's processes and acknowledges the
// cleanup. Before its first round it stops what an earlier agent of the
// host left running (clearHost). On the service host it runs the
// controller's orders. Only a Config it cannot run with is an error.
func Run(ctx context.Context, cfg Config) error {
	switch {
	case cfg.Client == nil || cfg.Host == "":
		return fmt.Errorf("%w: the controller's client and this host's name are required", ErrConfig)
	case cfg.WorkRoot == "" || !filepath.IsAbs(cfg.WorkRoot):
		return fmt.Errorf("%w: the work root %q must be an absolute directory", ErrConfig, cfg.WorkRoot)
	case cfg.RunnerCmd == "":
		return fmt.Errorf("%w: the runner command (the Actions runner's run.sh) is required", ErrConfig)
	case cfg.RunnerUser != "" && !filepath.IsAbs(cfg.RunnerCmd):
		return fmt.Errorf("%w: the runner command %q must be an absolute path with a runner user: the install is checked and copied where it lies", ErrConfig, cfg.RunnerCmd)
	case slices.ContainsFunc(cfg.Scratch, func(d string) bool { return !filepath.IsAbs(d) }):
		return fmt.Errorf("%w: every swept directory (-scratch) must be absolute: %q", ErrConfig, cfg.Scratch)
	}
	a := &runner{}
	if cfg.RunnerUser != "" {
		ids, err := lookupRunner(cfg.RunnerUser)
		if err != nil {
			return err
		}
		if err := checkNoLogin(cfg.RunnerUser); err != nil {
			return err
		}
		if err := checkHome(ids); err != nil {
			return err
		}
		if err := checkNoSubIDs(cfg.RunnerUser, ids.uid, subIDFiles); err != nil {
			return err
		}
		if err := checkHardlinks(protectedHardlinks); err != nil {
			return err
		}
		// The install is checked and copied where it really is: a
		// versioned install behind a link is its target.
		install, err := filepath.EvalSymlinks(filepath.Dir(cfg.RunnerCmd))
		if err != nil {
			return fmt.Errorf("%w: the runner's install: %w", ErrConfig, err)
		}
		if a.links, err = checkInstall(install, cfg.WorkRoot, ids); err != nil {
			return err
		}
		cfg.RunnerCmd = filepath.Join(install, filepath.Base(cfg.RunnerCmd))
		a.ids = &ids
	}
	if cfg.GPU == nil {
		cfg.GPU = spark.NvidiaSMIApps{}
	}
	if cfg.Disk == nil {
		cfg.Disk = spark.StatfsDisk{}
	}
	if cfg.Processes == nil {
		cfg.Processes = noProcesses{}
		if runtime.GOOS == "linux" {
			cfg.Processes = ProcEnviron{}
		}
	}
	if runtime.GOOS == "linux" && cfg.RunnerUser != "" {
		// The runner's user runs nothing but jobs: every process of it
		// is a job's, whatever environment it kept, whatever finds the
		// lease's other processes.
		a.runnerUser = ProcUser{UID: a.ids.uid, GID: a.ids.gid}
		cfg.Processes = AnyOf{cfg.Processes, a.runnerUser}
	}
	if cfg.RunnerWork == "" {
		cfg.RunnerWork = filepath.Join(filepath.Dir(cfg.RunnerCmd), "_work")
	}
	if cfg.Every <= 0 {
		cfg.Every = 10 * time.Second
	}
	if cfg.JobGrace <= 0 {
		cfg.JobGrace = 10 * time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.RunnerUser == "" {
		cfg.Log.Warn("agent.runner_user", "host", cfg.Host, "why", "the runner runs as the agent's own user, so a job could read this host's credential: set a runner user (-runner-user)")
	}
	// The work root is the agent's, entered by the runner's user: each
	// lease's directory in it is the runner's alone.
	if err := os.MkdirAll(cfg.WorkRoot, 0o755); err != nil {
		return fmt.Errorf("%w: the work root: %w", ErrConfig, err)
	}
	id, unlock, err := claimHost(cfg.WorkRoot, cfg.Host)
	if err != nil {
		return err
	}
	defer unlock()
	if a.ids != nil {
		// Checked once this agent is the host's only one: its link
		// check is in the work root.
		if err := a.ids.checkWorkRoot(cfg.RunnerCmd, cfg.WorkRoot); err != nil {
			return err
		}
		if err := a.ids.checkScratch(a.ids.scratchRoots(cfg.Scratch)); err != nil {
			return err
		}
	}
	a.cfg, a.instance = cfg, id
	a.clearHost()
	var wg sync.WaitGroup
	if cfg.Service != nil {
		wg.Go(func() { a.orders(ctx) })
	}
	t := time.NewTicker(cfg.Every)
	defer t.Stop()
	for {
		a.round(ctx)
		select {
		case <-ctx.Done():
			a.stopJob()
			wg.Wait()
			return nil
		case <-t.C:
		}
	}
}

type runner struct {
	cfg      Config
	job      *job
	instance string // this host's agent, across restarts: only it takes its leases' configs again
	// runnerUser finds the runner user's processes (when it has one of
	// its own, on Linux); ids is that user.
	runnerUser LeaseProcesses
	ids        *runnerIDs
	// links are the install's files and their link counts when it was
	// last checked, before the current job's copy.
	links installLinks
}

// clearHost stops what an earlier agent of this host left, before the
// first round: a killed agent leaves its runner running. Every process of
// a job started under the work root, and every process of the runner's
// user, is stopped, every lease's directory removed and the runner user's
// files swept; a job whose runner it was is started again from its
// config, in a fresh directory. What fails is logged, and the next job
// does not start while a process of the runner's user runs.
func (a *runner) clearHost() {
	var procs AnyOf
	if runtime.GOOS == "linux" {
		procs = append(procs, workProcs{workRoot: a.cfg.WorkRoot})
	}
	if a.runnerUser != nil {
		procs = append(procs, a.runnerUser)
	}
	if err := stopLease(procs, "any"); err != nil {
		a.event("restart-cleanup", "", err)
	}
	entries, err := os.ReadDir(a.cfg.WorkRoot)
	if err != nil {
		a.event("restart-cleanup", "", err)
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") {
			if err := removeTree(filepath.Join(a.cfg.WorkRoot, e.Name())); err != nil {
				a.event("restart-cleanup", "", err)
			}
		}
	}
	if a.ids != nil {
		if err := sweepUser(a.ids.scratchRoots(a.cfg.Scratch), jobFiles{a.ids.uid, a.links}); err != nil {
			a.event("restart-cleanup", "", err)
		}
	}
}

func (a *runner) event(kind, lease string, err error) {
	switch {
	case err != nil:
		a.cfg.Log.Warn("agent."+kind, "host", a.cfg.Host, "lease", lease, "error", err)
	case kind == "heartbeat":
		a.cfg.Log.Debug("agent."+kind, "host", a.cfg.Host)
	default:
		a.cfg.Log.Info("agent."+kind, "host", a.cfg.Host, "lease", lease)
	}
	if a.cfg.OnEvent != nil {
		a.cfg.OnEvent(Event{Kind: kind, Lease: lease, Err: err})
	}
}

// round is one heartbeat and one look at what the controller wants here.
func (a *runner) round(ctx context.Context) {
	cl, host := a.cfg.Client, a.cfg.Host
	_, err := Heartbeat(ctx, cl, host, a.cfg.GPU)
	a.event("heartbeat", "", err)
	st, err := cl.HostState(ctx, host)
	if err != nil {
		a.event("state", "", err)
		return
	}
	if j := a.job; j != nil && j.done != nil {
		select {
		case <-j.done:
			if j.exited.IsZero() {
				j.exited = time.Now()
				var exit error
				code := j.cmd.ProcessState.ExitCode()
				switch {
				case a.ids != nil && code == 126:
					exit = fmt.Errorf("agent: the runner %s could not be run as %s (exit 126: not executable, or on a noexec mount)", a.cfg.RunnerCmd, a.ids.name)
				case a.ids != nil && code == 127:
					exit = fmt.Errorf("agent: the runner %s could not be run as %s (exit 127: not found, or its interpreter is missing)", a.cfg.RunnerCmd, a.ids.name)
				case code != 0:
					exit = fmt.Errorf("agent: the runner exited with %s", j.cmd.ProcessState)
				}
				a.event("runner-exited", j.lease, exit)
				if a.ids != nil && (code == 126 || code == 127) && !j.release && st.Mode == spark.Leased && st.Lease == j.lease {
					// The shell that starts the runner could not run it
					// (126: not executable, 127: not found): the job
					// never started, so the lease goes back now.
					j.release = true
					a.event("released", j.lease, cl.Release(ctx, j.lease, j.token))
				}
			}
		default:
		}
	}
	switch {
	case st.Mode == spark.Leased && st.Lease != "" && (a.job == nil || a.job.lease != st.Lease):
		a.start(ctx, st.Lease)
	case st.Mode == spark.Leased && a.job != nil && a.job.lease == st.Lease && !a.job.exited.IsZero() && !a.job.release &&
		time.Since(a.job.exited) >= a.cfg.JobGrace:
		// The job ended on this host but nothing released its lease:
		// say so, so the host is not held idle until the lease expires.
		a.job.release = true
		a.event("released", st.Lease, cl.Release(ctx, st.Lease, a.job.token))
	case st.Mode == spark.Cleaning && st.Ended != "":
		a.cleanup(ctx, st.Ended)
	}
}

// start takes lease's runner config, runs the preflight and starts the
// runner. A lease without a config here (a development lease, a config
// not minted yet) starts nothing; a pair's second host runs the preflight
// only; a failed preflight starts nothing and releases the lease; a
// config another agent process for this host took (ErrConflict) is left
// to it.
func (a *runner) start(ctx context.Context, lease string) {
	cl := a.cfg.Client
	a.job = &job{lease: lease}
	asg, err := cl.TakeRunner(ctx, a.cfg.Host, a.instance)
	if errors.Is(err, spark.ErrNotFound) || (err == nil && asg.Lease != lease) {
		a.job = nil // nothing to run here (yet): look again next round
		return
	}
	if err != nil {
		a.event("runner-config", lease, err)
		a.job = nil
		return
	}
	a.job.token = asg.Token
	fail := func(kind string, err error) {
		a.event(kind, lease, err)
		a.job.release = true
		a.event("released", lease, cl.Release(ctx, lease, asg.Token))
	}
	// Each job starts in a directory of its own, made anew: what an
	// earlier try at the lease left there is gone.
	dir := filepath.Join(a.cfg.WorkRoot, lease)
	if err := removeTree(dir); err != nil {
		fail("preflight-failed", err)
		return
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		fail("preflight-failed", err)
		return
	}
	// Nothing of the runner's user may run before the job's runner
	// starts: a process left from earlier work could read the job's
	// credentials.
	if err := a.userIdle(lease); err != nil {
		fail("preflight-failed", err)
		return
	}
	pf := PreflightOptions{Host: a.cfg.Host, WorkDir: dir, MinFree: a.cfg.MinFree, Interconnect: a.cfg.Interconnect,
		ServiceReleased: a.cfg.ServiceReleased, GPU: a.cfg.GPU, Disk: a.cfg.Disk}
	if err := Preflight(ctx, cl, lease, pf); err != nil {
		fail("preflight-failed", err)
		return
	}
	if asg.JITConfig == "" {
		// A pair's second host: the job runs on the first and reaches
		// this one over the interconnect.
		a.event("preflight-passed", lease, nil)
		return
	}
	cmd := exec.Command(a.cfg.RunnerCmd)
	cmd.Dir = dir
	newGroup(cmd) // its whole process group is stopped at cleanup
	var private []string
	if a.ids != nil {
		// The job's own runner, home and temporary directory, all in the
		// lease's directory: what it writes goes with it. They are made
		// while that directory is still root's alone, and it is given to
		// the runner's user last: nothing of that user's can move what
		// root makes there.
		home, tmp, own := filepath.Join(dir, "home"), filepath.Join(dir, "tmp"), filepath.Join(dir, "runner")
		var err error
		for _, d := range []string{home, tmp} {
			if err == nil {
				err = os.Mkdir(d, 0o700)
			}
			if err == nil {
				err = os.Lchown(d, int(a.ids.uid), int(a.ids.gid))
			}
		}
		if install := filepath.Dir(a.cfg.RunnerCmd); err == nil {
			// Checked again for each job: the install may have changed
			// since the agent started.
			if a.links, err = checkInstall(install, a.cfg.WorkRoot, *a.ids); err == nil {
				err = a.links.leftovers()
			}
			if err == nil {
				err = freshRunner(install, own, *a.ids)
			}
		}
		if err == nil {
			err = asUser(cmd, dir, *a.ids)
		}
		if err != nil {
			fail("runner-started", fmt.Errorf("agent: the job's own runner in %s: %w", dir, err))
			return
		}
		// Looked for again now that the directory is the user's: a
		// process of it that started since could reach into it.
		if err := a.userIdle(lease); err != nil {
			fail("runner-started", err)
			return
		}
		cmd.Path = filepath.Join(own, filepath.Base(a.cfg.RunnerCmd))
		cmd.Args[0] = cmd.Path
		isolate(cmd)
		noCoreDumps(cmd)
		private = []string{"HOME=" + home, "TMPDIR=" + tmp}
	}
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); !slices.Contains(credentialEnv, name) && name != "ACTIONS_RUNNER_INPUT_JITCONFIG" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, a.cfg.RunnerEnv...)
	cmd.Env = append(cmd.Env, private...)
	// The job's own credential (RoleJob), never the host's: its preflight
	// and receipt steps use it, and it can do nothing else.
	cmd.Env = append(cmd.Env, "SPARK_ADDR="+cl.Addr(), "SPARK_TOKEN="+asg.JobToken.Reveal(),
		"SPARK_HOST="+a.cfg.Host, "SPARK_LEASE="+lease, "SPARK_WORK_DIR="+dir,
		"SPARK_INTERCONNECT_CMD="+a.cfg.Interconnect, "SPARK_SERVICE_RELEASED_CMD="+a.cfg.ServiceReleased,
		"ACTIONS_RUNNER_INPUT_JITCONFIG="+asg.JITConfig.Reveal())
	if err := cmd.Start(); err != nil {
		fail("runner-started", err)
		return
	}
	done := make(chan struct{})
	a.job.cmd, a.job.done = cmd, done
	go func() { cmd.Wait(); close(done) }()
	a.event("runner-started", lease, nil)
}

// userIdle is nil when no process of the runner's user runs (or it has
// none of its own): one left from earlier work, or started by other means
// than a job, could read the job's credentials.
func (a *runner) userIdle(lease string) error {
	if a.runnerUser == nil {
		return nil
	}
	pids, err := a.runnerUser.Of(lease)
	if err == nil && len(pids) > 0 {
		err = fmt.Errorf("%w: %d process(es) of the runner's user run before this lease's job (pids %v): stop them", ErrProcesses, len(pids), pids)
	}
	return err
}

// stopJob stops what is left of the current job's runner: its whole
// process group, then waits for it.
func (a *runner) stopJob() {
	j := a.job
	if j == nil || j.cmd == nil {
		return
	}
	select {
	case <-j.done:
	default:
		killGroup(j.cmd)
		<-j.done
	}
}

// cleanup is the host's cleanup after lease ended: no process of its job
// remains (its runner's process group and every process carrying the
// lease, stopped), its work directory is gone, and the GPU's processes
// are counted for the acknowledgement. When a process of the lease
// survives, or the GPU's processes cannot be counted, nothing is
// acknowledged: the host stays out of service and the next round tries
// again.
func (a *runner) cleanup(ctx context.Context, lease string) {
	if a.job != nil && a.job.lease == lease {
		a.stopJob()
	}
	if err := stopLease(a.cfg.Processes, lease); err != nil {
		a.event("cleaned", lease, err)
		return
	}
	// The lease's directory, and, with no runner user of its own, the
	// runner's work folder, where the job's checkout, actions and tools
	// are; with one, everything that user owns outside the lease's
	// directory: the next job starts clean.
	dirs := []string{filepath.Join(a.cfg.WorkRoot, lease)}
	if a.ids == nil {
		dirs = append(dirs, a.cfg.RunnerWork)
	}
	for _, dir := range dirs {
		if err := removeTree(dir); err != nil {
			a.event("cleaned", lease, err)
			return
		}
	}
	if a.ids != nil {
		if err := sweepUser(a.ids.scratchRoots(a.cfg.Scratch), jobFiles{a.ids.uid, a.links}); err != nil {
			a.event("cleaned", lease, err)
			return
		}
	}
	apps, err := a.cfg.GPU.ComputeApps(ctx)
	if err != nil {
		a.event("cleaned", lease, fmt.Errorf("agent: the GPU's processes cannot be counted, so the cleanup is not acknowledged: %w", err))
		return
	}
	if err := a.cfg.Client.AckCleanup(ctx, a.cfg.Host, lease, len(apps)); err != nil {
		a.event("cleaned", lease, err)
		return
	}
	if a.job != nil && a.job.lease == lease {
		a.job = nil
	}
	a.event("cleaned", lease, nil)
}

// orders runs the resident service's steps the controller orders, until
// ctx ends.
func (a *runner) orders(ctx context.Context) {
	cl, s := a.cfg.Client, a.cfg.Service
	steps := map[string]func(context.Context) error{"drain": s.Drain, "stop": s.Stop, "verify_released": s.VerifyReleased, "start": s.Start, "healthy": s.Healthy}
	for ctx.Err() == nil {
		o, ok, err := cl.NextOrder(ctx, a.cfg.Host, 30*time.Second)
		if err != nil || !ok {
			if err != nil && ctx.Err() == nil {
				a.event("order", "", err)
				_ = wait.For(ctx, a.cfg.Every) // the controller is unreachable: try again later
			}
			continue
		}
		step, known := steps[o.Step]
		failure := ""
		if !known {
			failure = fmt.Sprintf("this agent runs no step %q", o.Step)
		} else if err := step(ctx); err != nil {
			failure = err.Error()
		}
		if err := cl.ReportOrder(ctx, a.cfg.Host, o.ID, failure); err != nil {
			a.event("order", o.Step, err)
			continue
		}
		a.event("order", o.Step, nil)
	}
}
