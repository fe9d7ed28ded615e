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

// hubSize is how many of the newest changes a changeHub keeps at least
// (at most twice as many: it drops the older half at once).
const hubSize = 4096

// hubRetry is how long a changeHub waits after a failed read.
const hubRetry = time.Second

// hubGather is how long a changeHub lets publications gather after a
// wake-up before it reads them: a burst of commits is read, and its
// streams woken and flushed, once per window rather than once per
// commit, for at most this much more delivery lag.
const hubGather = 20 * time.Millisecond

// changeHub reads the event stream once for all the streams of a server:
// while any stream is open, one goroutine reads each publication and
// keeps the newest changes in memory, so that N streams cost one read of
// the store, not N. A stream whose position is older than what the hub
// holds reads the store itself until it catches up.
type changeHub struct {
	src ports.ChangeStream
	log *slog.Logger
	// encode is a change's SSE frame, made once as the hub reads it.
	encode func(*ports.Change) ([]byte, error)

	mu    sync.Mutex
	users int
	stop  context.CancelFunc
	ring  []ports.Change // ids increasing, after base
	// frames are ring's frames, index for index (nil: not encoded).
	frames [][]byte
	base   int64 // the hub holds every change with id > base read so far
	ready  bool  // base is set
	gen    int   // the running reader's generation
	subs   map[chan struct{}]struct{}
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
		h.stop, h.ring, h.frames, h.ready = cancel, nil, nil, false
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

// after returns the changes after id the hub holds, at most limit, and
// their frames (nil where not encoded); ok is false when the hub cannot
// tell (it does not reach back to id). The slices are the hub's own, not
// copies: the hub only appends past them and replaces its ring when it
// drops, so they never change; the caller must not change them either.
func (h *changeHub) after(id int64, limit int) (changes []ports.Change, frames [][]byte, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.ready || id < h.base {
		return nil, nil, false
	}
	i, _ := slices.BinarySearchFunc(h.ring, id+1, func(c ports.Change, id int64) int { return cmp.Compare(c.ID, id) })
	j := min(len(h.ring), i+limit)
	return h.ring[i:j:j], h.frames[i:j:j], true
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
			if last, err = h.src.ChangesLast(ctx); err == nil && !h.update(gen, func() { h.ring, h.frames, h.base = nil, nil, last }) {
				return
			}
			continue
		}
		if len(batch) > 0 {
			last = batch[len(batch)-1].ID
			frames := h.frame(ctx, batch) // outside the lock
			ok := h.update(gen, func() {
				h.ring, h.frames = append(h.ring, batch...), append(h.frames, frames...)
				if len(h.ring) > 2*hubSize {
					drop := len(h.ring) - hubSize
					h.base = h.ring[drop-1].ID
					h.ring = append([]ports.Change(nil), h.ring[drop:]...)
					h.frames = append([][]byte(nil), h.frames[drop:]...)
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
		if ports.Sleep(ctx, hubGather) != nil {
			return
		}
	}
}

// frame encodes batch's frames; one that fails is logged and left nil
// (its streams encode it themselves, and fail there).
func (h *changeHub) frame(ctx context.Context, batch []ports.Change) [][]byte {
	out := make([][]byte, len(batch))
	if h.encode == nil {
		return out
	}
	for i := range batch {
		b, err := h.encode(&batch[i])
		if err != nil {
			h.log.WarnContext(ctx, "api.events_encode_failed", "id", batch[i].ID, "error", err)
			continue
		}
		out[i] = b
	}
	return out
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
	return ports.Sleep(ctx, hubRetry) == nil
}
