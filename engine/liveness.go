package engine

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
)

// KeepAlive keeps owner's liveness row (ports.Liveness) alive until ctx
// ends: it beats at once, then every third of ttl, each beat saying alive
// until ttl from then, and removes the row when ctx ends (a clean stop).
// Beats run on the liveness lane; a failed or late one is counted
// (RenewalLiveness) and logged, and the next one tries again.
func KeepAlive(ctx context.Context, l ports.Liveness, owner string, ttl time.Duration, clock ports.Clock, log *slog.Logger, m *Metrics) {
	ctx = ports.WithLane(ctx, ports.LaneLiveness)
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

// OwnLiveness is a ports.Liveness that remembers the beats made through
// it, so a process reads its own owner's liveness (its jobs' wake-ups, the
// chain's lost-job checks) without a query; other owners' are read from
// the wrapped Liveness.
type OwnLiveness struct {
	ports.Liveness

	mu  sync.Mutex
	own map[string]time.Time
}

var _ ports.Liveness = (*OwnLiveness)(nil)

// LivenessBeat beats through the wrapped Liveness and remembers until.
func (o *OwnLiveness) LivenessBeat(ctx context.Context, owner string, until time.Time) error {
	if err := o.Liveness.LivenessBeat(ctx, owner, until); err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.own == nil {
		o.own = map[string]time.Time{}
	}
	if until = ports.StoredTime(until); until.After(o.own[owner]) {
		o.own[owner] = until
	}
	return nil
}

// LivenessGet is the remembered until of an owner beaten through o, else
// the wrapped Liveness's answer.
func (o *OwnLiveness) LivenessGet(ctx context.Context, owner string) (time.Time, error) {
	o.mu.Lock()
	until, ok := o.own[owner]
	o.mu.Unlock()
	if ok {
		return until, nil
	}
	return o.Liveness.LivenessGet(ctx, owner)
}

// LivenessEnd forgets owner and ends its row.
func (o *OwnLiveness) LivenessEnd(ctx context.Context, owner string) error {
	o.mu.Lock()
	delete(o.own, owner)
	o.mu.Unlock()
	return o.Liveness.LivenessEnd(ctx, owner)
}
