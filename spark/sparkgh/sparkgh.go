// Package sparkgh connects the spark fleet controller to GitHub:
// maintainers request fleet time from pull requests with labels or comment
// commands, the controller answers with check runs on the exact SHA,
// dispatches the admitted default-branch workflow with a one-job JIT
// runner, and mirrors a sanitized dashboard. Schedule queues the work the
// controller asks for itself (benchmarks, merge CI) at a branch's commit,
// dispatched the same way once granted; with Config.MergeQueue each merge
// group of GitHub's merge queue runs merge CI at its commit. A check's
// Re-run asks for its lane again. A one-job
// runner whose job never ran is removed when its lease ends. Redeliverer
// asks GitHub to send again the webhook deliveries the receiver missed or
// could not process, which GitHub never does by itself. It covers the
// maintainers' side, enabling a repository, the controller's schedules and
// merge-correctness CI. With an execution engine (Config.Engine, such as
// dstack) no runner is minted and no workflow dispatched: the engine runs
// each granted lane at its repository and commit (Target) and reports it
// (EngineRunning, EngineFinished), and the check passes only for a run
// that succeeded with its evidence receipt recorded.
package sparkgh

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpugate/gpugate/internal/cli"
	"github.com/gpugate/gpugate/internal/secret"
	"github.com/gpugate/gpugate/internal/textlimit"
	"github.com/gpugate/gpugate/spark"
)

// Secret is a credential (the webhook secret, a JIT runner config): it
// prints, logs and encodes as "[redacted]"; Reveal returns the value. It is
// the same type as rest.Secret.
type Secret = secret.Secret

// Lane is what a label or command asks for.
type Lane struct {
	Suite    string         `yaml:"suite"` // smoke or performance
	Topology spark.Topology `yaml:"topology"`
}

// Config is the integration's configuration.
type Config struct {
	WebhookSecret Secret
	Labels        map[string]Lane // label -> lane
	CommandPrefix string          // default /spark
	MinRole       string          // default maintain
	CheckName     string          // default "Spark test"
	Workflow      string          // default spark-test.yml
	RunnerLabels  []string        // the fleet's base labels
	HostNames     map[string]string
	Class         spark.Class // default ManualPR
	// MergeQueue, when set, serves the merge queue of its branches; nil
	// ignores merge_group deliveries.
	MergeQueue *MergeQueue
	// Engine is what runs a granted lane: "" or RunnerEngine, a one-job
	// JIT runner and the dispatched workflow (OnGrant); any other name
	// (the fleet file's engine: dstack), an execution engine the
	// deployment drives at the lane's repository and commit (Target),
	// which reports the run with EngineRunning and EngineFinished. Then
	// no runner is minted, handed off or removed and no workflow is
	// dispatched.
	Engine string
}

// DefaultConfig is the default labels, commands and runner labels.
func DefaultConfig(secretValue string) Config {
	return Config{
		WebhookSecret: Secret(secretValue),
		Labels: map[string]Lane{
			"spark-test":      {Suite: "smoke", Topology: spark.Single},
			"spark-test-long": {Suite: "performance", Topology: spark.Single},
			"spark-pair-test": {Suite: "smoke", Topology: spark.Pair},
		},
		RunnerLabels: []string{"self-hosted", "Linux", "ARM64", "waffuru-spark"},
		HostNames:    map[string]string{"spark-1": "Spark 1", "spark-2": "Spark 2"},
	}
}

func (c *Config) defaults() {
	if c.CommandPrefix == "" {
		c.CommandPrefix = "/spark"
	}
	if c.MinRole == "" {
		c.MinRole = "maintain"
	}
	if c.CheckName == "" {
		c.CheckName = "Spark test"
	}
	if c.Workflow == "" {
		c.Workflow = "spark-test.yml"
	}
	if c.Class == "" {
		c.Class = spark.ManualPR
	}
}

// PR is a pull request as the integration needs it.
type PR struct {
	Repo       string // owner/name
	Number     int
	HeadSHA    string
	Open       bool
	HeadRepoID int64
	BaseRepoID int64
	Labels     []string
	UpdatedAt  time.Time // when GitHub last changed it; zero when unknown
}

// Check is a check run's content.
type Check struct {
	Status     string // queued, in_progress, completed
	Conclusion string // success, failure, cancelled, neutral
	Title      string
	Summary    string
	// ExternalID, set when the check is created, is the request it
	// reports (the check run's external_id): a maintainer's Re-run names
	// it back.
	ExternalID string
}

// GitHub is the surface the integration uses; GitHubAPI is the go-github
// adapter.
type GitHub interface {
	Permission(ctx context.Context, repo, user string) (string, error)
	PullRequest(ctx context.Context, repo string, number int) (PR, error)
	CreateCheck(ctx context.Context, repo, sha, name string, c Check) (int64, error)
	UpdateCheck(ctx context.Context, repo string, id int64, name string, c Check) error
	Comment(ctx context.Context, repo string, number int, body string) error
	// Dispatch runs workflow at the repository's default branch.
	Dispatch(ctx context.Context, repo, workflow string, inputs map[string]any) error
	// MintJIT creates a one-job runner registration.
	MintJIT(ctx context.Context, name string, labels []string) (Secret, error)
	// SuiteChecks lists the check runs named name in check suite suite.
	SuiteChecks(ctx context.Context, repo string, suite int64, name string) ([]CheckRun, error)
	// Runners lists the runners registered where JIT runners are minted.
	Runners(ctx context.Context) ([]RegisteredRunner, error)
	// RemoveRunner deletes the registration of the runner with this exact
	// name; no such runner (it removed itself after its job) is not an
	// error.
	RemoveRunner(ctx context.Context, name string) error
	// BranchSHA returns the commit a branch points to now; an error
	// matching ErrNoBranch when there is no such branch.
	BranchSHA(ctx context.Context, repo, branch string) (string, error)
}

// RegisteredRunner is one runner registration as GitHub lists it.
type RegisteredRunner struct {
	Name string
	Busy bool // running a job
}

// CheckRun is one check run as GitHub lists it.
type CheckRun struct {
	ID         int64
	HeadSHA    string
	ExternalID string
}

// Annotation keys the integration stores on requests.
const (
	keyRepo   = "gh.repo"
	keyCheck  = "gh.check"
	keyLabel  = "gh.label"
	keyRunner = "gh.runner"
	keyPhase  = "gh.phase"
	keyJobURL = "gh.job_url" // the job that ran the suite, which the check links
	keySHA    = "gh.sha"     // the commit of a request that has no pull request
	keyCancel = "gh.cancel"
)

// The job's phases, as its workflow_job deliveries report them.
const (
	phaseRunning   = "running"
	phasePassed    = "passed"
	phaseConcluded = "job concluded " // and the job's conclusion
)

// Integration drives GitHub from the controller.
type Integration struct {
	cfg  Config
	ctrl *spark.Controller
	gh   GitHub
	log  *slog.Logger

	mu      sync.Mutex
	tracked map[string]Check // requests with a live check, and what it last showed
	opening map[string]bool  // requests whose check is being created
	// runners are the granted requests whose one-job runner was minted,
	// with how many times removing it failed.
	runners map[string]int
	// JITConfigs receives each minted JIT config with its runner name; the
	// deployment hands it to the host agent. It is never logged. An error
	// (the agent cannot receive it) fails the grant like a failed mint: the
	// workflow is not dispatched and the lease is released.
	JITConfigs func(runner string, cfg Secret) error
}

// Format prints the integration without its webhook secret, for every
// verb: fmt prints unexported fields raw, so a Secret among them would
// show.
func (in *Integration) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "sparkgh.Integration{webhook secret: %s}", secret.Redacted)
}

// ErrNoBranch is matched by GitHub.BranchSHA errors when the branch does
// not exist (GitHub answered 404).
var ErrNoBranch = errors.New("sparkgh: no such branch")

// ErrConfig is matched by Validate's errors.
var ErrConfig = errors.New("sparkgh: invalid configuration")

// roles are GitHub's repository roles, weakest first.
var roles = []string{"none", "read", "triage", "write", "maintain", "admin"}

// Validate checks the configuration New would run with (the webhook
// secret aside): a minimum role GitHub has (a misspelt one would admit
// every actor), lanes of a known suite and topology, and no empty label.
func (c Config) Validate() error {
	if c.MinRole != "" && slices.Index(roles, c.MinRole) < 1 {
		return fmt.Errorf("%w: MinRole %q: one of %s", ErrConfig, c.MinRole, strings.Join(roles[1:], ", "))
	}
	for label, lane := range c.Labels {
		switch {
		case strings.TrimSpace(label) == "":
			return fmt.Errorf("%w: a label name is empty", ErrConfig)
		case lane.Suite != "smoke" && lane.Suite != "performance":
			return fmt.Errorf("%w: label %s: suite %q: smoke or performance", ErrConfig, label, lane.Suite)
		case lane.Topology != spark.Single && lane.Topology != spark.Pair:
			return fmt.Errorf("%w: label %s: topology %q: single or pair", ErrConfig, label, lane.Topology)
		}
	}
	if slices.ContainsFunc(c.RunnerLabels, func(l string) bool { return strings.TrimSpace(l) == "" }) {
		return fmt.Errorf("%w: a runner label is empty", ErrConfig)
	}
	if mq := c.MergeQueue; mq != nil {
		switch {
		case len(mq.Branches) == 0 || slices.ContainsFunc(mq.Branches, func(b string) bool { return strings.TrimSpace(b) == "" }):
			return fmt.Errorf("%w: merge queue: name the base branches whose queue it serves (branches: [main])", ErrConfig)
		case mq.Suite != "smoke" && mq.Suite != "performance":
			return fmt.Errorf("%w: merge queue: suite %q: smoke or performance", ErrConfig, mq.Suite)
		case mq.Topology != spark.Single && mq.Topology != spark.Pair:
			return fmt.Errorf("%w: merge queue: topology %q: single or pair", ErrConfig, mq.Topology)
		}
	}
	return nil
}

// ErrNoSecret is returned by New without a webhook secret: go-github
// accepts unsigned payloads when no secret is expected.
var ErrNoSecret = errors.New("sparkgh: refusing to start without a webhook secret: set Config.WebhookSecret to the GitHub webhook's secret (8 characters or more)")

// New builds the integration. Wire its OnGrant into spark.Options.OnGrant.
func New(cfg Config, ctrl *spark.Controller, gh GitHub, log *slog.Logger) (*Integration, error) {
	if len(cfg.WebhookSecret) < 8 {
		return nil, ErrNoSecret
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.defaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Integration{cfg: cfg, ctrl: ctrl, gh: gh, log: log, tracked: map[string]Check{}, opening: map[string]bool{},
		runners: map[string]int{}}, nil
}

// SetController attaches the controller (it is built after the
// integration when OnGrant is wired).
func (in *Integration) SetController(c *spark.Controller) { in.ctrl = c }

func (in *Integration) hostName(h string) string {
	if n, ok := in.cfg.HostNames[h]; ok {
		return n
	}
	return h
}

// authorize is the decision a label or command makes: the actor's role,
// and never a fork.
func (in *Integration) authorize(ctx context.Context, pr PR, actor string) error {
	if pr.HeadRepoID == 0 || pr.HeadRepoID != pr.BaseRepoID {
		return fmt.Errorf("fork pull requests are never admitted to private hardware")
	}
	return in.hasRole(ctx, pr.Repo, actor)
}

// hasRole refuses an actor below Config.MinRole in repo.
func (in *Integration) hasRole(ctx context.Context, repo, actor string) error {
	role, err := in.gh.Permission(ctx, repo, actor)
	if err != nil {
		return fmt.Errorf("could not read @%s's permission: %v", actor, err)
	}
	if slices.Index(roles, role) < slices.Index(roles, in.cfg.MinRole) || slices.Index(roles, role) < 0 {
		return fmt.Errorf("@%s has the %s role; requesting fleet time needs %s or higher", actor, role, in.cfg.MinRole)
	}
	return nil
}

// askFor is request, with a request the controller refuses (a pair
// without a distributed test, an invalid one) answered on the pull
// request instead of failing the delivery.
func (in *Integration) askFor(ctx context.Context, pr PR, lane Lane, label string) error {
	err := in.request(ctx, pr, lane, label)
	if errors.Is(err, spark.ErrPairRefused) || errors.Is(err, spark.ErrInvalid) {
		return in.refuse(ctx, pr, err.Error())
	}
	return err
}

// request queues a lane for a PR and opens its check run, unless the same
// lane is already queued or running at that commit.
func (in *Integration) request(ctx context.Context, pr PR, lane Lane, label string) error {
	// The same work again (a delivery seen twice, a repeated command, a
	// command for what a label asked for) while the first is queued or
	// running is that one. A command's ask outlives the label's: the
	// label's removal no longer cancels it.
	live, err := in.ctrl.LiveForPR(ctx, pr.Repo, pr.Number)
	if err != nil {
		return err
	}
	if i := slices.IndexFunc(live, func(r spark.Request) bool {
		return r.PR != nil && r.PR.Repo == pr.Repo && r.PR.Number == pr.Number && r.PR.SHA == pr.HeadSHA &&
			r.Suite == lane.Suite && r.Topology == lane.Topology
	}); i >= 0 {
		in.log.Info("sparkgh.already_requested", "request", live[i].ID, "repo", pr.Repo, "pr", pr.Number, "sha", textlimit.ShortSHA(pr.HeadSHA))
		if label == "" && live[i].Annotations[keyLabel] != "" {
			return in.ctrl.Annotate(ctx, live[i].ID, keyLabel, "")
		}
		return nil
	}
	r, err := in.ctrl.Submit(ctx, spark.SubmitRequest{Class: in.cfg.Class, Topology: lane.Topology, Suite: lane.Suite,
		PR: &spark.PRRef{Repo: pr.Repo, Number: pr.Number, SHA: pr.HeadSHA}, Owner: spark.OwnerGitHub,
		Annotations: map[string]string{keyRepo: pr.Repo, keyLabel: label, keyPhase: "queued"}})
	if err != nil {
		return err
	}
	in.log.Info("sparkgh.queued", "request", r.ID, "repo", pr.Repo, "pr", pr.Number, "sha", textlimit.ShortSHA(pr.HeadSHA))
	return in.openCheck(ctx, r.ID)
}

// openCheck creates the check run of a queued GitHub request. When GitHub
// refuses, the request stays queued without one and Sync tries again.
func (in *Integration) openCheck(ctx context.Context, id string) error {
	// A webhook and Sync can both find the request without a check; only
	// one creates it.
	in.mu.Lock()
	busy := in.opening[id]
	in.opening[id] = true
	in.mu.Unlock()
	if busy {
		return nil
	}
	defer func() {
		in.mu.Lock()
		delete(in.opening, id)
		in.mu.Unlock()
	}()
	st, err := in.ctrl.Status(ctx, id)
	if err != nil {
		return err
	}
	r := st.Request
	if _, ok := in.checkID(r); ok {
		return nil // created meanwhile
	}
	shown := in.render(st)
	created := shown
	created.ExternalID = r.ID
	check, err := in.gh.CreateCheck(ctx, r.Annotations[keyRepo], commitOf(r), in.cfg.CheckName, created)
	if err != nil {
		return fmt.Errorf("create the check of request %s (Sync retries): %w", id, err)
	}
	if err := in.ctrl.Annotate(ctx, id, keyCheck, strconv.FormatInt(check, 10)); err != nil {
		return err
	}
	in.mu.Lock()
	in.tracked[id] = shown
	in.mu.Unlock()
	return nil
}

// render is the check a maintainer reads for a request's state.
func (in *Integration) render(st spark.Status) Check {
	r := st.Request
	sha := textlimit.ShortSHA(commitOf(r))
	hosts := make([]string, len(r.Hosts))
	for i, h := range r.Hosts {
		hosts[i] = in.hostName(h)
	}
	where := strings.Join(hosts, " + ")
	switch r.State {
	case spark.Queued:
		title := fmt.Sprintf("Spark test queued — position %d", st.Position)
		// The first host the reasons name is the request's first choice.
		best := -1
		for h, name := range in.cfg.HostNames {
			for _, phrase := range []string{"host " + h + " is running request", "host " + h + " is draining"} {
				if i := strings.Index(st.Pending, phrase); i >= 0 && (best < 0 || i < best) {
					best, title = i, fmt.Sprintf("%s draining — active job finishing", name)
				}
			}
		}
		return Check{Status: "queued", Title: title, Summary: "Waiting: " + in.sanitize(st.Pending)}
	case spark.Active:
		if r.Annotations[keyPhase] == phaseRunning {
			return Check{Status: "in_progress", Title: "Spark test running — exact SHA " + sha,
				Summary: fmt.Sprintf("Running the %s suite on %s at %s.", r.Suite, where, sha)}
		}
		return Check{Status: "in_progress", Title: where + " allocated — environment preparing",
			Summary: fmt.Sprintf("Reservation %s holds %s; the workflow is being dispatched for %s.", r.ID, where, sha)}
	case spark.Released:
		if r.Annotations[keyPhase] == phasePassed {
			digest := spark.ReceiptDigest(r)
			if digest == "" {
				// A pass is the suite's verdict with its evidence: without
				// the receipt the required check cannot pass.
				return Check{Status: "completed", Conclusion: "failure", Title: "Spark test passed without an evidence receipt",
					Summary: fmt.Sprintf("The %s suite passed on %s at %s, but its entry point recorded no evidence receipt (sparkctl receipt), so the check does not pass.", r.Suite, where, sha)}
			}
			job := ""
			if u := r.Annotations[keyJobURL]; u != "" {
				job = fmt.Sprintf(" [The job](%s) keeps it with its log.", u)
			}
			return Check{Status: "completed", Conclusion: "success", Title: "Spark test passed — evidence receipt recorded",
				Summary: fmt.Sprintf("The %s suite passed on %s at exact SHA %s. Evidence receipt `%s`.%s", r.Suite, where, sha, digest, job)}
		}
		return Check{Status: "completed", Conclusion: "failure", Title: "Spark test failed",
			Summary: fmt.Sprintf("The %s suite did not pass on %s at %s: %s", r.Suite, where, sha, r.Annotations[keyPhase])}
	case spark.Superseded:
		return Check{Status: "completed", Conclusion: "neutral", Title: "Spark test superseded", Summary: "A newer commit was pushed: " + r.Reason}
	case spark.Canceled:
		why := r.Reason
		if c := r.Annotations[keyCancel]; c != "" {
			why = c
		}
		return Check{Status: "completed", Conclusion: "cancelled", Title: "Spark test cancelled", Summary: "The queued request was cancelled: " + why}
	}
	return Check{Status: "completed", Conclusion: "failure", Title: "Spark test " + string(r.State), Summary: r.Reason}
}

// sanitize keeps request IDs and host names but nothing else sensitive:
// pending reasons come from the controller and carry no addresses.
func (in *Integration) sanitize(s string) string {
	for h, name := range in.cfg.HostNames {
		s = strings.ReplaceAll(s, "host "+h, name)
	}
	return s
}

func (in *Integration) checkID(r spark.Request) (int64, bool) {
	id, err := strconv.ParseInt(r.Annotations[keyCheck], 10, 64)
	return id, err == nil && id > 0
}

// Sync refreshes every tracked check from the controller and completes the
// checks of requests that ended (cancelled and superseded included); a
// live GitHub request without a check (GitHub refused it when the request
// was queued) gets one. Call it after each Reconcile.
func (in *Integration) Sync(ctx context.Context) error {
	in.mu.Lock()
	ids := make([]string, 0, len(in.tracked))
	for id := range in.tracked {
		ids = append(ids, id)
	}
	in.mu.Unlock()
	_, live, err := in.ctrl.Snapshot(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range live { // also pick up requests tracked before a restart
		_, ok := in.checkID(r)
		switch {
		case ok && !slices.Contains(ids, r.ID):
			ids = append(ids, r.ID)
		case !ok && r.Annotations[keyRepo] != "" && (r.PR != nil || r.Annotations[keyMerge] != ""):
			// A GitHub request whose check could not be created: the
			// maintainer (or the merge queue) must still see it.
			if err := in.openCheck(ctx, r.ID); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, id := range ids {
		st, err := in.ctrl.Status(ctx, id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		check, ok := in.checkID(st.Request)
		if !ok {
			continue
		}
		// Sync runs after every admission round (seconds apart): a check
		// is written only when what it shows changed, or the
		// installation's API budget would go on rewriting it.
		shown := in.render(st)
		in.mu.Lock()
		last, known := in.tracked[id]
		in.mu.Unlock()
		if !known || last != shown {
			if err := in.gh.UpdateCheck(ctx, st.Request.Annotations[keyRepo], check, in.cfg.CheckName, shown); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		in.mu.Lock()
		if st.Request.State == spark.Queued || st.Request.State == spark.Active {
			in.tracked[id] = shown
		} else {
			delete(in.tracked, id)
		}
		in.mu.Unlock()
	}
	errs = append(errs, in.sweepRunners(ctx, live))
	return errors.Join(errs...)
}

// sweepRunners removes the runners of ended requests whose job never ran
// on them (strandedRunner), so none is left registered, or online on a
// host its lease no longer holds (the runner "processes one job
// and deregisters"). live are the controller's live requests: an active
// one's runner is watched from here on (a restart forgets the grants it
// saw).
func (in *Integration) sweepRunners(ctx context.Context, live []spark.Request) error {
	if !in.cfg.runsOwnRunner() {
		return nil // none was minted
	}
	in.mu.Lock()
	for _, r := range live {
		if _, ok := in.runners[r.ID]; !ok && r.State == spark.Active && r.Annotations[keyRepo] != "" {
			in.runners[r.ID] = 0
		}
	}
	ids := slices.Collect(maps.Keys(in.runners))
	in.mu.Unlock()
	slices.Sort(ids)
	var errs []error
	for _, id := range ids {
		st, err := in.ctrl.Status(ctx, id)
		if errors.Is(err, spark.ErrNotFound) {
			in.forgetRunner(id)
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		switch r := st.Request; {
		case r.State == spark.Queued || r.State == spark.Active:
		case !strandedRunner(r):
			in.forgetRunner(id)
		default:
			if err := in.removeRunner(ctx, r); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func (in *Integration) forgetRunner(id string) {
	in.mu.Lock()
	delete(in.runners, id)
	in.mu.Unlock()
}

// SweepRegisteredRunners removes every idle registered runner named for
// a reservation (RunnerName) whose request has ended: what sweepRunners,
// called from Sync, cannot know after a restart (a lease that ended while
// sparkd was down), and a runner a host agent started after its lease
// ended. A busy runner is left: it removes itself after its job. A name
// the controller does not know is not the fleet's. It returns the runners
// it removed.
func (in *Integration) SweepRegisteredRunners(ctx context.Context) ([]string, error) {
	if !in.cfg.runsOwnRunner() {
		return nil, nil // none was minted
	}
	rs, err := in.gh.Runners(ctx)
	if err != nil {
		return nil, fmt.Errorf("sparkgh: list the registered runners: %w", err)
	}
	var removed []string
	var errs []error
	for _, reg := range rs {
		id, ok := RunnerRequest(reg.Name)
		if !ok || reg.Busy {
			continue
		}
		st, err := in.ctrl.Status(ctx, id)
		switch {
		case errors.Is(err, spark.ErrNotFound):
			continue
		case err != nil:
			errs = append(errs, err)
			continue
		case st.Request.State == spark.Queued || st.Request.State == spark.Active:
			continue
		}
		if err := in.gh.RemoveRunner(ctx, reg.Name); err != nil {
			errs = append(errs, fmt.Errorf("sparkgh: remove runner %s of ended request %s: %w", reg.Name, id, err))
			continue
		}
		in.forgetRunner(id)
		in.log.Info("sparkgh.runner_removed", "request", id, "runner", reg.Name, "why", "its lease has ended and it is idle")
		removed = append(removed, reg.Name)
	}
	return removed, errors.Join(errs...)
}

// removeTries bounds the removals of one ended request's runner.
const removeTries = 3

// strandedRunner reports whether an ended request's one-job runner may
// still be registered: its job never ran on it. A runner that ran its job
// removed itself; one whose job is still running at the lease's end
// removes itself when the job ends.
func strandedRunner(r spark.Request) bool {
	phase := r.Annotations[keyPhase]
	return phase != phaseRunning && phase != phasePassed && !strings.HasPrefix(phase, phaseConcluded)
}

// removeRunner removes an ended request's runner; a failure is tried
// again by the next sweep, up to removeTries times.
func (in *Integration) removeRunner(ctx context.Context, r spark.Request) error {
	runner := RunnerName(r.ID)
	err := in.gh.RemoveRunner(ctx, runner)
	in.mu.Lock()
	defer in.mu.Unlock()
	if err == nil {
		delete(in.runners, r.ID)
		in.log.Info("sparkgh.runner_removed", "request", r.ID, "runner", runner, "why", "the lease ended before its job ran on it")
		return nil
	}
	in.runners[r.ID]++
	n := in.runners[r.ID]
	in.log.Error("sparkgh.runner_remove_failed", "request", r.ID, "runner", runner, "try", n, "of", removeTries, "error", err,
		"hint", "its label is its reservation's own, so it takes no job; remove it from the runner group's settings")
	if n >= removeTries {
		delete(in.runners, r.ID)
	}
	return fmt.Errorf("sparkgh: remove runner %s of ended request %s: %w", runner, r.ID, err)
}

// commitOf is the commit a request runs: its pull request's head, or
// the commit a schedule or a merge group named.
func commitOf(r spark.Request) string {
	if r.PR != nil {
		return r.PR.SHA
	}
	return r.Annotations[keySHA]
}

// RunnerName is the one-job runner of a reservation.
func RunnerName(requestID string) string { return "spark-" + requestID }

// RunnerRequest is the reservation whose one-job runner is named runner;
// false for any other name.
func RunnerRequest(runner string) (string, bool) {
	id, ok := strings.CutPrefix(runner, "spark-")
	return id, ok && id != ""
}

// runnerLabels are a reservation's runner labels, which its workflow's
// runs-on names: the fleet's base labels, the topology's, and the runner's
// own name. The last is what binds the job to this runner: with the shared
// labels alone, GitHub may hand the job to another lease's runner, on
// another host, or to one whose lease has ended, and the preflight would
// check the wrong host.
func (c Config) runnerLabels(topology spark.Topology, requestID string) []string {
	topo := "spark-single"
	if topology == spark.Pair {
		topo = "spark-pair"
	}
	return append(slices.Clone(c.RunnerLabels), topo, RunnerName(requestID))
}

// OnGrant dispatches, with the runner engine (Config.Engine), the
// admitted default-branch workflow with the reservation's inputs and mints
// a one-job JIT runner with the allocation's cumulative labels and its own
// name as a label, which only this reservation's job asks for. Wire it
// into spark.Options.OnGrant. If minting, the hand-off to JITConfigs or
// the dispatch fails, the lease is released so the capacity is not held
// idle, and the check fails naming the step. With another engine it mints
// and dispatches nothing: the engine runs the lane.
func (in *Integration) OnGrant(r spark.Request) {
	sha := commitOf(r)
	if sha == "" || r.Annotations[keyRepo] == "" {
		return // not a GitHub request
	}
	if !in.cfg.runsOwnRunner() {
		// The engine runs it; a runner would be a second way in.
		in.log.Info("sparkgh.granted", "request", r.ID, "engine", in.cfg.Engine)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	runner := RunnerName(r.ID)
	labels := in.cfg.runnerLabels(r.Topology, r.ID)
	step, err := func() (string, error) {
		jit, err := in.gh.MintJIT(ctx, runner, labels)
		if err != nil {
			return "minting the one-job runner", err
		}
		in.mu.Lock()
		in.runners[r.ID] = 0 // removed by sweepRunners if its job never runs
		in.mu.Unlock()
		if in.JITConfigs != nil {
			if err := in.JITConfigs(runner, jit); err != nil {
				return "handing the runner's config to the host agent", err
			}
		}
		return "dispatching the workflow", in.gh.Dispatch(ctx, r.Annotations[keyRepo], in.cfg.Workflow, map[string]any{
			"reservation_id": r.ID, "head_sha": sha, "topology": string(r.Topology), "suite": r.Suite,
		})
	}()
	if err != nil {
		// The check run is public: it names the step; the error, which can
		// carry API addresses and file paths, goes to the controller's log.
		in.log.Error("sparkgh.dispatch_failed", "request", r.ID, "step", step, "error", err)
		if err := in.ctrl.Annotate(ctx, r.ID, keyPhase, step+" failed, so the lease was released (the controller's log has the error)"); err != nil {
			in.log.Error("sparkgh.annotate_failed", "request", r.ID, "error", err)
		}
		if err := in.ctrl.Release(ctx, r.ID, r.Token); err != nil {
			// The lease then ends at its duration; say so where an
			// operator looks.
			in.log.Error("sparkgh.release_failed", "request", r.ID, "error", err)
		}
		return
	}
	if err := in.ctrl.Annotate(ctx, r.ID, keyRunner, runner); err != nil {
		// Without the runner's name the job's webhooks cannot find the
		// request; the lease ends at its duration.
		in.log.Error("sparkgh.annotate_failed", "request", r.ID, "error", err)
	}
	in.log.Info("sparkgh.dispatched", "request", r.ID, "runner", runner, "labels", strings.Join(labels, ","))
}

// Scheduled is work the controller's own schedule asks for (scheduled
// benchmarks, controller-approved merge-correctness CI): no pull request, a branch's commit at
// the time it is asked for.
type Scheduled struct {
	Name     string         // the schedule's name: the request's owner is schedule:<name>
	Repo     string         // owner/name
	Branch   string         // whose current commit runs
	Class    spark.Class    // benchmark, merge-ci or background-ci
	Topology spark.Topology // default single
	Suite    string         // the workflow's suite input
	Duration time.Duration  // default: the class's lease length
}

// ErrSchedule is matched by Schedule's refusals of its argument.
var ErrSchedule = errors.New("sparkgh: invalid scheduled request")

// ScheduledClasses are the classes a schedule may ask for: development,
// service starts and pull-request work have entry points of their own.
var ScheduledClasses = []spark.Class{spark.Benchmark, spark.MergeCI, spark.BackgroundCI}

// Validate reports what Schedule would refuse in s without asking GitHub
// or the controller: a name, an owner/name repository, a branch, a suite,
// a scheduled class, and a topology single or pair (or none).
func (s Scheduled) Validate() error {
	_, _, ok := cli.ParseRepo(s.Repo)
	switch {
	case s.Name == "" || s.Branch == "" || s.Suite == "":
		return fmt.Errorf("%w: %q: name, branch and suite are required", ErrSchedule, s.Name)
	case !ok:
		return fmt.Errorf("%w: %s: repo %q: want owner/name", ErrSchedule, s.Name, s.Repo)
	case !slices.Contains(ScheduledClasses, s.Class):
		return fmt.Errorf("%w: %s: class %q: a schedule asks for %v", ErrSchedule, s.Name, s.Class, ScheduledClasses)
	case s.Topology != "" && s.Topology != spark.Single && s.Topology != spark.Pair:
		return fmt.Errorf("%w: %s: topology %q: single or pair", ErrSchedule, s.Name, s.Topology)
	case s.Duration < 0:
		return fmt.Errorf("%w: %s: duration %s is negative", ErrSchedule, s.Name, s.Duration)
	}
	return nil
}

// ScheduleOwner is the owner of the requests schedule name submits.
func ScheduleOwner(name string) string { return spark.OwnerSchedulePrefix + name }

// Schedule queues s at its branch's current commit, unless a request of
// the same schedule is still queued: that one is returned, and nothing
// more is queued. When the controller
// grants it, OnGrant mints a one-job runner and dispatches the workflow at
// that commit, as for a pull request; there is no check run, since there
// is no pull request to show it on. Only the scheduled classes are
// accepted: development, service starts and pull-request work have their
// own entry points.
func (in *Integration) Schedule(ctx context.Context, s Scheduled) (spark.Request, error) {
	if err := s.Validate(); err != nil {
		return spark.Request{}, err
	}
	// A schedule has at most one request waiting: when the fleet is too
	// busy to run the last one before the next is due, asking again would
	// only grow the queue.
	_, live, err := in.ctrl.Snapshot(ctx)
	if err != nil {
		return spark.Request{}, fmt.Errorf("sparkgh: schedule %s: %w", s.Name, err)
	}
	if i := slices.IndexFunc(live, func(r spark.Request) bool { return r.State == spark.Queued && r.Owner == ScheduleOwner(s.Name) }); i >= 0 {
		in.log.Warn("sparkgh.schedule_still_queued", "schedule", s.Name, "request", live[i].ID)
		return live[i], nil
	}
	sha, err := in.gh.BranchSHA(ctx, s.Repo, s.Branch)
	if err != nil {
		return spark.Request{}, fmt.Errorf("sparkgh: schedule %s: the commit of %s %s: %w", s.Name, s.Repo, s.Branch, err)
	}
	r, err := in.ctrl.Submit(ctx, spark.SubmitRequest{Class: s.Class, Topology: s.Topology, Suite: s.Suite, Duration: s.Duration,
		Owner: ScheduleOwner(s.Name), Annotations: map[string]string{keyRepo: s.Repo, keySHA: sha, keyPhase: "queued"}})
	if err != nil {
		return spark.Request{}, fmt.Errorf("sparkgh: schedule %s: %w", s.Name, err)
	}
	in.log.Info("sparkgh.scheduled", "schedule", s.Name, "request", r.ID, "repo", s.Repo, "sha", textlimit.ShortSHA(sha))
	return r, nil
}
