package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/reconcilerhq/reconciler/internal/runobserve"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// Start adopts the agents a previous runtime on the same WorkRoot left
// (it crashed, or closed): each launch's state directory names its run and
// key. A live agent of a run the store holds is observed as if this
// runtime had launched it (logged as agent.adopt): its start, heartbeats,
// and its real exit code from the supervisor's exit.json; a launch of its
// key starts nothing and a release stops it. An agent that ended while
// no runtime watched has its exit reported the same way (lost, as an
// error, when its supervisor was killed before recording one). Launches
// that were let go, and older launches of a run, are stopped and removed;
// those of runs the store does not know (or cannot read) are left alone,
// logged as agent.not_adopted (another daemon's store may hold them).
func (r *Runtime) Start(ctx context.Context) error {
	all, err := launches(r.cfg.WorkRoot)
	if err != nil {
		return fmt.Errorf("process runtime: adopt: %w", err)
	}
	for ref, dirs := range all {
		if _, err := r.out.Store.RunGet(ctx, ref); err != nil {
			reason := "the store has no such run"
			if !errors.Is(err, ports.ErrNotFound) {
				reason = err.Error()
			}
			r.out.Logger.Info("agent.not_adopted", "kind", ref.Kind, "id", ref.ID, "reason", reason)
			continue
		}
		var current *proc
		for _, dir := range dirs {
			pr := r.adopt(ref, dir)
			if pr == nil {
				continue
			}
			if pr.released || (current != nil && !pr.started.After(current.started)) {
				r.letGo(pr)
				continue
			}
			if current != nil {
				r.letGo(current)
			}
			current = pr
		}
		if current == nil {
			continue
		}
		r.mu.Lock()
		if r.closed || r.procs[ref] != nil {
			r.mu.Unlock()
			continue
		}
		r.procs[ref] = current
		r.launches.Add(current.key)
		r.wg.Add(2)
		r.mu.Unlock()
		go r.watch(current)
		go r.observe(current)
		r.out.Logger.Info("agent.adopt", "kind", ref.Kind, "id", ref.ID, "pid", current.pid, "key", current.key)
	}
	return nil
}

// adopt reads the launch in state directory dir; nil when it is unreadable.
func (r *Runtime) adopt(ref reconcile.RunRef, dir string) *proc {
	var l launchRecord
	if readJSON(dir, launchFile, &l) != nil {
		return nil
	}
	var a agentRecord
	_ = readJSON(dir, agentFile, &a)
	return &proc{ref: ref, key: l.Key, dir: dir, pid: a.Pid, started: l.Started, adopted: true,
		released: exists(dir, releasedFile), done: make(chan struct{}), stop: make(chan struct{})}
}

// letGo stops an adopted launch no run wants any more and removes its
// state once it ended.
func (r *Runtime) letGo(pr *proc) {
	r.wg.Add(1)
	go r.watch(pr)
	r.terminate(pr, "agent.release")
	r.forgetWhenEnded(pr)
}

// watch closes an adopted process's done once its supervisor ended (its
// lock is free), with the exit the supervisor recorded.
func (r *Runtime) watch(pr *proc) {
	defer r.wg.Done()
	tick := time.NewTicker(r.cfg.Poll)
	defer tick.Stop()
	for supervised(pr.dir) {
		select {
		case <-r.quit:
			return
		case <-tick.C:
		}
	}
	pr.exit, pr.exitErr, pr.lost = ended(pr.dir)
	close(pr.done)
}

// observe is the pod watcher of one process: it writes the start once the
// launch's move landed, heartbeats while the process lives, and the exit
// once the run is running, waking the run after each phase change. Once
// it wrote the exit or gave up, the launch's state directory is removed
// when the process has ended; a closing runtime keeps it for the next.
func (r *Runtime) observe(pr *proc) {
	defer r.wg.Done()
	ctx := context.Background()
	if !r.observed(ctx, pr) {
		r.forgetWhenEnded(pr)
	}
}

// observed writes pr's observations; it reports whether it stopped (a
// release, a replacement or Close) rather than ended by itself.
func (r *Runtime) observed(ctx context.Context, pr *proc) (stopped bool) {
	name := fmt.Sprintf("pid-%d", pr.pid)
	// The launch moved the run out of queued into a state where its agent
	// runs; wait for that write before observing anything.
	if !r.await(ctx, pr, runobserve.Launched(pr.ref.Kind)) {
		return r.stopped(pr)
	}
	if !r.write(ctx, pr, ports.RunObserveParams{Ref: pr.ref, Heartbeat: r.out.Clock.Now(),
		Pod: &reconcile.Pod{Name: name, Phase: reconcile.PodRunning, Since: pr.started}}) {
		return r.stopped(pr)
	}
	tick := time.NewTicker(r.cfg.Heartbeat)
	defer tick.Stop()
	for live := true; live; {
		select {
		case <-pr.stop:
			return true
		case <-pr.done:
			live = false
		case <-tick.C:
			if !r.write(ctx, pr, ports.RunObserveParams{Ref: pr.ref, Heartbeat: r.out.Clock.Now()}) {
				return r.stopped(pr)
			}
		}
	}
	exited := r.out.Clock.Now()
	r.out.Logger.Info("agent.exit", "kind", pr.ref.Kind, "id", pr.ref.ID, "pid", pr.pid, "exit_code", pr.exit, "lost", pr.lost)
	// The exit belongs to the running state.
	if !r.await(ctx, pr, runobserve.Running(pr.ref.Kind)) {
		return r.stopped(pr)
	}
	pod := reconcile.Pod{Name: name, Phase: reconcile.PodTerminated, LastError: pr.exitErr, Since: exited}
	if pr.lost {
		pod.Phase = reconcile.PodError
	} else {
		code := pr.exit
		pod.ExitCode = &code
	}
	var review *reconcile.ReviewDraft
	if pr.ref.Kind == reconcile.KindPRReview && pod.Succeeded() {
		review = r.review(pr.ref)
	}
	r.write(ctx, pr, r.out.Exited(ctx, pr.ref, r.WorkDir(pr.ref), pod, exited, review))
	return r.stopped(pr)
}

// review reads the review a review agent wrote in its working directory:
// ReviewFile (at most MaxReview bytes; nil when there is none) and the
// verdict in ReviewEventFile.
func (r *Runtime) review(ref reconcile.RunRef) *reconcile.ReviewDraft {
	dir := r.WorkDir(ref)
	f, err := os.Open(filepath.Join(dir, ReviewFile))
	if err != nil {
		return nil
	}
	defer f.Close()
	body, err := io.ReadAll(io.LimitReader(f, MaxReview+1))
	if err != nil {
		r.out.Logger.Warn("agent.review_unreadable", "kind", ref.Kind, "id", ref.ID, "error", err)
		return nil
	}
	event, _ := os.ReadFile(filepath.Join(dir, ReviewEventFile))
	return runobserve.Review(string(body), string(event), MaxReview)
}

// stopped reports whether pr's observations were stopped.
func (r *Runtime) stopped(pr *proc) bool {
	select {
	case <-pr.stop:
		return true
	default:
		return false
	}
}

// await waits for the run's state (runobserve.Lander.Await) and reports
// whether it came while pr is still the run's process.
func (r *Runtime) await(ctx context.Context, pr *proc, check func(reconcile.State) (ready, pending bool)) bool {
	return r.out.Lander().Await(ctx, pr.ref, pr.stop, check) && r.current(pr)
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
	return r.current(pr) && r.out.Write(ctx, o)
}
