package process

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/reconcilerhq/reconciler/internal/runobserve"
	"github.com/reconcilerhq/reconciler/internal/tracing"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// Defaults used when Config leaves a knob at zero.
const (
	DefaultStopGrace = 10 * time.Second
	DefaultHeartbeat = 30 * time.Second
	// DefaultLandWait bounds how long an observation waits for the run to
	// reach the state it belongs to (the launch's write landing, the run
	// becoming running) before it is dropped; the heartbeat staleness rule
	// then catches the run.
	DefaultLandWait = 2 * time.Minute
	// DefaultPoll is how often the supervisor of an adopted agent (not
	// this runtime's child) is checked for its end.
	DefaultPoll = 200 * time.Millisecond
	// StartWait bounds the wait for a supervisor's answer to a start.
	StartWait = 30 * time.Second
	// LogFile is the agent's output file in its working directory.
	LogFile = "agent.log"
	// ReviewFile is where a review agent writes its review, in its
	// working directory (RECONCILER_REVIEW_FILE); ReviewEventFile its
	// verdict: COMMENT (default), APPROVE or REQUEST_CHANGES.
	ReviewFile      = "review.md"
	ReviewEventFile = "review-event"
	// MaxReview is the most bytes of a review brought back; the rest is
	// cut, and the review says so.
	MaxReview = 60000
)

// ErrNoCommand is returned by a launch when no agent command is configured.
var ErrNoCommand = errors.New("no agent command configured")

// Config says what an agent process is and how it is treated.
type Config struct {
	// Command is the program to run (looked up in PATH when it has no
	// slash); Args its arguments.
	Command string
	Args    []string
	// Supervisor is the command line that runs Supervise (the reconciler
	// binary and SuperviseArg); the agent runs under it, so it outlives
	// the runtime and a restarted runtime learns its exit (required).
	Supervisor []string
	// Env are plain environment variables of the agent.
	Env map[string]string
	// Secrets are environment variables whose values are resolved through
	// the SecretResolver when the agent starts; they are never stored or
	// logged.
	Secrets map[string]release.SecretRef
	// WorkRoot holds one working directory per run, WorkRoot/<kind>/<id>,
	// and the launches' state directories, WorkRoot/.state.
	WorkRoot string
	// StopGrace is the time between SIGTERM and SIGKILL (default 10 s).
	StopGrace time.Duration
	// Heartbeat is how often a live process's heartbeat is written
	// (default 30 s).
	Heartbeat time.Duration
	// LandWait bounds the wait for the run's state (DefaultLandWait).
	LandWait time.Duration
	// Poll is how often an adopted agent's end is looked for
	// (DefaultPoll).
	Poll time.Duration
	// Keys bounds the record of launch and release keys acted on
	// (runobserve.DefaultKeys each).
	Keys int
	// Credential, when set, runs the supervisor and the agent as this
	// user and group (the runtime must run as root): the agent can then
	// read neither serve's /proc/<pid>/environ nor its files. The run's
	// working and state directories are given to that user, and the
	// directories above them under WorkRoot made traversable (0711).
	Credential *syscall.Credential
}

// envName is what an environment variable name may look like.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Validate checks the configuration, naming the wrong field.
func (c Config) Validate() error {
	if c.WorkRoot == "" {
		return errors.New("process runtime: WorkRoot is empty")
	}
	if len(c.Supervisor) == 0 || c.Supervisor[0] == "" {
		return errors.New("process runtime: Supervisor is empty (the reconciler binary and " + SuperviseArg + ")")
	}
	for name := range c.Env {
		if !envName.MatchString(name) {
			return fmt.Errorf("process runtime: Env: %q is not a variable name", name)
		}
	}
	for name := range c.Secrets {
		if !envName.MatchString(name) {
			return fmt.Errorf("process runtime: Secrets: %q is not a variable name", name)
		}
		if _, ok := c.Env[name]; ok {
			return fmt.Errorf("process runtime: %s is both a plain and a secret variable", name)
		}
	}
	if c.StopGrace < 0 || c.Heartbeat < 0 || c.LandWait < 0 || c.Poll < 0 || c.Keys < 0 {
		return errors.New("process runtime: StopGrace, Heartbeat, LandWait, Poll and Keys must not be negative")
	}
	return nil
}

// Options are the runtime's collaborators.
type Options struct {
	// Store receives the observations.
	Store ports.RunStore
	// Secrets resolves Config.Secrets; nil refuses any secret.
	Secrets ports.SecretResolver
	// Clock stamps observations (default ports.SystemClock).
	Clock ports.Clock
	// Wake enqueues the run after a phase change (nil: no wake-up).
	Wake func(context.Context, reconcile.RunRef)
	// Logger logs starts, exits and failed writes (default slog.Default).
	Logger *slog.Logger
	// Exit, when set, may add to the observation of an exit before it is
	// written (the pull request a repo agent's branch became); workDir is
	// the agent's working directory.
	Exit func(ctx context.Context, ref reconcile.RunRef, workDir string, o *ports.RunObserveParams)
}

// Runtime is the local-process ports.AgentRuntime.
type Runtime struct {
	cfg Config
	out runobserve.Writer
	// launches and releases are the keys acted on (bounded); a run's
	// current process keeps its own key besides.
	launches, releases *runobserve.Keys
	secrets            ports.SecretResolver
	quit               chan struct{}

	mu     sync.Mutex
	procs  map[reconcile.RunRef]*proc
	closed bool
	wg     sync.WaitGroup
}

var _ ports.AgentRuntime = (*Runtime)(nil)

// New returns a runtime for cfg; it starts nothing until a launch, and
// adopts nothing until Start.
func New(cfg Config, opt Options) (*Runtime, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opt.Store == nil {
		return nil, errors.New("process runtime: Options.Store is nil")
	}
	if cfg.StopGrace == 0 {
		cfg.StopGrace = DefaultStopGrace
	}
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.LandWait == 0 {
		cfg.LandWait = DefaultLandWait
	}
	if cfg.Poll == 0 {
		cfg.Poll = DefaultPoll
	}
	r := &Runtime{cfg: cfg, out: runobserve.NewWriter(opt.Store, opt.Clock, opt.Wake, opt.Logger, opt.Exit, cfg.LandWait),
		launches: runobserve.NewKeys(cfg.Keys), releases: runobserve.NewKeys(cfg.Keys), quit: make(chan struct{}),
		secrets: opt.Secrets, procs: map[reconcile.RunRef]*proc{}}
	return r, nil
}

// proc is one supervised agent: started by this runtime, or adopted.
type proc struct {
	ref reconcile.RunRef
	key string
	// dir is the launch's state directory.
	dir     string
	pid     int // the supervisor's: its process group and session
	started time.Time
	adopted bool
	// done is closed once the supervisor ended; exit, exitErr and lost
	// are set before.
	done    chan struct{}
	exit    int
	exitErr string
	// lost: no exit status was recorded (the supervisor was killed).
	lost bool
	// stop is closed when the process is released or replaced, or the
	// runtime closes: its observations end.
	stop     chan struct{}
	stopOnce sync.Once
	// released is set when the runtime let the process go: its state
	// directory is removed once it ended.
	released bool
}

// Branch is the branch a repo run's agent pushes its work to; its pull
// request is opened from it.
func Branch(ref reconcile.RunRef) string { return "reconciler/" + safeName(ref.ID) }

// WorkDir returns the working directory of a run's agent.
func (r *Runtime) WorkDir(ref reconcile.RunRef) string {
	return filepath.Join(r.cfg.WorkRoot, safeName(string(ref.Kind)), safeName(ref.ID))
}

// KeysRecorded is the number of launch and release keys the runtime
// holds in its record (at most twice Config.Keys).
func (r *Runtime) KeysRecorded() int { return r.launches.Len() + r.releases.Len() }

// AgentLaunch starts the run's agent process under its supervisor,
// stopping a previous attempt's first. A key seen before, or the key of
// the run's current (possibly adopted) process, is a no-op.
func (r *Runtime) AgentLaunch(ctx context.Context, p ports.AgentLaunchParams) error {
	if r.cfg.Command == "" {
		return fmt.Errorf("launch %s: %w (serve --agent-command)", p.Ref, ErrNoCommand)
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return fmt.Errorf("launch %s: process runtime closed", p.Ref)
	}
	prev := r.procs[p.Ref]
	if (prev != nil && prev.key == p.IdempotencyKey) || !r.launches.Claim(p.IdempotencyKey) {
		r.mu.Unlock()
		return nil
	}
	delete(r.procs, p.Ref)
	r.mu.Unlock()
	if prev != nil {
		r.terminate(prev, "agent.replace")
		<-prev.done
		r.forget(prev)
	}
	pr, err := r.start(ctx, p)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.launches.Forget(p.IdempotencyKey) // a failed launch may be retried
		return err
	}
	r.procs[p.Ref] = pr
	r.wg.Add(1)
	go r.observe(pr)
	return nil
}

// start starts the supervisor of a launch and waits for its answer.
func (r *Runtime) start(ctx context.Context, p ports.AgentLaunchParams) (*proc, error) {
	dir := r.WorkDir(p.Ref)
	state := r.stateDir(p.Ref, p.IdempotencyKey)
	_ = os.RemoveAll(state) // a failed start's leftovers
	for _, d := range []string{dir, state} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("launch %s: %w", p.Ref, err)
		}
	}
	env, err := r.environ(ctx, p, dir)
	if err != nil {
		return nil, err
	}
	started := r.out.Clock.Now()
	if err := writeJSON(state, launchFile, launchRecord{Kind: p.Ref.Kind, ID: p.Ref.ID, Key: p.IdempotencyKey, Started: started}); err != nil {
		return nil, fmt.Errorf("launch %s: state directory: %w", p.Ref, err)
	}
	if err := r.handOver(dir, state); err != nil {
		_ = os.RemoveAll(state)
		return nil, fmt.Errorf("launch %s: %w", p.Ref, err)
	}
	pr, err := r.spawn(p, dir, state, env)
	if err != nil {
		_ = os.RemoveAll(state)
		return nil, err
	}
	pr.started = started
	r.out.Logger.Info("agent.start", "kind", p.Ref.Kind, "id", p.Ref.ID, "purpose", p.Purpose, "pid", pr.pid, "dir", dir)
	return pr, nil
}

// spawn runs the supervisor (in a session of its own) with the locked
// lock file and the answer pipe, and reads its answer.
func (r *Runtime) spawn(p ports.AgentLaunchParams, dir, state string, env []string) (*proc, error) {
	out, err := os.OpenFile(filepath.Join(dir, LogFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("launch %s: %w", p.Ref, err)
	}
	defer out.Close() // the child has its own copy once started
	lock, err := os.OpenFile(filepath.Join(state, lockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("launch %s: state directory: %w", p.Ref, err)
	}
	defer lock.Close() // the supervisor's copy holds the lock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return nil, fmt.Errorf("launch %s: lock state directory: %w", p.Ref, err)
	}
	answer, ready, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("launch %s: %w", p.Ref, err)
	}
	defer answer.Close()
	args := append(append(slices.Clone(r.cfg.Supervisor[1:]), state, r.cfg.Command), r.cfg.Args...)
	cmd := exec.Command(r.cfg.Supervisor[0], args...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, out, out
	cmd.ExtraFiles = []*os.File{lock, ready} // descriptors 3 and 4
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: r.cfg.Credential}
	err = cmd.Start()
	ready.Close()
	if err != nil {
		return nil, fmt.Errorf("launch %s: start supervisor %s: %w", p.Ref, r.cfg.Supervisor[0], err)
	}
	pr := &proc{ref: p.Ref, key: p.IdempotencyKey, dir: state, pid: cmd.Process.Pid, done: make(chan struct{}), stop: make(chan struct{})}
	go pr.reap(cmd)
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(answer).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	t := time.NewTimer(StartWait)
	defer t.Stop()
	select {
	case s := <-line:
		if s == "ok" {
			return pr, nil
		}
		<-pr.done
		if s == "" {
			s = fmt.Sprintf("supervisor exited (%d) without an answer", pr.exit)
		}
		return nil, fmt.Errorf("launch %s: start %s: %s", p.Ref, r.cfg.Command, strings.TrimPrefix(s, "error: "))
	case <-t.C:
		_ = syscall.Kill(-pr.pid, syscall.SIGKILL)
		<-pr.done
		return nil, fmt.Errorf("launch %s: the supervisor did not answer within %s", p.Ref, StartWait)
	}
}

// handOver gives the run's working and state directories (and what is in
// the state directory) to Config.Credential's user, and makes the
// directories between them and WorkRoot traversable; without a
// Credential it does nothing.
func (r *Runtime) handOver(dirs ...string) error {
	c := r.cfg.Credential
	if c == nil {
		return nil
	}
	root := filepath.Clean(r.cfg.WorkRoot)
	for _, d := range dirs {
		err := filepath.WalkDir(d, func(path string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(path, int(c.Uid), int(c.Gid))
		})
		if err != nil {
			return fmt.Errorf("give %s to uid %d: %w", d, c.Uid, err)
		}
		for up := filepath.Dir(d); strings.HasPrefix(up, root); up = filepath.Dir(up) {
			if err := os.Chmod(up, 0o711); err != nil {
				return fmt.Errorf("make %s traversable: %w", up, err)
			}
			if up == root {
				break
			}
		}
	}
	return nil
}

// environ builds the agent's environment: PATH, the run's identity, the
// configured variables and the resolved secrets.
func (r *Runtime) environ(ctx context.Context, p ports.AgentLaunchParams, dir string) ([]string, error) {
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"RECONCILER_RUN_KIND=" + string(p.Ref.Kind),
		"RECONCILER_RUN_ID=" + p.Ref.ID,
		"RECONCILER_PURPOSE=" + string(p.Purpose),
		"RECONCILER_TRIGGER=" + p.Trigger,
		"RECONCILER_WORKDIR=" + dir,
	}
	if p.Ref.Kind == reconcile.KindRepo {
		row, err := r.out.Store.RunGet(ctx, p.Ref)
		if err != nil {
			return nil, fmt.Errorf("launch %s: read run: %w", p.Ref, err)
		}
		env = append(env, "RECONCILER_REPO="+row.Repo, "RECONCILER_BRANCH="+Branch(p.Ref))
	}
	if p.Ref.Kind == reconcile.KindPRReview {
		env = append(env, "RECONCILER_REVIEW_FILE="+filepath.Join(dir, ReviewFile))
	}
	if tp := tracing.Traceparent(ctx); tp != "" {
		env = append(env, tracing.Env+"="+tp)
	}
	for k, v := range r.cfg.Env {
		env = append(env, k+"="+v)
	}
	for k, ref := range r.cfg.Secrets {
		if r.secrets == nil {
			return nil, fmt.Errorf("launch %s: secret variable %s: no secret resolver", p.Ref, k)
		}
		v, err := r.secrets.Resolve(ctx, ref)
		if err != nil {
			return nil, fmt.Errorf("launch %s: secret variable %s: %w", p.Ref, k, err)
		}
		env = append(env, k+"="+v)
	}
	return env, nil
}

// reap waits for the supervisor this runtime started and records how the
// agent ended: the supervisor's exit.json, else (it was killed) its own
// status.
func (pr *proc) reap(cmd *exec.Cmd) {
	err := cmd.Wait()
	code, text, lost := ended(pr.dir)
	if lost {
		code, text = cmd.ProcessState.ExitCode(), ""
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
		if err != nil {
			text = err.Error()
		}
	}
	pr.exit, pr.exitErr = code, text
	close(pr.done)
}

// AgentRelease lets the run's process go (logged as agent.release) and
// stops it: SIGTERM to its process group, and SIGKILL after the grace
// period if it still runs. It does not wait. A run without a process is
// released without error.
func (r *Runtime) AgentRelease(_ context.Context, ref reconcile.RunRef, key string) error {
	if !r.releases.Claim(key) {
		return nil
	}
	r.mu.Lock()
	pr := r.procs[ref]
	delete(r.procs, ref)
	r.mu.Unlock()
	if pr != nil {
		r.terminate(pr, "agent.release")
		r.forgetWhenEnded(pr)
	}
	return nil
}

// terminate ends pr's observations, marks its launch released and stops
// the process: SIGTERM now, SIGKILL after the grace period. event
// (agent.release, agent.replace) is logged.
func (r *Runtime) terminate(pr *proc, event string) {
	pr.stopOnce.Do(func() {
		close(pr.stop)
		r.mu.Lock()
		pr.released = true
		r.mu.Unlock()
		_ = os.WriteFile(filepath.Join(pr.dir, releasedFile), nil, 0o600)
		r.out.Logger.Info(event, "kind", pr.ref.Kind, "id", pr.ref.ID, "pid", pr.pid)
		select {
		case <-pr.done:
			return
		default:
		}
		if !signalGroup(pr.dir, syscall.SIGTERM) {
			return
		}
		r.out.Logger.Info("agent.stop", "kind", pr.ref.Kind, "id", pr.ref.ID, "pid", pr.pid, "grace", r.cfg.StopGrace)
		go func() {
			t := time.NewTimer(r.cfg.StopGrace)
			defer t.Stop()
			select {
			case <-pr.done:
			case <-t.C:
				signalGroup(pr.dir, syscall.SIGKILL)
			}
		}()
	})
}

// forgetWhenEnded removes pr's state directory once it ended, unless the
// runtime closes first (the next one adopts it).
func (r *Runtime) forgetWhenEnded(pr *proc) {
	go func() {
		select {
		case <-pr.done:
			r.forget(pr)
		case <-r.quit:
		}
	}()
}

// forget removes the state directory of an ended process.
func (r *Runtime) forget(pr *proc) {
	if err := os.RemoveAll(pr.dir); err != nil {
		r.out.Logger.Warn("agent.state_not_removed", "kind", pr.ref.Kind, "id", pr.ref.ID, "dir", pr.dir, "error", err)
	}
}

// Close stops observing and waits for the observers; the agents run on,
// and a runtime started later on the same WorkRoot adopts them. Later
// launches fail.
func (r *Runtime) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	close(r.quit)
	procs := make([]*proc, 0, len(r.procs))
	for _, pr := range r.procs {
		procs = append(procs, pr)
	}
	r.mu.Unlock()
	for _, pr := range procs {
		pr.stopOnce.Do(func() { close(pr.stop) })
	}
	r.wg.Wait()
}

// safeName turns a kind or id into one path element: characters other than
// letters, digits, '.', '_' and '-' become '_', and a changed name gets a
// hash suffix so two ids never share a directory.
func safeName(s string) string {
	var b strings.Builder
	changed := false
	for _, c := range s {
		if c == '.' || c == '_' || c == '-' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') {
			b.WriteRune(c)
			continue
		}
		b.WriteByte('_')
		changed = true
	}
	out := b.String()
	if out == "" || strings.Trim(out, ".") == "" {
		out, changed = "_"+out, true
	}
	if changed {
		h := fnv.New32a()
		h.Write([]byte(s))
		out = fmt.Sprintf("%s-%08x", out, h.Sum32())
	}
	return out
}
