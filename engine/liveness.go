package engine

import (
	"context"
	"log/slog"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
)

// KeepAlive keeps owner's liveness row (ports.Liveness) alive until ctx
// ends: it beats at once, then every third of ttl, each beat saying alive
// until ttl from then, and removes the row when ctx ends (a clean stop).
// Beats run on the renewal lane; a failed or late one is counted
// (RenewalLiveness) and logged, and the next one tries again.
func KeepAlive(ctx context.Context, l ports.Liveness, owner string, ttl time.Duration, clock ports.Clock, log *slog.Logger, m *Metrics) {
	ctx = ports.WithLane(ctx, ports.LaneRenewal)
	beat := func() {
		sent := time.Now()
		err := l.LivenessBeat(ctx, owner, clock.Now().Add(ttl))
		took := time.Since(sent)
		switch {
		case err != nil && ctx.Err() == nil:
			m.Renewal(RenewalLiveness, RenewalFailed, 1)
			log.Warn("liveness beat failed", "owner", owner, "error", err)
		case err != nil:
		case took > ttl/3:
			m.Renewal(RenewalLiveness, RenewalLate, 1)
			log.Warn("liveness beat late", "owner", owner, "took", took, "ttl", ttl)
		default:
			m.Renewal(RenewalLiveness, RenewalOK, 1)
		}
	}
	beat()
	t := time.NewTicker(ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			end, cancel := context.WithTimeout(context.WithoutCancel(ctx), ttl/3)
			defer cancel()
			if err := l.LivenessEnd(end, owner); err != nil {
				log.Warn("liveness end failed", "owner", owner, "error", err)
			}
			return
		case <-t.C:
			beat()
		}
	}
}
