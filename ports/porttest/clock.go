package porttest

import (
	"sync"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
)

// FakeClock is a ports.Clock that moves only when a test moves it, so
// suites control not-before times and lease expiry exactly. It is
// goroutine-safe.
type FakeClock struct {
	mu  sync.Mutex
	now time.Time
}

var _ ports.Clock = (*FakeClock)(nil)

// NewFakeClock returns a clock that reads start until moved.
func NewFakeClock(start time.Time) *FakeClock { return &FakeClock{now: start} }

// Now returns the clock's current time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d (backward when d is negative) and
// returns the new time.
func (c *FakeClock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// Set moves the clock to t.
func (c *FakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}
