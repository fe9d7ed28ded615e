package chain

import (
	"context"
	"fmt"
	"sync"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// handoffLimit bounds the facts a process holds for job-dispatch: past
// it, the oldest half is dropped (their passes read the facts again).
const handoffLimit = 16384

// handoff holds the facts a desired-release pass of this process read and
// decided on, as they stand after its decision, for the job-dispatch pass
// it hands off to: that pass takes them instead of reading them again when
// their stamp (ports.FactsStamp) is still the store's, and reads them
// afresh otherwise (a change meanwhile, or another process's pass). Safe
// for concurrent passes; bounded by handoffLimit.
type handoff struct {
	// limit bounds the facts held (0: handoffLimit).
	limit int
	mu    sync.Mutex
	// cur takes new facts; old holds the ones put before cur last filled
	// up, dropped when it fills up again.
	cur, old map[release.ReleaseTarget]ports.TargetFacts
}

// put holds f, the facts of target t.
func (h *handoff) put(t release.ReleaseTarget, f ports.TargetFacts) {
	h.mu.Lock()
	defer h.mu.Unlock()
	limit := h.limit
	if limit <= 0 {
		limit = handoffLimit
	}
	if h.cur == nil || len(h.cur) >= limit/2 {
		h.old, h.cur = h.cur, make(map[release.ReleaseTarget]ports.TargetFacts)
	}
	delete(h.old, t)
	h.cur[t] = f
}

// take removes and returns the facts held for t.
func (h *handoff) take(t release.ReleaseTarget) (ports.TargetFacts, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range []map[release.ReleaseTarget]ports.TargetFacts{h.cur, h.old} {
		if f, ok := m[t]; ok {
			delete(m, t)
			return f, true
		}
	}
	return ports.TargetFacts{}, false
}

// handOffFacts holds f's facts for the job-dispatch pass of its target, as
// they stand once the target's desired release is rel (of version) by d.
func (c *Chain) handOffFacts(f *facts, d *ports.DesiredRelease, rel *release.Release, version *release.DeploymentVersion) {
	tf := f.TargetFacts
	desired := *d
	desired.Decision = nil
	r, v := *rel, *version
	tf.Desired, tf.Release, tf.Version = &desired, &r, &v
	tf.Stamp.ReleaseID = rel.ID
	c.handoff.put(f.Detail.Target, tf)
}

// handedOff takes the facts held for ts (handOffFacts) that are current:
// those whose stamp the store still has, read for them all in one
// statement, the release's creation time taken from it.
func (c *Chain) handedOff(ctx context.Context, ts []release.ReleaseTarget) (map[release.ReleaseTarget]ports.TargetFacts, error) {
	held := map[release.ReleaseTarget]ports.TargetFacts{}
	var keys []release.ReleaseTarget
	for _, t := range ts {
		if f, ok := c.handoff.take(t); ok {
			held[t] = f
			keys = append(keys, t)
		}
	}
	if len(keys) == 0 {
		return held, nil
	}
	stamps, err := c.Store.TargetStampMany(ctx, keys, historyLimit)
	if err != nil {
		return nil, fmt.Errorf("read the stamps of %d targets: %w", len(keys), err)
	}
	for t, f := range held {
		st, ok := stamps[t]
		if !ok || !st.Matches(f.Stamp) {
			delete(held, t)
			continue
		}
		rel := *f.Release
		rel.CreatedAt = st.ReleaseCreatedAt
		f.Release, f.Stamp = &rel, st
		held[t] = f
	}
	return held, nil
}
