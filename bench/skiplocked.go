package main

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"
)

// skipLocked is the bare loop over one table: conns connections, each
// leasing lease rows in one UPDATE ... RETURNING (FOR UPDATE SKIP LOCKED)
// and acking them in one DELETE, each statement its own transaction.
type skipLocked struct {
	conns, lease int
}

func (s *skipLocked) setup(ctx context.Context, pool *pgxpool.Pool, n int) error {
	_, err := pool.Exec(ctx, `CREATE TABLE bare_job (
		id bigserial PRIMARY KEY,
		state text NOT NULL DEFAULT 'available',
		lease_owner text,
		lease_expires_at timestamptz,
		args jsonb NOT NULL DEFAULT '{}')`)
	if err != nil {
		return fmt.Errorf("skiplocked: create table: %w", err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO bare_job (args) SELECT '{}' FROM generate_series(1, $1)`, n); err != nil {
		return fmt.Errorf("skiplocked: insert: %w", err)
	}
	return nil
}

func (s *skipLocked) burn(ctx context.Context, pool *pgxpool.Pool, n int) (int64, bool, error) {
	var passes, acked atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	for i := range s.conns {
		owner := fmt.Sprintf("bare-%d", i)
		g.Go(func() error {
			conn, err := pool.Acquire(gctx)
			if err != nil {
				return err
			}
			defer conn.Release()
			ids := make([]int64, 0, s.lease)
			for gctx.Err() == nil {
				rows, err := conn.Query(gctx, `UPDATE bare_job SET state = 'running', lease_owner = $1,
					lease_expires_at = now() + interval '30 seconds'
					WHERE id IN (SELECT id FROM bare_job WHERE state = 'available' ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED)
					RETURNING id`, owner, s.lease)
				if err != nil {
					return fmt.Errorf("lease: %w", err)
				}
				ids = ids[:0]
				for rows.Next() {
					var id int64
					if err := rows.Scan(&id); err != nil {
						rows.Close()
						return fmt.Errorf("lease: %w", err)
					}
					ids = append(ids, id)
				}
				if err := rows.Err(); err != nil {
					return fmt.Errorf("lease: %w", err)
				}
				if len(ids) == 0 {
					return nil // everything is leased; the others finish theirs.
				}
				passes.Add(int64(len(ids))) // the no-op work
				tag, err := conn.Exec(gctx, `DELETE FROM bare_job WHERE id = ANY($1)`, ids)
				if err != nil {
					return fmt.Errorf("ack: %w", err)
				}
				acked.Add(tag.RowsAffected())
			}
			return nil
		})
	}
	err := g.Wait()
	if ctx.Err() != nil {
		err = nil // timed out: reported as not drained
	}
	return passes.Load(), acked.Load() == int64(n), err
}

func (s *skipLocked) figures() map[string]any {
	return map[string]any{"conns": s.conns, "lease": s.lease}
}
