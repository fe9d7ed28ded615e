package console

import (
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
)

// eventsHeartbeat is how often an idle console stream sends a comment
// and checks that its session is still valid.
const eventsHeartbeat = 15 * time.Second

// maxStreams bounds the console's open event streams (503 beyond).
const maxStreams = 256

// eventsBatch is how many changes one read of the stream takes.
const eventsBatch = 500

// routeEvents serves GET /events: the live parts of the pages
// (static/live.js) refresh when it says something changed.
func (s *Server) routeEvents() {
	s.mux.HandleFunc("GET /events", s.page(s.events))
}

// events streams, as Server-Sent Events, one "change" event per batch of
// changes committed after the stream opened: its id the last change's,
// its data the batch's kinds (space-separated). It needs the session's
// read scope, as every page (the changes are what the pages show: tokens
// are not scoped by workspace), and ends when the session does (checked
// every heartbeat) or the client leaves. Without an event stream it is
// 404, and the pages fall back to polling.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	if s.o.Changes == nil {
		s.notFound(w, r)
		return
	}
	select {
	case s.streams <- struct{}{}:
		defer func() { <-s.streams }()
	default:
		s.problem(w, r, http.StatusServiceUnavailable, "too many open event streams; the page polls instead")
		return
	}
	ctx := r.Context()
	wake := s.o.Changes.ChangesNotify(ctx) // before the first read: nothing published between goes unnoticed
	after, err := s.o.Changes.ChangesLast(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // none (serve --write-timeout): a stream lasts as long as its session and client
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := io.WriteString(w, "retry: 5000\n\n"); err != nil || rc.Flush() != nil {
		return
	}
	beat := time.NewTicker(eventsHeartbeat)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
			if _, err := s.authenticate(r); err != nil {
				return // the session ended: the page's reconnect finds out
			}
			if _, err := io.WriteString(w, ": heartbeat\n\n"); err != nil || rc.Flush() != nil {
				return
			}
			continue
		case <-wake:
		}
		frame, last, err := s.changesAfter(r, after)
		if err != nil {
			if ctx.Err() == nil {
				s.o.Logger.WarnContext(ctx, "console.events_read_failed", "after", after, "error", err)
			}
			return
		}
		after = last
		if frame == "" {
			continue
		}
		if _, err := io.WriteString(w, frame); err != nil || rc.Flush() != nil {
			return
		}
	}
}

// changesAfter reads every change after after and returns the one frame
// that says they happened ("" when none) and the last id read. Changes no
// longer retained are one change too: the page re-reads its state.
func (s *Server) changesAfter(r *http.Request, after int64) (frame string, last int64, err error) {
	ctx := ports.WithLane(r.Context(), ports.LaneRead)
	last = after
	var kinds []string
	for {
		batch, err := s.o.Changes.ChangesAfter(ctx, last, eventsBatch)
		if errors.Is(err, ports.ErrChangesExpired) {
			if last, err = s.o.Changes.ChangesLast(ctx); err != nil {
				return "", after, err
			}
			kinds = append(kinds, "expired")
			break
		}
		if err != nil {
			return "", after, err
		}
		for i := range batch {
			last = batch[i].ID
			if k := string(batch[i].Kind); !slices.Contains(kinds, k) {
				kinds = append(kinds, k)
			}
		}
		if len(batch) < eventsBatch {
			break
		}
	}
	if len(kinds) == 0 {
		return "", last, nil
	}
	return "id: " + strconv.FormatInt(last, 10) + "\nevent: change\ndata: " + strings.Join(kinds, " ") + "\n\n", last, nil
}
