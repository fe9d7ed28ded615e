package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"

	"github.com/reconcilerhq/reconciler/ports"
)

// DefaultEventsHeartbeat is how often an idle event stream sends a
// comment, so proxies keep it open, when Options.EventsHeartbeat is zero.
const DefaultEventsHeartbeat = 15 * time.Second

// eventsBatch is how many changes one read of the retention takes.
const eventsBatch = 500

// EventsParams are the parameters of the event stream.
type EventsParams struct {
	Kind        []string `query:"kind" doc:"only changes of these kinds (comma-separated): target.desired, target.current, job.created, job.status, workflow.status, taskrun.status, run.status, catalog.revision"`
	Workspace   string   `query:"workspace" doc:"only changes of objects in this workspace (targets' and jobs'; the other kinds have none)"`
	LastEventID string   `header:"Last-Event-ID" doc:"resume after this event id: the retained changes after it, then live (410 when changes after it are no longer retained)"`
	After       string   `query:"after" doc:"as Last-Event-ID, for clients that cannot set it; the header wins"`
}

// eventsFilter is EventsParams checked.
type eventsFilter struct {
	kinds     []ports.ChangeKind
	workspace string
	resume    bool
	after     int64
}

func (p *EventsParams) filter() (eventsFilter, error) {
	f := eventsFilter{workspace: p.Workspace}
	for _, k := range p.Kind {
		for _, part := range strings.Split(k, ",") {
			kind := ports.ChangeKind(strings.TrimSpace(part))
			if !kind.Valid() {
				return f, invalid("query.kind", "unknown kind "+strconv.Quote(part)+"; want one of "+changeKindList())
			}
			f.kinds = append(f.kinds, kind)
		}
	}
	id, loc := p.After, "query.after"
	if p.LastEventID != "" {
		id, loc = p.LastEventID, "header.Last-Event-ID"
	}
	if id != "" {
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil || n < 0 {
			return f, invalid(loc, "must be an event id (a non-negative integer), got "+strconv.Quote(id))
		}
		f.resume, f.after = true, n
	}
	return f, nil
}

// match reports whether the filter keeps c.
func (f *eventsFilter) match(c *ports.Change) bool {
	return (len(f.kinds) == 0 || slices.Contains(f.kinds, c.Kind)) && (f.workspace == "" || f.workspace == c.Workspace)
}

func changeKindList() string {
	names := make([]string, len(ports.ChangeKinds))
	for i, k := range ports.ChangeKinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

func (s *Server) registerEvents() {
	op := s.op("streamEvents", http.MethodGet, "/events",
		"Stream changes as Server-Sent Events: each event's id is the change's, its event the kind, its data the change as JSON; "+
			"resumable with Last-Event-ID, filtered by kind and workspace, with a comment every heartbeat while idle", ports.ScopeRead, "events")
	op.Metadata[metaStream] = true
	op.Errors = append(op.Errors, http.StatusGone, http.StatusTooManyRequests)
	op.Responses = map[string]*huma.Response{"200": {Description: "the stream", Content: map[string]*huma.MediaType{
		"text/event-stream": {Schema: &huma.Schema{Type: "string"}}}}}
	huma.Register(s.api, op, func(ctx context.Context, in *EventsParams) (*huma.StreamResponse, error) {
		f, err := in.filter()
		if err != nil {
			return nil, err
		}
		if s.o.Changes == nil {
			return nil, huma.Error404NotFound("the event stream is not served here")
		}
		// Join the hub before the first read, so nothing published
		// between the two goes unnoticed.
		wake, leave := s.hub.join()
		var first []ports.Change
		if f.resume {
			first, err = s.readChanges(ctx, f.after)
			if errors.Is(err, ports.ErrChangesExpired) {
				leave()
				return nil, huma.Error410Gone("events after " + strconv.FormatInt(f.after, 10) +
					" are no longer retained (serve --events-keep, --events-retention): read the current state, then stream without Last-Event-ID")
			}
		} else {
			f.after, err = s.readLast(ctx)
		}
		if err != nil {
			leave()
			return nil, s.fail(ctx, err)
		}
		return &huma.StreamResponse{Body: func(hctx huma.Context) {
			defer leave()
			s.streamChanges(hctx, &f, first, wake)
		}}, nil
	})
}

// readChanges reads one batch after after, bounded by ReadWait.
func (s *Server) readChanges(ctx context.Context, after int64) ([]ports.Change, error) {
	rctx, cancel := s.readContext(ctx)
	defer cancel()
	return s.o.Changes.ChangesAfter(rctx, after, eventsBatch)
}

// readLast reads the newest change's id, bounded by ReadWait.
func (s *Server) readLast(ctx context.Context) (int64, error) {
	rctx, cancel := s.readContext(ctx)
	defer cancel()
	return s.o.Changes.ChangesLast(rctx)
}

// readContext bounds one read of a stream as authenticate bounds a GET's.
func (s *Server) readContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx = ports.WithLane(ctx, ports.LaneRead)
	if s.o.ReadWait > 0 {
		return context.WithTimeout(ctx, s.o.ReadWait)
	}
	return context.WithCancel(ctx)
}

// streamChanges writes first, then every later change, until the client
// leaves, a read fails, or the stream falls behind the retention (the
// client resumes with Last-Event-ID and is told 410).
func (s *Server) streamChanges(hctx huma.Context, f *eventsFilter, first []ports.Change, wake <-chan struct{}) {
	ctx := hctx.Context()
	hctx.SetHeader("Content-Type", "text/event-stream")
	hctx.SetHeader("Cache-Control", "no-cache")
	hctx.SetHeader("X-Accel-Buffering", "no")
	hctx.SetStatus(http.StatusOK)
	w := hctx.BodyWriter()
	var rc *http.ResponseController
	if _, rw := humago.Unwrap(hctx); rw != nil {
		rc = http.NewResponseController(rw)
	}
	flush := func() error {
		if rc == nil {
			return nil
		}
		if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
		return nil
	}
	if _, err := io.WriteString(w, "retry: 2000\n\n"); err != nil || flush() != nil {
		return
	}
	beat := s.o.EventsHeartbeat
	if beat <= 0 {
		beat = DefaultEventsHeartbeat
	}
	ticker := time.NewTicker(beat)
	defer ticker.Stop()
	batch := first
	var frames [][]byte // batch's frames from the hub, nil where not encoded
	var buf []byte
	for {
		// The batch's frames go out in one write: one chunk, a few
		// syscalls, whatever the number of changes.
		buf = buf[:0]
		for i := range batch {
			f.after = batch[i].ID
			if !f.match(&batch[i]) {
				continue
			}
			var frame []byte
			if i < len(frames) {
				frame = frames[i]
			}
			if frame == nil {
				var err error
				if frame, err = s.frames.frame(&batch[i]); err != nil {
					s.o.Logger.ErrorContext(ctx, "api.events_encode_failed", "error", err)
					return
				}
			}
			buf = append(buf, frame...)
		}
		if len(buf) > 0 {
			if _, err := w.Write(buf); err != nil || flush() != nil {
				return
			}
		}
		if len(batch) < eventsBatch {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				if _, err := io.WriteString(w, ": heartbeat\n\n"); err != nil || flush() != nil {
					return
				}
				batch = nil
				continue
			case <-wake:
			}
		}
		var err error
		var ok bool
		batch, frames, ok = s.hub.after(f.after, eventsBatch)
		if !ok { // older than the hub holds: read the store
			batch, frames = nil, nil
			batch, err = s.readChanges(ctx, f.after)
		}
		if err != nil {
			if ctx.Err() == nil {
				s.o.Logger.WarnContext(ctx, "api.events_read_failed", "after", f.after, "error", err)
			}
			return
		}
	}
}

// frameCacheSize is how many encoded changes frameCache keeps.
const frameCacheSize = 4096

// frameCache keeps the SSE frames of the newest changes streamed, so a
// change sent to many watchers is encoded once.
type frameCache struct {
	mu     sync.Mutex
	frames map[int64][]byte
	ring   [frameCacheSize]int64 // ids in insertion order, 0: free
	next   int
}

// frame returns c's SSE frame: its id, its kind as the event, and the
// change as JSON data.
func (f *frameCache) frame(c *ports.Change) ([]byte, error) {
	f.mu.Lock()
	b, ok := f.frames[c.ID]
	f.mu.Unlock()
	if ok {
		return b, nil
	}
	data, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode change %d: %w", c.ID, err)
	}
	b = fmt.Appendf(nil, "id: %d\nevent: %s\ndata: %s\n\n", c.ID, c.Kind, data)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frames == nil {
		f.frames = make(map[int64][]byte, frameCacheSize)
	}
	if _, ok := f.frames[c.ID]; !ok {
		delete(f.frames, f.ring[f.next])
		f.ring[f.next], f.frames[c.ID] = c.ID, b
		f.next = (f.next + 1) % frameCacheSize
	}
	return b, nil
}
