package process

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/reconcilerhq/reconciler/internal/runobserve"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// observe is the pod watcher of one process: it writes the start once the
// launch's move landed, heartbeats while the process lives, and the exit
// once the run is running, waking the run after each phase change.
func (r *Runtime) observe(pr *proc) {
	defer r.wg.Done()
	ctx := context.Background()
	name := fmt.Sprintf("pid-%d", pr.cmd.Process.Pid)
	// The launch moved the run out of queued into a state where its agent
	// runs; wait for that write before observing anything.
	if !r.await(ctx, pr, runobserve.Launched(pr.ref.Kind)) {
		return
	}
	r.write(ctx, pr, ports.RunObserveParams{Ref: pr.ref, Heartbeat: r.opt.Clock.Now(),
		Pod: &reconcile.Pod{Name: name, Phase: reconcile.PodRunning, Since: pr.started}})
	tick := time.NewTicker(r.cfg.Heartbeat)
	defer tick.Stop()
	for live := true; live; {
		select {
		case <-pr.stop:
			return
		case <-pr.done:
			live = false
		case <-tick.C:
			if !r.write(ctx, pr, ports.RunObserveParams{Ref: pr.ref, Heartbeat: r.opt.Clock.Now()}) {
				return
			}
		}
	}
	exited := r.opt.Clock.Now()
	r.opt.Logger.Info("agent.exit", "kind", pr.ref.Kind, "id", pr.ref.ID, "pid", pr.cmd.Process.Pid, "exit_code", pr.exit)
	// The exit belongs to the running state.
	if !r.await(ctx, pr, runobserve.Running(pr.ref.Kind)) {
		return
	}
	code := pr.exit
	o := ports.RunObserveParams{Ref: pr.ref, Heartbeat: exited,
		Pod: &reconcile.Pod{Name: name, Phase: reconcile.PodTerminated, ExitCode: &code, LastError: pr.exitErr, Since: exited}}
	if code == 0 {
		o.Patch = runobserve.DonePatch(pr.ref.Kind)
	}
	if r.opt.Exit != nil {
		r.opt.Exit(ctx, pr.ref, r.WorkDir(pr.ref), &o)
	}
	r.write(ctx, pr, o)
}

// await waits for the run's state (runobserve.Lander.Await) and reports
// whether it came while pr is still the run's process.
func (r *Runtime) await(ctx context.Context, pr *proc, check func(reconcile.State) (ready, pending bool)) bool {
	land := runobserve.Lander{Store: r.opt.Store, Wait: r.cfg.LandWait, Logger: r.opt.Logger}
	return land.Await(ctx, pr.ref, pr.stop, check) && r.current(pr)
}

// current reports whether pr is still the run's process.
func (r *Runtime) current(pr *proc) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.procs[pr.ref] == pr
}

// write records an observation of the current process and, for a phase
// change, wakes the run. It reports whether pr is still current.
func (r *Runtime) write(ctx context.Context, pr *proc, o ports.RunObserveParams) bool {
	if !r.current(pr) {
		return false
	}
	if _, err := r.opt.Store.RunObserve(ctx, o); err != nil {
		r.opt.Logger.Warn("agent.observe_failed", "kind", pr.ref.Kind, "id", pr.ref.ID, "error", err)
		return !errors.Is(err, ports.ErrNotFound)
	}
	if o.Pod != nil {
		r.opt.Wake(ctx, pr.ref)
	}
	return true
}
