package runobserve

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// ExitHook may add to the observation of an agent's exit before it is
// written (serve opens a repo agent's pull request there); workDir is the
// agent's working directory on this machine, empty when its files are
// elsewhere (in its pod).
type ExitHook func(ctx context.Context, ref reconcile.RunRef, workDir string, o *ports.RunObserveParams)

// Writer is what an agent runtime writes its observations with: the run
// store, the clock that stamps them, the wake-up after a phase change, the
// log and the exit hook.
type Writer struct {
	Store ports.RunStore
	Clock ports.Clock
	// Wake enqueues the run after a phase change.
	Wake   func(context.Context, reconcile.RunRef)
	Logger *slog.Logger
	// Exit is the runtime's ExitHook (nil: none).
	Exit ExitHook
	// Wait bounds each Await (the runtime's LandWait).
	Wait time.Duration
}

// NewWriter returns a Writer with a runtime's collaborators, the missing
// ones defaulted: ports.SystemClock, slog.Default and no wake-up.
func NewWriter(store ports.RunStore, clock ports.Clock, wake func(context.Context, reconcile.RunRef), logger *slog.Logger,
	exit ExitHook, wait time.Duration) Writer {
	if clock == nil {
		clock = ports.SystemClock
	}
	if logger == nil {
		logger = slog.Default()
	}
	if wake == nil {
		wake = func(context.Context, reconcile.RunRef) {}
	}
	return Writer{Store: store, Clock: clock, Wake: wake, Logger: logger, Exit: exit, Wait: wait}
}

// Lander is the Lander of w's store, wait and log.
func (w Writer) Lander() Lander { return Lander{Store: w.Store, Wait: w.Wait, Logger: w.Logger} }

// Write records o and, when it carries a pod (a phase change), wakes the
// run. A failed write is logged (agent.observe_failed); Write reports
// whether the observer should go on: false once the run is gone.
func (w Writer) Write(ctx context.Context, o ports.RunObserveParams) bool {
	if _, err := w.Store.RunObserve(ctx, o); err != nil {
		w.Logger.Warn("agent.observe_failed", "kind", o.Ref.Kind, "id", o.Ref.ID, "error", err)
		return !errors.Is(err, ports.ErrNotFound)
	}
	if o.Pod != nil {
		w.Wake(ctx, o.Ref)
	}
	return true
}

// Exited is the observation of an agent's end: the pod p at heartbeat at,
// with the kind's done fact on exit 0 (DonePatch) and, for a review, the
// draft it reported (review; nil clears an earlier one), and the exit
// hook's additions (workDir as ExitHook says).
func (w Writer) Exited(ctx context.Context, ref reconcile.RunRef, workDir string, p reconcile.Pod, at time.Time,
	review *reconcile.ReviewDraft) ports.RunObserveParams {
	o := ports.RunObserveParams{Ref: ref, Heartbeat: at, Pod: &p}
	if p.Succeeded() {
		o.Patch = DonePatch(ref.Kind)
		if ref.Kind == reconcile.KindPRReview {
			o.Patch["review"] = review
		}
	}
	if w.Exit != nil {
		w.Exit(ctx, ref, workDir, &o)
	}
	return o
}
