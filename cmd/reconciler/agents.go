package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/reconcilerhq/reconciler/adapters/process"
	"github.com/reconcilerhq/reconciler/engine/runs"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// agentOptions configure serve's agent runtime: the process runtime, or
// the kubernetes runtime.
type agentOptions struct {
	runtime   string
	kube      kubeOptions
	command   string
	args      []string
	env       []string
	secrets   []string
	user      string
	workRoot  string
	stopGrace time.Duration
	heartbeat time.Duration
}

// agentFlags binds the process runtime's flags.
func agentFlags(f *pflag.FlagSet, o *agentOptions) {
	f.StringVar(&o.command, "agent-command", "", "program each run's agent runs as, in its own working directory (process runtime); empty: launches fail until set")
	f.StringArrayVar(&o.args, "agent-arg", nil, "argument of --agent-command; repeat for several")
	f.StringArrayVar(&o.env, "agent-env", nil, "NAME=VALUE environment variable of every agent, or NAME to pass serve's own NAME through (it must be set); repeat for several")
	f.StringVar(&o.user, "agent-user", "", "run agents (and their supervisors) as this user: NAME, UID or UID:GID (serve must run as root); keeps serve's /proc/<pid>/environ and files out of their reach")
	f.StringArrayVar(&o.secrets, "agent-secret", nil, "NAME=REF secret variable of every agent, REF as env:NAME (with --secret-prefix) or file:/path (under a --secret-dir), resolved at each start; repeat for several")
	f.StringVar(&o.workRoot, "agent-workdir", filepath.Join(os.TempDir(), "reconciler-agents"), "directory holding one working directory per run (<kind>/<id>)")
	f.DurationVar(&o.stopGrace, "agent-stop-grace", process.DefaultStopGrace, "time between SIGTERM and SIGKILL when an agent is stopped")
	f.DurationVar(&o.heartbeat, "agent-heartbeat", process.DefaultHeartbeat, "how often a live agent's heartbeat is recorded")
	f.StringVar(&o.runtime, "runtime", runtimeProcess, "where run agents run: process (a local process per run) or kubernetes (a pod per run: --kube-*)")
	kubeFlags(f, &o.kube)
}

// The agent runtimes --runtime names.
const (
	runtimeProcess    = "process"
	runtimeKubernetes = "kubernetes"
)

// agentRuntime is serve's agent runtime with what serve needs of it.
type agentRuntime struct {
	ports.AgentRuntime
	close func()
}

// newAgentRuntime builds the runtime --runtime names; its observations
// wake the run at once; exit, when set, is its exit hook.
func newAgentRuntime(ctx context.Context, o agentOptions, store ports.RunStore, q ports.Queue, secrets ports.SecretResolver, clock ports.Clock,
	log *slog.Logger, exit func(context.Context, reconcile.RunRef, string, *ports.RunObserveParams)) (agentRuntime, error) {
	switch o.runtime {
	case runtimeProcess, "":
		rt, err := newProcessRuntime(ctx, o, store, q, secrets, clock, log, exit)
		if err != nil {
			return agentRuntime{}, err
		}
		return agentRuntime{AgentRuntime: rt, close: rt.Close}, nil
	case runtimeKubernetes:
		rt, err := newKubeRuntime(ctx, o, store, q, secrets, clock, log, exit)
		if err != nil {
			return agentRuntime{}, err
		}
		return agentRuntime{AgentRuntime: rt, close: rt.Close}, nil
	}
	return agentRuntime{}, usagef("--runtime %q: want process or kubernetes", o.runtime)
}

// wake is the runtimes' Wake: it enqueues the run's work item.
func wake(q ports.Queue, clock ports.Clock) func(context.Context, reconcile.RunRef) {
	return func(ctx context.Context, ref reconcile.RunRef) {
		_ = q.WorkEnqueue(ctx, ports.EnqueueParams{Key: runs.Key(ref), EventTime: clock.Now()})
	}
}

// config turns the flags into the runtime's configuration, naming the
// wrong flag.
func (o agentOptions) config() (process.Config, error) {
	c := process.Config{Command: o.command, Args: o.args, WorkRoot: o.workRoot, StopGrace: o.stopGrace, Heartbeat: o.heartbeat,
		Env: map[string]string{}, Secrets: map[string]release.SecretRef{}}
	self, err := os.Executable()
	if err != nil {
		return c, fmt.Errorf("agent runtime: the supervisor is this binary: %w", err)
	}
	c.Supervisor = []string{self, process.SuperviseArg}
	if o.stopGrace <= 0 || o.heartbeat <= 0 {
		return c, usagef("--agent-stop-grace and --agent-heartbeat must be positive")
	}
	for _, kv := range o.env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			if v, ok = os.LookupEnv(k); !ok {
				return c, usagef("--agent-env %q: want NAME=VALUE, or NAME set in serve's environment (it is not)", kv)
			}
		}
		c.Env[k] = v
	}
	for _, kv := range o.secrets {
		k, ref, ok := strings.Cut(kv, "=")
		if !ok || ref == "" {
			return c, usagef("--agent-secret %q: want NAME=env:VAR or NAME=file:/path", k)
		}
		c.Secrets[k] = release.SecretRef{Ref: ref}
	}
	if o.user != "" {
		if c.Credential, err = agentCredential(o.user); err != nil {
			return c, err
		}
	}
	if err := c.Validate(); err != nil {
		return c, usagef("--agent-env/--agent-secret/--agent-workdir: %v", err)
	}
	return c, nil
}

// newProcessRuntime builds the process agent runtime whose observations
// wake the run at once.
// exit, when set, is the runtime's exit hook.
func newProcessRuntime(ctx context.Context, o agentOptions, store ports.RunStore, q ports.Queue, secrets ports.SecretResolver, clock ports.Clock, log *slog.Logger,
	exit func(context.Context, reconcile.RunRef, string, *ports.RunObserveParams)) (*process.Runtime, error) {
	cfg, err := o.config()
	if err != nil {
		return nil, err
	}
	rt, err := process.New(cfg, process.Options{Store: store, Secrets: secrets, Clock: clock, Logger: log, Exit: exit, Wake: wake(q, clock)})
	if err != nil {
		return nil, fmt.Errorf("agent runtime: %w", err)
	}
	if err := rt.Start(ctx); err != nil {
		rt.Close()
		return nil, err
	}
	return rt, nil
}

// agentCredential resolves --agent-user (NAME, UID or UID:GID) to the
// credential agents run with; it needs serve to run as root.
func agentCredential(spec string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, usagef("--agent-user %q: serve must run as root to start agents as another user", spec)
	}
	name, group, hasGroup := strings.Cut(spec, ":")
	uid, err := strconv.ParseUint(name, 10, 32)
	gid := uid
	if err != nil {
		u, lerr := user.Lookup(name)
		if lerr != nil {
			return nil, usagef("--agent-user %q: %v", spec, lerr)
		}
		uid, _ = strconv.ParseUint(u.Uid, 10, 32)
		gid, _ = strconv.ParseUint(u.Gid, 10, 32)
	}
	if hasGroup {
		if gid, err = strconv.ParseUint(group, 10, 32); err != nil {
			return nil, usagef("--agent-user %q: the group after ':' must be a number", spec)
		}
	}
	if uid == 0 {
		return nil, usagef("--agent-user %q: is root; name an unprivileged user", spec)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}
