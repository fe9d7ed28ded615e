package engine

import (
	"sync"
	"time"
)

// adaptiveLimit is how many slots of its kind's Concurrency a kind may use
// now, from its observed pass times (which include the passes' waits for
// store connections): a pass that took more than half the lease halves it
// (at least 1), since passes that slow may not finish within their lease
// and only load the store further; a pass within a quarter of the lease
// raises it by one, back up to the kind's Concurrency. Additive increase,
// multiplicative decrease: under load the engine leases fewer items at
// once instead of starting passes it cannot finish.
type adaptiveLimit struct {
	mu    sync.Mutex
	max   int
	cur   int
	lease time.Duration
}

func newAdaptiveLimit(concurrency int, lease time.Duration) *adaptiveLimit {
	n := max(concurrency, 1)
	return &adaptiveLimit{max: n, cur: n, lease: lease}
}

// observe records a pass that took d.
func (a *adaptiveLimit) observe(d time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case d > a.lease/2:
		a.cur = max(a.cur/2, 1)
	case d < a.lease/4 && a.cur < a.max:
		a.cur++
	}
}

// limit is how many slots the kind may use now.
func (a *adaptiveLimit) limit() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cur
}
