package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/api/client"
	"github.com/reconcilerhq/reconciler/ports"
)

// benchWatchers are the event stream's clients of a benchmark (bench
// release --watchers): each reads GET /api/v1/events of an API served on
// loopback, every change, and records how long after its change each
// event arrived.
type benchWatchers struct {
	changes ports.ChangeStream
	srv     *http.Server
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	first   int64 // the newest change's id when they started
	seen    []atomic.Int64

	mu     sync.Mutex
	lags   []time.Duration
	counts []int
	errs   []error
}

// startBenchWatchers serves be's API with its event stream on loopback and
// connects n watchers; it returns once every stream is open.
func startBenchWatchers(ctx context.Context, be *backend, n int, log *slog.Logger) (*benchWatchers, error) {
	changes := be.startChanges(10_000_000, 24*time.Hour, ports.SystemClock, log)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench watchers: %w", err)
	}
	w := &benchWatchers{changes: changes, seen: make([]atomic.Int64, n)}
	if w.first, err = changes.ChangesLast(ctx); err != nil {
		_ = ln.Close()
		return nil, err
	}
	handler := api.New(api.Options{Releases: be.releases, Workflows: be.workflows, Queue: be.queue, Tokens: be.tokens,
		Insecure: true, Changes: changes, LongPolls: n, Logger: log}).Handler()
	w.srv = &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = w.srv.Serve(ln) }()
	c, err := client.New("http://"+ln.Addr().String(), "bench")
	if err != nil {
		_ = w.srv.Close()
		return nil, err
	}
	wctx, cancel := context.WithCancel(ctx)
	w.cancel = cancel
	var opened sync.WaitGroup
	opened.Add(n)
	for i := range n {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			var once sync.Once
			onOpen := func() { once.Do(opened.Done) }
			var lags []time.Duration
			count := 0
			var err error
			if i == 0 {
				// The first decodes every change, for its lag; the others
				// only count ids, as a client that hands the data on would.
				err = c.Events(wctx, client.EventFilter{OnOpen: onOpen}, -1, func(ch ports.Change) error {
					lags = append(lags, time.Since(ch.At))
					count++
					w.seen[i].Store(ch.ID)
					return nil
				})
			} else {
				err = countEvents(wctx, "http://"+ln.Addr().String(), onOpen, func(id int64) {
					count++
					w.seen[i].Store(id)
				})
			}
			once.Do(opened.Done)
			w.mu.Lock()
			w.lags = append(w.lags, lags...)
			w.counts = append(w.counts, count)
			if err != nil && !errors.Is(err, context.Canceled) {
				w.errs = append(w.errs, err)
			}
			w.mu.Unlock()
		}()
	}
	opened.Wait()
	return w, nil
}

// countEvents reads GET /api/v1/events of server from now on, calling
// seen with each event's id, until ctx ends.
func countEvents(ctx context.Context, server string, opened func(), seen func(id int64)) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, server+api.Prefix+"/events", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer bench")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /events: %s", res.Status)
	}
	opened()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if id, ok := bytes.CutPrefix(sc.Bytes(), []byte("id: ")); ok {
			n, err := strconv.ParseInt(string(id), 10, 64)
			if err != nil {
				return fmt.Errorf("GET /events: id %q: %w", id, err)
			}
			seen(n)
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return sc.Err()
}

// stop waits (at most wait) until every watcher has seen the newest
// change, stops them and returns the figures: the changes published since
// they started, the fewest any watcher received, and the delivery lag
// (from the change's time to its arrival) at p50, p99 and max.
func (w *benchWatchers) stop(ctx context.Context, wait time.Duration) (map[string]any, error) {
	last, err := w.changes.ChangesLast(ctx)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	behind := func() bool {
		for i := range w.seen {
			if w.seen[i].Load() < last {
				return true
			}
		}
		return false
	}
	for time.Now().Before(deadline) && behind() {
		time.Sleep(10 * time.Millisecond)
	}
	w.cancel()
	w.wg.Wait()
	_ = w.srv.Close()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.errs) > 0 {
		return nil, fmt.Errorf("bench watchers: %w", errors.Join(w.errs...))
	}
	slices.Sort(w.lags)
	pct := func(p float64) float64 {
		if len(w.lags) == 0 {
			return 0
		}
		return round3(float64(w.lags[int(p*float64(len(w.lags)-1))].Microseconds()) / 1000)
	}
	return map[string]any{"watchers": len(w.seen), "events": last - w.first,
		"events_min_delivered": slices.Min(w.counts),
		"event_lag_p50_ms":     pct(0.50), "event_lag_p99_ms": pct(0.99), "event_lag_max_ms": pct(1)}, nil
}
