package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
)

// changesChannel is the channel events_publish notifies once it has moved
// changes into the events table.
const changesChannel = "reconciler_events"

// DefaultChangesInterval is how often Changes publishes and prunes by
// itself, besides after each statement of the DB's publisher.
const DefaultChangesInterval = time.Second

// Changes is the PostgreSQL ports.ChangeStream over migration 0024: the
// triggers record each change in events_outbox in the writing
// transaction; the DB's publisher moves committed rows into events after
// each of its statements (and Changes every Interval), numbering them in
// the order they become visible, then notifies reconciler_events, which
// wakes ChangesNotify in every process on the database.
type Changes struct {
	db        *DB
	keep      int
	retention time.Duration
	notify    *notifier
	log       *slog.Logger

	stop context.CancelFunc
	done chan struct{}
	once sync.Once
}

var _ ports.ChangeStream = (*Changes)(nil)

// NewChanges returns the event stream of db, keeping the newest keep
// changes (at least 1) and none older than retention (0: no age limit),
// and starts its publishing loop, which runs every interval (0:
// DefaultChangesInterval) until Close. log receives failures (nil: none).
func NewChanges(db *DB, keep int, retention, interval time.Duration, log *slog.Logger) *Changes {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if interval <= 0 {
		interval = DefaultChangesInterval
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Changes{db: db, keep: max(keep, 1), retention: retention, log: log, stop: cancel, done: make(chan struct{}),
		notify: newNotifier(db.pool.Config().ConnConfig, changesChannel)}
	move := c.publish
	db.pub.after.Store(&move)
	go c.run(ctx, interval)
	return c
}

// Close stops the publishing loop and the listener. It is idempotent.
func (c *Changes) Close() {
	c.once.Do(func() {
		c.db.pub.after.Store(nil)
		c.stop()
		<-c.done
		c.notify.close()
	})
}

// run publishes and prunes every interval until ctx ends.
func (c *Changes) run(ctx context.Context, interval time.Duration) {
	defer close(c.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.publish(ctx)
		if err := c.Prune(ctx); err != nil && ctx.Err() == nil {
			c.log.LogAttrs(ctx, slog.LevelWarn, "events.prune_failed", slog.String("error", err.Error()))
		}
	}
}

// publish moves committed changes into the events table; a failure leaves
// them in the outbox for the next call.
func (c *Changes) publish(ctx context.Context) {
	if _, err := c.db.pool.Exec(ctx, `SELECT events_publish()`); err != nil && ctx.Err() == nil {
		c.log.LogAttrs(ctx, slog.LevelWarn, "events.publish_failed", slog.String("error", err.Error()))
	}
}

// Publish moves the committed changes into the events table now (the loop
// does it every interval), so that a test or a command need not wait.
func (c *Changes) Publish(ctx context.Context) error {
	if _, err := c.db.pool.Exec(ctx, `SELECT events_publish()`); err != nil {
		return fmt.Errorf("publish changes: %w", err)
	}
	return nil
}

// Prune drops the changes beyond the newest keep or older than retention.
func (c *Changes) Prune(ctx context.Context) error {
	retention := c.retention
	if retention <= 0 {
		retention = 100 * 365 * 24 * time.Hour
	}
	if _, err := c.db.pool.Exec(ctx, `SELECT events_prune($1, make_interval(secs => $2))`, int64(c.keep), retention.Seconds()); err != nil {
		return fmt.Errorf("prune changes: %w", err)
	}
	return nil
}

// sqlChangesAfter reads the pruned mark and the changes after $1 in one
// snapshot.
const sqlChangesAfter = `SELECT p.through, e.id, e.kind, e.workspace, e.object_id, e.at, e.data
	FROM events_pruned p LEFT JOIN LATERAL (SELECT * FROM events WHERE id > $1 ORDER BY id LIMIT $2) e ON true
	ORDER BY e.id`

// ChangesAfter lists retained changes with ID > after, oldest first.
func (c *Changes) ChangesAfter(ctx context.Context, after int64, limit int) ([]ports.Change, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("changes after %d: limit must be positive", after)
	}
	_, _, pool := c.db.on(ctx)
	rows, err := pool.Query(ctx, sqlChangesAfter, after, limit)
	if err != nil {
		return nil, fmt.Errorf("changes after %d: %w", after, err)
	}
	var (
		through int64
		out     []ports.Change
	)
	for rows.Next() {
		var (
			id               *int64
			kind, ws, object *string
			at               *time.Time
			data             []byte
		)
		if err := rows.Scan(&through, &id, &kind, &ws, &object, &at, &data); err != nil {
			rows.Close()
			return nil, fmt.Errorf("changes after %d: %w", after, err)
		}
		if id == nil {
			continue
		}
		out = append(out, ports.Change{ID: *id, Kind: ports.ChangeKind(*kind), Workspace: *ws, Object: *object,
			At: at.UTC(), Data: json.RawMessage(data)})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("changes after %d: %w", after, err)
	}
	if after < through {
		return nil, fmt.Errorf("changes after %d (pruned through %d): %w", after, through, ports.ErrChangesExpired)
	}
	return out, nil
}

// ChangesLast returns the id of the newest published change: the newest
// retained, else the highest pruned.
func (c *Changes) ChangesLast(ctx context.Context) (int64, error) {
	_, _, pool := c.db.on(ctx)
	var last int64
	if err := pool.QueryRow(ctx, `SELECT GREATEST((SELECT COALESCE(max(id), 0) FROM events), (SELECT through FROM events_pruned))`).Scan(&last); err != nil {
		return 0, fmt.Errorf("last change: %w", err)
	}
	return last, nil
}

// ChangesNotify returns a channel woken after changes are published by
// any process on the database, until ctx ends.
func (c *Changes) ChangesNotify(ctx context.Context) <-chan struct{} {
	return c.notify.subscribeUntil(ctx)
}
