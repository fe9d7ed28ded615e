package benchstat

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/reconcilerhq/reconciler/ports"
)

// Querier is what the package reads through: a *pgx.Conn or *pgxpool.Pool.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Counters are the cumulative counts of the current database (commits, rows
// written) and of the server (transaction ids assigned) at one moment.
type Counters struct {
	// Commits is pg_stat_database.xact_commit: every committed transaction,
	// read-only ones included.
	Commits int64
	// RowsWritten is tup_inserted + tup_updated + tup_deleted.
	RowsWritten int64
	// XIDs is the next transaction id: its delta counts the transactions
	// that wrote (each gets an id, committed or not), in the whole cluster.
	XIDs int64
}

// Read returns the current counters of q's database.
func Read(ctx context.Context, q Querier) (Counters, error) {
	var c Counters
	err := q.QueryRow(ctx, `SELECT xact_commit, tup_inserted + tup_updated + tup_deleted,
		pg_snapshot_xmax(pg_current_snapshot())::text::bigint
		FROM pg_stat_database WHERE datname = current_database()`).Scan(&c.Commits, &c.RowsWritten, &c.XIDs)
	if err != nil {
		return Counters{}, fmt.Errorf("read pg_stat_database: %w", err)
	}
	return c, nil
}

// Settings are the server's durability settings, as SHOW prints them.
type Settings struct {
	Fsync, SynchronousCommit, FullPageWrites string
}

// ReadSettings returns the durability settings of q's server.
func ReadSettings(ctx context.Context, q Querier) (Settings, error) {
	var s Settings
	err := q.QueryRow(ctx, `SELECT current_setting('fsync'), current_setting('synchronous_commit'),
		current_setting('full_page_writes')`).Scan(&s.Fsync, &s.SynchronousCommit, &s.FullPageWrites)
	if err != nil {
		return Settings{}, fmt.Errorf("read durability settings: %w", err)
	}
	return s, nil
}

// Settle waits until no connection of application name app is left on the
// server, then a little longer (a backend leaves pg_stat_activity just
// before it flushes its statistics on exit), so that Read counts all they
// did. It gives up after timeout.
func Settle(ctx context.Context, q Querier, app string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var n int
		if err := q.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n); err != nil {
			return fmt.Errorf("settle: %w", err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("settle: %d connections of %q still open after %s", n, app, timeout)
		}
		if err := ports.Sleep(ctx, 10*time.Millisecond); err != nil {
			return err
		}
	}
	return ports.Sleep(ctx, 100*time.Millisecond)
}

// Fields are the JSON figures of a timed span that did units units of
// work (named unit, e.g. "item"), between counters before and after, on a
// server with settings s.
func Fields(unit string, units int64, before, after Counters, s Settings) map[string]any {
	commits := after.Commits - before.Commits
	rows := after.RowsWritten - before.RowsWritten
	per := func(n int64) float64 {
		if units <= 0 {
			return 0
		}
		return round(float64(n) / float64(units))
	}
	return map[string]any{
		"unit":               unit,
		"commits":            commits,
		"commits_per_unit":   per(commits),
		"xids":               after.XIDs - before.XIDs,
		"rows_written":       rows,
		"rows_per_unit":      per(rows),
		"fsync":              s.Fsync,
		"synchronous_commit": s.SynchronousCommit,
		"full_page_writes":   s.FullPageWrites,
	}
}

// round keeps three decimals.
func round(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }
