package engine

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
)

// ResyncSource lists work keys that should be reconciled on every sweep
// (e.g. every non-terminal run). It calls yield for each key.
type ResyncSource func(ctx context.Context, yield func(ports.WorkKey) error) error

// Resync periodically enqueues every key its sources list: the safety net
// for any signal that was lost. Enqueues coalesce in the queue, so several
// engines sweeping at once do not amplify the load.
type Resync struct {
	Queue    ports.Queue
	Sources  []ResyncSource
	Interval time.Duration
	Clock    ports.Clock
	Logger   *slog.Logger
	// Batch is how many keys are enqueued per call (default 500).
	Batch int
}

// Run sweeps once at start and then every Interval until ctx ends.
func (r *Resync) Run(ctx context.Context) error {
	t := time.NewTicker(r.Interval)
	defer t.Stop()
	for {
		n, err := r.Sweep(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			r.Logger.Error("resync failed", "error", err)
		} else {
			r.Logger.Debug("resync", "enqueued", n)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Sweep enqueues every listed key once and returns how many it enqueued.
func (r *Resync) Sweep(ctx context.Context) (int, error) {
	batch := r.Batch
	if batch <= 0 {
		batch = 500
	}
	now := r.Clock.Now()
	buf := make([]ports.EnqueueParams, 0, batch)
	total := 0
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		if err := r.Queue.WorkEnqueue(ctx, buf...); err != nil {
			return fmt.Errorf("resync enqueue: %w", err)
		}
		total += len(buf)
		buf = buf[:0]
		return nil
	}
	for _, src := range r.Sources {
		err := src(ctx, func(k ports.WorkKey) error {
			// Resync items carry the sweep time as their event time and a
			// low priority, so real events go first.
			buf = append(buf, ports.EnqueueParams{Key: k, Priority: -1, EventTime: now})
			if len(buf) == batch {
				return flush()
			}
			return nil
		})
		if err != nil {
			return total, err
		}
	}
	return total, flush()
}
