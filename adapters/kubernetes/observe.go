package kubernetes

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/reconcilerhq/reconciler/internal/kube"
	"github.com/reconcilerhq/reconciler/internal/runobserve"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// watcher is the observer of one pod: the informer hands it the pod's
// latest state, it writes what changed.
type watcher struct {
	ref     reconcile.RunRef
	name    string
	updates chan *corev1.Pod // holds the latest state not yet taken
	stop    chan struct{}
	once    sync.Once
}

// end stops the observer.
func (w *watcher) end() { w.once.Do(func() { close(w.stop) }) }

// offer hands the observer p, replacing a state it has not taken yet.
func (w *watcher) offer(p *corev1.Pod) {
	for {
		select {
		case w.updates <- p:
			return
		default:
		}
		select {
		case <-w.updates:
		default:
		}
	}
}

// onPod is the informer's handler: it routes a pod's state to its
// observer, starting one for a pod not yet observed (a new launch's, or
// one a restarted runtime adopts). A pod being deleted is no longer
// observed, unless it disappeared without the runtime deleting it: then
// its agent is gone, which its observer reports.
func (r *Runtime) onPod(obj any, deleted bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Labels[kube.ManagedByLabel] != kube.ManagedBy || p.Labels[RunLabel] == "" {
		return
	}
	ref := refOf(p)
	if ref.ID == "" || reconcile.MachineFor(ref.Kind) == nil || RunHash(ref) != p.Labels[RunLabel] {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	w, ok := r.watchers[p.Name]
	if deleted || p.DeletionTimestamp != nil {
		if ok && deleted && w.ended() {
			delete(r.watchers, p.Name)
			return
		}
		if ok {
			if deleted {
				p = p.DeepCopy()
				p.Status.Phase, p.Status.Reason = corev1.PodFailed, "Deleted"
				p.Status.Message = "the pod was deleted"
				w.offer(p)
				return // the observer reports the loss and ends
			}
			w.offer(p)
		}
		return
	}
	if !ok {
		w = &watcher{ref: ref, name: p.Name, updates: make(chan *corev1.Pod, 1), stop: make(chan struct{})}
		r.watchers[p.Name] = w
		r.wg.Add(1)
		go r.observe(w)
	}
	w.offer(p)
}

// forget stops observing pod name (the runtime deletes it).
func (r *Runtime) forget(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w, ok := r.watchers[name]; ok {
		w.end()
		delete(r.watchers, name)
	}
}

// current reports whether w still observes its pod.
func (r *Runtime) current(w *watcher) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.watchers[w.name] == w
}

// observe writes what w's pod does: its first phase once the launch's
// move landed, each later phase, a heartbeat every Heartbeat while it
// lives, and its end (exit code, reason) once the run is running; then it
// ends.
func (r *Runtime) observe(w *watcher) {
	defer r.wg.Done()
	ctx := context.Background()
	land := r.out.Lander()
	if !land.Await(ctx, w.ref, w.stop, runobserve.Launched(w.ref.Kind)) || !r.current(w) {
		r.drop(w)
		return
	}
	tick := time.NewTicker(r.cfg.Heartbeat)
	defer tick.Stop()
	var last *reconcile.Pod
	for {
		var p *corev1.Pod
		select {
		case <-w.stop:
			return
		case <-tick.C:
			if last.Alive() && !r.write(ctx, w, ports.RunObserveParams{Ref: w.ref, Heartbeat: r.out.Clock.Now()}) {
				return
			}
			continue
		case p = <-w.updates:
		}
		if p.DeletionTimestamp != nil {
			continue // being deleted by someone else: its end comes as a deletion or a phase
		}
		o := observation(p, r.out.Clock.Now())
		if last != nil && last.Phase == o.Phase && last.LastError == o.LastError {
			continue
		}
		if o.Phase == reconcile.PodTerminated || (o.Phase == reconcile.PodError && p.Status.Phase == corev1.PodFailed) {
			r.exit(ctx, w, land, o, p)
			return
		}
		if last != nil && last.Phase == o.Phase {
			o.Since = last.Since
		}
		if !r.write(ctx, w, ports.RunObserveParams{Ref: w.ref, Heartbeat: r.out.Clock.Now(), Pod: &o}) {
			return
		}
		last = &o
	}
}

// exit writes a pod's end, an exit code once the run is running (a
// provisioning run must see its pod up first, or a fast agent's success
// would read as a dead pod), with the kind's done fact on exit 0 and the Exit hook's
// additions.
func (r *Runtime) exit(ctx context.Context, w *watcher, land runobserve.Lander, o reconcile.Pod, p *corev1.Pod) {
	code := -1
	if o.ExitCode != nil {
		code = *o.ExitCode
	}
	r.out.Logger.Info("agent.exit", "kind", w.ref.Kind, "id", w.ref.ID, "pod", w.name, "exit_code", code, "reason", o.LastError)
	// An exit code waits for the running state; a pod lost without one
	// (evicted, deleted) is reported at once.
	if o.Phase == reconcile.PodTerminated && (!land.Await(ctx, w.ref, w.stop, runobserve.Running(w.ref.Kind)) || !r.current(w)) {
		r.drop(w)
		return
	}
	var review *reconcile.ReviewDraft
	if w.ref.Kind == reconcile.KindPRReview && o.Succeeded() {
		review = reviewOf(p)
	}
	r.write(ctx, w, r.out.Exited(ctx, w.ref, "", o, o.Since, review))
	r.drop(w)
}

// reviewOf is the review a review agent's pod brought back: its agent
// container's termination message (Kubernetes keeps at most
// MaxTerminationMessage bytes of it), whose first line may be
// "review-event: VERDICT"; nil when it wrote none.
func reviewOf(p *corev1.Pod) *reconcile.ReviewDraft {
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; cs.Name == p.Spec.Containers[0].Name && t != nil && t.Message != "" {
			body, event := runobserve.SplitReviewEvent(t.Message)
			return runobserve.Review(body, event, MaxTerminationMessage)
		}
	}
	return nil
}

// drop forgets w once it ends by itself, so a later state of its pod (a
// resync) does not start a second observer of an ended pod.
func (r *Runtime) drop(w *watcher) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.watchers[w.name] == w {
		ended := &watcher{ref: w.ref, name: w.name, updates: make(chan *corev1.Pod, 1), stop: make(chan struct{})}
		ended.end()
		r.watchers[w.name] = ended
	}
}

// ended reports whether w's observer has ended.
func (w *watcher) ended() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

// write records an observation while w observes its pod and, for a phase
// change, wakes the run. It reports whether w should go on.
func (r *Runtime) write(ctx context.Context, w *watcher, o ports.RunObserveParams) bool {
	return r.current(w) && r.out.Write(ctx, o)
}

// stuck are the waiting reasons of a container that will not start by
// itself: the pod is in error, though Kubernetes calls it pending.
var stuck = map[string]bool{"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true,
	"CreateContainerConfigError": true, "CreateContainerError": true, "CrashLoopBackOff": true}

// observation maps a pod's state to the kernel's pod: Pending → pending
// (error when a container cannot start: ErrImagePull, ImagePullBackOff,
// ...), Running → running (ready once every container is ready),
// Succeeded → terminated with exit code 0, Failed → terminated with the
// agent container's exit code (error when it has none: evicted, deleted),
// Unknown → unknown.
func observation(p *corev1.Pod, now time.Time) reconcile.Pod {
	o := reconcile.Pod{Name: p.Name, Since: now}
	switch p.Status.Phase {
	case corev1.PodPending, "":
		o.Phase = reconcile.PodPending
		for _, cs := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			if cs.State.Waiting != nil && stuck[cs.State.Waiting.Reason] {
				o.Phase, o.LastError = reconcile.PodError, kube.PodReason(p)
			}
		}
	case corev1.PodRunning:
		o.Phase = reconcile.PodRunning
		if len(p.Status.ContainerStatuses) > 0 {
			ready := true
			for _, cs := range p.Status.ContainerStatuses {
				ready = ready && cs.Ready
			}
			if ready {
				o.Phase = reconcile.PodReady
			}
		}
	case corev1.PodSucceeded:
		code := 0
		o.Phase, o.ExitCode = reconcile.PodTerminated, &code
	case corev1.PodFailed:
		o.Phase, o.LastError = reconcile.PodError, kube.PodReason(p)
		if len(p.Spec.Containers) > 0 {
			for _, cs := range p.Status.ContainerStatuses {
				if t := cs.State.Terminated; cs.Name == p.Spec.Containers[0].Name && t != nil {
					code := int(t.ExitCode)
					o.Phase, o.ExitCode = reconcile.PodTerminated, &code
				}
			}
		}
		if o.LastError == "" {
			o.LastError = "pod failed"
		}
	default:
		o.Phase = reconcile.PodUnknown
	}
	return o
}
