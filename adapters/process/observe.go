package process

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// landPoll is how often an observation re-reads the run while it waits for
// the state it belongs to. The wait is short: the executor writes the
// launch's move right after the launch returns.
const landPoll = 20 * time.Millisecond

// observe is the pod watcher of one process: it writes the start once the
// launch's move landed, heartbeats while the process lives, and the exit
// once the run is running, waking the run after each phase change.
func (r *Runtime) observe(pr *proc) {
	defer r.wg.Done()
	ctx := context.Background()
	m := reconcile.MachineFor(pr.ref.Kind)
	name := fmt.Sprintf("pid-%d", pr.cmd.Process.Pid)
	// The launch moved the run out of queued into a state where its agent
	// runs; wait for that write before observing anything.
	if !r.await(ctx, pr, func(st reconcile.State) (bool, bool) { return m.RunsAgent(st), st == reconcile.RepoQueued }) {
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
	// The exit belongs to the running state: a provisioning run must see
	// its pod up first, or a fast agent's success would read as a dead pod.
	running := m.Agent[len(m.Agent)-1]
	if !r.await(ctx, pr, func(st reconcile.State) (bool, bool) { return st == running, m.RunsAgent(st) }) {
		return
	}
	code := pr.exit
	o := ports.RunObserveParams{Ref: pr.ref, Heartbeat: exited,
		Pod: &reconcile.Pod{Name: name, Phase: reconcile.PodTerminated, ExitCode: &code, LastError: pr.exitErr, Since: exited}}
	if code == 0 {
		o.Patch = donePatch(pr.ref.Kind)
	}
	if r.opt.Exit != nil {
		r.opt.Exit(ctx, pr.ref, r.WorkDir(pr.ref), &o)
	}
	r.write(ctx, pr, o)
}

// donePatch is what an exit 0 reports besides the pod: the kind's "work
// done" field.
func donePatch(k reconcile.RunKind) map[string]any {
	switch k {
	case reconcile.KindPRReview:
		return map[string]any{"review_done": true}
	case reconcile.KindPersistentAgent:
		return map[string]any{"turn_done": true, "pending_messages": 0}
	}
	return nil
}

// await re-reads the run until ready(state) holds, and reports whether it
// does. It gives up (false) when pending(state) no longer holds, when the
// process was released or replaced, when the run is gone, or after
// LandWait.
func (r *Runtime) await(ctx context.Context, pr *proc, check func(reconcile.State) (ready, pending bool)) bool {
	deadline := time.NewTimer(r.cfg.LandWait)
	defer deadline.Stop()
	poll := time.NewTicker(landPoll)
	defer poll.Stop()
	for {
		row, err := r.opt.Store.RunGet(ctx, pr.ref)
		switch {
		case errors.Is(err, ports.ErrNotFound):
			return false
		case err == nil:
			ready, pending := check(row.State)
			if ready {
				return r.current(pr)
			}
			if !pending {
				return false
			}
		}
		select {
		case <-pr.stop:
			return false
		case <-deadline.C:
			r.opt.Logger.Warn("agent.observation_dropped", "kind", pr.ref.Kind, "id", pr.ref.ID, "state", row.State)
			return false
		case <-poll.C:
		}
	}
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
