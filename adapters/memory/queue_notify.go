package memory

import "time"

// waker wakes idle workers: subscribers get a non-blocking send on their
// buffered channel whenever an operation may have made work due, and a
// wall-clock timer covers items that become due by the passing of time
// (a not-before or a lease expiry).
type waker struct {
	subs []chan struct{}
	// kick is set under the lock by anything that made an item due; unlock
	// sends the wake-ups once per operation.
	kick  bool
	timer *time.Timer
	// armedAt is the queue-clock instant the timer is set for; zero when it
	// is not armed.
	armedAt time.Time
}

// WorkNotify implements ports.WorkNotifier. Every call subscribes a new
// channel (buffered, capacity 1) that receives a value whenever an item may
// have become due: an enqueue, an ack or retry that leaves a due item, a
// redrive, or, by a wall-clock timer, a not-before or lease expiry passing.
// With a fake clock the timer still measures delays from the fake "now", so
// timed wake-ups are best effort and callers poll as a fallback.
// Subscriptions last as long as the queue: call it once per waiting loop.
func (q *Queue) WorkNotify() <-chan struct{} {
	ch := make(chan struct{}, 1)
	q.mu.Lock()
	defer q.mu.Unlock()
	q.wake.subs = append(q.wake.subs, ch)
	q.rearm(time.Time{})
	return ch
}

// unlock sends pending wake-ups and releases the lock.
func (q *Queue) unlock() {
	if q.wake.kick {
		q.wake.kick = false
		for _, ch := range q.wake.subs {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
	q.mu.Unlock()
}

// wakeAt makes sure the timer fires by queue-clock instant t. It costs
// nothing while nobody subscribes.
func (q *Queue) wakeAt(t time.Time) {
	w := &q.wake
	if len(w.subs) == 0 || (!w.armedAt.IsZero() && !t.Before(w.armedAt)) {
		return
	}
	w.armedAt = t
	d := t.Sub(q.clock.Now())
	if w.timer == nil {
		w.timer = time.AfterFunc(d, q.onTimer)
		return
	}
	w.timer.Reset(d)
}

// onTimer wakes the subscribers, moves what became due into the due heaps
// and arms the timer for the next instant.
func (q *Queue) onTimer() {
	q.mu.Lock()
	defer q.unlock()
	fired := q.wake.armedAt
	q.wake.armedAt = time.Time{}
	q.wake.kick = true
	now := q.now()
	for _, kq := range q.kinds {
		advance(kq, now)
	}
	q.rearm(fired)
}

// rearm arms the timer for the earliest pending instant after the given
// one. Skipping instants at or before it keeps a fake clock that does not
// move from spinning the timer.
func (q *Queue) rearm(after time.Time) {
	var next time.Time
	for _, kq := range q.kinds {
		if t, ok := kq.nextInstant(); ok && t.After(after) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if !next.IsZero() {
		q.wakeAt(next)
	}
}
