package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"github.com/reconcilerhq/reconciler/ports"
)

// DB is an open PostgreSQL database: a pgx pool, and bun over it through
// database/sql. The adapters of this package share one DB.
type DB struct {
	bun   *bun.DB
	sqldb *sql.DB
	pool  *pgxpool.Pool
	// hotMode is how hot-path statements (hotQuery) are sent.
	hotMode pgx.QueryExecMode
	// lockWait is told when a migration waits for another session's lock.
	lockWait func(pid int)
	// pub sends the notifications of committed changes.
	pub *publisher
	// lanes are the pools of the lanes with connections of their own
	// (WithLaneConns), by ports.Lane; nil shares the main pool.
	lanes []*lane
}

// lane is a pool of connections of its own for one ports.Lane, with bun
// over it, so its statements never wait behind the main pool's.
type lane struct {
	bun   *bun.DB
	sqldb *sql.DB
	pool  *pgxpool.Pool
}

// DefaultLaneConns are the connections a lane has of its own unless
// WithLaneConns says otherwise: renewals and acks get 2, so that they
// never wait behind passes holding every connection of the main pool, API
// reads 2, so that the API answers while passes hold it, and liveness
// beats 1, so that a live process's row never lapses behind renewals.
var DefaultLaneConns = map[ports.Lane]int32{ports.LaneRenewal: 2, ports.LaneRead: 2, ports.LaneLiveness: 1}

// on returns the bun, database/sql and pgx handles of ctx's lane.
func (db *DB) on(ctx context.Context) (*bun.DB, *sql.DB, *pgxpool.Pool) {
	if l := ports.LaneOf(ctx); int(l) < len(db.lanes) && db.lanes[l] != nil {
		ln := db.lanes[l]
		return ln.bun, ln.sqldb, ln.pool
	}
	return db.bun, db.sqldb, db.pool
}

// LanePool is the pgx pool serving lane l: its own, or the main pool.
func (db *DB) LanePool(l ports.Lane) *pgxpool.Pool {
	if int(l) < len(db.lanes) && db.lanes[l] != nil {
		return db.lanes[l].pool
	}
	return db.pool
}

// DefaultConnectTimeout bounds each connection attempt (TCP connect and the
// server's answer to the start-up message) when the DSN sets no
// connect_timeout: a server that accepts connections but never answers
// fails Open instead of hanging it.
const DefaultConnectTimeout = 10 * time.Second

// openOptions are what the Options of Open tune.
type openOptions struct {
	pool      *pgxpool.Config
	lockWait  func(pid int)
	laneConns map[ports.Lane]int32
}

// Option tunes Open.
type Option func(*openOptions)

// WithMaxConns caps the pool at n connections (pgx's default is the larger
// of 4 and the number of CPUs).
func WithMaxConns(n int32) Option {
	return func(o *openOptions) { o.pool.MaxConns = n }
}

// WithLaneConns gives lane its own pool of n connections (n <= 0: the
// lane shares the main pool), beside the main pool of WithMaxConns.
func WithLaneConns(l ports.Lane, n int32) Option {
	return func(o *openOptions) { o.laneConns[l] = n }
}

// WithTracer traces every statement of the pool's connections with t (for
// tests and tools that count or time statements).
func WithTracer(t pgx.QueryTracer) Option {
	return func(o *openOptions) { o.pool.ConnConfig.Tracer = t }
}

// WithConnectTimeout bounds each connection attempt by d, overriding the
// DSN's connect_timeout and DefaultConnectTimeout; d <= 0 changes nothing.
func WithConnectTimeout(d time.Duration) Option {
	return func(o *openOptions) {
		if d > 0 {
			o.pool.ConnConfig.ConnectTimeout = d
		}
	}
}

// WithLockWaitNotice calls notify, with the process id of the session
// holding it, when a migration has to wait for another session's migration
// lock (another process migrating the same schema), before it waits.
func WithLockWaitNotice(notify func(holderPID int)) Option {
	return func(o *openOptions) { o.lockWait = notify }
}

// Open connects to dsn (a postgres:// URL or keyword/value string that pgx
// understands) and checks the server answers, each connection attempt
// bounded by the DSN's connect_timeout (else DefaultConnectTimeout).
//
// bun renders every argument into the SQL text, so statements reach pgx
// without parameters; they are sent with the simple protocol (one round
// trip, no per-text prepared statement) unless the DSN sets
// default_query_exec_mode. The few statements on the hot path (hotQuery)
// are written with $n parameters instead and sent as cached prepared
// statements with plan_cache_mode=force_generic_plan (unless the DSN sets
// it), so Postgres plans each once per connection; a DSN that sets
// default_query_exec_mode (for a transaction-pooling proxy, say) sends
// them in that mode too. Sessions run with jit off unless the DSN sets
// jit: compiling costs more than these statements run.
func Open(ctx context.Context, dsn string, opts ...Option) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse dsn: %w", err)
	}
	hot := cfg.ConnConfig.DefaultQueryExecMode
	if !strings.Contains(dsn, "default_query_exec_mode") {
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
		hot = pgx.QueryExecModeCacheStatement
	}
	if _, set := cfg.ConnConfig.RuntimeParams["plan_cache_mode"]; !set {
		// Only the hot statements are prepared, and their plans do not
		// depend on the values: plan each once, not on every call.
		cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	}
	if _, set := cfg.ConnConfig.RuntimeParams["jit"]; !set {
		// Every statement here is short. With JIT on, a plan whose
		// estimated cost grows with the tables (the lease's candidates at
		// 100,000 items) crosses jit_inline_above_cost and spends a second
		// compiling each call.
		cfg.ConnConfig.RuntimeParams["jit"] = "off"
	}
	if cfg.ConnConfig.ConnectTimeout <= 0 {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	oo := openOptions{pool: cfg, laneConns: map[ports.Lane]int32{}}
	for l, n := range DefaultLaneConns {
		oo.laneConns[l] = n
	}
	for _, o := range opts {
		o(&oo)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		if ctx.Err() == nil && timedOut(err) {
			return nil, fmt.Errorf("connect %s:%d: no answer within the connect timeout of %s: %w",
				cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.ConnectTimeout, err)
		}
		return nil, fmt.Errorf("connect %s:%d: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	sqldb := stdlib.OpenDBFromPool(pool)
	db := &DB{bun: bun.NewDB(sqldb, pgdialect.New()), sqldb: sqldb, pool: pool, hotMode: hot, lockWait: oo.lockWait,
		lanes: make([]*lane, len(ports.Lanes))}
	for _, l := range ports.Lanes {
		n := oo.laneConns[l]
		if l == ports.LaneWork || n <= 0 {
			continue
		}
		lcfg := cfg.Copy()
		lcfg.MaxConns, lcfg.MinConns = n, 0
		lp, err := pgxpool.NewWithConfig(ctx, lcfg) // connects lazily
		if err != nil {
			db.closeLanes()
			pool.Close()
			return nil, fmt.Errorf("connect %s lane: %w", l, err)
		}
		lsql := stdlib.OpenDBFromPool(lp)
		db.lanes[l] = &lane{bun: bun.NewDB(lsql, pgdialect.New()), sqldb: lsql, pool: lp}
	}
	db.pub = newPublisher(db)
	return db, nil
}

// timedOut reports whether err is a connection attempt running out of
// time (its connect timeout), not a refusal or an authentication error.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// closeLanes closes the lanes' pools.
func (db *DB) closeLanes() {
	for _, ln := range db.lanes {
		if ln != nil {
			_ = ln.bun.Close()
			ln.pool.Close()
		}
	}
}

// Close closes the database and its pool. Adapters over it must not be used
// afterwards.
func (db *DB) Close() {
	db.pub.wait()
	db.closeLanes()
	_ = db.bun.Close()
	db.pool.Close()
}

// MaxConns is the most connections the pool opens (WithMaxConns, else the
// DSN's pool_max_conns, else pgx's default).
func (db *DB) MaxConns() int { return int(db.pool.Config().MaxConns) }

// Ping checks that the server answers, for health checks.
func (db *DB) Ping(ctx context.Context) error {
	if err := db.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping postgres: %w", err)
	}
	return nil
}

// hotQuery runs q, a statement written with $n parameters, in the context's
// transaction if any, sent in hotMode: a cached prepared statement whose
// plan Postgres reuses, for statements that run on every pass.
func (db *DB) hotQuery(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	args = append([]any{db.hotMode}, args...)
	if t, ok := ctx.Value(txKey{}).(*ctxTx); ok && t.db == db {
		return t.tx.Tx.QueryContext(ctx, q, args...)
	}
	_, sqldb, _ := db.on(ctx)
	return sqldb.QueryContext(ctx, q, args...)
}

// dollarParams rewrites bun's indexed placeholders ?N as Postgres's $N+1,
// so one statement text serves bun and hotQuery. The statements it is used
// on have no other question marks.
func dollarParams(q string) string {
	return indexedParam.ReplaceAllStringFunc(q, func(m string) string {
		n, _ := strconv.Atoi(m[1:])
		return "$" + strconv.Itoa(n+1)
	})
}

var indexedParam = regexp.MustCompile(`\?[0-9]+`)

// scanOne returns a function scanning the first row of rows into dest;
// no row is sql.ErrNoRows.
func scanOne(rows *sql.Rows, err error) func(dest ...any) error {
	return func(dest ...any) error {
		if err != nil {
			return err
		}
		defer rows.Close()
		if !rows.Next() {
			if err := rows.Err(); err != nil {
				return err
			}
			return sql.ErrNoRows
		}
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		return rows.Close()
	}
}

// rowsReader is what a scan of the queue's hot statements reads: pgx's rows,
// or database/sql's inside a transaction.
type rowsReader interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// sqlRows is database/sql's rows as a rowsReader.
type sqlRows struct{ rows *sql.Rows }

func (r sqlRows) Next() bool             { return r.rows.Next() }
func (r sqlRows) Scan(dest ...any) error { return r.rows.Scan(dest...) }
func (r sqlRows) Err() error             { return r.rows.Err() }
func (r sqlRows) Close()                 { _ = r.rows.Close() }

// poolQuery is hotQuery read through pgx directly when ctx carries no
// transaction of db, skipping database/sql's conversions (the queue's
// lease, heartbeat and ack read hundreds of rows per call).
func (db *DB) poolQuery(ctx context.Context, q string, args ...any) (rowsReader, error) {
	if t, ok := ctx.Value(txKey{}).(*ctxTx); ok && t.db == db {
		rows, err := db.hotQuery(ctx, q, args...)
		if err != nil {
			return nil, err
		}
		return sqlRows{rows}, nil
	}
	_, _, pool := db.on(ctx)
	rows, err := pool.Query(ctx, q, append([]any{db.hotMode}, args...)...)
	if err != nil {
		return nil, err
	}
	return rows, nil
}

// hotExec is hotQuery for a statement whose rows are not read.
func (db *DB) hotExec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	args = append([]any{db.hotMode}, args...)
	if t, ok := ctx.Value(txKey{}).(*ctxTx); ok && t.db == db {
		return t.tx.Tx.ExecContext(ctx, q, args...)
	}
	_, sqldb, _ := db.on(ctx)
	return sqldb.ExecContext(ctx, q, args...)
}

// txKey is the context key of the transaction InTx opened.
type txKey struct{}

// ctxTx is a transaction carried in a context, with the DB it belongs to.
type ctxTx struct {
	db *DB
	tx bun.Tx
	// afterCommit runs, in order, once tx has committed (DB.afterCommit).
	afterCommit []func()
	// savepoints numbers the nested transactions' savepoints.
	savepoints int
}

// InTx runs fn in a transaction carried by the context fn receives: every
// adapter method of this DB called with that context joins it, so their
// writes commit together when fn returns nil and roll back when it returns
// an error or panics. A context already inside a transaction of this DB
// joins that one instead of opening another, under a savepoint rolled back
// when its fn fails.
func (db *DB) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	if t, ok := ctx.Value(txKey{}).(*ctxTx); ok && t.db == db {
		return t.nested(ctx, fn)
	}
	b, _, _ := db.on(ctx)
	tx, err := b.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = tx.Rollback() // also on panic; the panic goes on
		}
	}()
	t := &ctxTx{db: db, tx: tx}
	if err := fn(context.WithValue(ctx, txKey{}, t)); err != nil {
		return err
	}
	committed = true
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit transaction: %w", err)
	}
	for _, f := range t.afterCommit {
		f()
	}
	return nil
}

// nested runs fn inside t under a savepoint: when fn fails, its
// statements and the after-commit hooks it added are rolled back and the
// enclosing transaction goes on without them (a failed statement inside fn
// does not abort the enclosing transaction).
func (t *ctxTx) nested(ctx context.Context, fn func(ctx context.Context) error) error {
	t.savepoints++
	name := "nested_" + strconv.Itoa(t.savepoints)
	if _, err := t.tx.ExecContext(ctx, "SAVEPOINT "+name); err != nil {
		return fmt.Errorf("begin nested transaction: %w", err)
	}
	hooks := len(t.afterCommit)
	if err := fn(ctx); err != nil {
		if _, rbErr := t.tx.ExecContext(context.WithoutCancel(ctx), "ROLLBACK TO SAVEPOINT "+name); rbErr != nil {
			return errors.Join(err, fmt.Errorf("roll back nested transaction: %w", rbErr))
		}
		t.afterCommit = t.afterCommit[:hooks]
		return err
	}
	if _, err := t.tx.ExecContext(ctx, "RELEASE SAVEPOINT "+name); err != nil {
		return fmt.Errorf("end nested transaction: %w", err)
	}
	return nil
}

// afterCommit runs f once the transaction ctx carries for db has committed
// (never when it rolls back), or at once when ctx carries none: the
// statement that preceded it has committed by itself.
func (db *DB) afterCommit(ctx context.Context, f func()) {
	if t, ok := ctx.Value(txKey{}).(*ctxTx); ok && t.db == db {
		t.afterCommit = append(t.afterCommit, f)
		return
	}
	f()
}

// DB is the Transactor of every adapter over it.
var _ ports.Transactor = (*DB)(nil)

// idb returns the transaction ctx carries for this DB, or the DB itself.
func (db *DB) idb(ctx context.Context) bun.IDB {
	if t, ok := ctx.Value(txKey{}).(*ctxTx); ok && t.db == db {
		return t.tx
	}
	b, _, _ := db.on(ctx)
	return b
}
