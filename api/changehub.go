package api

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
)

// hubSize is how many of the newest changes a changeHub keeps.
const hubSize = 4096

// hubRetry is how long a changeHub waits after a failed read.
const hubRetry = time.Second

// changeHub reads the event stream once for all the streams of a server:
// while any stream is open, one goroutine reads each publication and
// keeps the newest changes in memory, so that N streams cost one read of
// the store, not N. A stream whose position is older than what the hub
// holds reads the store itself until it catches up.
type changeHub struct {
	src ports.ChangeStream
	log *slog.Logger

	mu    sync.Mutex
	users int
	stop  context.CancelFunc
	ring  []ports.Change // ids increasing, after base
	base  int64          // the hub holds every change with id > base read so far
	ready bool           // base is set
	gen   int            // the running reader's generation
	subs  map[chan struct{}]struct{}
}

// join registers a stream: its channel is woken when the hub has read
// more. leave must be called when the stream ends.
func (h *changeHub) join() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs == nil {
		h.subs = map[chan struct{}]struct{}{}
	}
	h.subs[ch] = struct{}{}
	h.users++
	if h.users == 1 {
		ctx, cancel := context.WithCancel(context.Background())
		h.gen++
		h.stop, h.ring, h.ready = cancel, nil, false
		go h.run(ctx, h.gen)
	}
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.subs, ch)
		if h.users--; h.users == 0 {
			h.stop()
		}
	}
}

// after returns the changes after id the hub holds, at most limit; ok is
// false when the hub cannot tell (it does not reach back to id).
func (h *changeHub) after(id int64, limit int) ([]ports.Change, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.ready || id < h.base {
		return nil, false
	}
	i, _ := slices.BinarySearchFunc(h.ring, id+1, func(c ports.Change, id int64) int { return cmp.Compare(c.ID, id) })
	return append([]ports.Change(nil), h.ring[i:min(len(h.ring), i+limit)]...), true
}

// run reads each publication until ctx ends.
func (h *changeHub) run(ctx context.Context, gen int) {
	wake := h.src.ChangesNotify(ctx)
	last, err := h.src.ChangesLast(ctx)
	for err != nil {
		if !h.pause(ctx, err) {
			return
		}
		last, err = h.src.ChangesLast(ctx)
	}
	// Wake every stream once: one behind base (a change published before
	// the hub read it) reads the store to catch up.
	if !h.update(gen, func() { h.base, h.ready = last, true; h.wakeAll() }) {
		return
	}
	for {
		batch, err := h.src.ChangesAfter(ctx, last, eventsBatch)
		if err != nil {
			if !h.pause(ctx, err) {
				return
			}
			// Fell behind the retention: start again from the newest.
			if last, err = h.src.ChangesLast(ctx); err == nil && !h.update(gen, func() { h.ring, h.base = nil, last }) {
				return
			}
			continue
		}
		if len(batch) > 0 {
			last = batch[len(batch)-1].ID
			ok := h.update(gen, func() {
				h.ring = append(h.ring, batch...)
				if drop := len(h.ring) - hubSize; drop > 0 {
					h.base = h.ring[drop-1].ID
					h.ring = append([]ports.Change(nil), h.ring[drop:]...)
				}
				h.wakeAll()
			})
			if !ok {
				return
			}
		}
		if len(batch) == eventsBatch {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		}
	}
}

// wakeAll wakes every stream; the caller holds the lock.
func (h *changeHub) wakeAll() {
	for ch := range h.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// update runs fn under the lock unless a newer reader replaced gen's; it
// reports whether it ran.
func (h *changeHub) update(gen int, fn func()) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gen != gen {
		return false
	}
	fn()
	return true
}

// pause logs a failed read and waits hubRetry; false when ctx ended.
func (h *changeHub) pause(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	h.log.WarnContext(ctx, "api.events_read_failed", "error", err)
	t := time.NewTimer(hubRetry)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
