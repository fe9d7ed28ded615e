package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// noopArgs are the arguments of River's no-op job.
type noopArgs struct{}

// Kind names the job kind.
func (noopArgs) Kind() string { return "bench-noop" }

// riverQueue is River: clients clients (like separate processes) on one
// pool, each working the default queue with maxWorkers workers, fetching
// with the cooldown and poll interval the reconciler engines of `bench
// queue` use (5 ms, 200 ms); River's defaults (100 ms, 1 s) cap a client
// at maxWorkers jobs per 100 ms.
type riverQueue struct {
	clients, maxWorkers int
}

// riverFetchCooldown and riverPollInterval are the fetch settings of the
// clients.
const (
	riverFetchCooldown = 5 * time.Millisecond
	riverPollInterval  = 200 * time.Millisecond
)

func (r *riverQueue) setup(ctx context.Context, pool *pgxpool.Pool, n int) error {
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: quietLogger()})
	if err != nil {
		return fmt.Errorf("river: migrator: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river: migrate: %w", err)
	}
	client, err := r.client(pool, nil) // insert-only
	if err != nil {
		return err
	}
	const chunk = 1000
	for i := 0; i < n; i += chunk {
		ps := make([]river.InsertManyParams, min(chunk, n-i))
		for j := range ps {
			ps[j] = river.InsertManyParams{Args: noopArgs{}}
		}
		if _, err := client.InsertManyFast(ctx, ps); err != nil {
			return fmt.Errorf("river: insert: %w", err)
		}
	}
	return nil
}

func (r *riverQueue) burn(ctx context.Context, pool *pgxpool.Pool, n int) (int64, bool, error) {
	var passes atomic.Int64
	all := make(chan struct{})
	work := river.WorkFunc(func(context.Context, *river.Job[noopArgs]) error {
		if passes.Add(1) == int64(n) {
			close(all)
		}
		return nil
	})
	clients := make([]*river.Client[pgx.Tx], r.clients)
	for i := range clients {
		c, err := r.client(pool, work)
		if err != nil {
			return 0, false, err
		}
		if err := c.Start(ctx); err != nil {
			return 0, false, fmt.Errorf("river: start: %w", err)
		}
		clients[i] = c
	}
	drained := false
	var err error
	select {
	case <-all:
		// Every job had its pass; the span ends when the last completion
		// has committed.
		drained, err = waitZero(ctx, pool, `SELECT count(*) FROM river_job WHERE state <> 'completed'`)
	case <-ctx.Done():
	}
	for _, c := range clients {
		stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if e := c.Stop(stopCtx); e != nil && err == nil {
			err = fmt.Errorf("river: stop: %w", e)
		}
		cancel()
	}
	return passes.Load(), drained, err
}

// client builds a River client on pool; with a nil worker it only inserts.
func (r *riverQueue) client(pool *pgxpool.Pool, work river.Worker[noopArgs]) (*river.Client[pgx.Tx], error) {
	workers := river.NewWorkers()
	insertOnly := work == nil
	if insertOnly {
		work = river.WorkFunc(func(context.Context, *river.Job[noopArgs]) error { return nil })
	}
	river.AddWorker(workers, work)
	cfg := &river.Config{Workers: workers, Logger: quietLogger()}
	if !insertOnly {
		cfg.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: r.maxWorkers}}
		cfg.FetchCooldown = riverFetchCooldown
		cfg.FetchPollInterval = riverPollInterval
	}
	c, err := river.NewClient(riverpgxv5.New(pool), cfg)
	if err != nil {
		return nil, fmt.Errorf("river: client: %w", err)
	}
	return c, nil
}

func (r *riverQueue) figures() map[string]any {
	return map[string]any{"workers": r.clients, "max_workers": r.maxWorkers,
		"fetch_cooldown_ms": riverFetchCooldown.Milliseconds(), "fetch_poll_interval_ms": riverPollInterval.Milliseconds()}
}

// quietLogger drops River's logs.
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
