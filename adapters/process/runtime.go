package process

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

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
	// LogFile is the agent's output file in its working directory.
	LogFile = "agent.log"
)

// ErrNoCommand is returned by a launch when no agent command is configured.
var ErrNoCommand = errors.New("no agent command configured")

// Config says what an agent process is and how it is treated.
type Config struct {
	// Command is the program to run (looked up in PATH when it has no
	// slash); Args its arguments.
	Command string
	Args    []string
	// Env are plain environment variables of the agent.
	Env map[string]string
	// Secrets are environment variables whose values are resolved through
	// the SecretResolver when the agent starts; they are never stored or
	// logged.
	Secrets map[string]release.SecretRef
	// WorkRoot holds one working directory per run: WorkRoot/<kind>/<id>.
	WorkRoot string
	// StopGrace is the time between SIGTERM and SIGKILL (default 10 s).
	StopGrace time.Duration
	// Heartbeat is how often a live process's heartbeat is written
	// (default 30 s).
	Heartbeat time.Duration
	// LandWait bounds the wait for the run's state (DefaultLandWait).
	LandWait time.Duration
}

// envName is what an environment variable name may look like.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Validate checks the configuration, naming the wrong field.
func (c Config) Validate() error {
	if c.WorkRoot == "" {
		return errors.New("process runtime: WorkRoot is empty")
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
	if c.StopGrace < 0 || c.Heartbeat < 0 || c.LandWait < 0 {
		return errors.New("process runtime: StopGrace, Heartbeat and LandWait must not be negative")
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
	opt Options

	mu     sync.Mutex
	seen   map[string]bool
	procs  map[reconcile.RunRef]*proc
	closed bool
	wg     sync.WaitGroup
}

var _ ports.AgentRuntime = (*Runtime)(nil)

// New returns a runtime for cfg; it starts nothing until a launch.
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
	if opt.Clock == nil {
		opt.Clock = ports.SystemClock
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.Wake == nil {
		opt.Wake = func(context.Context, reconcile.RunRef) {}
	}
	return &Runtime{cfg: cfg, opt: opt, seen: map[string]bool{}, procs: map[reconcile.RunRef]*proc{}}, nil
}

// proc is one started agent process.
type proc struct {
	ref     reconcile.RunRef
	cmd     *exec.Cmd
	started time.Time
	// done is closed once the process was reaped; exit and exitErr are
	// set before.
	done    chan struct{}
	exit    int
	exitErr string
	// stop is closed when the process is released or replaced: its
	// observations end.
	stop     chan struct{}
	stopOnce sync.Once
}

// Branch is the branch a repo run's agent pushes its work to; its pull
// request is opened from it.
func Branch(ref reconcile.RunRef) string { return "reconciler/" + safeName(ref.ID) }

// WorkDir returns the working directory of a run's agent.
func (r *Runtime) WorkDir(ref reconcile.RunRef) string {
	return filepath.Join(r.cfg.WorkRoot, safeName(string(ref.Kind)), safeName(ref.ID))
}

// AgentLaunch starts the run's agent process, stopping a previous
// attempt's first. A key seen before is a no-op.
func (r *Runtime) AgentLaunch(ctx context.Context, p ports.AgentLaunchParams) error {
	if r.cfg.Command == "" {
		return fmt.Errorf("launch %s: %w (serve --agent-command)", p.Ref, ErrNoCommand)
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return fmt.Errorf("launch %s: process runtime closed", p.Ref)
	}
	if r.seen[p.IdempotencyKey] {
		r.mu.Unlock()
		return nil
	}
	r.seen[p.IdempotencyKey] = true
	prev := r.procs[p.Ref]
	delete(r.procs, p.Ref)
	r.mu.Unlock()
	if prev != nil {
		r.terminate(prev)
		<-prev.done
	}
	pr, err := r.start(ctx, p)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		delete(r.seen, p.IdempotencyKey) // a failed launch may be retried
		return err
	}
	r.procs[p.Ref] = pr
	r.wg.Add(1)
	go r.observe(pr)
	return nil
}

// start starts the process of a launch.
func (r *Runtime) start(ctx context.Context, p ports.AgentLaunchParams) (*proc, error) {
	dir := r.WorkDir(p.Ref)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("launch %s: working directory: %w", p.Ref, err)
	}
	env, err := r.environ(ctx, p, dir)
	if err != nil {
		return nil, err
	}
	out, err := os.OpenFile(filepath.Join(dir, LogFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("launch %s: %w", p.Ref, err)
	}
	defer out.Close() // the child has its own copy once started
	cmd := exec.Command(r.cfg.Command, r.cfg.Args...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("launch %s: start %s: %w", p.Ref, r.cfg.Command, err)
	}
	pr := &proc{ref: p.Ref, cmd: cmd, started: r.opt.Clock.Now(), done: make(chan struct{}), stop: make(chan struct{})}
	go pr.reap()
	r.opt.Logger.Info("agent.start", "kind", p.Ref.Kind, "id", p.Ref.ID, "purpose", p.Purpose, "pid", cmd.Process.Pid, "dir", dir)
	return pr, nil
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
		row, err := r.opt.Store.RunGet(ctx, p.Ref)
		if err != nil {
			return nil, fmt.Errorf("launch %s: read run: %w", p.Ref, err)
		}
		env = append(env, "RECONCILER_REPO="+row.Repo, "RECONCILER_BRANCH="+Branch(p.Ref))
	}
	for k, v := range r.cfg.Env {
		env = append(env, k+"="+v)
	}
	for k, ref := range r.cfg.Secrets {
		if r.opt.Secrets == nil {
			return nil, fmt.Errorf("launch %s: secret variable %s: no secret resolver", p.Ref, k)
		}
		v, err := r.opt.Secrets.Resolve(ctx, ref)
		if err != nil {
			return nil, fmt.Errorf("launch %s: secret variable %s: %w", p.Ref, k, err)
		}
		env = append(env, k+"="+v)
	}
	return env, nil
}

// reap waits for the process and records how it ended.
func (pr *proc) reap() {
	err := pr.cmd.Wait()
	st := pr.cmd.ProcessState
	switch ws, ok := st.Sys().(syscall.WaitStatus); {
	case ok && ws.Signaled():
		pr.exit = 128 + int(ws.Signal())
	default:
		pr.exit = st.ExitCode()
	}
	if err != nil {
		pr.exitErr = err.Error()
	}
	close(pr.done)
}

// AgentRelease lets the run's process go (logged as agent.release) and
// stops it: SIGTERM to its process group, and SIGKILL after the grace
// period if it still runs. It does not wait. A run without a process is
// released without error.
func (r *Runtime) AgentRelease(_ context.Context, ref reconcile.RunRef, key string) error {
	r.mu.Lock()
	if r.seen[key] {
		r.mu.Unlock()
		return nil
	}
	r.seen[key] = true
	pr := r.procs[ref]
	delete(r.procs, ref)
	r.mu.Unlock()
	if pr != nil {
		r.opt.Logger.Info("agent.release", "kind", ref.Kind, "id", ref.ID, "pid", pr.cmd.Process.Pid)
		r.terminate(pr)
	}
	return nil
}

// terminate ends pr's observations and stops the process: SIGTERM now,
// SIGKILL after the grace period.
func (r *Runtime) terminate(pr *proc) {
	pr.stopOnce.Do(func() {
		close(pr.stop)
		pgid := -pr.cmd.Process.Pid
		select {
		case <-pr.done:
			return
		default:
		}
		_ = syscall.Kill(pgid, syscall.SIGTERM)
		r.opt.Logger.Info("agent.stop", "kind", pr.ref.Kind, "id", pr.ref.ID, "pid", pr.cmd.Process.Pid, "grace", r.cfg.StopGrace)
		go func() {
			t := time.NewTimer(r.cfg.StopGrace)
			defer t.Stop()
			select {
			case <-pr.done:
			case <-t.C:
				_ = syscall.Kill(pgid, syscall.SIGKILL)
			}
		}()
	})
}

// Close stops every process (SIGTERM, then SIGKILL after the grace period)
// and waits for them and their observers; later launches fail.
func (r *Runtime) Close() {
	r.mu.Lock()
	r.closed = true
	procs := make([]*proc, 0, len(r.procs))
	for _, pr := range r.procs {
		procs = append(procs, pr)
	}
	r.procs = map[reconcile.RunRef]*proc{}
	r.mu.Unlock()
	for _, pr := range procs {
		r.terminate(pr)
	}
	for _, pr := range procs {
		<-pr.done
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
