package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/ports"
)

// EventFilter are the event stream's filters: kinds (none: every kind)
// and a workspace.
type EventFilter struct {
	Kinds     []ports.ChangeKind
	Workspace string
	// OnOpen, when set, is called each time a connection is open (its
	// answer's headers came): every change published from then on is
	// streamed.
	OnOpen func()
}

// eventsReconnect is how long Events waits before it resumes a stream the
// server ended.
const eventsReconnect = time.Second

// Events streams the changes after after (-1: from now on) that match f
// to fn, oldest first, until ctx ends, fn returns an error, or the server
// refuses the stream (a resume point older than its retention is a 410
// *Error). A stream the server or the network ends is resumed from the
// last change seen (Last-Event-ID).
func (c *Client) Events(ctx context.Context, f EventFilter, after int64, fn func(ports.Change) error) error {
	for {
		err := c.eventsOnce(ctx, f, &after, fn)
		var apiErr *Error
		var stop stopError
		switch {
		case errors.As(err, &stop):
			return stop.err
		case ctx.Err() != nil, errors.As(err, &apiErr):
			return err
		}
		t := time.NewTimer(eventsReconnect)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// stopError is fn's error, which ends Events.
type stopError struct{ err error }

func (e stopError) Error() string { return e.err.Error() }

// eventsOnce reads one connection's events, advancing *after.
func (c *Client) eventsOnce(ctx context.Context, f EventFilter, after *int64, fn func(ports.Change) error) error {
	kinds := make([]string, len(f.Kinds))
	for i, k := range f.Kinds {
		kinds[i] = string(k)
	}
	path := "/events" + query("kind", strings.Join(kinds, ","), "workspace", f.Workspace)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base.String()+api.Prefix+path, nil)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if *after >= 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(*after, 10))
	}
	hc := *c.http
	hc.Timeout = 0 // a stream lasts as long as it is read
	res, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	defer res.Body.Close()
	if res.StatusCode >= 300 {
		b, _ := io.ReadAll(io.LimitReader(res.Body, maxResponseBytes))
		return answerError(res.StatusCode, b)
	}
	if f.OnOpen != nil {
		f.OnOpen()
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	var data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		case line == "" && data != "":
			var ch ports.Change
			if err := json.Unmarshal([]byte(data), &ch); err != nil {
				return fmt.Errorf("GET %s: decode event: %w", path, err)
			}
			data = ""
			*after = ch.ID
			if err := fn(ch); err != nil {
				return stopError{err}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("GET %s: read stream: %w", path, err)
	}
	return nil
}
